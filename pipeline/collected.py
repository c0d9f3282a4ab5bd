"""The listing of collected OTLP spans a session holds, read by audits.

Each batch of spans recorded in a session (:mod:`pipeline.collect.recording`)
ends with one ``item.recorded`` event of framework :data:`FRAMEWORK` and kind
:data:`SPANS_KIND` whose ``fields`` (:class:`SpansListed`) list the spans
recorded and those recorded without their content. The schema lives here, out
of :mod:`pipeline.collect`, so the ledger audit
(:func:`pipeline.audit.audit_sessions`) reads it without importing the receiver.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

import msgspec

from turnledger.ledger.events import ItemRecorded

if TYPE_CHECKING:
    from uuid import UUID

    from turnledger.ledger.store import EventStore

FRAMEWORK: Final = "otlp"
"""The ``framework`` of the ``item.recorded`` events a collected span writes."""

SPANS_KIND: Final = "spans"
"""The ``kind`` of the ``item.recorded`` event listing a batch's spans in a session."""

NOT_RECORDED: Final = "otlp span without content (conversation not recorded)"
"""The ``skipped`` kind a ledger audit counts spans without content under."""


class SpansListed(msgspec.Struct):
    """The ``fields`` of a ``spans`` item.

    ``[trace id, span id, operation]`` of each span recorded, and the ids of
    those recorded without content.
    """

    spans: list[tuple[str, str, str]]
    without_content: list[str] = msgspec.field(default_factory=list)


LISTED: Final = msgspec.json.Decoder(SpansListed)
"""Decodes a ``spans`` item's ``fields``."""


def listed_without_content(fields: str) -> int:
    """How many spans a ``spans`` item lists as recorded without content."""
    return len(LISTED.decode(fields).without_content)


def spans_without_content(store: EventStore, streams: Iterable[UUID]) -> int:
    """Count the spans recorded without content in these session streams."""
    found = 0
    for stream in streams:
        for recorded in store.read_stream(stream, types=(ItemRecorded,)):
            event = recorded.event
            if (
                isinstance(event, ItemRecorded)
                and event.framework == FRAMEWORK
                and event.kind == SPANS_KIND
            ):
                found += listed_without_content(event.fields)
    return found
