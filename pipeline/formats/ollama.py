"""Ollama's own chat API (``POST /api/chat``).

A message is ``{role: system|user|assistant|tool, content, images?,
thinking?, tool_calls?}``. An assistant message's ``tool_calls[]`` are
``{function: {name, arguments, index?}, id?}`` with ``arguments`` an object;
a ``role: "tool"`` message answers with ``content`` and, in newer versions,
``tool_name`` (or ``tool_call_id`` when the call had an id). Calls often carry
no id: a result then answers the first unanswered call of the assistant
message before it (of its ``tool_name`` when it names one), as Ollama's chat
templates place them; such calls get synthetic ids. ``images`` (base64) and
``thinking`` are not text: counted as skipped.

A response is ``{message, done}``; a streamed one is newline-delimited JSON
(``application/x-ndjson``), one ``{message: {content piece, tool_calls?}}``
object per line, calls arriving whole. Calls and results pair as Chat
Completions' do (results before the next assistant message).
"""

from __future__ import annotations

from turnledger.pipeline.formats._common import (
    UNTYPED,
    Indexed,
    Items,
    JSONObject,
    Sink,
    as_object,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
)
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message


class _Open:
    """The calls of the last assistant message, answered in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.counter = 0

    def call(self, name: str, call_id: str) -> str:
        if not call_id:
            self.counter += 1
            call_id = f"ollama:call:{name}:{self.counter}"
        self.calls.append((name, call_id))
        return call_id

    def result(self, name: str, call_id: str) -> str:
        for index, (open_name, open_id) in enumerate(self.calls):
            if (call_id and open_id == call_id) or (
                not call_id and (not name or name == open_name)
            ):
                del self.calls[index]
                return open_id
        if call_id:
            return call_id
        self.counter += 1
        return f"ollama:unmatched:{name}:{self.counter}"


def ollama_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert ``/api/chat`` messages to the neutral model.

    Args:
        items: The messages.
        sink: Collects skipped fields and malformed messages.

    Returns:
        The messages, each with the index of its source message.
    """
    open_calls = _Open()
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        message = _message(item, sink, open_calls)
        if message is not None:
            converted.append((index, message))
    return converted


def _message(item: JSONObject, sink: Sink, open_calls: _Open) -> Message | None:
    role = get_str(item, "role")
    for field in ("images", "thinking"):
        if item.get(field):
            sink.skip(field)
    if role in {"system", "user", "assistant"}:
        open_calls.calls.clear()
    if role == "system":
        return make_message("system", text_of(item.get("content"), sink))
    if role == "user":
        return make_message("user", text_of(item.get("content"), sink))
    if role == "assistant":
        calls = [_call(raw, sink, open_calls) for raw in get_list(item, "tool_calls")]
        text = text_of(item.get("content"), sink)
        return make_message(
            "assistant", text, tool_calls=tuple(call for call in calls if call)
        )
    if role == "tool":
        name = get_str(item, "tool_name") or get_str(item, "name") or ""
        call_id = open_calls.result(name, get_str(item, "tool_call_id") or "")
        result = ToolResult(
            call_id=call_id,
            content=text_of(item.get("content"), sink),
            name=name or None,
        )
        return make_message("tool", tool_results=(result,))
    sink.unknown(f"role:{role or UNTYPED}")
    return None


def _call(raw: object, sink: Sink, open_calls: _Open) -> ToolCall | None:
    obj = as_object(raw)
    function = get_object(obj, "function") if obj is not None else None
    if obj is None or function is None:
        sink.skip_part("tool_call:<no function>", raw, in_calls=True)
        return None
    name = get_str(function, "name") or ""
    return ToolCall(
        id=open_calls.call(name, get_str(obj, "id") or ""),
        name=name,
        arguments=json_text(function.get("arguments", {})),
    )


def request_history(body: JSONObject) -> list[object]:
    """Return the history a ``/api/chat`` request sends (``messages``)."""
    return get_list(body, "messages")


def response_output(body: object) -> list[object]:
    """Return the new message of a ``/api/chat`` response (``[message]``)."""
    obj = as_object(body)
    message = get_object(obj, "message") if obj is not None else None
    return [message] if message is not None else []


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the new message of a streamed ``/api/chat`` response.

    Args:
        events: The decoded JSON lines, in order.

    Returns:
        ``[message]``, or ``[]`` when no line carried a message.
    """
    messages = [
        message for event in events if (message := get_object(event, "message"))
    ]
    if not messages:
        return []
    content = "".join(get_str(message, "content") or "" for message in messages)
    thinking = "".join(get_str(message, "thinking") or "" for message in messages)
    calls = [call for message in messages for call in get_list(message, "tool_calls")]
    assembled: JSONObject = {"role": "assistant", "content": content}
    if thinking:
        assembled["thinking"] = thinking
    if calls:
        assembled["tool_calls"] = calls
    return [assembled]
