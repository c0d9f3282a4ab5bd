"""What collected sessions lack: spans recorded without their conversation.

A model call span whose content was not captured records its usage only, and a
tool run without its result records nothing but the span itself (an
``item.recorded`` of framework ``otlp``, kind ``span_without_content``). The
ledger ``audit`` reports them under ``skipped`` with :data:`NOT_RECORDED`, so
a clean pairing audit of such a session still says its conversation is not
there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from turnledger.ledger.events import ItemRecorded
from turnledger.pipeline.collect.recording import FRAMEWORK, NO_CONTENT_KIND

if TYPE_CHECKING:
    from uuid import UUID

    from turnledger.ledger.store import EventStore

NOT_RECORDED: Final = "otlp span without content (conversation not recorded)"
"""The ``skipped`` kind a ledger audit counts such spans under."""


def spans_without_content(store: EventStore, streams: Iterable[UUID]) -> int:
    """Count the spans recorded without content in these session streams."""
    found = 0
    for stream in streams:
        for recorded in store.read_stream(stream, types=(ItemRecorded,)):
            event = recorded.event
            if (
                isinstance(event, ItemRecorded)
                and event.framework == FRAMEWORK
                and event.kind == NO_CONTENT_KIND
            ):
                found += 1
    return found
