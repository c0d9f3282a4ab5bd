"""The observer view: a bounded, scrubbed timeline of what happened, per stream.

Each ledger event becomes zero or more :class:`ObserverItem` through
:func:`~projections.observer.items.observe` (ids, counts, durations, flags and
scrubbed text of at most 200 characters, never raw payloads). A state is kept per
stream (a session stream, or the stream a memory event was written to) and holds
its newest ``limit`` items (default 200) plus a count of those it dropped, so the
loss is visible. A view with another limit has another name
(``observer_view_<limit>``), so changing the limit builds fresh states rather than
mixing bounds; :func:`timeline` merges several streams' newest items in ledger
order. Rendering items as log events and spans is :mod:`projections.observer.export`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    EVENT_TYPES,
    Event,
    KnowledgeCaptured,
    MemoryForgotten,
    MemoryStored,
    MemorySuperseded,
    SessionOpened,
)
from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.projections.observer._text import short
from turnledger.projections.observer.items import ObserverItem, observe

DEFAULT_LIMIT: Final = 200
"""Items kept per stream by default."""


class ObserverState(msgspec.Struct, frozen=True, kw_only=True):
    """The timeline of one stream.

    Attributes:
        agent: The agent alias (from ``session.opened``, or a memory event).
        session_key: The session key, for session streams (bounded).
        channel: The channel, for session streams (bounded).
        items: The newest items, oldest first.
        dropped: How many older items the bound dropped.
    """

    agent: str = ""
    session_key: str = ""
    channel: str = ""
    items: tuple[ObserverItem, ...] = ()
    dropped: int = 0


def _learn(state: ObserverState, event: Event) -> ObserverState:
    """Remember who a stream belongs to."""
    match event:
        case SessionOpened(agent=agent, session_key=key, channel=channel):
            return msgspec.structs.replace(
                state, agent=agent, session_key=short(key), channel=short(channel)
            )
        case (
            MemoryStored(agent=agent)
            | MemoryForgotten(agent=agent)
            | MemorySuperseded(agent=agent)
            | KnowledgeCaptured(agent=agent)
        ) if not state.agent:
            return msgspec.structs.replace(state, agent=agent)
        case _:
            return state


class ObserverView:
    """The observer projection: one bounded timeline per stream.

    Args:
        limit: Items kept per stream (>= 1); it is part of the name unless it
            is the default.

    Raises:
        ValueError: ``limit`` is below 1.
    """

    state_type: type[ObserverState] = ObserverState
    event_types: tuple[type[Event], ...] = EVENT_TYPES
    lifecycle: LifecycleDeclaration = LifecycleDeclaration(
        surface="Logs / observer",
        owner=(
            "projections.observer (ObserverView fold); "
            "projections.observer.export (structlog/OTel emitters)"
        ),
        durability="log",
        scope="session",
        reviewers_check=(
            "Logs and observer events are evidence and diagnostics, not memory. "
            "They carry ids, counts, durations, flags and scrubbed summaries of at "
            "most 200 characters: tool-call arguments and errors included, and "
            "never user input, assistant text, tool output or memory content."
        ),
    )

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            msg = f"Expected an observer limit >= 1, found {limit}"
            raise ValueError(msg)
        self.limit = limit
        self.name = "observer_view"
        if limit != DEFAULT_LIMIT:
            self.name = f"observer_view_{limit}"

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Return the stream's key (every event is observed on its stream)."""
        return (str(recorded.stream_id),)

    def initial(self, key: str) -> ObserverState:  # noqa: ARG002 - same for all keys
        """Return an empty timeline."""
        return ObserverState()

    def evolve(self, state: ObserverState, recorded: Recorded) -> ObserverState:
        """Append the event's items, dropping the oldest beyond the limit."""
        items = observe(recorded)
        state = _learn(state, recorded.event)
        if not items:
            return state
        kept = (*state.items, *items)
        excess = max(0, len(kept) - self.limit)
        return msgspec.structs.replace(
            state, items=kept[excess:], dropped=state.dropped + excess
        )


OBSERVER_VIEW: Final = ObserverView()
"""The observer projection with the default limit."""


def timeline(
    states: Mapping[str, ObserverState],
    *,
    agent: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[ObserverItem, ...]:
    """Return the newest items of several streams, merged in ledger order.

    Args:
        states: Observer states by stream id.
        agent: Only streams of this agent; all when ``None``.
        limit: Items returned at most (the newest ones).

    Returns:
        Items sorted by position, oldest first.
    """
    merged = sorted(
        (
            item
            for state in states.values()
            if agent in (None, state.agent)
            for item in state.items
        ),
        key=lambda item: item.position,
    )
    return tuple(merged[-limit:]) if limit > 0 else ()
