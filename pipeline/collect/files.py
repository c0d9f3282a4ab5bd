"""OTLP JSON span files: ``turnledger import --format otlp`` (and detected).

A file holds one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans":
[...]}``), or one per line (the OpenTelemetry Collector's file exporter). It is
read whole or refused: a line that is not such a request refuses the file,
naming the line. Its spans go through the receiver's mapping
(:class:`~.recording.Recorder`) in one atomic append: an import writes
everything or nothing, and importing the same file again writes no span twice.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from turnledger.pipeline.collect.decode import CollectError, Span, spans_of_document
from turnledger.pipeline.collect.recording import BatchReport, Recorder
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, read_input_file

if TYPE_CHECKING:
    from collections.abc import Mapping

    from turnledger.ledger.store import EventStore
    from turnledger.policies.pricing import ModelPrice

_SIGNATURE: Final = re.compile(rb'\A\s*\{\s*"resourceSpans"\s*:')
_PEEK: Final = 4096


def looks_like_otlp(path: str | Path) -> bool:
    """Whether a file begins as an OTLP/JSON trace request (read: its first 4 KiB)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(_PEEK)
    except OSError:
        return False
    return _SIGNATURE.match(head) is not None


def read_otlp_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[Span]:
    """Read every span of an OTLP JSON file (one request, or one per line).

    Raises:
        CollectError: The file (or one of its lines) is not an OTLP/JSON trace
            request; the message names the line.
        InputFileError: The file is missing, not a regular file or too large.
    """
    data = read_input_file(path, max_bytes=max_bytes, what="OTLP JSON file")
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
) -> BatchReport:
    """Record a file's spans as one batch (see :class:`~.recording.Recorder`).

    Raises:
        InvalidEventError: A span cannot be recorded; nothing was written.
    """
    return Recorder(store, pricing=pricing, agent=agent).record(spans)
