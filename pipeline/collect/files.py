"""OTLP JSON files: ``import`` and ``audit`` of them (``--format otlp``).

Detected by :func:`~turnledger.pipeline.inputs.looks_like_otlp`. A file holds
one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) or
``ExportLogsServiceRequest`` (``{"resourceLogs": [...]}``), or one per line
(the OpenTelemetry Collector's file exporter), of one signal. It is read whole
or refused: a line that is not such a request refuses the file, naming the
line (an object holding neither key too: nothing of it would be read), so does
a file holding both signals, and a span of no known shape that holds model
traffic (see :mod:`.coverage`). Its spans, or its log records, go through the
receiver's mapping (:class:`~.recording.Recorder`) in one atomic append: an
import writes everything or nothing, and importing the same file again writes
nothing twice. A log file's GenAI content events join their spans as the
receiver's ``/v1/logs`` joins them, whichever file is imported first. An
audit (:func:`audit_otlp_file`) records a file the same way into a scratch
ledger, a temporary SQLite file deleted after, and audits its sessions.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import msgspec

from turnledger.ledger.errors import quote_value
from turnledger.ledger.sqlite import SQLiteBackend
from turnledger.ledger.store import EventStore
from turnledger.pipeline.audit import AuditReport, audit_conversations
from turnledger.pipeline.collect.coverage import (
    file_coverage,
    logs_coverage,
    refused_span,
)
from turnledger.pipeline.collect.decode import (
    CollectError,
    LogRecord,
    Span,
    logs_of_document,
    spans_of_document,
)
from turnledger.pipeline.collect.recording import BatchReport, LogsReport, Recorder
from turnledger.pipeline.collected import NO_PARTS
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, read_input_file
from turnledger.pipeline.sessions import load_history

if TYPE_CHECKING:
    from collections.abc import Mapping

    from turnledger.pipeline.formats.model import Coverage
    from turnledger.policies.pricing import ModelPrice


class OtlpFile(msgspec.Struct, frozen=True):
    """An OTLP JSON file read whole: its spans, or its log records."""

    spans: list[Span]
    logs: list[LogRecord]


def read_otlp_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> OtlpFile:
    """Read every span or log record of an OTLP JSON file (one request a line, or one).

    Raises:
        CollectError: The file (or one of its lines) is not an OTLP/JSON trace
            or log request, the message naming the line; it holds both; or a
            span of no known shape holds model traffic
            (:func:`.coverage.refused_span`).
        InputFileError: The file is missing, not a regular file or too large.
    """
    data = read_input_file(path, max_bytes=max_bytes, what="OTLP JSON file")
    read = _requests(data)
    refused = refused_span(read.spans)
    if refused:
        msg = (
            "Expected spans of a known GenAI shape (or holding no model traffic),"
            f" found model traffic no reader understands: {refused}"
        )
        raise CollectError(msg)
    return read


def _documents(data: bytes) -> list[tuple[int, object]]:
    """The file's one document (line 0), or its lines' (numbered from 1)."""
    try:
        return [(0, msgspec.json.decode(data))]
    except (msgspec.DecodeError, RecursionError):
        pass  # not one document: JSON lines
    documents: list[tuple[int, object]] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            documents.append((number, msgspec.json.decode(line)))
        except (msgspec.DecodeError, RecursionError) as e:
            reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
            msg = (
                "Expected an OTLP/JSON trace or log request on line "
                f"{number}, found {reason}"
            )
            raise CollectError(msg) from None
    if not documents:
        msg = "Expected an OTLP/JSON trace or log request, found an empty file"
        raise CollectError(msg)
    return documents


def _requests(data: bytes) -> OtlpFile:
    documents = _documents(data)
    read = OtlpFile(spans=[], logs=[])
    signals: dict[str, int] = {}  # the signals read, each with its first line
    for number, document in documents:
        try:
            signal = _read_request(document, read)
        except CollectError as e:
            raise CollectError(f"line {number}: {e}" if number else str(e)) from None
        if signal:
            signals.setdefault(signal, number)
    if len(signals) > 1:
        where = ", ".join(f"{k} from line {n}" for k, n in signals.items())
        msg = f"Expected the requests of one signal in a file, found {where}"
        raise CollectError(msg)
    return read


def _read_request(document: object, read: OtlpFile) -> str:
    """Add one request's spans or log records to ``read``; which signal it was."""
    keys = set(document) if isinstance(document, dict) else set()
    if "resourceSpans" in keys and "resourceLogs" in keys:
        msg = "Expected a trace or a log request, found resourceSpans and resourceLogs"
        raise CollectError(msg)
    if "resourceLogs" in keys:
        read.logs.extend(logs_of_document(document))
        return "log records"
    if keys and "resourceSpans" not in keys:
        found = ", ".join(quote_value(k) for k in sorted(keys)[:5])
        msg = (
            "Expected an OTLP/JSON trace or log request (resourceSpans or "
            f"resourceLogs), found an object with keys {found}"
        )
        raise CollectError(msg)
    read.spans.extend(spans_of_document(document))
    return "spans" if keys else ""


