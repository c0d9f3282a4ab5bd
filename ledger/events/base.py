"""The base of the event catalogue: the ``Event`` Struct, its field types, ``tag_of``.

Every ledger event subclasses :class:`Event` (a frozen, keyword-only msgspec
Struct tagged on its ``type`` field, with a ``SCHEMA_VERSION``); the annotated
field types here (counts, identifiers, digests, and the closed vocabularies of
turn origins, memory sources, tool-result provenances and failure kinds) are
shared by the catalogue's modules. The catalogue's rules and its public home are
:mod:`ledger.events`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

import msgspec

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
"""A count that cannot be negative."""

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
"""An identifier that cannot be empty."""

Sha256Hex = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
"""A lowercase hex SHA-256 digest."""

TurnOrigin: TypeAlias = Literal[
    "interactive", "channel", "agent_direct", "cron", "daemon", "sub_turn"
]
"""Where a turn came from; recall, autosave and consolidation branch on it."""

MemorySource: TypeAlias = Literal[
    "tool", "autosave", "consolidation", "import", "cli", "governance"
]
"""What wrote a memory entry."""

ToolResultProvenance: TypeAlias = Literal["executed", "synthesized", "imported"]
"""Where a tool result came from: a real run, the pairing repair, or an import."""

TurnFailureKind: TypeAlias = Literal[
    "error",
    "interrupted",
    "iteration_limit",
    "provider_error",
    "cancelled",
    "budget_exceeded",
    "unrecordable_response",
]
"""Why a turn did not complete."""


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """Base of every ledger event. Not recorded itself.

    ``ID_FIELDS`` names the fields holding identifiers (agent names, session
    keys, stream, turn and tool call ids); :meth:`identifiers` gives their
    values, which the store checks for control characters before writing
    (:func:`ledger.ids.check_identifier`).
    """

    SCHEMA_VERSION: ClassVar[int] = 1
    ID_FIELDS: ClassVar[tuple[str, ...]] = ()

    def identifiers(self) -> list[tuple[str, object]]:
        """Return ``(field, value)`` for every identifier the event holds.

        The fields of ``ID_FIELDS`` (one whose value is ``None`` is left out);
        types with identifiers inside tuples add those, named by position.
        """
        return [
            (name, value)
            for name in self.ID_FIELDS
            if (value := getattr(self, name)) is not None
        ]


def tag_of(event_type: type[Event]) -> str:
    """Return the stable tag stored for an event type."""
    tag = event_type.__struct_config__.tag
    if not isinstance(tag, str):
        msg = f"Expected {event_type.__name__} to have a string tag, found {tag!r}"
        raise TypeError(msg)
    return tag
