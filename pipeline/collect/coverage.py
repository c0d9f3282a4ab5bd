"""What an OTLP file's spans became, and what collected sessions lack.

A file's coverage (:func:`file_coverage`) counts its spans as records of kind
``span``, as every transcript reader counts its records: a model call or tool
run span recorded is *mapped* (one whose content was not captured too: its
``model.called`` carries the usage, and ``skipped`` counts it as ``span without
content (usage only)``); the others are *accounted* for with a reason: a GenAI
operation that carries no message of its own (``invoke_agent``, ...), the
request span of a call Logfire streamed (:mod:`.genai.logfire`), a span already
in the ledger (sent or imported before, or twice in the file), or a
span of no known shape (counted, not guessed). A span of no known shape that
holds model traffic (messages, tool arguments or results, token usage: see
:func:`~.genai.model_traffic`) is what no reader understands, and refuses the
file (:func:`refused_span`); one without (an HTTP server span) is accounted.

A model call span whose content was not captured records its usage only, and a
tool run without its result records nothing but its place in the batch's
``item.recorded`` (framework ``otlp``, kind ``spans``, its id listed under
``without_content``, a tool run's with its call's under ``without_result``, see
:mod:`pipeline.collected`). The ledger audit
(:func:`turnledger.pipeline.audit.audit_sessions`) reports them under
``skipped`` with :data:`NOT_RECORDED` (a tool run, :data:`WITHOUT_RESULT`, when
the session holds no result of its call), so a clean pairing audit of such a
session still says its conversation is not there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.collect.genai import adk_carried, model_traffic, span_kind
from turnledger.pipeline.collect.genai.logfire import STREAM_REQUEST
from turnledger.pipeline.collected import (
    NOT_RECORDED,
    PART_NOT_RECORDED,
    WITHOUT_INPUTS,
    WITHOUT_OUTPUTS,
    WITHOUT_RESULT,
    not_recorded,
)
from turnledger.pipeline.formats.model import Coverage

if TYPE_CHECKING:
    from turnledger.pipeline.collect.decode import LogRecord, Span

__all__ = [
    "ALREADY_RECORDED",
    "LOG_RECORD",
    "NOT_RECORDED",
    "NO_KNOWN_SHAPE",
    "NO_MESSAGES",
    "PART_NOT_RECORDED",
    "SPAN",
    "STREAMED",
    "WITHOUT_INPUTS",
    "WITHOUT_OUTPUTS",
    "WITHOUT_RESULT",
    "file_coverage",
    "logs_coverage",
    "not_recorded",
    "refused_span",
]

SPAN: Final = "span"
"""The record kind of an OTLP file's coverage."""

NO_MESSAGES: Final = "GenAI operation without messages of its own"
STREAMED: Final = "a streamed call's request (the call is its stream's log)"
ALREADY_RECORDED: Final = "already in the ledger"
NO_KNOWN_SHAPE: Final = "no known shape (counted, not guessed)"


def _where(number: int, span: Span, label: str) -> str:
    return f"span {number} ({span.span_id}, {label})"


def refused_span(spans: Sequence[Span]) -> str:
    """Why a file's spans cannot be read fully, or ``""``.

    The first span of no known shape that holds model traffic, named by its
    place in the file, its id and label, and what it holds.
    """
    wrappers = adk_carried(spans)
    for number, span in enumerate(spans, 1):
        kind, label = span_kind(span, wrappers)
        if kind == "unknown" and (held := model_traffic(span)) is not None:
            return f"{_where(number, span, label)} holds {held}"[:300]
    return ""


def file_coverage(spans: Sequence[Span], duplicates: Sequence[str]) -> Coverage:
    """How every span of a file ended (see the module's doc).

    Args:
        spans: The file's spans, in file order.
        duplicates: The recorder's duplicates (one id per span found
            already recorded); of the spans sharing an id, the last are the
            duplicates.
    """
    wrappers = adk_carried(spans)
    recordable = Counter(
        span.span_id
        for span in spans
        if span_kind(span, wrappers)[0] in ("chat", "tool")
    )
    fresh = recordable - Counter(duplicates)  # per id: the first ones are mapped
    reasons: Counter[str] = Counter()
    first = ""
    for number, span in enumerate(spans, 1):
        kind, label = span_kind(span, wrappers)
        if kind == "known":
            reason = STREAMED if label == STREAM_REQUEST else NO_MESSAGES
        elif kind == "unknown":
            reason = NO_KNOWN_SHAPE
        elif fresh[span.span_id] > 0:
            fresh[span.span_id] -= 1
            continue
        else:
            reason = ALREADY_RECORDED
        reasons[f"{SPAN} {label}: {reason}"[:200]] += 1
        first = first or f"{_where(number, span, label)}: {reason}"[:200]
    return _coverage(SPAN, len(spans), reasons, first)


def _coverage(kind: str, read: int, reasons: Counter[str], first: str) -> Coverage:
    """``read`` records of one kind, those in ``reasons`` accounted for."""
    accounted = reasons.total()
    counts = {"read": read, "mapped": read - accounted, "accounted": accounted}
    return Coverage(
        read=read,
        mapped=read - accounted,
        accounted=accounted,
        kinds={kind: counts} if read else {},
        reasons=dict(sorted(reasons.items())),
        first=first,
    )


LOG_RECORD: Final = "log record"
"""The record kind of an OTLP log file's coverage."""


def logs_coverage(records: Sequence[LogRecord], outcomes: Sequence[str]) -> Coverage:
    """How every log record of a file ended.

    Args:
        records: The file's log records, in file order.
        outcomes: The recorder's outcome of each (``""``: recorded, parked
            for its span or joined to it; else why not, as
            :meth:`.Recorder.record_logs` says).
    """
    reasons: Counter[str] = Counter()
    first = ""
    for number, (record, outcome) in enumerate(zip(records, outcomes, strict=True), 1):
        if not outcome:
            continue
        label = record.event_name[:100] or "without an event name"
        reasons[f"{LOG_RECORD} {label}: {outcome}"[:200]] += 1
        first = first or f"log record {number} ({label}): {outcome}"[:200]
    return _coverage(LOG_RECORD, len(records), reasons, first)
