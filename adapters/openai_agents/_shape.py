"""The shapes the OpenAI Agents adapter shares between recording and folding.

An item recorded as a typed event keeps, in its ``item.recorded`` event, only
its difference from the usual shape of its kind (:data:`DEFAULTS`; a key the
item lacks is listed under :data:`ABSENT`). :func:`typed_items` rebuilds the
items a typed event stands for from those differences: folding
(:mod:`adapters.openai_agents.fold`) gives items back with it, and recording
(:mod:`adapters.openai_agents.items`) checks with it that a difference is
enough. Items travel as JSON through :data:`ENCODER` and :data:`DECODER`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ToolResultRecorded,
    TurnStarted,
)

Item = dict[str, Any]
"""A Responses input item as plain JSON data."""

DEFAULTS: Final[dict[str, Item]] = {
    "user": {"role": "user"},
    "message": {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": []}],
    },
    "function_call": {"type": "function_call"},
    "function_call_output": {"type": "function_call_output"},
}
ABSENT: Final = "-"


class ItemError(TypeError):
    """An item is not a JSON object the Responses API could hold."""


def _dump(obj: object) -> object:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    msg = f"Expected a JSON value in a session item, found {type(obj).__name__}"
    raise ItemError(msg)


ENCODER: Final = msgspec.json.Encoder(enc_hook=_dump)
DECODER: Final = msgspec.json.Decoder()


def undelta(kind: str, delta: Item | None) -> Item:
    """Return the usual item of a kind with a recorded difference applied."""
    item = {**DEFAULTS[kind], **(delta or {})}
    for key in item.pop(ABSENT, ()):
        item.pop(key, None)
    return msgspec.json.decode(msgspec.json.encode(item))  # type: ignore[no-any-return]


def place_text(kind: str, skeleton: Item, text: str) -> Item:
    """Put a typed event's text back where the item held it."""
    if "content" not in skeleton:
        skeleton["content"] = text
        return skeleton
    content = skeleton["content"]
    if (
        kind == "message"
        and isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and "text" not in content[0]
    ):
        content[0]["text"] = text
    return skeleton


def usual_kinds(event: Event) -> list[str]:
    """The kinds of the items a typed event records when nothing completes it."""
    if isinstance(event, AssistantMessage):
        kinds = ["message"] if event.text or not event.tool_calls else []
        return kinds + ["function_call"] * len(event.tool_calls)
    if isinstance(event, TurnStarted):
        return ["user"]
    return ["function_call_output"]


def typed_items(event: Event, shapes: list[Any] | None) -> Iterator[tuple[str, Item]]:
    """The items a typed event records (with their shapes when given)."""
    if shapes is None:
        shapes = [[k, None] for k in usual_kinds(event)]
    calls = iter(event.tool_calls) if isinstance(event, AssistantMessage) else iter(())
    for kind, delta in shapes:
        item = undelta(str(kind), delta)
        if isinstance(event, TurnStarted):
            yield kind, place_text(kind, item, event.user_input)
        elif isinstance(event, AssistantMessage) and kind == "message":
            yield kind, place_text(kind, item, event.text)
        elif isinstance(event, AssistantMessage):
            call = next(calls)
            item.setdefault("call_id", call.id)
            item.setdefault("name", call.name)
            item.setdefault("arguments", call.arguments)
            yield kind, item
        elif isinstance(event, ToolResultRecorded):
            item.setdefault("call_id", event.call_id)
            item.setdefault("output", event.output)
            yield kind, item
