"""The SQLite write path: group commit, hash chain, idempotency keys.

One ``BEGIN IMMEDIATE`` transaction per group (one fsync for all). Each stream's
head (version and link) is known under the write lock; each accepted row is
chained (``ledger.chain``) at the position it will get, and inserted AT that
position (the rowid is given explicitly, so the position a link covers is the
row's position by construction; a taken rowid is refused, never replaced); the
rows go in with one ``executemany``, and every trigger still fires on every
row. Should a row still be refused (only rows written behind our back could
cause that), the group is redone with a savepoint per append, so a conflict
fails only its own append. An append with an idempotency key first looks the
key up: a used key returns the first outcome and writes nothing; a new key is
recorded with the rows.

Heads are remembered between groups (:class:`WriteCache`): after ``BEGIN
IMMEDIATE`` one ``PRAGMA data_version`` tells whether any other connection (in
this process or another) committed since this connection's last commit. Only
when none did are the remembered last position and stream heads used; otherwise
(and after any failed or rolled-back group) they are forgotten and read again
from the database under the lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from turnledger.ledger.backend import (
    AppendRequest,
    Conflict,
    EncodedRow,
    Replayed,
    mark_keyed,
)
from turnledger.ledger.chain import (
    CHAIN_FORMAT,
    GENESIS,
    HEADER_SIZE,
    LINK_OFFSET,
    chain_rows,
    head_link,
)

TABLE: Final = "stored_events"
KEYS_TABLE: Final = "turnledger_appends"

_INSERT: Final = (
    f"INSERT INTO {TABLE} (rowid, originator_id, originator_version, topic, state) "
    "VALUES (?,?,?,?,?)"
)
_DATA_VERSION: Final = "PRAGMA data_version"
_HEAD: Final = (
    "SELECT originator_version, substr(state, 1, 1), "
    f"substr(state, {LINK_OFFSET + 1}, 32) FROM {TABLE} "
    "WHERE originator_id=? ORDER BY originator_version DESC LIMIT 1"
)
_STREAM: Final = (
    f"SELECT rowid, originator_version, topic, state FROM {TABLE} "
    "WHERE originator_id=? ORDER BY originator_version"
)
_MAX_ROWID: Final = f"SELECT max(rowid) FROM {TABLE}"
_KEY_LOOKUP: Final = (
    f"SELECT stream, first_version, last_version, positions FROM {KEYS_TABLE} "
    "WHERE key=?"
)
_KEY_INSERT: Final = f"INSERT INTO {KEYS_TABLE} VALUES (?,?,?,?,?)"
_CHAINED: Final = bytes((CHAIN_FORMAT,))
LINK_SIZE: Final = 32
CACHED_HEADS: Final = 65_536
"""The most stream heads a :class:`WriteCache` remembers (then it starts over)."""

Outcome = tuple[int, ...] | Conflict | Replayed
Row = tuple[int, str, int, str, bytes]
KeyRow = tuple[str, str, int, int, str]


class _RowRefusedError(Exception):
    """The batched insert hit a key or trigger error; redo the group with savepoints."""


class WriteCache:
    """What one writer connection knows between its groups (see the module doc).

    Valid only for ``connection`` and only while ``PRAGMA data_version`` read
    under the write lock still equals ``data_version``. Heads are keyed by the
    stream id's ``int`` (hashed in C; a ``UUID`` hashes in Python).
    """

    __slots__ = ("connection", "data_version", "heads", "next_position")

    def __init__(self) -> None:
        self.connection: sqlite3.Connection | None = None
        self.data_version = -1
        self.next_position = 0
        self.heads: dict[int, tuple[int, bytes]] = {}

    def start(
        self, raw: sqlite3.Connection
    ) -> tuple[int, int, dict[int, tuple[int, bytes]]]:
        """Under the write lock: the data version, the next position, known heads.

        What is remembered is used only when no other connection committed
        since this connection's last commit; otherwise the next position is
        read from the database and no head is known.
        """
        data_version = raw.execute(_DATA_VERSION).fetchone()[0]
        if self.connection is raw and self.data_version == data_version:
            return data_version, self.next_position, self.heads
        self.forget()
        return data_version, int(raw.execute(_MAX_ROWID).fetchone()[0] or 0) + 1, {}

    def remember(
        self,
        raw: sqlite3.Connection,
        data_version: int,
        next_position: int,
        heads: dict[int, tuple[int, bytes]],
    ) -> None:
        """After a commit on ``raw``: keep the heads it wrote and read."""
        # Our own commit does not move data_version: what we know stays valid.
        known = self.heads if self.connection is raw else {}
        if len(known) + len(heads) > CACHED_HEADS:
            known = {}
        known.update(heads)
        self.connection = raw
        self.data_version = data_version
        self.next_position = next_position
        self.heads = known

    def forget(self) -> None:
        """Drop everything remembered; the next group reads from the database."""
        self.connection = None
        self.data_version = -1
        self.next_position = 0
        self.heads = {}


def write_group(
    raw: sqlite3.Connection,
    requests: Sequence[AppendRequest],
    *,
    atomic: bool,
    cache: WriteCache | None = None,
) -> list[Outcome]:
    """Write a group in one transaction; see the module docstring."""
    known = cache if cache is not None else WriteCache()
    try:
        return _write(raw, requests, atomic=atomic, savepoints=False, cache=known)
    except _RowRefusedError:
        return _write(raw, requests, atomic=atomic, savepoints=True, cache=known)


def read_head(raw: sqlite3.Connection, stream_id: UUID) -> tuple[int, bytes]:
    """Return a stream's head version and the 16-byte ``prev`` its next row takes."""
    found = raw.execute(_HEAD, (stream_id.hex,)).fetchone()
    if found is None:
        return 0, GENESIS
    version, fmt, link = found
    if blob(fmt) == _CHAINED and len(blob(link)) == LINK_SIZE:
        return int(version), blob(link)[:16]
    # A pre-chain head (a ledger written before the chain): computed once here.
    rows = [
        (int(r[0]), int(r[1]), str(r[2]), blob(r[3]))
        for r in raw.execute(_STREAM, (stream_id.hex,)).fetchall()
    ]
    head, full = head_link(rows, stream_id)
    return head, full[:16]