def import_otlp(
    store: EventStore,
    read: OtlpFile,
    *,
    agent: str | None = None,
    pricing: Mapping[str, ModelPrice] | None = None,
) -> tuple[BatchReport | LogsReport, Coverage]:
    """Record a file's spans, or its log records, as one batch (:class:`.Recorder`).

    Returns:
        What the batch recorded, and how every span or log record ended
        (:func:`.coverage.file_coverage`, :func:`.coverage.logs_coverage`).

    Raises:
        InvalidEventError: A span cannot be recorded; nothing was written.
    """
    recorder = Recorder(store, pricing=pricing, agent=agent)
    if read.logs:
        outcomes: list[str] = []
        logged = recorder.record_logs(read.logs, outcomes=outcomes)
        return logged, logs_coverage(read.logs, outcomes)
    duplicates: list[str] = []
    report = recorder.record(read.spans, duplicates=duplicates)
    return report, file_coverage(read.spans, duplicates)


def skipped_of(report: BatchReport | LogsReport) -> dict[str, int]:
    """What a batch left out, by kind, with counts (an import's ``skipped``)."""
    # What either signal's content left out: parts without text, questions.
    skipped = {
        "message without parts" if k == NO_PARTS else f"{k} part (not text)": n
        for k, n in report.parts.items()
    }
    counted = [
        ("span without its input messages", report.without_inputs),
        ("span without its output messages", report.without_outputs),
    ]
    if isinstance(report, LogsReport):
        skipped.update({f"log record ({k})": n for k, n in report.unknown.items()})
        counted += [
            ("log event already in the ledger", report.duplicates),
            ("log event without content", report.without_content),
            (
                "log event of a span holding its own content (kept)",
                report.span_had_content,
            ),
        ]
    else:
        skipped.update({f"span of operation {k}": n for k, n in report.known.items()})
        skipped.update(
            {f"span of no known shape ({k})": n for k, n in report.unknown.items()}
        )
        counted += [
            ("span already in the ledger", report.duplicates),
            ("span without content (usage only)", report.without_content),
            ("tool span without its result", report.without_result),
            ("output choice after the first", report.extra_choices),
        ]
    skipped.update((kind, n) for kind, n in counted if n)
    return dict(sorted(skipped.items()))


def audit_otlp_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> AuditReport:
    """Audit an OTLP JSON file as importing it would record it.

    Its spans (or log records) are recorded by the import's mapping
    (:func:`import_otlp`) into
    a scratch ledger, a temporary SQLite file deleted after; each session
    written is one conversation, named by its session key and audited by the
    ledger's rule (a result anywhere after its call). ``skipped`` is what the
    import reports skipped (:func:`skipped_of`), ``coverage`` counts spans or
    log records (:func:`.coverage.file_coverage`, :func:`.coverage.logs_coverage`).

    Raises:
        CollectError: The file cannot be read whole (see :func:`read_otlp_file`).
        InputFileError: The file is missing, not a regular file or too large.
    """
    read = read_otlp_file(path, max_bytes=max_bytes)
    with tempfile.TemporaryDirectory(prefix="turnledger-audit-") as tmp:
        backend = SQLiteBackend(str(Path(tmp) / "scratch.db"), synchronous="OFF")
        store = EventStore(backend)
        try:
            batch, coverage = import_otlp(store, read)
            conversations = [
                (
                    s.session,
                    [e.message for e in load_history(store, UUID(s.stream)).entries],
                )
                for s in batch.sessions
            ]
        finally:
            store.close()
    report = audit_conversations("otlp", conversations)  # the ledger's rule
    return msgspec.structs.replace(report, skipped=skipped_of(batch), coverage=coverage)
