"""OTLP trace and log requests (protobuf or JSON) into one neutral model.

Both encodings of an ``ExportTraceServiceRequest`` become the same
:class:`Span` values, and of an ``ExportLogsServiceRequest`` the same
:class:`LogRecord` values: ids as lowercase hex, times as integer nanoseconds,
attribute values as plain Python values (``AnyValue`` arrays as tuples,
key-value lists as dicts, bytes as ``bytes``). The JSON form is OTLP/JSON:
camelCase keys, hex trace and span ids, 64-bit integers as strings or numbers,
doubles as numbers or as the strings proto3's JSON mapping allows (``"NaN"``,
``"Infinity"``, ``"-Infinity"``, or a number in JSON's syntax). A request that
cannot be read whole is refused with a :class:`CollectError` naming what was
expected and what was found; nothing of it is used.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

import msgspec

from turnledger.ledger.errors import quote_value
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

_Request = TypeVar("_Request")

MAX_DEPTH: Final = 32
"""The deepest nesting of attribute values read (arrays and key-value lists)."""

_UNKNOWN_SERVICE: Final = "unknown_service"


class CollectError(PipelineError, ValueError):
    """An OTLP request or file that cannot be read whole; nothing of it is used."""


# Spans hold values decoded from a request (text, numbers, bytes, tuples and
# dicts of them): no reference cycle can pass through one, so the cycle
# collector does not track them (gc=False), and a batch of them in flight
# triggers fewer of its collections.


class SpanEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A span event: its name, time and attributes."""

    name: str
    time_ns: int = 0
    attributes: dict[str, object] = msgspec.field(default_factory=dict)


STATUS_ERROR: Final = 2
"""A span status code: an error."""


