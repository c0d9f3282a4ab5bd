"""An agent's long-term memory as of a ledger position: what it believed then.

A fold of the agent's memory stream up to a global position. Every key the
stream named by then is kept with its state at that point: ``stored`` (live),
``superseded`` (replaced by a newer entry) or ``forgotten``; contents are the
last stored ones, as recorded (a sealed content stays sealed here: the reader
opens it, and a content whose key was shredded reads as ``[forgotten]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded

MemoryStatus: TypeAlias = Literal["stored", "superseded", "forgotten"]
"""What an entry was at the position asked."""


class MemoryAt(msgspec.Struct, frozen=True, kw_only=True):
    """One memory key as of a position.

    Attributes:
        key: The key.
        content: The last content stored for it (as recorded).
        category: Its category.
        session: The session that stored it.
        status: ``stored``, ``superseded`` or ``forgotten``.
        position: The position of the last event about it.
        stored_at: When its content was stored.
        superseded_by: The newer key, when superseded.
    """

    key: str
    content: str
    category: str
    session: str | None
    status: MemoryStatus
    position: int
    stored_at: datetime
    superseded_by: str | None = None


def memory_as_of(events: Iterable[Recorded], position: int) -> dict[str, MemoryAt]:
    """Fold memory events up to ``position``: every key's state then, by key."""
    found: dict[str, MemoryAt] = {}
    for r in events:
        if r.position > position:
            break
        event = r.event
        if isinstance(event, MemoryStored):
            found[event.key] = MemoryAt(
                key=event.key,
                content=event.content,
                category=event.category,
                session=event.session,
                status="stored",
                position=r.position,
                stored_at=r.recorded_at,
            )
        elif isinstance(event, MemoryForgotten) and event.key in found:
            found[event.key] = msgspec.structs.replace(
                found[event.key], status="forgotten", position=r.position
            )
        elif isinstance(event, MemorySuperseded) and event.key in found:
            found[event.key] = msgspec.structs.replace(
                found[event.key],
                status="superseded",
                position=r.position,
                superseded_by=event.superseded_by,
            )
    return found
