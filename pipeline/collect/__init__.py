"""The OTLP receiver: OpenTelemetry GenAI spans into the ledger (``collect``).

:mod:`.decode` reads OTLP trace requests (protobuf and JSON) into one neutral
span model, :mod:`.genai` reads a span by the GenAI conventions, :mod:`.recording`
turns batches of spans into atomic ledger appends, :mod:`.server` is the
``/v1/traces`` receiver, :mod:`.files` imports OTLP JSON files and
:mod:`.coverage` tells which sessions hold model calls without their
conversation.
"""

from __future__ import annotations

from turnledger.pipeline.collect.decode import (
    CollectError,
    Span,
    decode_json,
    decode_protobuf,
)
from turnledger.pipeline.collect.recording import BatchReport, Recorder

__all__ = [
    "BatchReport",
    "CollectError",
    "Recorder",
    "Span",
    "decode_json",
    "decode_protobuf",
]
