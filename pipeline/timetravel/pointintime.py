"""Point-in-time reads: one resolver for ``--at``, and a session as it was then.

``--at`` takes a global position, a turn id of the session (the position of
that turn's last event) or an ISO 8601 time (the last event recorded at or
before it); every command resolves it here. :func:`point_in_time` gathers what
a session looked like at a position: the provider-visible history, the costs
so far, the agent's memory then, and the recall the next turn was given, with
its ``[Memory context]`` block rebuilt from the memory as it was then.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import quote_value
from turnledger.ledger.events import MemoryRecalled
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.numbers import MAX_INTEGER, parse_whole
from turnledger.ledger.store import EventStore
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.sessions import SessionRef
from turnledger.policies.messages import Message
from turnledger.policies.recall import RecalledMemory, render_memory_block
from turnledger.projections.costs import CostTotals, grand_total
from turnledger.projections.history.read import provider_messages
from turnledger.projections.lineage import lineage
from turnledger.projections.memory_at import MemoryAt, memory_as_of
from turnledger.projections.queries import SessionHistories, cost_records

_POSITION: Final = re.compile(r"[0-9]+")


class TimeTravelError(PipelineError, ValueError):
    """A point in time, a fork or a rewind that cannot be done as asked."""


def parse_position(text: str) -> int | None:
    """Return the global position ``text`` writes in ASCII digits, else ``None``.

    Raises:
        TimeTravelError: The digits name a position above
            :data:`~ledger.numbers.MAX_INTEGER`.
    """
    if not _POSITION.fullmatch(text):
        return None
    position = parse_whole(text)
    if position is None:
        msg = f"Expected a position of at most {MAX_INTEGER}, found {quote_value(text)}"
        raise TimeTravelError(msg)
    return position


def resolve_at(events: list[Recorded], text: str) -> int:
    """Return the global position ``--at``/``--to`` names among a session's events.

    Args:
        events: The session's lineage (its events, a fork's prefix included).
        text: A global position, a turn id of the session (the position of
            the turn's last event), or an ISO 8601 time (the position of the
            last event recorded at or before it; a time without a zone is UTC).

    Raises:
        TimeTravelError: The text is none of these.
    """
    position = parse_position(text)
    if position is not None:
        return position
    turn = [r.position for r in events if getattr(r.event, "turn_id", None) == text]
    if turn:
        return max(turn)
    when = parse_time(text)
    if when is None:
        msg = (
            "Expected a position, a turn id of the session or an ISO time, "
            f"found {quote_value(text)}"
        )
        raise TimeTravelError(msg)
    return max((r.position for r in events if r.recorded_at <= when), default=0)


def parse_time(text: str) -> datetime | None:
    """Return an ISO 8601 time (UTC when it names no zone), or ``None``."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def resolve_global_at(store: EventStore, text: str) -> int:
    """Return the global position a position or an ISO time names (any stream).

    Raises:
        TimeTravelError: The text is neither.
    """
    position = parse_position(text)
    if position is not None:
        return position
    when = parse_time(text)
    if when is None:
        msg = f"Expected a position or an ISO time, found {quote_value(text)}"
        raise TimeTravelError(msg)
    found = 0
    for r in store.iter_all():
        if r.recorded_at > when:
            break
        found = r.position
    return found


class NextRecall(msgspec.Struct, frozen=True, kw_only=True):
    """The recall recorded for the first turn after a position.

    Attributes:
        turn_id: That turn.
        keys: The entries it was given, in order (as recorded).
        injected_chars: The size of the block it was given (as recorded).
        block: The block of those entries with their contents as of the
            position (``[forgotten]`` for a shredded one).
    """

    turn_id: str
    keys: tuple[str, ...]
    injected_chars: int
    block: str


class PointInTime(msgspec.Struct, frozen=True, kw_only=True):
    """A session as of a position.

    Attributes:
        position: The global position.
        history: The provider-visible history then.
        costs: The session's model-call totals up to then (its lineage's).
        memory: The agent's memory keys stored (live) then.
        next_recall: The next turn's recall, if a turn followed.
    """

    position: int
    history: list[Message]
    costs: CostTotals
    memory: tuple[str, ...]
    next_recall: NextRecall | None


def point_in_time(
    store: EventStore,
    ref: SessionRef,
    position: int,
    *,
    opener: Callable[[str], str] = lambda content: content,
) -> PointInTime:
    """Return what session ``ref`` looked like at global ``position``.

    Args:
        store: The ledger.
        ref: The session.
        position: The global position.
        opener: Opens a sealed memory content (``[forgotten]`` once shredded).
    """
    state = SessionHistories(store).get(ref.stream_id, at=position)
    memory = memory_as_of(store.read_stream(memory_stream_id(ref.agent)), position)
    upcoming = _next_recall(lineage(store, ref.stream_id), position)
    return PointInTime(
        position=position,
        history=provider_messages(state),
        costs=grand_total(cost_records(store, stream_id=ref.stream_id, at=position)),
        memory=tuple(k for k, m in memory.items() if m.status == "stored"),
        next_recall=None
        if upcoming is None
        else NextRecall(
            turn_id=upcoming.turn_id,
            keys=tuple(e.key for e in upcoming.entries),
            injected_chars=upcoming.injected_chars,
            block=_block(upcoming, memory, opener),
        ),
    )


def _next_recall(events: list[Recorded], position: int) -> MemoryRecalled | None:
    for r in events:
        if r.position > position and isinstance(r.event, MemoryRecalled):
            return r.event
    return None


def _block(
    recall: MemoryRecalled,
    memory: dict[str, MemoryAt],
    opener: Callable[[str], str],
) -> str:
    entries = [
        RecalledMemory(
            id=e.entry_id,
            key=e.key,
            content=opener(memory[e.key].content),
            truncated=False,
        )
        for e in recall.entries
        if e.key in memory
    ]
    return render_memory_block(entries)
