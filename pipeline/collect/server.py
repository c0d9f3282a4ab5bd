"""The OTLP/HTTP receiver: ``POST /v1/traces`` and ``/v1/logs``, as an ASGI app.

Spans (``/v1/traces``) and GenAI log events (``/v1/logs``: the message events
instrumentations emit as log records in a span's context), protobuf or JSON.
A request is answered 200 only after its whole batch was appended in one
transaction and committed (:meth:`.recording.Recorder.record`,
:meth:`~.recording.Recorder.record_logs`): a batch is all or nothing, and
kill -9 after a 200 loses nothing of it. The answer is an
``ExportTraceServiceResponse`` (``ExportLogsServiceResponse``) in the
request's encoding; spans of no known shape (log records that are no GenAI
message event of a span) are reported in its ``partial_success``
(``rejected_spans``, ``rejected_log_records``, and a message counting them),
and every answer carries the batch's counts in the ``turnledger-batch`` header
(JSON). Refusals, with nothing written: 400 for a body that does not decode
whole (one line naming what was expected), 401 without the token, 421 without
a token for a ``Host`` header that is not a loopback name (a web page's own
name resolved to this address: DNS rebinding), 404 off those two paths, 405
for another method, 413 past the size bound, 415 for another content type or
encoding, 503 when the ledger cannot write (OTLP exporters retry it). Error
bodies are a ``google.rpc.Status`` in the request's encoding.
"""

from __future__ import annotations

import asyncio
import hmac
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, TypeAlias, TypeVar

import msgspec

from turnledger.ledger.errors import InvalidEventError, LedgerError, quote_value
from turnledger.pipeline.collect.decode import (
    CollectError,
    decode_json,
    decode_logs_json,
    decode_logs_protobuf,
    decode_protobuf,
)
from turnledger.pipeline.collect.recording import BatchReport, LogsReport, Recorder
from turnledger.pipeline.web import is_loopback

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
_Batch = TypeVar("_Batch")
_Report = TypeVar("_Report")

PATH: Final = "/v1/traces"
LOGS_PATH: Final = "/v1/logs"
DEFAULT_MAX_BODY: Final = 16 * 1024 * 1024
"""The largest request body accepted (after decompression), in bytes."""

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_INVALID_ARGUMENT: Final = 3
_UNAVAILABLE: Final = 14
_UNAUTHENTICATED: Final = 16


