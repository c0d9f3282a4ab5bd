"""LangChain message dicts (``messages_to_dict`` and ``model_dump`` forms).

``messages_to_dict`` gives ``{"type": "ai" | "human" | "tool" | "system" | ...,
"data": {...}}``; ``model_dump`` gives the ``data`` object itself, with its
``type``. An AI message's calls are ``tool_calls: [{name, args, id}]`` (and
``invalid_tool_calls``, which a ``ToolMessage`` still answers); a
``ToolMessage`` names its ``tool_call_id`` and may have ``status: "error"``.

Accepted documents: a JSON array of messages, or an object with a ``messages``
array (a LangGraph state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
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
    type_of,
)
from turnledger.pipeline.formats._documents import item_list, load_json
from turnledger.pipeline.formats.openai_chat import tool_call
from turnledger.pipeline.formats.usage import attach_usage, langchain_usage
from turnledger.policies.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    make_message,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ModelUsage, ParsedTranscript

EXPECTED = "a JSON array of LangChain messages or an object with a `messages` array"

ROLES: dict[str, Role] = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
}
"""LangChain message types and the neutral role each becomes."""

_CHAT_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
}


def parse_langchain(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a LangChain messages document.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not JSON or has neither accepted shape.
    """
    items, _ = item_list(
        load_json(data, expected=EXPECTED), key="messages", expected=EXPECTED
    )
    sink = Sink()
    usage_at: dict[int, ModelUsage] = {}
    indexed = langchain_messages(items, sink, usage_at)
    found = conversation(
        conversation_id=name, indexed=indexed, origins=items.origins, source=name
    )
    return sink.transcript("langchain", [attach_usage(found, indexed, usage_at)])


def langchain_messages(
    items: Items, sink: Sink, usage_at: dict[int, ModelUsage] | None = None
) -> list[Indexed]:
    """Convert LangChain message dicts to the neutral model.

    Args:
        items: The message dicts.
        sink: Collects skipped messages (``remove``, unknown types).
        usage_at: When given, receives each AI message's ``usage_metadata``
            by the index of its dict.

    Returns:
        The messages, each with the index of its source dict.
    """
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        kind = type_of(item)
        data = get_object(item, "data") or item
        message = _message(kind, data, sink)
        if message is not None:
            converted.append((index, message))
            if usage_at is not None and message.role == "assistant":
                usage = langchain_usage(data, sink)
                if usage is not None:
                    usage_at[index] = usage
    return converted


def _message(kind: str, data: JSONObject, sink: Sink) -> Message | None:
    role = ROLES.get(kind)
    if kind == "chat":
        role = _CHAT_ROLES.get(get_str(data, "role") or "")
    if role is None:
        sink.unknown(kind)
        return None
    if role == "assistant":
        calls = _calls(data, sink)
        return make_message(role, text_of(data.get("content")), tool_calls=calls)
    if role == "tool":
        return make_message(role, tool_results=(_result(data, sink),))
    return make_message(role, text_of(data.get("content"), sink))


def _calls(data: JSONObject, sink: Sink) -> tuple[ToolCall, ...]:
    if "tool_calls" not in data:
        extra = get_object(data, "additional_kwargs") or {}
        raw_calls = get_list(extra, "tool_calls")
        return tuple(call for raw in raw_calls if (call := tool_call(raw, sink)))
    raw = get_list(data, "tool_calls") + get_list(data, "invalid_tool_calls")
    return tuple(_call(obj) for value in raw if (obj := as_object(value)))


def _call(obj: JSONObject) -> ToolCall:
    return ToolCall(
        id=get_str(obj, "id") or "",
        name=get_str(obj, "name") or "",
        arguments=json_text(obj.get("args", {})),
    )


def _result(data: JSONObject, sink: Sink) -> ToolResult:
    return ToolResult(
        call_id=get_str(data, "tool_call_id") or "",
        content=text_of(data.get("content"), sink),
        is_error=get_str(data, "status") == "error",
        name=get_str(data, "name"),
    )
