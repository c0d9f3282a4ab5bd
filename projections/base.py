"""What a projection is: a pure fold over recorded events, keyed, plus its declaration.

A projection names the event types it reads, maps each recorded event to the keys
of the states it changes (a session stream, a cost bucket, a graph node), and folds
the event into each such state with a pure ``evolve``. The runner
(:mod:`projections.runner`) persists the states with their tracking position in one
transaction; :func:`fold` does the same in memory, which is what rebuild-equals-live
and replay tests compare against.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeAlias, TypeVar

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event
from turnledger.policies.lifecycle import LifecycleDeclaration

S = TypeVar("S")

LedgerHead: TypeAlias = int | Callable[[], int]
"""A ledger's head position, or how to read it (``EventStore.max_position``).

A derived store's ``bind`` reads its own tracked positions first, then the
head, under its own lock: another process appends to the ledger before it
applies to the store, so every position the store tracks is then at most the
head. A head read before the lock could be passed by another process's
writes, and the store emptied for being "ahead" of a ledger that holds
everything it tracks.
"""


def head_position(head: LedgerHead) -> int:
    """The head position, read now if ``head`` is how to read it."""
    return head() if callable(head) else head


_ENCODER = msgspec.json.Encoder(order="sorted")


class Projection(Protocol[S]):
    """A read model defined as a keyed pure fold.

    Attributes:
        name: A stable identifier (names its view table and tracking row).
        lifecycle: Who owns the surface, how durable it is, what scope bounds it.
        event_types: The event types it reads; every other event is skipped.
        state_type: The msgspec type of one state (how the view store encodes it).
    """

    name: str
    lifecycle: LifecycleDeclaration
    event_types: tuple[type[Event], ...]
    state_type: type[S]

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Return the keys of the states this event changes (empty: none)."""
        ...

    def initial(self, key: str) -> S:
        """Return the state of a key before any event."""
        ...

    def evolve(self, state: S, recorded: Recorded) -> S:
        """Return the state after ``recorded`` (pure: no I/O, no clock)."""
        ...


def fold(
    projection: Projection[S],
    events: Iterable[Recorded],
    states: Mapping[str, S] | None = None,
) -> dict[str, S]:
    """Fold events into a projection's states, in memory.

    Args:
        projection: The projection.
        events: Recorded events in position order.
        states: States to start from (default: none, i.e. initial states).

    Returns:
        Every key's state after the events.
    """
    result: dict[str, S] = dict(states or {})
    wanted = projection.event_types
    for recorded in events:
        if not isinstance(recorded.event, wanted):
            continue
        for key in projection.keys(recorded):
            state = result.get(key)
            if state is None:
                state = projection.initial(key)
            result[key] = projection.evolve(state, recorded)
    return result


def digest(states: Mapping[str, Any]) -> str:
    """Return a SHA-256 digest of states, independent of insertion order."""
    h = hashlib.sha256()
    for key in sorted(states):
        h.update(key.encode())
        h.update(b"\x00")
        h.update(_ENCODER.encode(states[key]))
        h.update(b"\x00")
    return h.hexdigest()
