"""AWS Bedrock Converse messages (``POST .../model/{id}/converse``, ``-stream``).

A message is ``{role: user|assistant, content: [block]}``; a block is an
object with one key: ``text``, ``toolUse`` (``{toolUseId, name, input}``, a
call), ``toolResult`` (``{toolUseId, content: [{text} | {json} | {image} |
{document}], status?}``, a result, in the ``user`` message after the call's,
which becomes a carrier), ``reasoningContent``, ``image``, ``document``,
``cachePoint``, ... (no text: counted as skipped). Tools the provider ran
(a ``toolUse`` of ``type: "server_tool_use"`` and the ``toolResult`` the
provider put in the same assistant message, ``type: "..._result"``) are
paired inside one response: skipped and counted, as Anthropic's server tools
are. The request's top-level
``system`` (``[{text}]``) is the system prompt.

A response is ``{output: {message}, stopReason}``; a streamed one is an AWS
event stream (see :func:`pipeline.formats._http.parse_aws_event_stream`):
``messageStart``, ``contentBlockStart`` (a call's ``toolUseId`` and
``name``), ``contentBlockDelta`` (``text``, or a piece of a call's ``input``
JSON), ``contentBlockStop``, ``messageStop``. Calls and results pair as
Anthropic's do (a result in the message right after its call's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    PREAMBLE,
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

if TYPE_CHECKING:
    from turnledger.policies.messages import Role


def system_preamble(body: JSONObject, sink: Sink) -> list[Indexed]:
    """Return the request's ``system`` blocks as a leading system message."""
    if not get_list(body, "system"):
        return []
    return [(PREAMBLE, make_message("system", text_of(body.get("system"), sink)))]


def bedrock_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Converse messages to the neutral model.

    Args:
        items: The messages.
        sink: Collects skipped blocks and malformed messages.

    Returns:
        The messages, each with the index of its source message.
    """
    converted: list[Indexed] = []
    for index, item in items.objects(sink):
        role = get_str(item, "role")
        if role not in {"user", "assistant"}:
            sink.unknown(f"role:{role or UNTYPED}")
            continue
        converted.append(
            (index, _message("user" if role == "user" else "assistant", item, sink))
        )
    return converted


def _message(role: Role, item: JSONObject, sink: Sink) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for raw in get_list(item, "content"):
        block = as_object(raw)
        kind = next(iter(block), UNTYPED) if block else UNTYPED
        value = get_object(block, kind) if block is not None else None
        if value is not None and _provider_side(kind, value, role):
            sink.skip(f"{kind}:{get_str(value, 'type') or role}")
        elif block is not None and isinstance(block.get("text"), str):
            texts.append(get_str(block, "text") or "")
        elif kind == "toolUse" and value is not None:
            calls.append(
                ToolCall(
                    id=get_str(value, "toolUseId") or "",
                    name=get_str(value, "name") or "",
                    arguments=json_text(value.get("input", {})),
                )
            )
        elif kind == "toolResult" and value is not None:
            results.append(_result(value, sink))
        else:
            sink.skip_part(kind, raw)
    text = "\n".join(texts)
    if role == "assistant":
        return make_message("assistant", text, tool_calls=tuple(calls))
    return make_message("user", text, tool_results=tuple(results))


def _provider_side(kind: str, value: JSONObject, role: Role) -> bool:
    """A tool the provider ran (``type: server_tool_use`` and its result)."""
    if kind == "toolUse":
        return get_str(value, "type") == "server_tool_use"
    kind_of_result = get_str(value, "type") or ""
    return kind == "toolResult" and (
        role == "assistant" or kind_of_result.endswith("_result")
    )


def _result(value: JSONObject, sink: Sink) -> ToolResult:
    texts: list[str] = []
    for raw in get_list(value, "content"):
        part = as_object(raw) or {}
        if isinstance(part.get("text"), str):
            texts.append(get_str(part, "text") or "")
        elif "json" in part:
            texts.append(json_text(part["json"]))
        else:
            sink.skip(next(iter(part), UNTYPED))
    status = get_str(value, "status")
    return ToolResult(
        call_id=get_str(value, "toolUseId") or "",
        content="\n".join(texts),
        is_error=status == "error",
    )


def request_history(body: JSONObject) -> list[object]:
    """Return the history a Converse request sends (``messages``)."""
    return get_list(body, "messages")


def response_output(body: object) -> list[object]:
    """Return the new message of a Converse response (``output.message``)."""
    obj = as_object(body)
    output = get_object(obj, "output") if obj is not None else None
    message = get_object(output, "message") if output is not None else None
    return [message] if message is not None else []


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the new message of a ConverseStream response.

    Text deltas join per content block; a ``toolUse`` block's ``input`` JSON
    arrives in pieces and is decoded once whole (kept as text if it is not
    JSON).

    Args:
        events: ``{event-type: payload}`` objects, in order.

    Returns:
        ``[message]``, or ``[]`` when no event started a message.
    """
    started = False
    blocks: dict[int, JSONObject] = {}
    pieces: dict[int, list[str]] = {}
    for event in events:
        started = started or "messageStart" in event
        start = get_object(event, "contentBlockStart")
        delta = get_object(event, "contentBlockDelta")
        if start is not None:
            tool = get_object(get_object(start, "start") or {}, "toolUse") or {}
            blocks[_block_index(start)] = {"toolUse": dict(tool)}
        elif delta is not None:
            _delta(
                _block_index(delta), get_object(delta, "delta") or {}, blocks, pieces
            )
    if not started and not blocks:
        return []
    content: list[object] = []
    for index in sorted(blocks):
        block = blocks[index]
        use = get_object(block, "toolUse")
        if use is not None:
            use["input"] = "".join(pieces.get(index, [])) or "{}"
        elif index in pieces:
            block["text"] = "".join(pieces[index])
        content.append(block)
    return [{"role": "assistant", "content": content}]


def _delta(
    index: int,
    delta: JSONObject,
    blocks: dict[int, JSONObject],
    pieces: dict[int, list[str]],
) -> None:
    tool = get_object(delta, "toolUse")
    if tool is not None:
        blocks.setdefault(index, {"toolUse": {}})
        pieces.setdefault(index, []).append(get_str(tool, "input") or "")
    elif isinstance(delta.get("text"), str):
        blocks.setdefault(index, {"text": ""})
        pieces.setdefault(index, []).append(get_str(delta, "text") or "")
    else:  # reasoning and other deltas carry no text of the message
        blocks.setdefault(index, {next(iter(delta), UNTYPED): {}})


def _block_index(payload: JSONObject) -> int:
    index = payload.get("contentBlockIndex")
    return index if isinstance(index, int) else 0