class Span(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One span, whatever encoding it came in.

    Attributes:
        trace_id: 32 lowercase hex digits.
        span_id: 16 lowercase hex digits.
        parent_id: The parent span's id, ``""`` for a root span.
        name: The span's name.
        start_ns: Start time, nanoseconds since the epoch.
        end_ns: End time.
        attributes: The span's attributes.
        events: Its events, in the order sent.
        status_code: 0 unset, 1 ok, 2 error.
        status_message: The status description.
        service: The resource's ``service.name``.
    """

    trace_id: str
    span_id: str
    parent_id: str = ""
    name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    attributes: dict[str, object] = msgspec.field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: int = 0
    status_message: str = ""
    service: str = _UNKNOWN_SERVICE

    @property
    def failed(self) -> bool:
        """Whether the span's status is an error."""
        return self.status_code == STATUS_ERROR


class LogRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One log record, whatever encoding it came in.

    Attributes:
        trace_id: The trace it was emitted in (32 hex digits), ``""`` if none.
        span_id: The span it was emitted in (16 hex digits), ``""`` if none.
        event_name: The record's event name (``eventName``, else its
            ``event.name`` attribute), ``""`` for a plain log line.
        time_ns: When it happened (else when it was observed), nanoseconds.
        attributes: Its attributes.
        body: Its body, an ``AnyValue`` read as a plain value (``None`` if unset).
        service: The resource's ``service.name``.
    """

    trace_id: str = ""
    span_id: str = ""
    event_name: str = ""
    time_ns: int = 0
    attributes: dict[str, object] = msgspec.field(default_factory=dict)
    body: object = None
    service: str = _UNKNOWN_SERVICE


def _event_name(name: str, attributes: Mapping[str, object]) -> str:
    older = attributes.get("event.name")
    return name or (older if isinstance(older, str) else "")


# --- protobuf -------------------------------------------------------------


def decode_protobuf(body: bytes) -> list[Span]:
    """Decode an OTLP/protobuf ``ExportTraceServiceRequest``.

    Raises:
        CollectError: The body is not such a message, or a span's ids are not
            16 and 8 bytes.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415 - the otlp extra
        ExportTraceServiceRequest,
    )

    request = _pb_request(
        ExportTraceServiceRequest.FromString, "ExportTraceServiceRequest", body
    )
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = _pb_attributes(resource_spans.resource.attributes, "resource")
        service = _service(resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(_pb_span(span, f"span {len(spans)}", service))
    return spans


def decode_logs_protobuf(body: bytes) -> list[LogRecord]:
    """Decode an OTLP/protobuf ``ExportLogsServiceRequest``.

    Raises:
        CollectError: The body is not such a message, or a record's trace or
            span id is neither empty nor 16 and 8 bytes.
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415 - the otlp extra
        ExportLogsServiceRequest,
    )

    request = _pb_request(
        ExportLogsServiceRequest.FromString, "ExportLogsServiceRequest", body
    )
    records: list[LogRecord] = []
    for resource_logs in request.resource_logs:
        resource = _pb_attributes(resource_logs.resource.attributes, "resource")
        service = _service(resource)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                where = f"log record {len(records)}"
                trace_id, span_id = record.trace_id, record.span_id
                if trace_id and len(trace_id) != 16:
                    raise _pb_id_error(trace_id, 16, f"{where} traceId")
                if span_id and len(span_id) != 8:
                    raise _pb_id_error(span_id, 8, f"{where} spanId")
                attributes = _pb_attributes(record.attributes, where)
                records.append(
                    LogRecord(
                        trace_id=trace_id.hex(),
                        span_id=span_id.hex(),
                        event_name=_event_name(record.event_name, attributes),
                        time_ns=record.time_unix_nano or record.observed_time_unix_nano,
                        attributes=attributes,
                        body=_pb_value(record.body, 0, where)
                        if record.HasField("body")
                        else None,
                        service=service,
                    )
                )
    return records


def _pb_request(parse: Callable[[bytes], _Request], name: str, body: bytes) -> _Request:
    """A protobuf request parsed whole, or a :class:`CollectError` naming it."""
    from google.protobuf.message import (  # type: ignore[import-untyped]  # noqa: PLC0415 - the otlp extra
        DecodeError,
    )

    try:
        return parse(body)
    except (DecodeError, RecursionError, ValueError) as e:
        msg = (
            f"Expected an OTLP/protobuf {name}, found {len(body)} bytes that do "
            f"not decode ({quote_value(str(e))})"
        )
        raise CollectError(msg) from None


def _pb_span(span: PbSpan, where: str, service: str) -> Span:
    trace_id = span.trace_id
    span_id = span.span_id
    parent = span.parent_span_id
    if len(trace_id) != 16:
        raise _pb_id_error(trace_id, 16, f"{where} traceId")
    if len(span_id) != 8:
        raise _pb_id_error(span_id, 8, f"{where} spanId")
    if parent and len(parent) != 8:
        raise _pb_id_error(parent, 8, f"{where} parent")
    status = span.status
    events = span.events
    return Span(
        trace_id=trace_id.hex(),
        span_id=span_id.hex(),
        parent_id=parent.hex(),
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=_pb_attributes(span.attributes, where),
        events=tuple(
            SpanEvent(
                name=e.name,
                time_ns=e.time_unix_nano,
                attributes=_pb_attributes(e.attributes, where),
            )
            for e in events
        )
        if events
        else (),
        status_code=status.code,
        status_message=status.message,
        service=service,
    )


def _pb_id_error(raw: bytes, size: int, where: str) -> CollectError:
    return CollectError(f"Expected {where} of {size} bytes, found {len(raw)}")


_PB_SCALARS: Final = frozenset(
    {"string_value", "bool_value", "int_value", "double_value", "bytes_value"}
)


def _pb_attributes(pairs: Sequence[KeyValue], where: str) -> dict[str, object]:
    """A repeated ``KeyValue`` as a dict (scalars read inline: the hot path).

    An ``AnyValue``'s set field is its one ``value`` (a oneof: set even to a
    default, so ``WhichOneof`` names it whatever it holds).
    """
    found: dict[str, object] = {}
    for kv in pairs:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind in _PB_SCALARS:
            found[kv.key] = getattr(value, kind)
        else:
            found[kv.key] = None if kind is None else _pb_value(value, 0, where)
    return found


def _pb_value(value: AnyValue, depth: int, where: str) -> object:
    if depth > MAX_DEPTH:
        msg = f"Expected {where} attribute values nested at most {MAX_DEPTH} deep"
        raise CollectError(f"{msg}, found deeper")
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_pb_value(v, depth + 1, where) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {
            kv.key: _pb_value(kv.value, depth + 1, where)
            for kv in value.kvlist_value.values
        }
    return None if kind is None else getattr(value, kind)


# --- JSON -----------------------------------------------------------------


def decode_json(body: bytes) -> list[Span]:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest``.

    Raises:
        CollectError: The body is not JSON, is nested too deeply, or is not
            shaped as the request (the message names the place).
    """
    return spans_of_document(_json_document(body))


def spans_of_document(document: object) -> list[Span]:
    """The spans of an OTLP/JSON request already parsed from JSON.

    Raises:
        CollectError: It is not shaped as an ``ExportTraceServiceRequest``.
    """
    return [
        _json_span(raw, where, service)
        for raw, where, service in _json_items(document, _SPANS)
    ]


