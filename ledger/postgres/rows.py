"""Planning a PostgreSQL write group and chaining its rows.

:func:`plan_group` decides every append of a group from the heads and keys known
(a conflict, a replay under a key already used, a repeat of a key earlier in the
group, or rows to write); :func:`insert_rows` chains the accepted rows at their
reserved positions and writes them with one binary COPY (the server inserts
them a page at a time, and the client formats rows in C; an INSERT of unnested
arrays cost ~7 % more CPU per turn, client and server together) and their keys
with one INSERT (binary parameters: the text form of a bytea array costs a regex
substitution per row in the client and a parse in the server). Rows go in
sorted by stream and version, keys sorted, so two writers never wait on each
other in a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final
from uuid import UUID

import msgspec
import psycopg

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed, mark_keyed
from turnledger.ledger.chain import GENESIS, chain_state

Outcome = tuple[int, ...] | Conflict | Replayed
Plan = list[Outcome | int | AppendRequest]
_Row = tuple[bytes, int, UUID, str, bytes, int]
_Key = tuple[str, UUID, int, int, str]
_COPY_TYPES: Final = [20, 2950, 25, 17, 20]
"""The COPY's column types (bigint, uuid, text, bytea, bigint), as OIDs."""


def plan_group(
    requests: Sequence[AppendRequest],
    heads: dict[UUID, tuple[int, bytes]],
    used: dict[str, Replayed],
) -> tuple[Plan, int]:
    """Decide each append from the heads and keys; return it and the rows accepted.

    Each step: an outcome already known, the index of an earlier request in the
    group holding the same key, or a request to write. ``heads`` is moved past
    every accepted append.
    """
    plan: Plan = []
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
    return plan, accepted


def settled(plan: Plan) -> list[Outcome]:
    """The outcomes of a plan that writes nothing."""
    return [p for p in plan if not isinstance(p, (int, AppendRequest))]


def insert_rows(
    cursor: psycopg.Cursor[Any],
    sql: tuple[bytes, bytes],
    plan: Plan,
    positions: list[int],
    prevs: dict[UUID, bytes],
) -> list[Outcome]:
    """Chain the accepted rows at their positions and insert them (and keys).

    ``sql`` is the COPY of rows (columns: version, stream, topic, state,
    position) and the INSERT of keys; ``prevs`` (each
    stream's head link prefix) ends with each written stream's new one.
    """
    rows: list[_Row] = []
    keys: list[_Key] = []
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
        stream = step.stream_id
        order = stream.bytes
        prev = prevs.get(stream, GENESIS)
        written = tuple(positions[taken : taken + len(step.rows)])
        taken += len(step.rows)
        frames = step.rows if step.idempotency_key is None else mark_keyed(step.rows)
        for row, position in zip(frames, written, strict=True):
            version = row.originator_version
            state, link = chain_state(
                row.state,
                stream,
                version=version,
                position=position,
                topic=row.topic,
                prev=prev,
            )
            prev = link[:16]
            rows.append((order, version, stream, row.topic, state, position))
        prevs[stream] = prev
        if step.idempotency_key is None:
            results.append(written)
            continue
        first_version = step.expected_version + 1
        last_version = step.expected_version + len(written)
        # Recorded as a Replayed so later duplicates in the group can point at it;
        # turned back into plain positions below.
        results.append(Replayed(stream, first_version, last_version, written))
        encoded = msgspec.json.encode(list(written)).decode()
        keys.append(
            (step.idempotency_key, stream, first_version, last_version, encoded)
        )
    rows.sort(key=_by_stream_and_version)
    with cursor.copy(sql[0]) as copy:
        copy.set_types(_COPY_TYPES)
        for ready in rows:
            copy.write_row(ready[1:])
    if keys:
        keys.sort(key=_by_key)
        cursor.execute(sql[1], [list(column) for column in zip(*keys, strict=True)])
    return [_own(step, result) for step, result in zip(plan, results, strict=True)]


def _by_stream_and_version(row: _Row) -> Any:
    return row[:2]


def _by_key(key: _Key) -> str:
    return key[0]


def _own(step: Outcome | int | AppendRequest, result: Outcome) -> Outcome:
    if isinstance(step, AppendRequest) and isinstance(result, Replayed):
        return result.positions
    return result
