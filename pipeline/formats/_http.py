"""Bodies of recorded HTTP messages: JSON, SSE streams, gzip and base64.

A VCR recorder stores a body as ``parsed_body`` (already decoded), as a JSON
string in ``body``, under ``body.string`` (text, or ``!!binary`` bytes that
are gzip-compressed when ``Content-Encoding: gzip`` says so), or as the
decoded mapping itself in ``body`` (one without a ``string`` key). Streamed
responses are Server-Sent Events whose ``data:`` lines hold JSON, newline
delimited JSON (``application/x-ndjson``, Ollama), or AWS event streams
(``application/vnd.amazon.eventstream``, Bedrock's ConverseStream): binary
frames whose CRCs are checked, each event becoming ``{event-type: payload}``
(an InvokeModelWithResponseStream ``chunk`` becomes the model's own event,
decoded from its base64 ``bytes``).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import struct
import zlib
from typing import NamedTuple

from turnledger.pipeline.formats._common import (
    JSONObject,
    as_list,
    as_object,
    decode_json,
    get_object,
)
from turnledger.pipeline.formats.model import TranscriptError

_SSE_FIELDS = ("data:", "event:", "id:", "retry:", ":")


class Stream(NamedTuple):
    """A decoded Server-Sent Events body.

    Attributes:
        events: The JSON objects of the ``data:`` payloads, in order.
        problems: Payloads that were not JSON objects, described.
    """

    events: list[JSONObject]
    problems: list[str]


class BodyError(ValueError):
    """A body could not be decoded (the message says why)."""


def header(message: JSONObject, name: str) -> str | None:
    """Return the first value of a header, matching its name case-insensitively.

    Args:
        message: A recorded request or response (with ``headers``).
        name: The header name.

    Returns:
        The value, or ``None`` when the header is absent.
    """
    headers = get_object(message, "headers") or {}
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name.lower():
            values = as_list(value)
            first = values[0] if values else value
            return first if isinstance(first, str) else None
    return None


def decode_body(message: JSONObject) -> object:
    """Decode a recorded body to JSON, a :class:`Stream`, or ``None`` when empty.

    Args:
        message: A recorded request or response.

    Returns:
        The decoded body.

    Raises:
        BodyError: The body is not gzip data although it says so, or not JSON.
    """
    if message.get("parsed_body") is not None:
        return message["parsed_body"]
    body = message.get("body")
    obj = as_object(body)
    if (obj is not None and "string" not in obj) or as_list(body) is not None:
        return body  # stored already decoded, as YAML (a mapping or a list)
    raw = _raw_body(body)
    content_type = (header(message, "content-type") or "").lower()
    if isinstance(raw, bytes):
        raw = _inflate(raw, header(message, "content-encoding"))
        if _AWS_EVENT_STREAM in content_type:
            return parse_aws_event_stream(raw)
        raw = _text(raw)
    if not isinstance(raw, str) or not raw.strip():
        return None
    if _AWS_EVENT_STREAM in content_type:
        return parse_aws_event_stream(raw.encode("utf-8", "surrogateescape"))
    if _is_event_stream(raw, content_type):
        return parse_event_stream(raw)
    if "ndjson" in content_type:
        return _json_lines(raw)
    try:
        return decode_json(raw)
    except TranscriptError as error:
        raise BodyError(str(error)) from error


def _raw_body(body: object) -> object:
    obj = as_object(body)
    return obj.get("string") if obj is not None else body


def _inflate(raw: bytes, encoding: str | None) -> bytes:
    if (encoding or "").lower() != "gzip" and not raw.startswith(b"\x1f\x8b"):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as error:
        msg = f"Expected a gzip body, found {error}"
        raise BodyError(msg) from error


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        msg = f"Expected a UTF-8 body, found {error.reason} at byte {error.start}"
        raise BodyError(msg) from error


def _is_event_stream(text: str, content_type: str | None) -> bool:
    if content_type and "text/event-stream" in content_type.lower():
        return True
    return text.lstrip().startswith(_SSE_FIELDS)


def parse_event_stream(text: str) -> Stream:
    """Decode the ``data:`` payloads of a Server-Sent Events body.

    The ``data:`` lines of one event (up to a blank line) are joined with
    newlines; ``[DONE]`` markers are ignored.

    Args:
        text: The body text.

    Returns:
        The JSON object payloads, and a description of any other payload.
    """
    stream = Stream([], [])
    data: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line.strip() and data:
            _add_event("\n".join(data), stream)
            data = []
    return stream


def _add_event(payload: str, stream: Stream) -> None:
    if payload.strip() == "[DONE]":
        return
    try:
        event = as_object(decode_json(payload))
    except TranscriptError as error:
        stream.problems.append(str(error))
        return
    if event is None:
        stream.problems.append("Expected an event object, found another JSON value")
    else:
        stream.events.append(event)


_AWS_EVENT_STREAM = "application/vnd.amazon.eventstream"
_PRELUDE = 12
"""Total length, headers length, prelude CRC: 4 bytes each."""
_FIXED_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""AWS event stream header value types of fixed size (bool, ints, time, uuid)."""


