"""The OTLP receiver: OpenTelemetry GenAI telemetry into the ledger (``collect``).

:mod:`.decode` reads OTLP trace and log requests (protobuf and JSON) into one
neutral model, :mod:`.genai` reads a span by the GenAI conventions,
:mod:`.session` is one session's state and what a batch writes to it,
:mod:`.recording` turns batches of spans and of log events into atomic ledger
appends, :mod:`.server` is the ``/v1/traces`` and ``/v1/logs`` receiver,
:mod:`.files` imports OTLP JSON files and :mod:`.coverage` tells which sessions
hold model calls without their conversation.
"""

from __future__ import annotations

from turnledger.pipeline.collect.decode import (
    CollectError,
    LogRecord,
    Span,
    decode_json,
    decode_logs_json,
    decode_logs_protobuf,
    decode_protobuf,
)
from turnledger.pipeline.collect.recording import BatchReport, LogsReport, Recorder

__all__ = [
    "BatchReport",
    "CollectError",
    "LogRecord",
    "LogsReport",
    "Recorder",
    "Span",
    "decode_json",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_protobuf",
]
