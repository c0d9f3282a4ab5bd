"""The listings of collected OTLP spans and log events a session holds.

Each batch of spans recorded in a session (:mod:`pipeline.collect.recording`)
ends with one ``item.recorded`` event of framework :data:`FRAMEWORK` and kind
:data:`SPANS_KIND` whose ``fields`` (:class:`SpansListed`) list the spans
recorded and those recorded without their content. Each batch of GenAI log
events does the same with kind :data:`LOGS_KIND` (:class:`LogsListed`): the
events themselves, and the spans already recorded whose content they brought.
The schemas live here, out of :mod:`pipeline.collect`, so the ledger audit
(:func:`pipeline.audit.audit_sessions`) reads them without importing the
receiver.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

import msgspec

from turnledger.ledger.events import ItemRecorded, ToolResultRecorded

if TYPE_CHECKING:
    from uuid import UUID

    from turnledger.ledger.store import EventStore

FRAMEWORK: Final = "otlp"
"""The ``framework`` of the ``item.recorded`` events a collected span writes."""

SPANS_KIND: Final = "spans"
"""The ``kind`` of the ``item.recorded`` event listing a batch's spans in a session."""

NOT_RECORDED: Final = "otlp span without content (conversation not recorded)"
"""The ``skipped`` kind a ledger audit counts spans without content under."""

WITHOUT_INPUTS: Final = "otlp span without its input messages (question not recorded)"
"""The ``skipped`` kind a ledger audit counts model calls under whose span held
their answer but none of the messages they answered."""

WITHOUT_OUTPUTS: Final = "otlp span without its output messages (answer not recorded)"
"""The ``skipped`` kind a ledger audit counts model calls under whose span held
the messages sent but no answer (a call that failed is not counted)."""

WITHOUT_RESULT: Final = "otlp tool span without its result (result not recorded)"
"""The ``skipped`` kind a ledger audit counts tool runs under whose span held no
result, when the session holds no result of their call either (a later model
call's input may hold it: then they are not counted)."""

PART_NOT_RECORDED: Final = "otlp {} part (not recorded)"
"""The ``skipped`` kind (formatted with the part's type) a ledger audit counts
message parts under that hold no text (an image, a file, a reasoning part...)."""

NO_PARTS: Final = "no parts"
"""The part type a message sent without any part is counted under: its content
was not sent (``opentelemetry-instrumentation-openai-v2`` 2.4b0 sends a user
message whose content is a list, an image with its text, so)."""

MESSAGE_NOT_RECORDED: Final = "otlp message without parts (content not recorded)"
"""The ``skipped`` kind a ledger audit counts messages sent without parts under."""


def part_not_recorded(kind: str) -> str:
    """The ``skipped`` kind of a ledger audit for parts of type ``kind``."""
    if kind == NO_PARTS:
        return MESSAGE_NOT_RECORDED
    return PART_NOT_RECORDED.format(kind[:100])


class SpansListed(msgspec.Struct):
    """The ``fields`` of a ``spans`` item.

    ``[trace id, span id, operation]`` of each span recorded, the ids of those
    recorded without content, of those whose content log events sent before them
    gave, ``[call id, version]`` of each message a tool span made for its call
    (the model's own message was not in the ledger yet), the types of the
    message parts left out of the messages recorded (they hold no text), with
    counts, the ids of the model call spans that held their answer but no input
    message, and of those that held the messages sent but no answer, ``[span id,
    call id, error]`` of each tool span recorded without its result: ``error``
    is its run's error when the run failed, its call is known and, at the
    batch's end, that failure still awaits its result (the result a later model
    call's input holds is that failure; not when the batch held that result, or
    its call made again), else ``""``; the ids of the responses of the model
    calls recorded (``gen_ai.response.id``: a later call naming one continues
    this session); and ``[call id, tool, arguments]`` of each tool run without a
    call id that answered no call the session held (recorded under its span's
    id; a call of that tool and those arguments, the run's one or its Python
    call's, found later is its call); ``[span id, parent span id]`` of each
    model call span with a parent (an ADK ``call_llm`` span sent later is that
    parent), and the ids of the model call spans recorded before without content
    whose content such a ``call_llm`` span of this batch carried.
    """

    spans: list[tuple[str, str, str]]
    without_content: list[str] = msgspec.field(default_factory=list)
    from_logs: list[str] = msgspec.field(default_factory=list)
    stand_ins: list[tuple[str, int]] = msgspec.field(default_factory=list)
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    without_inputs: list[str] = msgspec.field(default_factory=list)
    without_outputs: list[str] = msgspec.field(default_factory=list)
    without_result: list[tuple[str, str, str]] = msgspec.field(default_factory=list)
    responses: list[str] = msgspec.field(default_factory=list)
    unpaired: list[tuple[str, str, list[str]]] = msgspec.field(default_factory=list)
    parents: list[tuple[str, str]] = msgspec.field(default_factory=list)
    carried: list[str] = msgspec.field(default_factory=list)


