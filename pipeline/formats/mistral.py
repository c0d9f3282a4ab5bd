"""Mistral Chat Completions (``api.mistral.ai/v1/chat/completions``).

The body is Chat Completions' (see :mod:`pipeline.formats.openai_chat`):
``messages`` with ``tool_calls[]`` (``{id, type?, function: {name,
arguments}}``, ``arguments`` a JSON string or an object) and ``role: "tool"``
results naming their ``tool_call_id``; content is a string or chunks
(``{type: "text", text}``, ``{type: "thinking", thinking: [...]}``, images,
documents: only text chunks are text). The differences are in the stream: a
delta carries each call whole (id, name and arguments), and calls of one
delta may all say ``index: 0``, so a fragment with a new id is a new call
rather than more of the call at its index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    JSONObject,
    as_object,
    get_list,
    get_object,
    get_str,
    json_text,
)
from turnledger.pipeline.formats.openai_chat import (
    chat_messages,
    request_history,
    response_output,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import Indexed, Items, Sink


def mistral_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Mistral messages (Chat Completions' shape) to the neutral model."""
    return chat_messages(items, sink)


def stream_output(events: list[JSONObject]) -> list[object]:
    """Assemble the new message of a streamed Mistral response.

    Text deltas are concatenated. A ``tool_calls`` fragment with an ``id``
    other than the last call's starts a new call; one without an id (or with
    the same id) adds its arguments to the call at its ``index``.

    Args:
        events: The decoded ``data:`` payloads, in order.

    Returns:
        ``[message]``, or ``[]`` when no event carried a choice.
    """
    deltas = [delta for event in events if (delta := _first_delta(event))]
    if not deltas:
        return []
    texts: list[str] = []
    calls: list[JSONObject] = []
    by_index: dict[object, JSONObject] = {}
    for delta in deltas:
        content = delta.get("content")
        texts.append(content if isinstance(content, str) else json_text(content or ""))
        for raw in get_list(delta, "tool_calls"):
            _merge(raw, calls, by_index)
    message: JSONObject = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = list(calls)
    return [message]


def _merge(
    raw: object, calls: list[JSONObject], by_index: dict[object, JSONObject]
) -> None:
    fragment = as_object(raw)
    if fragment is None:
        return
    function = get_object(fragment, "function") or {}
    call_id = get_str(fragment, "id") or ""
    arguments = json_text(function.get("arguments", ""))
    current = by_index.get(fragment.get("index"))
    if current is not None and (not call_id or call_id == current["id"]):
        parts = get_object(current, "function") or {}
        parts["arguments"] = f"{parts.get('arguments', '')}{arguments}"
        return
    name = get_str(function, "name") or ""
    call: JSONObject = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    calls.append(call)
    by_index[fragment.get("index")] = call


def _first_delta(event: JSONObject) -> JSONObject | None:
    choices = get_list(event, "choices")
    first = as_object(choices[0]) if choices else None
    return get_object(first, "delta") if first is not None else None


__all__ = ["mistral_messages", "request_history", "response_output", "stream_output"]
