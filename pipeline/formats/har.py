"""HAR recordings (HTTP Archive 1.2) of calls to model APIs.

A HAR file is ``{log: {entries: [{request: {method, url, headers: [{name,
value}], postData: {mimeType, text}}, response: {status, headers, content:
{mimeType, text, encoding}}}]}}``, as browsers, proxies and recorders (Polly.JS,
Playwright, mitmproxy) write it. Each entry is read as a cassette interaction
(see :mod:`pipeline.formats.cassette`): a ``POST`` to a model endpoint sends a
history and receives new output, the last request of each conversation plus
its response is counted, and the counting and pairing rules are those of the
request's API shape.

Bodies: ``postData.text`` and ``content.text`` are the bodies as text (HAR
stores them decoded, so ``Content-Encoding`` does not apply to them); with
``encoding: "base64"`` the text is base64 of the bytes (gzip-compressed bytes
are recognised by their magic number). Server-Sent Events are read as in a
cassette.

A HAR file in which no entry is a model request has no conversation, and
detection refuses it (its entries count as unrecognised).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    JSONObject,
    Sink,
    as_object,
    describe,
    get_list,
    get_object,
    get_str,
)
from turnledger.pipeline.formats._documents import describe_document, load_json
from turnledger.pipeline.formats._shapes import shape_for
from turnledger.pipeline.formats.cassette import read_interactions
from turnledger.pipeline.formats.model import TranscriptError

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "a HAR recording (an object with `log.entries`)"
_PREFIX = "log.entries"
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length"})
"""Headers that describe the wire bytes, not the decoded HAR text."""


def is_har(obj: JSONObject) -> bool:
    """Whether a JSON object is a HAR document (``log`` with ``entries``)."""
    log = get_object(obj, "log")
    return log is not None and isinstance(log.get("entries"), list)


def parse_har(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a HAR recording.

    Args:
        data: The file's bytes (JSON).
        name: The file name, for conversation sources.

    Returns:
        One conversation per model request that no later request extends.

    Raises:
        TranscriptError: The file is not JSON, or has no ``log.entries`` list.
    """
    document = load_json(data, expected=EXPECTED)
    obj = as_object(document)
    if obj is None or not is_har(obj):
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    entries = get_list(get_object(obj, "log") or {}, "entries")
    sink = Sink()
    interactions = [_interaction(index, raw, sink) for index, raw in enumerate(entries)]
    if not any(_is_model_request(item) for item in interactions):
        sink.unread = len(entries)  # nothing here is a model conversation
    return read_interactions(
        interactions, name=name, fmt="har", sink=sink, prefix=_PREFIX
    )


def _is_model_request(interaction: object) -> bool:
    obj = as_object(interaction)
    request = get_object(obj, "request") if obj is not None else None
    if request is None or (get_str(request, "method") or "").upper() != "POST":
        return False
    return shape_for(get_str(request, "uri") or "") is not None


def _interaction(index: int, raw: object, sink: Sink) -> object:
    """An entry in the cassette's interaction shape (a non-object stays as it is)."""
    entry = as_object(raw)
    if entry is None:
        return raw
    request = get_object(entry, "request") or {}
    response = get_object(entry, "response") or {}
    label = f"{_PREFIX}[{index}]"
    post = get_object(request, "postData") or {}
    content = get_object(response, "content") or {}
    status = response.get("status")
    return {
        "request": {
            "method": get_str(request, "method") or "",
            "uri": get_str(request, "url") or "",
            "headers": _headers(request),
            "body": _body(post, f"{label}.request.postData", sink),
        },
        "response": {
            "status": {"code": status if isinstance(status, int) else 200},
            "headers": _headers(response),
            "body": _body(content, f"{label}.response.content", sink),
        },
    }


def _headers(message: JSONObject) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for value in get_list(message, "headers"):
        pair = as_object(value)
        if pair is None:
            continue
        key, text = get_str(pair, "name"), get_str(pair, "value")
        if key is not None and text is not None and key.lower() not in _DROPPED_HEADERS:
            headers.setdefault(key, []).append(text)
    return headers


def _body(holder: JSONObject, label: str, sink: Sink) -> object:
    """The body for the cassette reader: text, ``{string: bytes}`` or ``None``."""
    text = holder.get("text")
    if text is None:
        return None
    if not isinstance(text, str):
        sink.problem(0, f"{label}.text: expected a string, found {describe(text)}")
        return None
    if get_str(holder, "encoding") != "base64":
        return text
    try:
        return {"string": base64.b64decode(text, validate=True)}
    except (binascii.Error, ValueError) as error:
        sink.problem(0, f"{label}.text: expected base64, found {error}")
        return None