LISTED: Final = msgspec.json.Decoder(SpansListed)
"""Decodes a ``spans`` item's ``fields``."""

LOGS_KIND: Final = "log_events"
"""The ``kind`` of the ``item.recorded`` listing a batch's log events in a session."""


class LoggedEvent(msgspec.Struct):
    """One GenAI log event as received: the span it belongs to and what it says.

    ``print`` identifies the record (a digest of all of it), so the same record
    sent again is known.
    """

    span_id: str
    name: str
    time_ns: int
    attributes: dict[str, object]
    body: object
    print: str


class LogsListed(msgspec.Struct):
    """The ``fields`` of a ``log_events`` item.

    The batch's GenAI log events of the session, the ids of the spans already
    recorded (without content) whose content they brought, the types of the
    message parts left out of the messages recorded, with counts, the ids of
    the spans whose events held their answer but no input message, and of
    those whose events held the messages sent but no answer; ``joined``: the
    spans whose events this session held, parked, and their span's session
    took (it lists them among its own events); ``parked``: the spans whose
    events the batch parked here, their span not recorded in this session yet
    (``None`` in an item written before they were listed: then the spans of
    the events not ``applied``).
    """

    events: list[LoggedEvent]
    applied: list[str] = msgspec.field(default_factory=list)
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    without_inputs: list[str] = msgspec.field(default_factory=list)
    without_outputs: list[str] = msgspec.field(default_factory=list)
    joined: list[str] = msgspec.field(default_factory=list)
    parked: list[str] | None = None


LOGS_LISTED: Final = msgspec.json.Decoder(LogsListed)
"""Decodes a ``log_events`` item's ``fields``."""


def not_recorded(store: EventStore, streams: Iterable[UUID]) -> dict[str, int]:
    """What collected spans left out of these session streams, with counts.

    The spans recorded without content (:data:`NOT_RECORDED`; a span whose
    content came later, in log events, is not counted), the tool spans without
    their result whose call the session holds no result of
    (:data:`WITHOUT_RESULT`), the model calls whose
    span held their answer but no input message (:data:`WITHOUT_INPUTS`), those
    whose span held the messages sent but no answer (:data:`WITHOUT_OUTPUTS`;
    one answered by log events applied to it later is not counted), and the
    message parts that hold no text, by type (:data:`PART_NOT_RECORDED`).
    """
    left: Counter[str] = Counter()
    for stream in streams:
        left.update(_left_in(store, stream))
    found = {kind: left[kind] for kind in _SPAN_KINDS if left[kind]}
    for kind, count in sorted(left.items()):
        if kind not in _SPAN_KINDS:
            found[part_not_recorded(kind)] = count
    return found


_SPAN_KINDS: Final = (NOT_RECORDED, WITHOUT_RESULT, WITHOUT_INPUTS, WITHOUT_OUTPUTS)


def _left_in(store: EventStore, stream: UUID) -> Counter[str]:
    """What collected spans left out of one session stream (see :func:`not_recorded`).

    Counted by kind: the span kinds, and the types of the parts left out.
    """
    left: Counter[str] = Counter()
    without: set[str] = set()
    applied: set[str] = set()
    # In stream order: log events applied to a span later may answer it.
    answerless: set[str] = set()
    runs: dict[str, str] = {}  # tool spans without result: their call ids
    answered: set[str] = set()
    for recorded in store.read_stream(stream, types=(ItemRecorded, ToolResultRecorded)):
        event = recorded.event
        if isinstance(event, ToolResultRecorded):
            answered.add(event.call_id)
        elif not isinstance(event, ItemRecorded) or event.framework != FRAMEWORK:
            continue
        elif event.kind == SPANS_KIND:
            spans = LISTED.decode(event.fields)
            runs.update((span, call) for span, call, _ in spans.without_result)
            without.update(spans.without_content)
            applied.update(spans.carried)
            left.update(spans.skipped)
            left[WITHOUT_INPUTS] += len(spans.without_inputs)
            answerless.update(spans.without_outputs)
        elif event.kind == LOGS_KIND:
            logs = LOGS_LISTED.decode(event.fields)
            applied.update(logs.applied)
            left.update(logs.skipped)
            left[WITHOUT_INPUTS] += len(logs.without_inputs)
            answerless.difference_update(logs.applied)
            answerless.update(logs.without_outputs)
    left[NOT_RECORDED] += len(without - applied)
    left[WITHOUT_OUTPUTS] += len(answerless)
    left[WITHOUT_RESULT] += sum(1 for call in runs.values() if call not in answered)
    return left
