"""Building GenAI spans for the collect tests: with the real SDK, and as OTLP JSON."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


@contextmanager
def exporter_provider(
    url: str, service: str = "support-bot", headers: dict[str, str] | None = None
) -> Iterator[TracerProvider]:
    """A tracer provider whose spans go to ``url`` by the OTLP/HTTP exporter."""
    provider = TracerProvider(resource=Resource({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=headers)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        yield provider
    finally:
        provider.shutdown()


_IDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value: object) -> object:
    """Protobuf's JSON mapping writes bytes in base64; OTLP/JSON wants ids in hex."""
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: base64.b64decode(v).hex() if k in _IDS else _hex_ids(v)
        for k, v in value.items()
    }


def post_json(url: str, body: bytes, signal: str = "traces") -> httpx.Response:
    """POST an OTLP/JSON request body to a receiver's ``/v1/traces`` (or
    ``/v1/logs`` for ``signal="logs"``); its answer."""
    return httpx.post(
        f"{url}/v1/{signal}", content=body, headers={"content-type": "application/json"}
    )


def otlp_json(spans: Sequence[ReadableSpan]) -> object:
    """Finished spans as the OTLP/HTTP exporter would send them, as OTLP/JSON.

    The exporter's own encoder makes the ``ExportTraceServiceRequest``;
    protobuf's JSON mapping writes it (as the OpenTelemetry Collector's file
    exporter does), its ids turned into hex as OTLP/JSON has them.
    """
    return _hex_ids(MessageToDict(encode_spans(spans)))


def otlp_logs_json(records: Sequence[ReadableLogRecord]) -> object:
    """Finished log records as the OTLP/HTTP log exporter would send them, as
    OTLP/JSON (as :func:`otlp_json` writes spans)."""
    return _hex_ids(MessageToDict(encode_logs(records)))


def text(content: str) -> dict[str, str]:
    """A text part of the current message form."""
    return {"type": "text", "content": content}


def chat_attributes(
    *,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    system: str | None = None,
    model: str = "gpt-4o",
    usage: tuple[int, int] = (100, 20),
) -> dict[str, Any]:
    """A chat span's attributes, content in the current form (JSON text)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": usage[0],
        "gen_ai.usage.output_tokens": usage[1],
    }
    if system is not None:
        attrs["gen_ai.system_instructions"] = json.dumps([text(system)])
    if inputs is not None:
        attrs["gen_ai.input.messages"] = json.dumps(inputs)
    if outputs is not None:
        attrs["gen_ai.output.messages"] = json.dumps(outputs)
    return attrs


USER = {"role": "user", "parts": [text("What is the weather in Paris?")]}
CALL = {
    "role": "assistant",
    "parts": [
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
    ],
}
RESULT = {
    "role": "tool",
    "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18C, sunny"}],
}
ANSWER = {"role": "assistant", "parts": [text("It is 18C and sunny in Paris.")]}


def any_value(value: object) -> dict[str, object]:
    """An OTLP/JSON AnyValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": attributes(value)}}
    return {"stringValue": str(value)}


def attributes(values: Mapping[str, object]) -> list[dict[str, object]]:
    """OTLP/JSON attributes."""
    return [{"key": k, "value": any_value(v)} for k, v in values.items()]


def json_span(
    trace: str,
    span: str,
    attrs: Mapping[str, object],
    *,
    start: int,
    name: str = "chat gpt-4o",
    events: list[tuple[str, Mapping[str, object]]] = (),  # type: ignore[assignment]
    status: int = 0,
) -> dict[str, object]:
    """One OTLP/JSON span (ids in hex, times as strings)."""
    return {
        "traceId": trace,
        "spanId": span,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_500_000),
        "attributes": attributes(attrs),
        "events": [
            {"timeUnixNano": str(start), "name": n, "attributes": attributes(a)}
            for n, a in events
        ],
        "status": {"code": status},
    }


def json_request(
    spans: list[dict[str, object]], service: str = "support-bot"
) -> dict[str, object]:
    """An OTLP/JSON ExportTraceServiceRequest of ``spans``."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes({"service.name": service})},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
            }
        ]
    }


def json_log(
    trace: str,
    span: str,
    name: str,
    body: object = None,
    *,
    time: int = 1_700_000_000_000_000_000,
    attrs: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """One OTLP/JSON log record: an event emitted in a span's context."""
    record: dict[str, object] = {
        "timeUnixNano": str(time),
        "eventName": name,
        "traceId": trace,
        "spanId": span,
        "attributes": attributes(attrs or {"gen_ai.system": "openai"}),
    }
    if body is not None:
        record["body"] = any_value(body)
    return record


def json_logs_request(
    records: list[dict[str, object]], service: str = "support-bot"
) -> dict[str, object]:
    """An OTLP/JSON ExportLogsServiceRequest of ``records``."""
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": attributes({"service.name": service})},
                "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}],
            }
        ]
    }
