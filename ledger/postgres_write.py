"""The PostgreSQL write path: one group per transaction, hash chain, idempotency keys.

A group costs a fixed number of round trips whatever its size: every head
(version and link) at once, every idempotency key at once, the positions reserved
from the table's sequence, one INSERT of every accepted row with its position,
one INSERT of the new keys. Writers run in parallel: a writer that read a head
another writer is about to move meets the primary key (it waits for that commit,
then fails); the group is then redone a savepoint per append, so the conflict
fails only its own append, and a keyed append whose key the other writer just
committed returns that first outcome. Rows go in sorted by stream and version,
keys sorted, so two writers never wait on each other in a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final
from uuid import UUID

import msgspec
import psycopg
from psycopg.sql import SQL, Composed, Identifier

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed
from turnledger.ledger.chain import (
    CHAIN_FORMAT,
    GENESIS,
    LINK_OFFSET,
    chain_state,
    head_link,
)

KEYS_TABLE: Final = "turnledger_appends"
SEALS_TABLE: Final = "turnledger_seals"
LINK_SIZE: Final = 32

Outcome = tuple[int, ...] | Conflict | Replayed


class Statements:
    """The write path's SQL for one schema and table."""

    def __init__(self, schema: str, table: str) -> None:
        ident = {
            "schema": Identifier(schema),
            "table": Identifier(table),
            "keys": Identifier(KEYS_TABLE),
        }
        self.heads: Composed = SQL(
            "SELECT DISTINCT ON (originator_id) originator_id, "
            "originator_version AS head, get_byte(state, 0) AS fmt, "
            f"substring(state from {LINK_OFFSET + 1} for 32) AS link "
            "FROM {schema}.{table} WHERE originator_id = ANY(%s) "
            "ORDER BY originator_id, originator_version DESC"
        ).format(**ident)
        self.stream: Composed = SQL(
            "SELECT notification_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE originator_id = %s ORDER BY originator_version"
        ).format(**ident)
        self.keys: Composed = SQL(
            "SELECT key, stream, first_version, last_version, positions "
            "FROM {schema}.{keys} WHERE key = ANY(%s)"
        ).format(**ident)
        self.sequence = f'"{schema}"."{table}_notification_id_seq"'
        self.reserve: Composed = SQL(
            "SELECT nextval(%s::regclass) AS p FROM generate_series(1, %s) ORDER BY 1"
        ).format()
        self.insert: Composed = SQL(
            "INSERT INTO {schema}.{table} "
            "(originator_id, originator_version, topic, state, notification_id) "
            "SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], "
            "%s::bytea[], %s::bigint[])"
        ).format(**ident)
        self.insert_keys: Composed = SQL(
            "INSERT INTO {schema}.{keys} SELECT * FROM unnest(%s::text[], "
            "%s::uuid[], %s::bigint[], %s::bigint[], %s::text[])"
        ).format(**ident)


def write_group(
    conn: psycopg.Connection[Any],
    cursor: psycopg.Cursor[Any],
    sql: Statements,
    requests: Sequence[AppendRequest],
) -> list[Outcome]:
    """Write a group inside the caller's transaction (and table lock)."""
    try:
        with conn.transaction():
            return _write(cursor, sql, requests)
    except psycopg.errors.IntegrityError:
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
    heads = _heads(cursor, sql, list({r.stream_id: None for r in requests}))
    prevs = {stream: head[1] for stream, head in heads.items()}
    used = _keys(cursor, sql, requests)
    # Each step: an outcome already known, the index of an earlier request in the
    # group holding the same key, or a request to write.
    plan: list[Outcome | int | AppendRequest] = []
    first_with: dict[str, int] = {}
    accepted = 0
    for index, request in enumerate(requests):
        key = request.idempotency_key
        if key is not None and key in used:
            plan.append(used[key])
            continue
        if key is not None and key in first_with:
            plan.append(first_with[key])
            continue
        head = heads.get(request.stream_id, (0, GENESIS))
        if head[0] != request.expected_version:
            plan.append(Conflict(head[0]))
            continue
        plan.append(request)
        accepted += len(request.rows)
        heads[request.stream_id] = (head[0] + len(request.rows), head[1])
        if key is not None:
            first_with[key] = index
    if not accepted:
        return [p for p in plan if not isinstance(p, (int, AppendRequest))]
    cursor.execute(sql.reserve, (sql.sequence, accepted))
    positions = [int(r["p"]) for r in cursor.fetchall()]
    return _insert(cursor, sql, plan, positions, prevs)


def _insert(
    cursor: psycopg.Cursor[Any],
    sql: Statements,
    plan: list[Outcome | int | AppendRequest],
    positions: list[int],
    prevs: dict[UUID, bytes],
) -> list[Outcome]:
    columns: tuple[list[Any], ...] = ([], [], [], [], [])
    keys: tuple[list[Any], ...] = ([], [], [], [], [])
    results: list[Outcome] = []
    taken = 0
    for step in plan:
        if isinstance(step, int):
            first = results[step]
            assert isinstance(first, Replayed)  # noqa: S101 - set just below
            results.append(first)
            continue
        if not isinstance(step, AppendRequest):
            results.append(step)
            continue
        prev = prevs.get(step.stream_id, GENESIS)
        written = tuple(positions[taken : taken + len(step.rows)])
        taken += len(step.rows)
        for row, position in zip(step.rows, written, strict=True):
            state, link = chain_state(
                row.state,
                step.stream_id,
                version=row.originator_version,
                position=position,
                topic=row.topic,
                prev=prev,
            )
            prev = link[:16]
            for column, value in zip(
                columns,
                (step.stream_id, row.originator_version, row.topic, state, position),
                strict=True,
            ):
                column.append(value)
        prevs[step.stream_id] = prev
        if step.idempotency_key is None:
            results.append(written)
            continue
        first_version = step.expected_version + 1
        last_version = step.expected_version + len(written)
        # Recorded as a Replayed so later duplicates in the group can point at it;
        # turned back into plain positions below.
        results.append(Replayed(step.stream_id, first_version, last_version, written))
        for column, value in zip(
            keys,
            (
                step.idempotency_key,
                step.stream_id,
                first_version,
                last_version,
                msgspec.json.encode(list(written)).decode(),
            ),
            strict=True,
        ):
            column.append(value)
    cursor.execute(
        sql.insert, _sorted(columns, key=lambda i: (columns[0][i].bytes, columns[1][i]))
    )
    if keys[0]:
        cursor.execute(sql.insert_keys, _sorted(keys, key=lambda i: keys[0][i]))
    return [_own(step, result) for step, result in zip(plan, results, strict=True)]


def _sorted(
    columns: tuple[list[Any], ...], *, key: Callable[[int], Any]
) -> tuple[list[Any], ...]:
    order = sorted(range(len(columns[0])), key=key)
    return tuple([column[i] for i in order] for column in columns)


def _own(step: Outcome | int | AppendRequest, result: Outcome) -> Outcome:
    if isinstance(step, AppendRequest) and isinstance(result, Replayed):
        return result.positions
    return result
