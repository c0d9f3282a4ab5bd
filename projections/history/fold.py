"""Folding a whole session stream at once, and the exact history of a lineage.

:func:`fold_stream` is the session-history fold of
:mod:`turnledger.projections.history` over many events in one pass: runs of
message events are appended once rather than one tuple copy per event, and a
compacting fold skips building the messages a later trim in the same batch hides,
so a long session folds in time linear in its length. :func:`exact_history` folds
a lineage's events and falls back to the transcript fold when a rewind undid a
trim whose messages the compacting fold had dropped; :func:`compacted` turns a
transcript-fold state into the compacting fold's form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, cast

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    ItemsRemoved,
    SessionForked,
    SessionRewound,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.policies.messages import make_message
from turnledger.projections.history import (
    SESSION_HISTORY,
    SESSION_TRANSCRIPT,
    SessionHistory,
    message_entry,
)
from turnledger.projections.history.rewind import compact
from turnledger.projections.history.state import HistoryEntry, SessionHistoryState

_MESSAGE_EVENTS: Final = (TurnStarted, AssistantMessage, ToolResultRecorded)
"""The events that only append one message (what :func:`fold_stream` batches)."""


def fold_stream(
    projection: SessionHistory,
    state: SessionHistoryState,
    events: Iterable[Recorded],
) -> SessionHistoryState:
    """Fold one session stream's events into its state, in linear time.

    The same fold as ``projection.evolve`` event by event (a test holds the two
    equal), but runs of message events are appended to the entries once, not one
    tuple copy per event, so a long session folds in time linear in its length.
    """
    wanted = projection.event_types
    events = events if isinstance(events, list) else list(events)
    horizon = _horizon(events) if projection.compact else 0
    pending: list[HistoryEntry] = []
    last = state.last_version
    opened = state.open_turn
    offset = state.version_offset
    completed = 0
    kinds: dict[type, int] = {}  # 0 skipped, 1 a message, 2 an end, 3 by evolve
    for recorded in events:
        event = recorded.event
        kind = kinds.get(type(event))
        if kind is None:
            kind = _kind(event, wanted)
            kinds[type(event)] = kind
        if kind == 1:
            said = cast("TurnStarted | AssistantMessage | ToolResultRecorded", event)
            version = recorded.version + offset
            if version <= horizon:  # a later trim hides it: only counted
                entry = HistoryEntry(
                    version=version, turn_id=said.turn_id, message=_TRIMMED_LATER
                )
            else:
                entry = message_entry(said, version)
            pending.append(entry)
            last = recorded.version
            if isinstance(said, TurnStarted):
                opened = said.turn_id
        elif kind == 2:  # a completed turn: no message, no tuple copy
            completed += 1
            last, opened = recorded.version, None
        elif kind == 3:
            state = _flush(state, pending, last, opened, completed)
            pending, completed = [], 0
            state = projection.evolve(state, recorded)
            last, opened = state.last_version, state.open_turn
            offset = state.version_offset
    return _flush(state, pending, last, opened, completed)


_TRIMMED_LATER: Final = make_message("user", "", kind="normal")
"""What :func:`fold_stream` keeps for a message a later trim hides (never shown)."""


def _horizon(events: list[Recorded]) -> int:
    """The version a compacting fold of ``events`` is sure to drop through.

    The highest trim boundary among them, unless a rewind is among them (it
    may undo a trim) or one of them is not folded in order: messages at or
    below it are dropped by that trim before the fold ends, so only their
    versions (the trims count them) matter. A fork's events count through its
    offset; a boundary is a lineage version, so the horizon is one too.
    """
    horizon = 0
    for event in [r.event for r in events if type(r.event) in _HORIZON_TYPES]:
        if not isinstance(event, HistoryTrimmed):
            return 0
        horizon = max(horizon, event.dropped_through_version)
    return horizon


_HORIZON_TYPES: Final = frozenset(
    {HistoryTrimmed, SessionRewound, SessionForked, ItemsRemoved}
)


def _kind(event: Event, wanted: tuple[type[Event], ...]) -> int:
    """How :func:`fold_stream` folds an event of this type."""
    if not isinstance(event, wanted):
        return 0
    if isinstance(event, _MESSAGE_EVENTS):
        return 1
    return 2 if isinstance(event, TurnCompleted) else 3


def _flush(
    state: SessionHistoryState,
    pending: list[HistoryEntry],
    last: int,
    opened: str | None,
    completed: int,
) -> SessionHistoryState:
    if not pending and not completed:
        return state
    return msgspec.structs.replace(
        state,
        entries=(*state.entries, *pending) if pending else state.entries,
        last_version=last,
        open_turn=opened,
        turns_completed=state.turns_completed + completed,
    )


def exact_history(
    events: Sequence[Recorded], state: SessionHistoryState | None = None
) -> SessionHistoryState:
    """Return one session's history folded from its events (a lineage), exactly.

    Args:
        events: All of the session's events (relabeled as one stream).
        state: The compacting fold of them, when the caller has it already.

    Returns:
        The compacting fold; or, when a rewind undid a trim whose messages
        that fold had dropped (``missing_through``), the transcript fold
        compacted the same way, which still holds them.
    """
    if state is None:
        state = fold_stream(SESSION_HISTORY, SESSION_HISTORY.initial(""), events)
    if not state.missing_through:
        return state
    whole = fold_stream(SESSION_TRANSCRIPT, SESSION_TRANSCRIPT.initial(""), events)
    return compacted(whole)


def compacted(state: SessionHistoryState) -> SessionHistoryState:
    """Return a transcript-fold state as the compacting fold holds it."""
    return compact(msgspec.structs.replace(state, compacted=True, missing_through=0))
