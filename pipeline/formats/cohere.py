"""Cohere Chat API v2 (``POST /v2/chat``) messages, as cassettes record them.

A message is ``{role: system|user|assistant|tool, content}``; ``content`` is a
string or a list of parts (``{type: "text", text}``, ``{type: "document",
document: {data}}``, ``{type: "thinking", thinking}``, images). An assistant
message carries ``tool_calls[]`` (``{id, type: "function", function: {name,
arguments}}``) and a ``tool_plan`` (the model's stated plan, text it wrote:
it is kept, before the content's text); a ``role: "tool"`` message answers
the call named by its ``tool_call_id``, with text or ``document`` parts (a
document's ``data`` becomes JSON text).

A response is ``{id, message: {role, content, tool_plan, tool_calls}}``; a
streamed one is Server-Sent Events (``message-start``, ``content-delta``,
``tool-plan-delta``, ``tool-call-start`` with the call's id and name,
``tool-call-delta`` with pieces of its arguments, ``message-end``). Calls and
results pair as Chat Completions' do (a result before the next assistant
message).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    UNTYPED,
    Indexed,
    Items,
    JSONObject,
    Sink,
    as_list,
    as_object,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
    type_of,
)
from turnledger.pipeline.formats.openai_chat import tool_call
from turnledger.policies.messages import Message, ToolResult, make_message

if TYPE_CHECKING:
    from collections.abc import Callable


def cohere_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Cohere v2 messages to the neutral model.

    Args:
        items: The messages.
        sink: Collects skipped parts and malformed messages.

    Returns:
        The messages, each with the index of its source message.
    """
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        message = _message(item, sink)
        if message is not None:
            converted.append((index, message))
    return converted


def _message(item: JSONObject, sink: Sink) -> Message | None:
    role = get_str(item, "role")
    if role == "system":
        return make_message("system", text_of(item.get("content"), sink))
    if role == "user":
        return make_message("user", text_of(item.get("content"), sink))
    if role == "assistant":
        calls = [
            call
            for raw in get_list(item, "tool_calls")
            if (call := tool_call(raw, sink))
        ]
        texts = [get_str(item, "tool_plan") or "", text_of(item.get("content"), sink)]
        text = "\n".join(text for text in texts if text)
        return make_message("assistant", text, tool_calls=tuple(calls))
    if role == "tool":
        result = ToolResult(
            call_id=get_str(item, "tool_call_id") or "",
            content=_result_text(item.get("content"), sink),
        )
        return make_message("tool", tool_results=(result,))
    sink.unknown(f"role:{role or UNTYPED}")
    return None


def _result_text(content: object, sink: Sink) -> str:
    """A tool result's text: text parts as they are, documents as JSON."""
    parts = as_list(content)
    if parts is None:
        return text_of(content, sink)
    texts: list[str] = []
    for part in parts:
        obj = as_object(part)
        if obj is not None and type_of(obj) == "document":
            document = get_object(obj, "document") or {}
            texts.append(json_text(document.get("data", document)))
        else:
            texts.append(text_of([part], sink))
    return "\n".join(text for text in texts if text)


def request_history(body: JSONObject) -> list[object]:
    """Return the history a ``/v2/chat`` request sends (``messages``)."""
    return get_list(body, "messages")


def response_output(body: object) -> list[object]:
    """Return the new message of a ``/v2/chat`` response (``[message]``)."""
    obj = as_object(body)
    message = get_object(obj, "message") if obj is not None else None
    if message is None:
        return []
    return [{"role": "assistant", **message}]


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the new message of a streamed ``/v2/chat`` response.

    Args:
        events: The decoded ``data:`` payloads, in order.

    Returns:
        ``[message]``, or ``[]`` when no event started a message.
    """
    stream = _Stream()
    for event in events:
        handler = stream.handlers.get(type_of(event))
        if handler is not None:
            handler(event)
    return [stream.message()] if stream.started else []


class _Stream:
    """The message a Cohere event stream builds."""

    def __init__(self) -> None:
        self.started = False
        self.texts: list[str] = []
        self.plan: list[str] = []
        self.calls: dict[int, tuple[JSONObject, list[str]]] = {}
        self.handlers: dict[str, Callable[[JSONObject], None]] = {
            "message-start": self._start,
            "content-delta": self._content,
            "tool-plan-delta": self._plan,
            "tool-call-start": self._call_start,
            "tool-call-delta": self._call_delta,
        }

    def _start(self, _event: JSONObject) -> None:
        self.started = True

    def _content(self, event: JSONObject) -> None:
        content = get_object(_delta_message(event), "content") or {}
        self.texts.append(get_str(content, "text") or "")

    def _plan(self, event: JSONObject) -> None:
        self.plan.append(get_str(_delta_message(event), "tool_plan") or "")

    def _call_start(self, event: JSONObject) -> None:
        call = get_object(_delta_message(event), "tool_calls") or {}
        function = get_object(call, "function") or {}
        self.calls[_index(event, len(self.calls))] = (
            {"id": get_str(call, "id") or "", "name": get_str(function, "name") or ""},
            [get_str(function, "arguments") or ""],
        )

    def _call_delta(self, event: JSONObject) -> None:
        call = get_object(_delta_message(event), "tool_calls") or {}
        function = get_object(call, "function") or {}
        started = self.calls.get(_index(event, len(self.calls) - 1))
        if started is not None:
            started[1].append(get_str(function, "arguments") or "")

    def message(self) -> JSONObject:
        calls: list[object] = []
        for key in sorted(self.calls):
            head, arguments = self.calls[key]
            function = {"name": head["name"], "arguments": "".join(arguments)}
            calls.append({"id": head["id"], "type": "function", "function": function})
        return {
            "role": "assistant",
            "content": "".join(self.texts),
            "tool_plan": "".join(self.plan),
            "tool_calls": calls,
        }


def _delta_message(event: JSONObject) -> JSONObject:
    return get_object(get_object(event, "delta") or {}, "message") or {}


def _index(event: JSONObject, default: int) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else default
