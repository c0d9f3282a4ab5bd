"""Pydantic AI message history (``ModelMessagesTypeAdapter`` JSON).

A JSON array of ``{"kind": "request" | "response", "parts": [...]}``. Response
parts ``tool-call`` (``{tool_name, args, tool_call_id}``) are calls; request
parts ``tool-return`` (``{tool_name, content, tool_call_id, outcome?}``) and
``retry-prompt`` parts that name a tool are results (a retry prompt, and a
return whose ``outcome`` is ``failed`` or ``retried``, is an error result).
Consecutive results of a request become one carrier user message. Built-in
(provider-executed) tool parts and ``thinking`` parts are skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.formats._common import (
    Indexed,
    Items,
    JSONObject,
    Sink,
    as_object,
    conversation,
    get_list,
    get_str,
    json_text,
    text_of,
    type_of,
)
from turnledger.pipeline.formats._documents import describe_document, load_json
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.pipeline.formats.usage import attach_usage, pydantic_ai_usage
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ModelUsage, ParsedTranscript

EXPECTED = "a JSON array of Pydantic AI model messages"


def parse_pydantic_ai(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Pydantic AI message-history document.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not a JSON array.
    """
    document = load_json(data, expected=EXPECTED)
    if not isinstance(document, list):
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    items = Items.of(document, "")
    sink = Sink()
    usage_at: dict[int, ModelUsage] = {}
    indexed = pydantic_ai_messages(items, sink, usage_at)
    found = conversation(
        conversation_id=name, indexed=indexed, origins=items.origins, source=name
    )
    return sink.transcript("pydantic-ai", [attach_usage(found, indexed, usage_at)])


def pydantic_ai_messages(
    items: Items, sink: Sink, usage_at: dict[int, ModelUsage] | None = None
) -> list[Indexed]:
    """Convert Pydantic AI model messages to the neutral model.

    Args:
        items: The model messages.
        sink: Collects skipped parts and malformed messages.
        usage_at: When given, receives each response's usage (with its model
            and provider) by the index of its model message.

    Returns:
        The messages, each with the index of its source model message.
    """
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        kind = type_of(item, "kind")
        if kind == "request":
            messages = _request(item, sink)
        elif kind == "response":
            messages = [_response(item, sink)]
            usage = pydantic_ai_usage(item, sink) if usage_at is not None else None
            if usage_at is not None and usage is not None:
                usage_at[index] = usage
        else:
            sink.unknown(f"kind:{kind}")
            messages = []
        converted.extend((index, message) for message in messages)
    return converted


@dataclass
class _Request:
    messages: list[Message] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)

    def flush(self) -> None:
        if self.results:
            carrier = make_message("user", tool_results=tuple(self.results))
            self.messages.append(carrier)
            self.results = []

    def add(self, message: Message) -> None:
        self.flush()
        self.messages.append(message)


def _request(item: JSONObject, sink: Sink) -> list[Message]:
    request = _Request()
    instructions = get_str(item, "instructions")
    if instructions:
        request.add(make_message("system", instructions))
    for part in _parts(item, sink):
        kind = type_of(part, "part_kind")
        if kind == "system-prompt":
            request.add(make_message("system", text_of(part.get("content"), sink)))
        elif kind == "user-prompt":
            request.add(make_message("user", _prompt_text(part, sink)))
        elif kind == "tool-return" or (
            kind == "retry-prompt" and get_str(part, "tool_name")
        ):
            request.results.append(_result(part, kind))
        elif kind == "retry-prompt":
            request.add(make_message("user", json_text(part.get("content", ""))))
        else:
            sink.skip(kind)
    request.flush()
    return request.messages


def _response(item: JSONObject, sink: Sink) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in _parts(item, sink):
        kind = type_of(part, "part_kind")
        if kind == "text":
            texts.append(get_str(part, "content") or "")
        elif kind == "tool-call":
            calls.append(_call(part))
        else:
            sink.skip(kind)
    text = "\n".join(text for text in texts if text)
    return make_message("assistant", text, tool_calls=tuple(calls))


def _parts(item: JSONObject, sink: Sink) -> list[JSONObject]:
    parts: list[JSONObject] = []
    for raw in get_list(item, "parts"):
        part = as_object(raw)
        if part is None:
            sink.skip_item(raw)
        else:
            parts.append(part)
    return parts


def _prompt_text(part: JSONObject, sink: Sink) -> str:
    content = part.get("content")
    if isinstance(content, list):
        for value in content:
            if not isinstance(value, str):
                sink.skip_item(value, "kind")
        return "\n".join(value for value in content if isinstance(value, str))
    return text_of(content, sink)


def _call(part: JSONObject) -> ToolCall:
    args = part.get("args")
    return ToolCall(
        id=get_str(part, "tool_call_id") or "",
        name=get_str(part, "tool_name") or "",
        arguments="{}" if args is None else json_text(args),
    )


_ERROR_OUTCOMES: Final = frozenset({"failed", "retried"})
"""The ``outcome`` values of a tool return that reach the model as an error
(Pydantic AI's ``ERROR_OUTCOMES``: the tool raised, or asked for a retry); a
``denied`` or ``interrupted`` return is an ordinary result saying so."""


def _result(part: JSONObject, kind: str) -> ToolResult:
    failed = get_str(part, "outcome") in _ERROR_OUTCOMES
    return ToolResult(
        call_id=get_str(part, "tool_call_id") or "",
        content=text_of(part.get("content")),
        is_error=kind == "retry-prompt" or failed,
        name=get_str(part, "tool_name"),
    )
