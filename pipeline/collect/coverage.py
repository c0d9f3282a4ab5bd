"""What collected sessions lack: spans recorded without their conversation.

A model call span whose content was not captured records its usage only, and a
tool run without its result records nothing but its place in the batch's
``item.recorded`` (framework ``otlp``, kind ``spans``, its id listed under
``without_content``). The
ledger ``audit`` reports them under ``skipped`` with :data:`NOT_RECORDED`, so
a clean pairing audit of such a session still says its conversation is not
there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from turnledger.ledger.events import ItemRecorded
from turnledger.pipeline.collect.recording import (
    FRAMEWORK,
    SPANS_KIND,
)
from turnledger.pipeline.collect.recording import (
    spans_without_content as listed_without_content,
)

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
                and event.kind == SPANS_KIND
            ):
                found += listed_without_content(event.fields)
    return found