def _json_lines(text: str) -> Stream:
    stream = Stream([], [])
    for line in text.splitlines():
        if line.strip():
            _add_event(line, stream)
    return stream


def parse_aws_event_stream(data: bytes) -> Stream:
    """Decode the frames of an AWS event stream (Bedrock ``converse-stream``).

    Each frame is ``total length, headers length, prelude CRC, headers,
    payload, message CRC``; an ``event`` frame's JSON payload becomes
    ``{<:event-type>: payload}`` (the shape the AWS SDKs hand out), except a
    ``chunk`` event's base64 ``bytes`` (InvokeModelWithResponseStream), which
    become the JSON event they encode; an ``exception`` frame is a problem
    naming its type.

    Args:
        data: The body bytes.

    Returns:
        The events, and the exception frames described.

    Raises:
        BodyError: A frame is cut short or fails its CRC check.
    """
    stream = Stream([], [])
    offset = 0
    while offset < len(data):
        frame = data[offset:]
        if len(frame) < _PRELUDE + 4:
            msg = f"Expected an AWS event stream frame, found {len(frame)} bytes"
            raise BodyError(msg)
        total, headers_length, prelude_crc = struct.unpack(">III", frame[:_PRELUDE])
        if zlib.crc32(frame[:8]) != prelude_crc or not (
            _PRELUDE + headers_length + 4 <= total <= len(frame)
        ):
            msg = f"Expected an AWS event stream frame at byte {offset}, found "
            msg += "a bad prelude"
            raise BodyError(msg)
        (message_crc,) = struct.unpack(">I", frame[total - 4 : total])
        if zlib.crc32(frame[: total - 4]) != message_crc:
            msg = (
                f"Expected an AWS event stream frame at byte {offset}, found a bad CRC"
            )
            raise BodyError(msg)
        headers = _frame_headers(frame[_PRELUDE : _PRELUDE + headers_length], offset)
        payload = frame[_PRELUDE + headers_length : total - 4]
        _add_frame(headers, payload, stream)
        offset += total
    return stream


def _frame_headers(data: bytes, offset: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    at = 0
    try:
        while at < len(data):
            size = data[at]
            name = data[at + 1 : at + 1 + size].decode("utf-8")
            kind = data[at + 1 + size]
            at += 2 + size
            if kind in _FIXED_SIZES:
                at += _FIXED_SIZES[kind]
                continue
            (length,) = struct.unpack(">H", data[at : at + 2])
            value = data[at + 2 : at + 2 + length]
            at += 2 + length
            if kind == 7:  # a string
                headers[name] = value.decode("utf-8")
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        msg = f"Expected AWS event stream headers at byte {offset}, found {error}"
        raise BodyError(msg) from error
    return headers


def _add_frame(headers: dict[str, str], payload: bytes, stream: Stream) -> None:
    kind = headers.get(":message-type", "event")
    if kind != "event":
        name = (
            headers.get(":exception-type")
            or headers.get(":error-code")
            or headers.get(":event-type")
            or kind
        )
        stream.problems.append(
            f"Expected an event, found an {kind} frame ({name})"[:200]
        )
        return
    before = len(stream.events)
    _add_event(payload.decode("utf-8", "replace") or "{}", stream)
    if len(stream.events) == before:
        return
    event = stream.events.pop()
    event_type = headers.get(":event-type", "")
    inner = event.get("bytes")
    if event_type == "chunk" and isinstance(inner, str):
        _add_chunk(inner, stream)
    else:
        stream.events.append({event_type: event})


def _add_chunk(inner: str, stream: Stream) -> None:
    """An InvokeModelWithResponseStream ``chunk``: base64 of the model's event."""
    try:
        _add_event(base64.b64decode(inner, validate=True).decode("utf-8"), stream)
    except (binascii.Error, ValueError) as error:
        stream.problems.append(f"Expected a base64 JSON chunk, found {error}"[:200])
