"""The SQLite write path: group commit, hash chain, idempotency keys.

One ``BEGIN IMMEDIATE`` transaction per group (one fsync for all). Each stream's
head (version and link) is read once under the write lock; each accepted row is
chained (``ledger.chain``) at the position it will get (rowids are max + 1 in
order: no deletes, one writer); the rows go in with one ``executemany``. Should a
row still be refused (only rows written behind our back could cause that), the
group is redone with a savepoint per append, so a conflict fails only its own
append. An append with an idempotency key first looks the key up: a used key
returns the first outcome and writes nothing; a new key is recorded with the rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final
from uuid import UUID

import msgspec

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed
from turnledger.ledger.chain import (
    CHAIN_FORMAT,
    GENESIS,
    LINK_OFFSET,
    chain_state,
    head_link,
)

TABLE: Final = "stored_events"
KEYS_TABLE: Final = "turnledger_appends"

_INSERT: Final = f"INSERT INTO {TABLE} VALUES (?,?,?,?)"
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

Outcome = tuple[int, ...] | Conflict | Replayed
Row = tuple[str, int, str, bytes]
KeyRow = tuple[str, str, int, int, str]


class _RowRefusedError(Exception):
    """The batched insert hit a key or trigger error; redo the group with savepoints."""


def write_group(
    raw: sqlite3.Connection, requests: Sequence[AppendRequest], *, atomic: bool
) -> list[Outcome]:
    """Write a group in one transaction; see the module docstring."""
    try:
        return _write(raw, requests, atomic=atomic, savepoints=False)
    except _RowRefusedError:
        return _write(raw, requests, atomic=atomic, savepoints=True)


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


def _write(  # noqa: C901 - the group's plan, kept in one place
    raw: sqlite3.Connection,
    requests: Sequence[AppendRequest],
    *,
    atomic: bool,
    savepoints: bool,
) -> list[Outcome]:
    results: list[Outcome] = []
    raw.execute("BEGIN IMMEDIATE")
    try:
        next_position = int(raw.execute(_MAX_ROWID).fetchone()[0] or 0) + 1
        heads: dict[UUID, tuple[int, bytes]] = {}
        keys: dict[str, Replayed] = {}
        rows: list[Row] = []
        key_rows: list[KeyRow] = []
        for request in requests:
            key = request.idempotency_key
            if key is not None:
                replay = keys.get(key) or _lookup(raw, key)
                if replay is not None:
                    results.append(replay)
                    continue
            head = heads.get(request.stream_id) or read_head(raw, request.stream_id)
            heads[request.stream_id] = head
            if head[0] != request.expected_version:
                results.append(Conflict(head[0]))
                continue
            mine, prev = _chain(request, next_position, head[1])
            positions = tuple(range(next_position, next_position + len(mine)))
            key_row = _key_row(request, positions)
            if savepoints and not _insert_savepoint(raw, mine, key_row):
                found = read_head(raw, request.stream_id)
                heads[request.stream_id] = found
                results.append(Conflict(found[0]))
                continue
            rows.extend(mine)
            if key_row is not None:
                key_rows.append(key_row)
                keys[key_row[0]] = _replayed(request, positions)
            results.append(positions)
            next_position += len(mine)
            heads[request.stream_id] = (head[0] + len(mine), prev)
        if not savepoints:
            try:
                raw.executemany(_INSERT, rows)
                if key_rows:
                    raw.executemany(_KEY_INSERT, key_rows)
            except sqlite3.IntegrityError as e:
                raise _RowRefusedError from e
        return _commit(raw, results, next_position - 1, atomic=atomic)
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _chain(
    request: AppendRequest, first_position: int, prev: bytes
) -> tuple[list[Row], bytes]:
    stream_hex = request.stream_id.hex
    out: list[Row] = []
    position = first_position
    for row in request.rows:
        state, link = chain_state(
            row.state,
            request.stream_id,
            version=row.originator_version,
            position=position,
            topic=row.topic,
            prev=prev,
        )
        prev = link[:16]
        out.append((stream_hex, row.originator_version, row.topic, state))
        position += 1
    return out, prev


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


def _commit(
    raw: sqlite3.Connection, results: list[Outcome], last_position: int, *, atomic: bool
) -> list[Outcome]:
    if atomic and any(isinstance(r, Conflict) for r in results):
        # All or nothing: one conflict abandons the whole group.
        raw.execute("ROLLBACK")
        return [r if isinstance(r, Conflict) else () for r in results]
    # No deletes and a single writer: rowids are max+1 in order. Check it.
    last = int(raw.execute(_MAX_ROWID).fetchone()[0] or 0)
    if last != last_position:
        msg = f"turnledger: expected the last position {last_position}, found {last}"
        raise sqlite3.IntegrityError(msg)
    raw.execute("COMMIT")
    return results
