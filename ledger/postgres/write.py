"""The PostgreSQL write path: one group per transaction, hash chain, idempotency keys.

A group (the appends the caller gathered) normally costs four round trips
whatever its size: ``BEGIN``, the writers' lock and every position it needs, in
one message; one binary COPY of every accepted row with its position and chain
link (two: start, end; ``ledger.postgres.rows``); ``COMMIT`` followed, in the
same message, by the followers' wake-up (``ledger.postgres.order.wake_followers``,
a transaction of its own). What the group
needs to know first is read before ``BEGIN``, and only when not known: the heads
(version and link) of streams this process has not seen committed at the
expected version (:class:`HeadCache`; a stream's first append needs none), and
the idempotency keys of keyed appends. Those reads are optimistic: nothing is
written from a stale one. The primary key refuses a version twice, the
contiguity trigger a version whose predecessor is missing or whose ``prev`` is
not that predecessor's link, and the keys table a key twice; any such refusal
(another writer got there first, or moved a head this process remembered) rolls
the group back and redoes it in one transaction that reads everything inside
it, a savepoint per append, so a conflict fails only its own append and a keyed
append whose key the other writer just committed returns that first outcome.
Rows go in sorted by stream and version, keys sorted, so two writers never wait
on each other in a cycle.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final
from uuid import UUID

import msgspec
import psycopg
from psycopg.sql import SQL, Identifier

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed
from turnledger.ledger.chain import CHAIN_FORMAT, GENESIS, LINK_OFFSET, head_link
from turnledger.ledger.postgres.rows import Outcome, insert_rows, plan_group, settled

KEYS_TABLE: Final = "turnledger_appends"
SEALS_TABLE: Final = "turnledger_seals"
CIPHER_TABLE: Final = "turnledger_cipher"
SEALED_TABLE: Final = "turnledger_sealed"
"""Whether the ledger holds sealed rows: row ``one = 1`` names the first one's
position (a trigger writes it with that row), row ``one = 0`` the position up to
which a ledger from before the trigger was searched (``first_sealed``)."""
LINK_SIZE: Final = 32


class Statements:
    """The write path's SQL for one schema and table (rendered once, as bytes).

    Args:
        schema: The ledger's schema.
        table: The events table.
        begin_write: The statements that take the writers' lock inside a
            transaction (``ledger.postgres.order.begin_write``).
    """

    def __init__(
        self, schema: str, table: str, begin_write: bytes, wake: bytes
    ) -> None:
        ident = {
            "schema": Identifier(schema),
            "table": Identifier(table),
            "keys": Identifier(KEYS_TABLE),
        }
        self.begin_write = begin_write
        self.wake = wake
        # One message: a failure after the data's COMMIT (in the wake-up) is told
        # apart from a failed COMMIT by the transaction's status (``_commit``).
        self.commit_and_wake = b"COMMIT; " + wake
        self.heads = (
            SQL(
                "SELECT DISTINCT ON (originator_id) originator_id, "
                "originator_version AS head, get_byte(state, 0) AS fmt, "
                f"substring(state from {LINK_OFFSET + 1} for 32) AS link "
                "FROM {schema}.{table} WHERE originator_id = ANY(%s) "
                "ORDER BY originator_id, originator_version DESC"
            )
            .format(**ident)
            .as_bytes(None)
        )
        self.stream = (
            SQL(
                "SELECT notification_id, originator_version, topic, state FROM "
                "{schema}.{table} WHERE originator_id = %s ORDER BY originator_version"
            )
            .format(**ident)
            .as_bytes(None)
        )
        self.keys = (
            SQL(
                "SELECT key, stream, first_version, last_version, positions "
                "FROM {schema}.{keys} WHERE key = ANY(%s)"
            )
            .format(**ident)
            .as_bytes(None)
        )
        self.sequence = f'"{schema}"."{table}_notification_id_seq"'
        self.reserve = (
            b"SELECT array_agg(p ORDER BY p) AS p, pg_current_xact_id()::text AS xid "
            b"FROM (SELECT nextval('"
            + self.sequence.encode()
            + b"'::regclass) AS p FROM generate_series(1, %d)) AS r"
        )
        self.insert = (
            SQL(
                "COPY {schema}.{table} (originator_version, originator_id, topic, "
                "state, notification_id) FROM STDIN (FORMAT BINARY)"
            )
            .format(**ident)
            .as_bytes(None)
        )
        self.insert_keys = (
            SQL(
                "INSERT INTO {schema}.{keys} SELECT * FROM unnest(%b::text[], "
                "%b::uuid[], %b::bigint[], %b::bigint[], %b::text[])"
            )
            .format(**ident)
            .as_bytes(None)
        )

    def begin(self, rows: int) -> bytes:
        """``BEGIN``, the writers' lock and ``rows`` positions: one message."""
        return b"BEGIN; " + self.begin_write + b"; " + self.reserve % rows


