"""Google Gemini ``generateContent`` contents (Google AI and Vertex AI).

A ``model`` content's parts hold ``functionCall`` parts; the results are
``functionResponse`` parts in the content immediately after it. Ids link them
when both sides have one; otherwise the function name does, in order (see
:mod:`pipeline.formats._names`). A response ``{"output": text}`` (or
``{"error": text}``, a failed result) is that text; any other is its JSON.
``executableCode`` / ``codeExecutionResult`` (provider-executed) and thought
parts are skipped and counted.

Accepted documents: an object with a ``contents`` array and an optional
``systemInstruction``, or a bare JSON array of contents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    PREAMBLE,
    UNTYPED,
    Indexed,
    Items,
    JSONObject,
    Sink,
    as_list,
    as_object,
    conversation,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
)
from turnledger.pipeline.formats._documents import item_list, load_json
from turnledger.pipeline.formats._names import NamePairing
from turnledger.policies.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    make_message,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "an object with a `contents` array (Gemini) or a JSON array of contents"

_ROLES: dict[str, Role] = {
    "model": "assistant",
    "user": "user",
    "function": "user",
    "tool": "user",
}
_PART_KINDS = (
    "functionCall",
    "functionResponse",
    "text",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
)


def parse_gemini(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Gemini transcript document.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not JSON or has neither accepted shape.
    """
    items, envelope = item_list(
        load_json(data, expected=EXPECTED), key="contents", expected=EXPECTED
    )
    sink = Sink()
    indexed = system_preamble(envelope or {}, sink) + gemini_messages(items, sink)
    found = conversation(
        conversation_id=name, indexed=indexed, origins=items.origins, source=name
    )
    return sink.transcript("gemini", [found])


def system_preamble(body: JSONObject, sink: Sink) -> list[Indexed]:
    """Return ``systemInstruction`` as a leading system message."""
    instruction = body.get("systemInstruction", body.get("system_instruction"))
    if instruction is None:
        return []
    obj = as_object(instruction)
    content = get_list(obj, "parts") if obj is not None else instruction
    return [(PREAMBLE, make_message("system", text_of(content, sink)))]


def gemini_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Gemini contents to the neutral model.

    Args:
        items: The contents.
        sink: Collects skipped parts and malformed contents.

    Returns:
        The messages, each with the index of its source content.
    """
    pairing = NamePairing("gemini")
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        pairing.next_message()
        message = _message(item, pairing, sink)
        if message is not None:
            converted.append((index, message))
    return converted


@dataclass
class _Parts:
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)


def _message(item: JSONObject, pairing: NamePairing, sink: Sink) -> Message | None:
    role = _ROLES.get(get_str(item, "role") or "user")
    if role is None:
        sink.unknown(f"role:{get_str(item, 'role')}")
        return None
    parts = _Parts()
    for raw in get_list(item, "parts"):
        _read_part(raw, parts, pairing, sink)
    return make_message(
        role,
        "\n".join(text for text in parts.texts if text),
        tool_calls=tuple(parts.calls),
        tool_results=tuple(parts.results),
    )


def _read_part(raw: object, parts: _Parts, pairing: NamePairing, sink: Sink) -> None:
    part = as_object(raw)
    kind = _part_kind(part) if part is not None else UNTYPED
    call = _field(part, "functionCall", "function_call")
    response = _field(part, "functionResponse", "function_response")
    if kind == "text" and part is not None:
        parts.texts.append(get_str(part, "text") or "")
    elif call is not None:
        name = get_str(call, "name") or ""
        call_id = pairing.call(name, get_str(call, "id"))
        arguments = json_text(call.get("args", {}))
        parts.calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    elif response is not None:
        name = get_str(response, "name") or ""
        call_id = pairing.result(name, get_str(response, "id"))
        content, failed = _response_text(response.get("response", {}))
        parts.results.append(
            ToolResult(call_id=call_id, content=content, name=name, is_error=failed)
        )
    else:
        sink.skip_part(kind, raw)


def _response_text(response: object) -> tuple[str, bool]:
    """Return a ``functionResponse.response`` as result text, and whether it failed.

    ``{"output": text}`` and ``{"error": text}`` (the SDKs' convention, and what
    the Gemini writer sends for plain text) give that text; any other value is
    kept as its JSON text.
    """
    obj = as_object(response)
    if obj is not None and len(obj) == 1:
        for key, failed in (("output", False), ("error", True)):
            text = get_str(obj, key)
            if text is not None:
                return text, failed
    return json_text(response), False


def _field(part: JSONObject | None, camel: str, snake: str) -> JSONObject | None:
    if part is None:
        return None
    return get_object(part, camel) or get_object(part, snake)


def _part_kind(part: JSONObject) -> str:
    """Name a part by its first non-null field (SDK dumps carry null fields)."""
    if part.get("thought") is True:
        return "thought"
    for kind in _PART_KINDS:
        if part.get(kind) is not None:
            return kind
    return next(
        (
            str(key)
            for key, value in part.items()
            if key != "thoughtSignature" and value is not None
        ),
        UNTYPED,
    )


def request_history(body: JSONObject) -> list[object]:
    """Return the history a Gemini request sends (``contents``)."""
    return get_list(body, "contents")


def response_output(body: object) -> list[object]:
    """Return the new content of a Gemini response.

    A JSON array body (``streamGenerateContent`` without SSE) is a list of
    chunks whose parts are concatenated.

    Args:
        body: The decoded response body.

    Returns:
        ``[content]``, or ``[]`` when no candidate carries one.
    """
    chunks = as_list(body)
    if chunks is None:
        chunks = [body]
    return stream_output([obj for chunk in chunks if (obj := as_object(chunk))])


def stream_output(events: list[JSONObject]) -> list[object]:
    """Concatenate the first candidate's parts over streamed chunks.

    Args:
        events: The decoded chunks (``data:`` payloads), in order.

    Returns:
        ``[{"role": "model", "parts": [...]}]``, or ``[]`` when no chunk has a
        candidate content.
    """
    parts: list[object] = []
    found = False
    for event in events:
        candidates = get_list(event, "candidates")
        first = as_object(candidates[0]) if candidates else None
        content = get_object(first, "content") if first is not None else None
        if content is not None:
            found = True
            parts.extend(get_list(content, "parts"))
    return [{"role": "model", "parts": parts}] if found else []