def blob(value: bytes | str) -> bytes:
    """Return a stored state as bytes (a TEXT value written behind our back too)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def _lookup(raw: sqlite3.Connection, key: str) -> Replayed | None:
    found = raw.execute(_KEY_LOOKUP, (key,)).fetchone()
    if found is None:
        return None
    positions = tuple(msgspec.json.decode(found[3], type=list[int]))
    return Replayed(UUID(found[0]), int(found[1]), int(found[2]), positions)


def _write(  # noqa: C901, PLR0915 - the group's plan, kept in one place
    raw: sqlite3.Connection,
    requests: Sequence[AppendRequest],
    *,
    atomic: bool,
    savepoints: bool,
    cache: WriteCache,
) -> list[Outcome]:
    results: list[Outcome] = []
    raw.execute("BEGIN IMMEDIATE")
    try:
        data_version, next_position, known = cache.start(raw)
        heads: dict[int, tuple[int, bytes]] = {}
        keys: dict[str, tuple[AppendRequest, tuple[int, ...]]] = {}
        rows: list[Row] = []
        key_rows: list[KeyRow] = []
        conflicts = False
        for request in requests:
            key = request.idempotency_key
            if key is not None:
                seen = keys.get(key)  # used earlier in this group
                replay = _lookup(raw, key) if seen is None else _replayed(*seen)
                if replay is not None:
                    results.append(replay)
                    continue
            stream = request.stream_id
            sid = stream.int
            head = heads.get(sid) or known.get(sid) or read_head(raw, stream)
            if head[0] != request.expected_version:
                heads[sid] = head
                results.append(Conflict(head[0]))
                conflicts = True
                continue
            parts = _parts(request.rows) if key is None else mark_keyed(request.rows)
            mine, prev = chain_rows(parts, stream, stream.hex, next_position, head[1])
            count = len(mine)
            positions = tuple(range(next_position, next_position + count))
            key_row = None if key is None else _key_row(request, positions)
            if savepoints and not _insert_savepoint(raw, mine, key_row):
                found = read_head(raw, stream)
                heads[sid] = found
                results.append(Conflict(found[0]))
                conflicts = True
                continue
            rows += mine
            if key_row is not None:
                key_rows.append(key_row)
                keys[key_row[0]] = (request, positions)
            results.append(positions)
            next_position += count
            heads[sid] = (head[0] + count, prev)
        if not savepoints:
            try:
                raw.executemany(_INSERT, rows)
                if key_rows:
                    raw.executemany(_KEY_INSERT, key_rows)
            except sqlite3.IntegrityError as e:
                raise _RowRefusedError from e
        if atomic and conflicts:
            # All or nothing: one conflict abandons the whole group.
            raw.execute("ROLLBACK")
            cache.forget()
            return [r if isinstance(r, Conflict) else () for r in results]
        # Every row went in at the position its link covers (explicit rowids): no
        # read-back is needed to know the positions are right.
        raw.execute("COMMIT")
    except BaseException:
        cache.forget()
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    cache.remember(raw, data_version, next_position, heads)
    return results


def _parts(rows: Sequence[EncodedRow | StoredEvent]) -> Sequence[EncodedRow]:
    """The rows as frame parts (``EventStore.encode`` makes them so already)."""
    if all(type(row) is EncodedRow for row in rows):
        return rows  # type: ignore[return-value]
    return [
        EncodedRow(
            row.originator_version,
            row.topic,
            row.state[:HEADER_SIZE],
            row.state[HEADER_SIZE:],
        )
        for row in rows
    ]


def _key_row(request: AppendRequest, positions: tuple[int, ...]) -> KeyRow | None:
    if request.idempotency_key is None:
        return None
    return (
        request.idempotency_key,
        request.stream_id.hex,
        request.expected_version + 1,
        request.expected_version + len(positions),
        msgspec.json.encode(positions).decode(),
    )


def _replayed(request: AppendRequest, positions: tuple[int, ...]) -> Replayed:
    return Replayed(
        request.stream_id,
        request.expected_version + 1,
        request.expected_version + len(positions),
        positions,
    )


def _insert_savepoint(
    raw: sqlite3.Connection, rows: list[Row], key_row: KeyRow | None
) -> bool:
    raw.execute("SAVEPOINT turnledger_append")
    try:
        raw.executemany(_INSERT, rows)
        if key_row is not None:
            raw.execute(_KEY_INSERT, key_row)
    except sqlite3.IntegrityError:
        # A key or contiguity trigger refused a row: only this append fails.
        raw.execute("ROLLBACK TO turnledger_append")
        raw.execute("RELEASE turnledger_append")
        return False
    raw.execute("RELEASE turnledger_append")
    return True