class HeadCache:
    """Stream heads (version, first 16 bytes of the link) this process saw committed.

    A hint, never trusted alone: an append planned on a stale head is refused by
    the database (primary key, contiguity and link trigger) and redone from what
    the database holds. Thread-safe; bounded (cleared when full).
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._heads: dict[UUID, tuple[int, bytes]] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def prev(self, stream: UUID, version: int) -> bytes | None:
        """The link prefix of ``stream`` at ``version``, if that is its known head."""
        found = self._heads.get(stream)
        return found[1] if found is not None and found[0] == version else None

    def remember(self, heads: dict[UUID, tuple[int, bytes]]) -> None:
        """Record committed heads."""
        with self._lock:
            if len(self._heads) + len(heads) > self._limit:
                self._heads.clear()
            self._heads.update(heads)

    def forget(self, streams: Iterable[UUID]) -> None:
        """Drop what is known of ``streams``."""
        with self._lock:
            for stream in streams:
                self._heads.pop(stream, None)


def write_group(
    conn: psycopg.Connection[Any],
    sql: Statements,
    requests: Sequence[AppendRequest],
    cache: HeadCache,
    *,
    atomic: bool,
) -> list[Outcome]:
    """Write a group in one transaction of its own (on an autocommit connection).

    With ``atomic``, a conflict anywhere writes nothing (every outcome is still
    reported; ``insert_batch`` blanks the others).
    """
    with conn.cursor() as cursor:
        try:
            return _fast(cursor, sql, requests, cache, atomic=atomic)
        except psycopg.errors.IntegrityError:
            cache.forget(r.stream_id for r in requests)
        outcomes: list[Outcome] = []
        with conn.transaction():
            cursor.execute(sql.begin_write)
            outcomes = _one_by_one(conn, cursor, sql, requests)
            if atomic and any(isinstance(o, Conflict) for o in outcomes):
                raise psycopg.Rollback  # all or nothing: leaves the block
        rolled_back = atomic and any(isinstance(o, Conflict) for o in outcomes)
        if not rolled_back and any(
            o and not isinstance(o, (Conflict, Replayed)) for o in outcomes
        ):
            wake(conn, sql.wake)  # rows were written
        return outcomes


def _fast(
    cursor: psycopg.Cursor[Any],
    sql: Statements,
    requests: Sequence[AppendRequest],
    cache: HeadCache,
    *,
    atomic: bool,
) -> list[Outcome]:
    """The whole group in one transaction, from what is known or read up front."""
    heads: dict[UUID, tuple[int, bytes]] = {}
    unknown: dict[UUID, None] = {}
    for request in requests:
        stream = request.stream_id
        if stream in heads or stream in unknown:
            continue  # the group's first append to a stream says its head
        prev = (
            GENESIS
            if request.expected_version == 0
            else cache.prev(stream, request.expected_version)
        )
        if prev is None:
            unknown[stream] = None
        else:
            heads[stream] = (request.expected_version, prev)
    if unknown:
        heads.update(_heads(cursor, sql, list(unknown)))
    plan, accepted = plan_group(requests, heads, _keys(cursor, sql, requests))
    if not accepted or (atomic and any(isinstance(p, Conflict) for p in plan)):
        return settled(plan)
    prevs = {stream: head[1] for stream, head in heads.items()}
    try:
        cursor.execute(sql.begin(accepted))
        while cursor.nextset():
            pass  # to the last result: the positions
        positions, xid = _reserved(cursor)
        results = insert_rows(
            cursor, (sql.insert, sql.insert_keys), plan, positions, prevs
        )
        _commit(cursor, sql, xid)
    except BaseException:
        conn = cursor.connection
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):  # a lost connection: no block
                conn.execute(b"ROLLBACK")
        raise
    written = {step.stream_id for step in plan if isinstance(step, AppendRequest)}
    cache.remember({stream: (heads[stream][0], prevs[stream]) for stream in written})
    return results


def _reserved(cursor: psycopg.Cursor[Any]) -> tuple[list[int], str]:
    """The positions reserved and the transaction's id (the last result)."""
    row = cursor.fetchone()
    if row is None:
        msg = "Expected the reserved positions, found no row"
        raise psycopg.InternalError(msg)
    return list(row["p"]), str(row["xid"])