def decode_logs_json(body: bytes) -> list[LogRecord]:
    """Decode an OTLP/JSON ``ExportLogsServiceRequest``.

    Raises:
        CollectError: The body is not JSON, is nested too deeply, or is not
            shaped as the request (the message names the place).
    """
    return logs_of_document(_json_document(body))


def logs_of_document(document: object) -> list[LogRecord]:
    """The log records of an OTLP/JSON request already parsed from JSON.

    Raises:
        CollectError: It is not shaped as an ``ExportLogsServiceRequest``.
    """
    return [
        _json_log(raw, where, service)
        for raw, where, service in _json_items(document, _LOGS)
    ]


class _Signal(NamedTuple):
    """Where an OTLP/JSON request of one signal keeps its items."""

    resources: str  # resourceSpans
    scopes: str  # scopeSpans
    older_scopes: str  # instrumentationLibrarySpans (OTLP before 0.15)
    items: str  # spans


_SPANS: Final = _Signal(
    "resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans"
)
_LOGS: Final = _Signal(
    "resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords"
)


def _json_document(body: bytes) -> object:
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        msg = f"Expected an OTLP/JSON document, found {len(body)} bytes: {reason}"
        raise CollectError(msg) from None


def _json_items(document: object, signal: _Signal) -> Iterator[tuple[object, str, str]]:
    """Each item of a request (a span, a log record): it, its place, its service."""
    root = _object(document, "the document")
    top = signal.resources
    for i, rs in enumerate(_list(root.get(top, []), top)):
        rs_obj = _object(rs, f"{top}[{i}]")
        resource = _object(rs_obj.get("resource", {}), f"{top}[{i}].resource")
        service = _service(
            _json_attributes(resource.get("attributes", []), "resource", 0)
        )
        scopes = rs_obj.get(signal.scopes, rs_obj.get(signal.older_scopes, []))
        for j, ss in enumerate(_list(scopes, f"{top}[{i}].{signal.scopes}")):
            where = f"{top}[{i}].{signal.scopes}[{j}]"
            raw_items = _object(ss, where).get(signal.items, [])
            for k, raw in enumerate(_list(raw_items, f"{where}.{signal.items}")):
                yield raw, f"{where}.{signal.items}[{k}]", service


def _json_log(raw: object, where: str, service: str) -> LogRecord:
    record = _object(raw, where)
    trace_id = record.get("traceId", "")
    span_id = record.get("spanId", "")
    attributes = _json_attributes(record.get("attributes", []), where, 0)
    happened = _int(record.get("timeUnixNano", 0), f"{where}.timeUnixNano")
    observed = _int(
        record.get("observedTimeUnixNano", 0), f"{where}.observedTimeUnixNano"
    )
    return LogRecord(
        trace_id=_hex_id(trace_id, 16, f"{where}.traceId") if trace_id else "",
        span_id=_hex_id(span_id, 8, f"{where}.spanId") if span_id else "",
        event_name=_event_name(
            _text(record.get("eventName", ""), f"{where}.eventName"), attributes
        ),
        time_ns=happened or observed,
        attributes=attributes,
        body=_json_value(record.get("body", {}), f"{where}.body", 0),
        service=service,
    )


