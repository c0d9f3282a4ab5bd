"""OTLP JSON span files: ``import`` and ``audit`` of them (``--format otlp``).

Detected by :func:`~turnledger.pipeline.inputs.looks_like_otlp`. A file holds
one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``), or
one per line (the OpenTelemetry Collector's file exporter). It is read whole or
refused: a line that is not such a request refuses the file, naming the line,
and so does a span of no known shape that holds model traffic (see :mod:`.coverage`).
Its spans go through the receiver's mapping (:class:`~.recording.Recorder`) in
one atomic append: an import writes everything or nothing, and importing the
same file again writes no span twice. An audit (:func:`audit_otlp_file`)
records them the same way into a scratch ledger, a temporary SQLite file
deleted after, and audits its sessions.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import msgspec

from turnledger.ledger.sqlite import SQLiteBackend
from turnledger.ledger.store import EventStore
from turnledger.pipeline.audit import AuditReport, audit_conversations
from turnledger.pipeline.collect.coverage import file_coverage, refused_span
from turnledger.pipeline.collect.decode import CollectError, Span, spans_of_document
from turnledger.pipeline.collect.recording import BatchReport, Recorder
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, read_input_file
from turnledger.pipeline.sessions import load_history

if TYPE_CHECKING:
    from collections.abc import Mapping

    from turnledger.pipeline.formats.model import Coverage
    from turnledger.policies.pricing import ModelPrice


def read_otlp_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[Span]:
    """Read every span of an OTLP JSON file (one request, or one per line).

    Raises:
        CollectError: The file (or one of its lines) is not an OTLP/JSON trace
            request, the message naming the line; or a span of no known shape
            holds model traffic (:func:`.coverage.refused_span`).
        InputFileError: The file is missing, not a regular file or too large.
    """
    data = read_input_file(path, max_bytes=max_bytes, what="OTLP JSON file")
    spans = _spans(data)
    refused = refused_span(spans)
    if refused:
        msg = (
            "Expected spans of a known GenAI shape (or holding no model traffic),"
            f" found model traffic no reader understands: {refused}"
        )
        raise CollectError(msg)
    return spans


def _spans(data: bytes) -> list[Span]:
    try:
        return spans_of_document(msgspec.json.decode(data))
    except (msgspec.DecodeError, RecursionError):
        pass  # not one document: JSON lines
    spans: list[Span] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            document = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError) as e:
            reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
            msg = (
                f"Expected an OTLP/JSON trace request on line {number}, found {reason}"
            )
            raise CollectError(msg) from None
        try:
            spans += spans_of_document(document)
        except CollectError as e:
            raise CollectError(f"line {number}: {e}") from None
    if not spans and not data.strip():
        msg = "Expected an OTLP/JSON trace request, found an empty file"
        raise CollectError(msg)
    return spans


def import_otlp(
    store: EventStore,
    spans: list[Span],
    *,
    agent: str | None = None,
    pricing: Mapping[str, ModelPrice] | None = None,
) -> tuple[BatchReport, Coverage]:
    """Record a file's spans as one batch (see :class:`~.recording.Recorder`).

    Returns:
        What the batch recorded, and how every span ended
        (:func:`.coverage.file_coverage`).

    Raises:
        InvalidEventError: A span cannot be recorded; nothing was written.
    """
    duplicates: list[str] = []
    recorder = Recorder(store, pricing=pricing, agent=agent)
    report = recorder.record(spans, duplicates=duplicates)
    return report, file_coverage(spans, duplicates)


def skipped_of(report: BatchReport) -> dict[str, int]:
    """What a batch left out, by kind, with counts (an import's ``skipped``)."""
    skipped = {
        **{f"span of operation {k}": n for k, n in report.known.items()},
        **{f"span of no known shape ({k})": n for k, n in report.unknown.items()},
    }
    if report.duplicates:
        skipped["span already in the ledger"] = report.duplicates
    if report.without_content:
        skipped["span without content (usage only)"] = report.without_content
    if report.extra_choices:
        skipped["output choice after the first"] = report.extra_choices
    return dict(sorted(skipped.items()))


def audit_otlp_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> AuditReport:
    """Audit an OTLP JSON file's spans as importing them would record them.

    The spans are recorded by the import's mapping (:func:`import_otlp`) into
    a scratch ledger, a temporary SQLite file deleted after; each session
    written is one conversation, named by its session key and audited by the
    ledger's rule (a result anywhere after its call). ``skipped`` is what the
    import reports skipped (:func:`skipped_of`), ``coverage`` counts spans
    (:func:`.coverage.file_coverage`).

    Raises:
        CollectError: The file cannot be read whole (see :func:`read_otlp_file`).
        InputFileError: The file is missing, not a regular file or too large.
    """
    spans = read_otlp_file(path, max_bytes=max_bytes)
    with tempfile.TemporaryDirectory(prefix="turnledger-audit-") as tmp:
        backend = SQLiteBackend(str(Path(tmp) / "scratch.db"), synchronous="OFF")
        store = EventStore(backend)
        try:
            batch, coverage = import_otlp(store, spans)
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
