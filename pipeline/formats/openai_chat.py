"""OpenAI Chat Completions messages.

An ``assistant`` message carries ``tool_calls[]`` (``{id, type: "function",
function: {name, arguments}}``); each result is a ``role: "tool"`` message
naming its ``tool_call_id``. Legacy ``function_call`` / ``role: "function"``
messages carry no id and pair by name with the message before them.

Accepted documents: a JSON array of messages, or an object with a ``messages``
array (and an optional ``system`` string, prepended as a system message).
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
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "a JSON array of chat messages or an object with a `messages` array"


def parse_openai_chat(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Chat Completions transcript document.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not JSON or has neither accepted shape.
    """
    items, envelope = item_list(
        load_json(data, expected=EXPECTED), key="messages", expected=EXPECTED
    )
    sink = Sink()
    indexed = system_preamble(envelope, sink) + chat_messages(items, sink)
    found = conversation(
        conversation_id=name,
        indexed=indexed,
        origins=items.origins,
        source=name,
    )
    return sink.transcript("openai-chat", [found])


def system_preamble(envelope: JSONObject | None, sink: Sink) -> list[Indexed]:
    """Return a top-level ``system`` field as a leading system message.

    The message is indexed :data:`PREAMBLE`: it precedes every item.
    """
    if envelope is None or envelope.get("system") is None:
        return []
    return [(PREAMBLE, make_message("system", text_of(envelope.get("system"), sink)))]


def chat_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Chat Completions messages to the neutral model.

    Args:
        items: The messages.
        sink: Collects skipped parts and malformed messages.

    Returns:
        The messages, each with the index of its source message.
    """
    legacy = NamePairing("function")
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        legacy.next_message()
        message = _message(item, sink, legacy)
        if message is not None:
            converted.append((index, message))
    return converted


def _message(item: JSONObject, sink: Sink, legacy: NamePairing) -> Message | None:
    role = get_str(item, "role")
    content = item.get("content")
    if role in {"system", "developer"}:
        return make_message("system", text_of(content, sink))
    if role == "user":
        return make_message("user", text_of(content, sink))
    if role == "assistant":
        return _assistant(item, sink, legacy)
    if role == "tool":
        return _tool_row(item, sink, get_str(item, "tool_call_id") or "")
    if role == "function":
        call_id = legacy.result(get_str(item, "name") or "", None)
        return _tool_row(item, sink, call_id)
    sink.unknown(f"role:{role or UNTYPED}")
    return None


def _assistant(item: JSONObject, sink: Sink, legacy: NamePairing) -> Message:
    calls = [
        call for raw in get_list(item, "tool_calls") if (call := tool_call(raw, sink))
    ]
    function_call = get_object(item, "function_call")
    if function_call is not None:
        name = get_str(function_call, "name") or ""
        arguments = json_text(function_call.get("arguments", "{}"))
        calls.append(
            ToolCall(id=legacy.call(name, None), name=name, arguments=arguments)
        )
    text = text_of(item.get("content"), sink) or (get_str(item, "refusal") or "")
    return make_message("assistant", text, tool_calls=tuple(calls))


def tool_call(raw: object, sink: Sink) -> ToolCall | None:
    """Convert one ``tool_calls[]`` element (``function`` or ``custom``).

    Args:
        raw: The element.
        sink: Counts elements of other types.

    Returns:
        The call, or ``None`` for an element that is not a client tool call.
    """
    obj = as_object(raw)
    kind = (get_str(obj, "type") or "function") if obj is not None else UNTYPED
    body = get_object(obj, kind) if obj is not None else None
    if obj is None or kind not in {"function", "custom"} or body is None:
        sink.skip_part(f"tool_call:{kind}", raw, in_calls=True)
        return None
    arguments = body.get("arguments" if kind == "function" else "input", "{}")
    return ToolCall(
        id=get_str(obj, "id") or "",
        name=get_str(body, "name") or "",
        arguments=json_text(arguments),
    )


def _tool_row(item: JSONObject, sink: Sink, call_id: str) -> Message:
    result = ToolResult(
        call_id=call_id,
        content=text_of(item.get("content"), sink),
        name=get_str(item, "name"),
    )
    return make_message("tool", tool_results=(result,))


def request_history(body: JSONObject) -> list[object]:
    """Return the history a Chat Completions request sends (``messages``)."""
    return get_list(body, "messages")


def response_output(body: object) -> list[object]:
    """Return the new message of a Chat Completions response.

    Args:
        body: The decoded response body.

    Returns:
        ``[choices[0].message]``, or ``[]`` when there is none.
    """
    obj = as_object(body)
    choices = get_list(obj, "choices") if obj is not None else []
    first = as_object(choices[0]) if choices else None
    message = get_object(first, "message") if first is not None else None
    return [message] if message is not None else []


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the new message of a streamed Chat Completions response.

    Text deltas are concatenated; ``tool_calls`` fragments are merged by
    ``index`` (the id and name arrive on the first fragment of each index,
    the arguments in pieces).

    Args:
        events: The decoded ``data:`` payloads, in order.

    Returns:
        ``[message]``, or ``[]`` when no event carried a choice.
    """
    deltas = [delta for event in events if (delta := _first_delta(event))]
    if not deltas:
        return []
    texts = [get_str(delta, "content") or "" for delta in deltas]
    calls: dict[int, _CallParts] = {}
    for delta in deltas:
        for fragment in get_list(delta, "tool_calls"):
            _merge_fragment(calls, fragment)
    message: JSONObject = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = [calls[key].as_json() for key in sorted(calls)]
    return [message]


@dataclass
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def as_json(self) -> JSONObject:
        function: JSONObject = {"name": self.name, "arguments": "".join(self.arguments)}
        return {"id": self.id, "type": "function", "function": function}


def _first_delta(event: JSONObject) -> JSONObject | None:
    choices = get_list(event, "choices")
    first = as_object(choices[0]) if choices else None
    return get_object(first, "delta") if first is not None else None


def _merge_fragment(calls: dict[int, _CallParts], raw: object) -> None:
    fragment = as_object(raw)
    if fragment is None:
        return
    index = fragment.get("index")
    parts = calls.setdefault(
        index if isinstance(index, int) else len(calls), _CallParts()
    )
    function = get_object(fragment, "function") or {}
    parts.id = parts.id or get_str(fragment, "id") or ""
    parts.name = parts.name or get_str(function, "name") or ""
    parts.arguments.append(get_str(function, "arguments") or "")
