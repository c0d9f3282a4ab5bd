"""Turning memory events into backend writes (shared by every backend).

A backend is a read model like a view: :class:`BackendTarget` makes it a
tracked target of the runner's one catch-up loop
(:func:`turnledger.projections.runner.catch_up`), which reads the memory events
after the backend's applied position and hands each page to
:meth:`MemoryBackend.apply` with the position reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    Event,
    MemoryForgotten,
    MemoryStored,
    MemorySuperseded,
)
from turnledger.projections.memory.protocol import MemoryBackend, NewMemory

MEMORY_EVENT_TYPES = (MemoryStored, MemoryForgotten, MemorySuperseded)
"""The events long-term memory is a projection of."""


def new_memory(recorded: Recorded) -> NewMemory:
    """Return the write a ``memory.stored`` event describes."""
    event = recorded.event
    if not isinstance(event, MemoryStored):
        msg = f"Expected a memory.stored event, found {type(event).__name__}"
        raise TypeError(msg)
    return NewMemory(
        agent=event.agent,
        key=event.key,
        content=event.content,
        category=event.category,
        session=event.session,
        namespace=event.namespace,
        importance=event.importance,
        entry_id=event.entry_id or f"{recorded.stream_id.hex[:12]}-{recorded.version}",
        at=recorded.recorded_at,
    )


def apply_one(backend: MemoryBackend, recorded: Recorded) -> None:
    """Apply one memory event to a backend.

    An operation the backend answers as unsupported is skipped: an append-only
    store keeps what it was given, by design.
    """
    match recorded.event:
        case MemoryStored():
            backend.store(new_memory(recorded))
        case MemoryForgotten(agent=agent, key=key):
            backend.forget(key, agent=agent)
        case MemorySuperseded(agent=agent, key=key, superseded_by=newer):
            backend.supersede(key, agent=agent, superseded_by=newer)
        case _:
            pass


def apply_in_order(
    backend: MemoryBackend,
    events: Sequence[Recorded],
    position: int,
    save_position: Callable[[int], None],
) -> None:
    """Apply one page's events above the backend's position, then save ``position``.

    Not a catch-up (the runner pages the ledger): the exactly-once rule of
    :meth:`MemoryBackend.apply` for backends without transactions spanning
    writes and position. Each write is an idempotent upsert/delete, so a crash
    between a write and the position save re-applies it harmlessly.
    """
    done = backend.applied_position()
    if position <= done:
        return
    for recorded in events:
        if recorded.position > done:
            apply_one(backend, recorded)
    save_position(position)


def _every(recorded: Recorded) -> bool:  # noqa: ARG001 - the default filter
    return True


def _as_recorded(recorded: Recorded) -> Recorded:
    return recorded


class BackendTarget:
    """A memory backend as a tracked target of the runner.

    Args:
        backend: The backend (its applied position is the tracking position).
        name: What progress reports call it (e.g. ``sqlite.default``).
        accepts: Which memory events are this backend's (default: every one).
        opened: Turns an event into the one applied (e.g. a sealed content
            opened with the key store; default: as recorded).
    """

    event_types: tuple[type[Event], ...] = MEMORY_EVENT_TYPES

    def __init__(
        self,
        backend: MemoryBackend,
        *,
        name: str = "memory",
        accepts: Callable[[Recorded], bool] = _every,
        opened: Callable[[Recorded], Recorded] = _as_recorded,
    ) -> None:
        self.backend = backend
        self.name = name
        self._accepts = accepts
        self._opened = opened

    def position(self) -> int:
        """The backend's applied position."""
        return self.backend.applied_position()

    def accepts(self, recorded: Recorded) -> bool:
        """Whether the event is this backend's."""
        return self._accepts(recorded)

    def apply(self, page: Sequence[Recorded], reached: int) -> None:
        """Apply the page (each event opened) and record ``reached``."""
        self.backend.apply([self._opened(r) for r in page], reached)
