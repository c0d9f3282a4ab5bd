"""Anthropic Messages.

An assistant message's ``content`` holds ``tool_use`` blocks (``{id, name,
input}``); the results are ``tool_result`` blocks (``{tool_use_id, content,
is_error?}``) in the next ``user`` message, which becomes a carrier
(``kind="tool_results"``). Provider-executed tools (``server_tool_use``,
``mcp_tool_use`` and every ``*_tool_result`` block) are paired by the provider
inside one response: they are skipped and counted, like ``thinking`` blocks.

Accepted documents: an object with a ``messages`` array and an optional
``system`` (a string or text blocks), or a bare JSON array of messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    PREAMBLE,
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
    type_of,
)
from turnledger.pipeline.formats._documents import item_list, load_json
from turnledger.policies.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    make_message,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "an object with a `messages` array (Anthropic Messages) or a JSON array"


def parse_anthropic(data: bytes, *, name: str) -> ParsedTranscript:
    """Read an Anthropic Messages transcript document.

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
    indexed = system_preamble(envelope or {}, sink) + anthropic_messages(items, sink)
    found = conversation(
        conversation_id=name, indexed=indexed, origins=items.origins, source=name
    )
    return sink.transcript("anthropic", [found])


def system_preamble(body: JSONObject, sink: Sink) -> list[Indexed]:
    """Return the top-level ``system`` prompt as a leading system message."""
    system = body.get("system")
    if system is None:
        return []
    return [(PREAMBLE, make_message("system", text_of(system, sink)))]


def anthropic_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Anthropic messages to the neutral model.

    Args:
        items: The messages.
        sink: Collects skipped blocks and malformed messages.

    Returns:
        The messages, each with the index of its source message.
    """
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        if "tool_calls" in item:
            sink.unknown("tool_calls (an OpenAI field)")
        message = anthropic_message(get_str(item, "role"), item.get("content"), sink)
        if message is not None:
            converted.append((index, message))
    return converted


def anthropic_message(role: str | None, content: object, sink: Sink) -> Message | None:
    """Convert one Anthropic message (a role and its content).

    Args:
        role: ``"user"``, ``"assistant"`` or ``"system"``.
        content: A string or a list of content blocks.
        sink: Counts blocks that produce no text, call or result.

    Returns:
        The message, or ``None`` for an unknown role (counted as skipped).
    """
    speaker = _ROLES.get(role or "")
    if speaker is None:
        sink.unknown(f"role:{role}")
        return None
    blocks = as_list(content)
    if blocks is None:
        return make_message(speaker, text_of(content, sink))
    parts = _Parts()
    for raw in blocks:
        _read_block(raw, speaker, parts, sink)
    return make_message(
        speaker,
        "\n".join(text for text in parts.texts if text),
        tool_calls=tuple(parts.calls),
        tool_results=tuple(parts.results),
    )


_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


@dataclass
class _Parts:
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)


def _read_block(raw: object, role: str, parts: _Parts, sink: Sink) -> None:
    block = as_object(raw)
    if isinstance(raw, str):
        parts.texts.append(raw)
        return
    kind = type_of(block) if block is not None else "<not an object>"
    if block is not None and kind == "text":
        parts.texts.append(get_str(block, "text") or "")
    elif block is not None and kind == "tool_use" and role == "assistant":
        parts.calls.append(_tool_use(block))
    elif block is not None and kind == "tool_result" and role == "user":
        parts.results.append(_tool_result(block, sink))
    else:
        sink.skip_part(kind, raw)


def _tool_use(block: JSONObject) -> ToolCall:
    return ToolCall(
        id=get_str(block, "id") or "",
        name=get_str(block, "name") or "",
        arguments=json_text(block.get("input", {})),
    )


def _tool_result(block: JSONObject, sink: Sink) -> ToolResult:
    return ToolResult(
        call_id=get_str(block, "tool_use_id") or "",
        content=text_of(block.get("content"), sink),
        is_error=block.get("is_error") is True,
    )


def request_history(body: JSONObject) -> list[object]:
    """Return the history an Anthropic request sends (``messages``)."""
    return get_list(body, "messages")


def response_output(body: object) -> list[object]:
    """Return the assistant message of an Anthropic response.

    Args:
        body: The decoded response body.

    Returns:
        ``[{"role": "assistant", "content": ...}]``, or ``[]`` for a body that is
        not a message (an error).
    """
    obj = as_object(body)
    if obj is None or as_list(obj.get("content")) is None:
        return []
    return [{"role": get_str(obj, "role") or "assistant", "content": obj["content"]}]


@dataclass
class _StreamBlock:
    block: JSONObject
    text: list[str] = field(default_factory=list)
    json: list[str] = field(default_factory=list)

    def finish(self) -> JSONObject:
        done = dict(self.block)
        if self.text:
            done["text"] = (get_str(done, "text") or "") + "".join(self.text)
        if self.json:
            done["input"] = "".join(self.json)
        return done


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the assistant message of a streamed Anthropic response.

    ``content_block_start`` opens a block (a ``tool_use`` carries its id and
    name); ``text_delta`` and ``input_json_delta`` fragments extend it.

    Args:
        events: The decoded ``data:`` payloads, in order.

    Returns:
        ``[{"role": "assistant", "content": [...]}]``, or ``[]`` when the stream
        holds no message.
    """
    blocks: dict[int, _StreamBlock] = {}
    started = False
    for event in events:
        kind = get_str(event, "type")
        started = started or kind == "message_start"
        index = event.get("index")
        if not isinstance(index, int):
            continue
        if kind == "content_block_start":
            blocks[index] = _StreamBlock(get_object(event, "content_block") or {})
        elif kind == "content_block_delta" and index in blocks:
            _extend(blocks[index], get_object(event, "delta") or {})
    if not started and not blocks:
        return []
    content: list[object] = [blocks[key].finish() for key in sorted(blocks)]
    return [{"role": "assistant", "content": content}]


def _extend(block: _StreamBlock, delta: JSONObject) -> None:
    kind = get_str(delta, "type")
    if kind == "text_delta":
        block.text.append(get_str(delta, "text") or "")
    elif kind == "input_json_delta":
        block.json.append(get_str(delta, "partial_json") or "")
