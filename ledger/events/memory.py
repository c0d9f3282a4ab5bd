"""The memory events: long-term entries written, deleted, superseded and recalled.

``MemoryStored``, ``MemoryForgotten`` and ``MemorySuperseded`` are the facts of an
agent's long-term memory stream; ``KnowledgeCaptured`` records an explicit
triple; ``MemoryRecalled`` (with its ``RecallRef`` references, never content)
records what a turn's recall found. Part of the catalogue whose public home is
:mod:`ledger.events`; the tags are stable stored data.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from turnledger.ledger.events.base import Event, MemorySource, NonEmpty, NonNegative


class RecallRef(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A reference to one recalled memory entry (never its content)."""

    key: str
    entry_id: str = ""
    score: float | None = None
    agent: str = ""


class MemoryRecalled(Event, tag="memory.recalled", frozen=True, kw_only=True, gc=False):
    """Memory was searched for a turn; only references and a scrubbed summary."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    backend: str
    entries: tuple[RecallRef, ...] = ()
    query_summary: str = ""
    injected_chars: NonNegative = 0

    def identifiers(self) -> list[tuple[str, object]]:
        """Return the turn id and each entry's agent (``entries[0].agent``)."""
        found = super().identifiers()
        found.extend(
            (f"entries[{i}].agent", e.agent) for i, e in enumerate(self.entries)
        )
        return found


class MemoryStored(Event, tag="memory.stored", frozen=True, kw_only=True, gc=False):
    """A long-term memory entry was written (upsert per agent and key)."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent", "session")

    agent: NonEmpty
    key: NonEmpty
    content: str
    category: str = "core"
    session: str | None = None
    namespace: str = "default"
    importance: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None
    source: MemorySource = "tool"
    entry_id: str = ""


class MemoryForgotten(
    Event, tag="memory.forgotten", frozen=True, kw_only=True, gc=False
):
    """A long-term memory entry was deleted."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent", "session")

    agent: NonEmpty
    key: NonEmpty
    session: str | None = None
    source: MemorySource = "tool"
    reason: str = ""


class MemorySuperseded(
    Event, tag="memory.superseded", frozen=True, kw_only=True, gc=False
):
    """A memory entry was replaced by a newer, conflicting one."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent",)

    agent: NonEmpty
    key: NonEmpty
    superseded_by: NonEmpty
    source: MemorySource = "consolidation"
    reason: str = ""


class KnowledgeCaptured(
    Event, tag="knowledge.captured", frozen=True, kw_only=True, gc=False
):
    """An explicit (subject, relation, object) triple."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent",)

    agent: NonEmpty
    subject: NonEmpty
    relation: NonEmpty
    object: NonEmpty
    provenance: str = ""
