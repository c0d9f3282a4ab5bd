"""Bodies of recorded HTTP messages: JSON, SSE streams, gzip and base64.

A VCR recorder stores a body as ``parsed_body`` (already decoded), as a JSON
string in ``body``, or under ``body.string`` (text, or ``!!binary`` bytes that
are gzip-compressed when ``Content-Encoding: gzip`` says so). Streamed
responses are Server-Sent Events whose ``data:`` lines hold JSON.
"""

from __future__ import annotations

import gzip
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
    raw = _raw_body(message.get("body"))
    if isinstance(raw, bytes):
        raw = _text(_inflate(raw, header(message, "content-encoding")))
    if not isinstance(raw, str) or not raw.strip():
        return None
    if _is_event_stream(raw, header(message, "content-type")):
        return parse_event_stream(raw)
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
