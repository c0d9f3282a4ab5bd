"""Ledger events -> OpenAI Responses input items: the session's fold.

:func:`fold_items` reads a session stream's events in order and gives back the
items they record, exactly as they were added: a typed event (``turn.started``,
``assistant.message``, ``tool_result.recorded``) with the ``item.recorded``
difference right after it, a raw ``item.recorded`` whole, and an
``items.removed`` range dropped. Each item carries the versions of the events
that recorded it (:class:`FoldedItem`), which ``pop_item`` and
``clear_session`` name in their ``items.removed`` event. Recording is in
:mod:`adapters.openai_agents.items`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, TypeAlias

import msgspec

from turnledger.adapters.openai_agents._shape import DECODER, ENCODER, typed_items
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    ToolResultRecorded,
    TurnStarted,
)


class Versioned(NamedTuple):
    """An event and the stream version it was appended at (what a fold needs)."""

    version: int
    event: Event


Folded: TypeAlias = Recorded | Versioned
"""A recorded event, or one just appended (its version known)."""


class FoldedItem(msgspec.Struct, frozen=True):
    """An item of the session and the version of the event that recorded it.

    Attributes:
        version: The typed event's version (the ``item.recorded``'s for a raw item).
        last_version: The last version of the events recording it.
        data: The item's JSON bytes.
    """

    version: int
    last_version: int
    data: bytes


def fold_items(
    items: list[FoldedItem], recorded: Iterable[Folded], tool_names: dict[str, str]
) -> None:
    """Fold a session stream's events (in order) into its items, in place."""
    pending: Folded | None = None
    for record in recorded:
        event = record.event
        if isinstance(event, ItemRecorded) and event.typed and pending is not None:
            shapes = DECODER.decode(event.fields)
            _emit(items, pending, shapes, record.version, tool_names)
            pending = None
            continue
        if pending is not None:
            _emit(items, pending, None, pending.version, tool_names)
            pending = None
        if isinstance(event, TurnStarted | AssistantMessage | ToolResultRecorded):
            pending = record
        elif isinstance(event, ItemRecorded) and not event.typed:
            data = event.fields.encode()
            items.append(FoldedItem(record.version, record.version, data))
        elif isinstance(event, ItemsRemoved):
            first, last = event.first_version, event.last_version
            items[:] = [i for i in items if not first <= i.version <= last]
    if pending is not None:
        _emit(items, pending, None, pending.version, tool_names)


def _emit(
    items: list[FoldedItem],
    record: Folded,
    shapes: list[Any] | None,
    last: int,
    tool_names: dict[str, str],
) -> None:
    if isinstance(record.event, AssistantMessage):
        for call in record.event.tool_calls:
            tool_names[call.id] = call.name
    for _, item in typed_items(record.event, shapes):
        items.append(FoldedItem(record.version, last, ENCODER.encode(item)))
