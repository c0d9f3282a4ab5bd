"""Turning memory events into backend writes (shared by every backend)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded
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
    """Apply events above the backend's position, then save ``position``.

    For backends without transactions spanning writes and position: each write is
    an idempotent upsert/delete, so a crash between a write and the position save
    re-applies it harmlessly.
    """
    done = backend.applied_position()
    if position <= done:
        return
    for recorded in events:
        if recorded.position > done:
            apply_one(backend, recorded)
    save_position(position)
