"""Query API for replay: a session's history after a lineage prefix and before prompts.

Replay re-derives the digests the ledger recorded. What it needs of the
projections is here, so it folds nothing itself: the session-history state after
a prefix of a session's lineage (:func:`history_of`), the state right before
each ``prompt.assembled`` (:func:`histories_before_prompts`: what that prompt's
history section was built from), and a state's digest (:func:`state_digest`).
Each state is exact: when a rewind undid a trim whose messages the compacting
fold had dropped, it is folded from the transcript
(:func:`turnledger.projections.history.fold.exact_history`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from uuid import UUID

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import PromptAssembled
from turnledger.projections.base import digest, fold
from turnledger.projections.history import SESSION_HISTORY, SessionHistoryState
from turnledger.projections.history.fold import exact_history


def history_of(events: Sequence[Recorded]) -> SessionHistoryState:
    """The session history after ``events`` (one session's lineage, in order)."""
    states = fold(SESSION_HISTORY, events)
    state = next(iter(states.values()), SESSION_HISTORY.initial(""))
    return exact_history(events, state) if state.missing_through else state


def histories_before_prompts(
    events: Sequence[Recorded],
) -> Iterator[tuple[Recorded, PromptAssembled, SessionHistoryState]]:
    """Yield each ``prompt.assembled`` with the session history just before it.

    One pass: the fold goes on event by event; only a state a rewind left
    inexact is folded again from the events before the prompt.
    """
    states: dict[str, SessionHistoryState] = {}
    for index, recorded in enumerate(events):
        event = recorded.event
        if isinstance(event, PromptAssembled):
            state = next(iter(states.values()), SESSION_HISTORY.initial(""))
            if state.missing_through:  # a rewind undid a trim: fold exactly
                state = exact_history(events[:index], state)
            yield recorded, event, state
        states = fold(SESSION_HISTORY, [recorded], states)


def state_digest(stream_id: UUID, state: SessionHistoryState) -> str:
    """The digest of one session's history state (what replay reports)."""
    return digest({str(stream_id): state})