def _commit(cursor: psycopg.Cursor[Any], sql: Statements, xid: str) -> None:
    """Commit, then wake the followers, in one round trip.

    An error there either failed the COMMIT (the rows are not written: raised)
    or came after it, from the wake-up (the rows are durable: the caller must
    not hear of a failure, and followers wake within a second anyway). The
    transaction's status (``pg_xact_status``) says which; a lost connection
    cannot be asked and is raised, as a COMMIT lost on the way always was.
    """
    try:
        cursor.execute(sql.commit_and_wake)
    except psycopg.Error:
        conn = cursor.connection
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute(b"ROLLBACK")  # the wake-up's block, left open
            found = conn.execute(
                b"SELECT pg_xact_status(%s::xid8) AS status", (xid,)
            ).fetchone()
        except psycopg.Error:
            found = None
        if found is None or found["status"] != "committed":
            raise


def wake(conn: psycopg.Connection[Any], statement: bytes) -> None:
    """Wake the followers after a durable commit; a failure here fails no append.

    The rows are committed: reporting an error would make a caller retry a
    write that happened. A follower that misses this wake-up wakes within a
    second anyway (``WakingSubscription``).
    """
    try:
        conn.execute(statement)
    except psycopg.Error:
        with contextlib.suppress(psycopg.Error):
            conn.execute(b"ROLLBACK")  # a failed wake leaves its block open


def _one_by_one(
    conn: psycopg.Connection[Any],
    cursor: psycopg.Cursor[Any],
    sql: Statements,
    requests: Sequence[AppendRequest],
) -> list[Outcome]:
    """Each append in its own savepoint, reading heads and keys inside the lock."""
    outcomes: list[Outcome] = []
    for request in requests:
        try:
            with conn.transaction():
                outcomes.extend(_write(cursor, sql, [request]))
        except psycopg.errors.IntegrityError:
            key = request.idempotency_key
            replay = _keys(cursor, sql, [request]).get(key) if key else None
            if replay is not None:
                outcomes.append(replay)
                continue
            head = _heads(cursor, sql, [request.stream_id]).get(request.stream_id)
            outcomes.append(Conflict(head[0] if head else 0))
    return outcomes


def _heads(
    cursor: psycopg.Cursor[Any], sql: Statements, streams: list[UUID]
) -> dict[UUID, tuple[int, bytes]]:
    cursor.execute(sql.heads, (streams,))
    heads: dict[UUID, tuple[int, bytes]] = {}
    for row in cursor.fetchall():
        link = bytes(row["link"] or b"")
        if row["fmt"] == CHAIN_FORMAT and len(link) == LINK_SIZE:
            heads[row["originator_id"]] = (int(row["head"]), link[:16])
            continue
        # A pre-chain head (a ledger written before the chain): computed once.
        cursor.execute(sql.stream, (row["originator_id"],))
        rows = [
            (
                int(r["notification_id"]),
                int(r["originator_version"]),
                str(r["topic"]),
                bytes(r["state"]),
            )
            for r in cursor.fetchall()
        ]
        version, full = head_link(rows, row["originator_id"])
        heads[row["originator_id"]] = (version, full[:16])
    return heads


def _keys(
    cursor: psycopg.Cursor[Any], sql: Statements, requests: Sequence[AppendRequest]
) -> dict[str, Replayed]:
    wanted = [r.idempotency_key for r in requests if r.idempotency_key is not None]
    if not wanted:
        return {}
    cursor.execute(sql.keys, (wanted,))
    return {
        row["key"]: Replayed(
            row["stream"],
            int(row["first_version"]),
            int(row["last_version"]),
            tuple(msgspec.json.decode(row["positions"], type=list[int])),
        )
        for row in cursor.fetchall()
    }


def _write(
    cursor: psycopg.Cursor[Any], sql: Statements, requests: Sequence[AppendRequest]
) -> list[Outcome]:
    """Plan and write inside the caller's transaction, reading heads and keys."""
    heads = _heads(cursor, sql, list({r.stream_id: None for r in requests}))
    prevs = {stream: head[1] for stream, head in heads.items()}
    plan, accepted = plan_group(requests, heads, _keys(cursor, sql, requests))
    if not accepted:
        return settled(plan)
    cursor.execute(sql.reserve % accepted)
    row = cursor.fetchone()
    positions = list(row["p"]) if row else []
    return insert_rows(cursor, (sql.insert, sql.insert_keys), plan, positions, prevs)
