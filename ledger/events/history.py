"""The session-history events: framework items, removals, forks and rewinds.

``ItemRecorded`` keeps a framework item's unmodelled fields verbatim,
``ItemsRemoved`` marks items a framework dropped from a session's history,
``SessionForked`` opens a session on another's prefix and ``SessionRewound``
takes a history back to an earlier version; the ledger itself keeps every row.
Part of the catalogue whose public home is :mod:`ledger.events`; the tags are
stable stored data.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from turnledger.ledger.events.base import Event, NonEmpty, NonNegative


class ItemRecorded(Event, tag="item.recorded", frozen=True, kw_only=True, gc=False):
    """A framework item's fields that no typed event models, kept verbatim.

    Written by the framework adapters (``turnledger.adapters``): right after the
    typed event carrying the item's modelled part (``typed``), or alone when no
    typed event models the item (a reasoning item, a state-only event). The typed
    event and this one give the item back exactly.
    """

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    framework: NonEmpty
    kind: str = ""
    fields: str = "{}"
    typed: bool = True


class ItemsRemoved(Event, tag="items.removed", frozen=True, kw_only=True, gc=False):
    """A framework removed items from a session's history; the ledger keeps them.

    The history projection drops what the events with versions in
    ``[first_version, last_version]`` of this stream put there (the OpenAI Agents
    SDK's ``pop_item`` and ``clear_session``, for instance).
    """

    first_version: NonNegative
    last_version: NonNegative
    framework: str = ""
    reason: str = ""


class SessionForked(Event, tag="session.forked", frozen=True, kw_only=True, gc=False):
    """A session begins as a fork of another session's prefix (its first event).

    Nothing of the source is copied: readers compose the source's events up to
    ``source_version`` with this stream's own
    (:class:`turnledger.projections.queries.SessionHistories`). Versions of the
    fork's history are counted through the prefix: this stream's version ``v``
    stands at ``base_version + v``.

    Attributes:
        agent: The fork's agent.
        session_key: The fork's session key.
        source_stream: The source session's stream id.
        source_version: The last version of the source stream in the fork.
        source_position: The global position of that event.
        base_version: The history version of the prefix's last event.
        channel: The fork's channel.
    """

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent", "session_key", "source_stream")

    agent: NonEmpty
    session_key: NonEmpty
    source_stream: NonEmpty
    source_version: NonNegative
    source_position: NonNegative = 0
    base_version: NonNegative = 0
    channel: str = ""


class SessionRewound(Event, tag="session.rewound", frozen=True, kw_only=True, gc=False):
    """The session's history goes back to what it was at ``to_version``.

    Messages after that history version are no longer provider-visible from here
    on; the ledger keeps them, and a later rewind to a version before this event
    brings them back (redo). Trims applied since stay applied.

    Attributes:
        to_version: The history version rewound to.
        to_position: The global position it was asked as.
        turns: The ids of the turns rewound.
        memory_rule: What happened to their long-term memory writes.
        superseded: The memory keys superseded by that rule.
    """

    to_version: NonNegative
    to_position: NonNegative = 0
    turns: tuple[str, ...] = ()
    memory_rule: Literal["keep", "supersede"] = "keep"
    superseded: tuple[str, ...] = ()

    def identifiers(self) -> list[tuple[str, object]]:
        """Return the id of every turn rewound (``turns[0]``...)."""
        return [(f"turns[{i}]", turn) for i, turn in enumerate(self.turns)]