class _Refusal(Exception):  # noqa: N818 - an answer, not an error of ours
    def __init__(
        self, status: int, message: str, code: int = _INVALID_ARGUMENT
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class CollectApp:
    """The receiver's ASGI app.

    Args:
        recorder: Where batches go.
        token: When set, every request must carry ``Authorization: Bearer <token>``.
        max_body: The largest body accepted, compressed or not, in bytes.
    """

    def __init__(
        self, recorder: Recorder, *, token: str = "", max_body: int = DEFAULT_MAX_BODY
    ) -> None:
        self.recorder = recorder
        self.token = token
        self.max_body = max_body
        self.batches = 0
        self.spans = 0
        self.log_records = 0
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request."""
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        kind = _media_type(headers.get("content-type", b""))
        try:
            report = await self._handle(scope, headers, receive)
        except _Refusal as refusal:
            self.refused += 1
            await _answer(send, refusal.status, kind, _status(kind, refusal), {})
            return
        self.batches += 1
        if isinstance(report, LogsReport):
            self.log_records += report.records
            answer = _logs_success(kind, report)
        else:
            self.spans += report.spans
            answer = _success(kind, report)
        extra = {"turnledger-batch": msgspec.json.encode(report)}
        await _answer(send, 200, kind, answer, extra)

    async def _handle(
        self, scope: Scope, headers: dict[str, bytes], receive: Receive
    ) -> BatchReport | LogsReport:
        path = scope["path"]
        if path not in (PATH, LOGS_PATH):
            msg = f"Expected a request to {PATH} or {LOGS_PATH}, found {path}"
            raise _Refusal(404, msg)
        if scope["method"] != "POST":
            raise _Refusal(405, f"Expected POST, found {scope['method']}")
        if not self.token:
            host = _host_name(headers.get("host", b"").decode("latin-1"))
            if not is_loopback(host):  # DNS rebinding: a page's name, our address
                msg = f"Expected a loopback Host header, found {quote_value(host)}"
                raise _Refusal(421, msg)
        elif not _authorized(headers, self.token):
            msg = (
                "Expected the access token (Authorization: Bearer), "
                "found none that matches"
            )
            raise _Refusal(401, msg, _UNAUTHENTICATED)
        kind = _media_type(headers.get("content-type", b""))
        if kind not in (PROTOBUF, JSON):
            msg = (
                f"Expected Content-Type {PROTOBUF} or {JSON}, found {quote_value(kind)}"
            )
            raise _Refusal(415, msg)
        body = await self._body(headers, receive)
        try:
            if path == LOGS_PATH:
                records = (
                    decode_logs_protobuf(body)
                    if kind == PROTOBUF
                    else decode_logs_json(body)
                )
                return await self._record(self.recorder.record_logs, records)
            spans = decode_protobuf(body) if kind == PROTOBUF else decode_json(body)
        except CollectError as e:
            raise _Refusal(400, str(e)) from None
        return await self._record(self.recorder.record, spans)

    async def _record(
        self, record: Callable[[_Batch], _Report], batch: _Batch
    ) -> _Report:
        try:
            return await asyncio.to_thread(record, batch)
        except InvalidEventError as e:
            msg = f"Expected a batch the ledger can record: {e}"
            raise _Refusal(400, msg) from None
        except LedgerError as e:
            msg = f"Expected the ledger to take the batch, found: {e}"
            raise _Refusal(503, msg, _UNAVAILABLE) from None

    async def _body(self, headers: dict[str, bytes], receive: Receive) -> bytes:
        declared = headers.get("content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            raise _Refusal(413, self._too_big(int(declared)))
        encoding = headers.get("content-encoding", b"identity").decode("latin-1")
        if encoding.lower() not in ("identity", "gzip", ""):
            msg = (
                f"Expected Content-Encoding gzip or none, found {quote_value(encoding)}"
            )
            raise _Refusal(415, msg)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Refusal(400, "Expected a whole body, found the client gone")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _Refusal(413, self._too_big(size))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        return self._gunzip(body) if encoding.lower() == "gzip" else body

    def _gunzip(self, body: bytes) -> bytes:
        inflater = zlib.decompressobj(wbits=31)
        try:
            data = inflater.decompress(body, self.max_body + 1)
        except zlib.error as e:
            msg = (
                f"Expected a gzip body, found {len(body)} bytes that do not "
                f"inflate ({e})"
            )
            raise _Refusal(400, msg) from None
        if len(data) > self.max_body or inflater.unconsumed_tail:
            raise _Refusal(413, self._too_big(len(data)))
        return data

    def _too_big(self, size: int) -> str:
        return f"Expected a body of at most {self.max_body} bytes, found {size} or more"


class DiscardApp:
    """The same answers for well-formed requests, with nothing decoded or kept.

    The benchmark's baseline: the HTTP stack and the exporter alone.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body, answer 200 with an empty response."""
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body", False):
            pass
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        kind = _media_type(headers.get("content-type", b""))
        await _answer(send, 200, kind, b"{}" if kind == JSON else b"", {})


def _host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:80`` -> ``::1``)."""
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return name if rest == "" or rest.startswith(":") else header
    return header.rsplit(":", 1)[0]


def _media_type(raw: bytes) -> str:
    return raw.decode("latin-1").split(";", 1)[0].strip().lower()


def _authorized(headers: dict[str, bytes], token: str) -> bool:
    offered = headers.get("authorization", b"")
    scheme, _, value = offered.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(
        value.strip(), token.encode()
    )


def _success(kind: str, report: BatchReport) -> bytes:
    """An ``ExportTraceServiceResponse``: spans of no known shape counted in it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    rejected = sum(report.unknown.values())
    noun = "span(s) of no known GenAI shape"
    message = _counted(rejected, noun, report.unknown)
    if kind == JSON:
        return _json_partial(rejected, "rejectedSpans", message)
    response = ExportTraceServiceResponse()
    if rejected:
        partial = ExportTracePartialSuccess(
            rejected_spans=rejected, error_message=message
        )
        response.partial_success.CopyFrom(partial)
    return bytes(response.SerializeToString())


def _logs_success(kind: str, report: LogsReport) -> bytes:
    """An ``ExportLogsServiceResponse``: the records not recorded counted in it."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415
        ExportLogsPartialSuccess,
        ExportLogsServiceResponse,
    )

    rejected = sum(report.unknown.values())
    message = _counted(rejected, "log record(s)", report.unknown)
    if kind == JSON:
        return _json_partial(rejected, "rejectedLogRecords", message)
    response = ExportLogsServiceResponse()
    if rejected:
        partial = ExportLogsPartialSuccess(
            rejected_log_records=rejected, error_message=message
        )
        response.partial_success.CopyFrom(partial)
    return bytes(response.SerializeToString())


def _counted(rejected: int, noun: str, why: dict[str, int]) -> str:
    if not rejected:
        return ""
    listed = ", ".join(f"{k} x{n}" for k, n in sorted(why.items()))
    return f"{rejected} {noun} counted, not recorded ({listed})"


def _json_partial(rejected: int, field: str, message: str) -> bytes:
    document: dict[str, object] = {}
    if rejected:
        document["partialSuccess"] = {field: str(rejected), "errorMessage": message}
    return msgspec.json.encode(document)


def _status(kind: str, refusal: _Refusal) -> bytes:
    """A ``google.rpc.Status`` (code, message) in the request's encoding."""
    text = str(refusal)
    if kind == PROTOBUF:
        raw = text.encode()
        return b"\x08" + _varint(refusal.code) + b"\x12" + _varint(len(raw)) + raw
    return msgspec.json.encode({"code": refusal.code, "message": text})


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


async def _answer(
    send: Send, status: int, kind: str, body: bytes, extra: dict[str, bytes]
) -> None:
    content_type = PROTOBUF if kind == PROTOBUF else JSON
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v) for k, v in extra.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