def _json_span(raw: object, where: str, service: str) -> Span:
    span = _object(raw, where)
    status = _object(span.get("status", {}), f"{where}.status")
    parent = span.get("parentSpanId", "")
    return Span(
        trace_id=_hex_id(span.get("traceId"), 16, f"{where}.traceId"),
        span_id=_hex_id(span.get("spanId"), 8, f"{where}.spanId"),
        parent_id=_hex_id(parent, 8, f"{where}.parentSpanId") if parent else "",
        name=_text(span.get("name", ""), f"{where}.name"),
        start_ns=_int(span.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano"),
        end_ns=_int(span.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano"),
        attributes=_json_attributes(span.get("attributes", []), where, 0),
        events=tuple(
            _json_event(e, f"{where}.events[{n}]")
            for n, e in enumerate(_list(span.get("events", []), f"{where}.events"))
        ),
        status_code=_status_code(status.get("code", 0), f"{where}.status.code"),
        status_message=_text(status.get("message", ""), f"{where}.status.message"),
        service=service,
    )


def _json_event(raw: object, where: str) -> SpanEvent:
    event = _object(raw, where)
    return SpanEvent(
        name=_text(event.get("name", ""), f"{where}.name"),
        time_ns=_int(event.get("timeUnixNano", 0), f"{where}.timeUnixNano"),
        attributes=_json_attributes(event.get("attributes", []), where, 0),
    )


def _json_attributes(raw: object, where: str, depth: int) -> dict[str, object]:
    found: dict[str, object] = {}
    for n, pair in enumerate(_list(raw, f"{where}.attributes")):
        kv = _object(pair, f"{where}.attributes[{n}]")
        key = _text(kv.get("key"), f"{where}.attributes[{n}].key")
        found[key] = _json_value(kv.get("value", {}), f"{where}.{key}", depth)
    return found


_SCALARS: Final[dict[str, type | tuple[type, ...]]] = {
    "stringValue": str,
    "boolValue": bool,
}

_INTEGER: Final = re.compile(r"-?[0-9]+")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SPECIAL_DOUBLES: Final = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
}
_INT_RANGE: Final = range(-(2**63), 2**64)
"""OTLP's integers: ``int64`` values and ``fixed64`` times."""


def _json_value(raw: object, where: str, depth: int) -> object:  # noqa: C901 - one branch per AnyValue kind
    if depth > MAX_DEPTH:
        msg = f"Expected {where} nested at most {MAX_DEPTH} deep, found deeper"
        raise CollectError(msg)
    value = _object(raw, where)
    if not value:
        return None
    if len(value) != 1:
        msg = f"Expected {where} to be an AnyValue of one kind, found {sorted(value)}"
        raise CollectError(msg)
    kind, inner = next(iter(value.items()))
    if kind in _SCALARS:
        if not isinstance(inner, _SCALARS[kind]):
            msg = f"Expected {where}.{kind} of its type, found {type(inner).__name__}"
            raise CollectError(msg)
        return inner
    if kind == "doubleValue":
        return _double(inner, f"{where}.doubleValue")
    if kind == "intValue":
        return _int(inner, f"{where}.intValue")
    if kind == "bytesValue":
        try:
            return base64.b64decode(_text(inner, where), validate=True)
        except binascii.Error:
            msg = f"Expected {where}.bytesValue in base64, found {quote_value(inner)}"
            raise CollectError(msg) from None
    if kind == "arrayValue":
        items = _object(inner, where).get("values", [])
        return tuple(
            _json_value(v, f"{where}[{n}]", depth + 1)
            for n, v in enumerate(_list(items, where))
        )
    if kind == "kvlistValue":
        return _json_attributes(
            [*_list(_object(inner, where).get("values", []), where)], where, depth + 1
        )
    msg = f"Expected {where} to be an AnyValue, found the key {quote_value(kind)}"
    raise CollectError(msg)


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        msg = f"Expected {where} to be an object, found {type(value).__name__}"
        raise CollectError(msg)
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        msg = f"Expected {where} to be an array, found {type(value).__name__}"
        raise CollectError(msg)
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        msg = f"Expected {where} to be a string, found {type(value).__name__}"
        raise CollectError(msg)
    return value


def _int(value: object, where: str) -> int:
    """A 64-bit integer, sent as a JSON number or as a string of ASCII digits."""
    found: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        found = value
    elif isinstance(value, str) and len(value) <= 21 and _INTEGER.fullmatch(value):
        found = int(value)
    if found is None or found not in _INT_RANGE:
        msg = f"Expected {where} to be a 64-bit integer, found {quote_value(value)}"
        raise CollectError(msg)
    return found


_STATUS_CODES: Final = {
    "STATUS_CODE_UNSET": 0,
    "STATUS_CODE_OK": 1,
    "STATUS_CODE_ERROR": 2,
}
"""A span status code's names: the protobuf JSON mapping writes an enum by its
name, which the OpenTelemetry Collector reads too (OTLP/JSON says integers)."""


def _status_code(value: object, where: str) -> int:
    """A status code: an integer (:func:`_int`), or its enum name."""
    if isinstance(value, str) and value in _STATUS_CODES:
        return _STATUS_CODES[value]
    return _int(value, where)


def _double(value: object, where: str) -> float:
    """A double, sent as a JSON number or as a string (proto3's JSON mapping)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        special = _SPECIAL_DOUBLES.get(value)
        if special is not None:
            return special
        if len(value) <= 64 and _NUMBER.fullmatch(value):
            number = float(value)
            if math.isfinite(number):
                return number
    msg = f"Expected {where} to be a double, found {quote_value(value)}"
    raise CollectError(msg)


def _hex_id(value: object, size: int, where: str) -> str:
    text = _text(value, where)
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != size:
        msg = f"Expected {where} of {size * 2} hex digits, found {quote_value(text)}"
        raise CollectError(msg)
    return raw.hex()


def _service(resource: Mapping[str, object]) -> str:
    name = resource.get("service.name")
    return name if isinstance(name, str) and name else _UNKNOWN_SERVICE
