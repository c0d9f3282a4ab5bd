"""Query API: a session's whole record as a reader pages it, a fork's prefix first.

A session's record is its lineage (:func:`turnledger.projections.lineage.lineage`:
a fork's source events up to the fork point, then its own), numbered through the
lineage, with the folds readers show beside it: the transcript
(:data:`~turnledger.projections.history.SESSION_TRANSCRIPT`, every recorded
message, trimmed ones included) and the cost records
(:data:`~turnledger.projections.costs.COST_RECORDS`). The ledger is append-only,
so :func:`advance_record` folds only the stream's events after the head a record
was read at onto it. The memory stream's provenance (:func:`memory_provenance`)
and the recalls around a position (:func:`recall_before`, :func:`recall_after`)
are read here too, so the web UI folds nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    MemoryForgotten,
    MemoryRecalled,
    MemoryStored,
    MemorySuperseded,
    SessionForked,
)
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore
from turnledger.projections.base import fold
from turnledger.projections.costs import COST_RECORDS, CostBucket
from turnledger.projections.history import SESSION_TRANSCRIPT, SessionHistoryState
from turnledger.projections.lineage import fork_event, lineage


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A session's record as of its stream's head version.

    Attributes:
        stream_id: The session stream.
        head: The stream's own head version the record was read at.
        forked: The fork event the stream begins with (``None``: not a fork).
        inherited: How many leading events are the source prefix (0: none).
        events: The lineage, oldest first. Each event carries the session's
            stream id and its version through the lineage (1, 2, ...: a fork's
            own event ``v`` is ``inherited + v``), the numbering the transcript
            gives its entries; positions are the ledger's.
        transcript: The transcript fold of the lineage.
        costs: The cost-records states of the lineage's model calls.
    """

    stream_id: UUID
    head: int
    forked: SessionForked | None
    inherited: int
    events: tuple[Recorded, ...]
    transcript: SessionHistoryState
    costs: dict[str, CostBucket]


def _numbered(events: Sequence[Recorded], offset: int) -> list[Recorded]:
    """Events with their lineage version (``offset`` + their own)."""
    if not offset:
        return list(events)
    return [msgspec.structs.replace(r, version=offset + r.version) for r in events]


def read_record(store: EventStore, stream_id: UUID) -> SessionRecord:
    """Read a session's record up to its stream's head (a fork's prefix first)."""
    head = store.stream_version(stream_id)
    own = store.read_stream(stream_id, until=head) if head else []
    forked = fork_event(own)
    events = lineage(store, stream_id, own=own) if forked is not None else own
    inherited = len(events) - len(own)
    key = str(stream_id)
    transcript = fold(SESSION_TRANSCRIPT, events, {}).get(
        key, SESSION_TRANSCRIPT.initial(key)
    )
    numbered = [
        msgspec.structs.replace(r, version=i + 1) if r.version != i + 1 else r
        for i, r in enumerate(events)
    ]
    return SessionRecord(
        stream_id=stream_id,
        head=head,
        forked=forked,
        inherited=inherited,
        events=tuple(numbered),
        transcript=transcript,
        costs=fold(COST_RECORDS, events),
    )


def advance_record(store: EventStore, record: SessionRecord) -> SessionRecord:
    """The record with the stream's events after ``record.head`` folded on."""
    if not record.head:  # read before the stream began: it may be a fork
        return read_record(store, record.stream_id)
    head = store.stream_version(record.stream_id)
    if head == record.head:
        return record
    fresh = store.read_stream(record.stream_id, after=record.head, until=head)
    key = str(record.stream_id)
    return msgspec.structs.replace(
        record,
        head=head,
        events=(*record.events, *_numbered(fresh, record.inherited)),
        transcript=fold(SESSION_TRANSCRIPT, fresh, {key: record.transcript})[key],
        costs=fold(COST_RECORDS, fresh, record.costs),
    )


class KeyProvenance(msgspec.Struct, frozen=True, kw_only=True):
    """One key of an agent's memory stream: its events and what it is now.

    Attributes:
        key: The key.
        events: Its ``memory.stored``/``forgotten``/``superseded`` events, oldest
            first.
        forgotten: Whether its last store was forgotten since.
        category: The category last stored.
        importance: The importance last stored.
    """

    key: str
    events: tuple[Recorded, ...]
    forgotten: bool
    category: str
    importance: float | None


_MEMORY_EVENTS = MemoryStored | MemoryForgotten | MemorySuperseded


def memory_provenance(store: EventStore, agent: str) -> list[KeyProvenance]:
    """Every key of the agent's memory stream with its events (latest change first)."""
    events: dict[str, list[Recorded]] = {}
    kept: dict[str, tuple[bool, str, float | None]] = {}
    for r in store.read_stream(memory_stream_id(agent)):
        event = r.event
        if not isinstance(event, _MEMORY_EVENTS):
            continue
        events.setdefault(event.key, []).append(r)
        before = kept.get(event.key, (False, "", None))
        if isinstance(event, MemoryStored):
            kept[event.key] = (False, event.category, event.importance)
        elif isinstance(event, MemoryForgotten):
            kept[event.key] = (True, before[1], before[2])
    found = [
        KeyProvenance(
            key=key,
            events=tuple(rs),
            forgotten=kept.get(key, (False, "", None))[0],
            category=kept.get(key, (False, "", None))[1],
            importance=kept.get(key, (False, "", None))[2],
        )
        for key, rs in events.items()
    ]
    return sorted(found, key=lambda k: k.events[-1].position, reverse=True)


def memory_keys_at(store: EventStore, agent: str, position: int) -> list[str]:
    """Keys the agent's memory stream holds at a position (stored, not forgotten)."""
    keys: dict[str, None] = {}
    for r in store.read_stream(memory_stream_id(agent)):
        if r.position > position:
            break
        if isinstance(r.event, MemoryStored):
            keys[r.event.key] = None
        elif isinstance(r.event, MemoryForgotten):
            keys.pop(r.event.key, None)
    return list(keys)


def recall_before(events: Sequence[Recorded], position: int) -> MemoryRecalled | None:
    """The last recall recorded at or before a position."""
    found = None
    for r in events:
        if r.position > position:
            break
        if isinstance(r.event, MemoryRecalled):
            found = r.event
    return found


def recall_after(events: Sequence[Recorded], position: int) -> MemoryRecalled | None:
    """The first recall recorded after a position: what the next turn was given."""
    for r in events:
        if r.position > position and isinstance(r.event, MemoryRecalled):
            return r.event
    return None
