"""OpenAI Responses input items <-> ledger events, losslessly.

Where an item maps to a typed event it is recorded as one: a user message as
``turn.started``, an assistant message and the function calls right after it as
ONE ``assistant.message`` (so parallel calls stay one message and pair as the
providers want), a function call output as ``tool_result.recorded``. Whatever of
the item the typed event does not model (ids, status, annotations, multi-part
content...) is kept verbatim in an ``item.recorded`` event right after it, as the
difference from the item's usual shape (nothing when there is none). Items no typed
event models (reasoning, system or developer messages, hosted tool calls...) are
kept whole in an ``item.recorded`` event of their own.
:func:`~adapters.openai_agents.fold.fold_items` gives the items back exactly.
This module holds the items' JSON form and the recording.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from turnledger.adapters.openai_agents._shape import (
    ABSENT,
    DECODER,
    DEFAULTS,
    ENCODER,
    Item,
    ItemError,
    typed_items,
    usual_kinds,
)
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)

FRAMEWORK: Final = "openai-agents"
"""The ``framework`` of the adapter's ``item.recorded`` events."""


def normalize(item: object) -> Item:
    """Return an item as plain JSON data (a dict), as it will be given back.

    Raises:
        ItemError: The item is not a JSON object.
    """
    value = DECODER.decode(ENCODER.encode(item))
    if not isinstance(value, dict):
        msg = (
            f"Expected a session item to be a JSON object, found {type(value).__name__}"
        )
        raise ItemError(msg)
    return value


def decode_item(data: bytes) -> Item:
    """Return a fresh copy of an item from its JSON bytes."""
    value: Item = DECODER.decode(data)
    return value


def _kind(item: Item) -> str | None:
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role == "user" and "content" in item:
        return "user"
    if kind == "message" and role == "assistant" and "content" in item:
        return "message"
    if kind in ("function_call", "function_call_output") and isinstance(
        item.get("call_id"), str
    ):
        if kind == "function_call" and not isinstance(item.get("name"), str):
            return None
        return str(kind)
    return None


def _text_of(content: object) -> tuple[str, bool]:
    """Return the text of a content value and whether it is exactly that text.

    Of a list of parts, the text (or refusal) of each part that has one, joined
    by newlines; a part without (an image, a file) adds nothing to the text
    (the item itself keeps it).
    """
    if isinstance(content, str):
        return content, True
    if isinstance(content, list):
        texts = [
            str(p.get("text", p.get("refusal", "")))
            for p in content
            if isinstance(p, dict) and ("text" in p or "refusal" in p)
        ]
        return "\n".join(texts), False
    return "", False


def _skeleton(kind: str, item: Item) -> Item:
    """The item without the values its typed event carries."""
    rest = dict(item)
    if kind in ("user", "message"):
        content = rest.get("content")
        if isinstance(content, str):
            del rest["content"]
        elif (
            kind == "message"
            and isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and content[0].get("type") == "output_text"
            and isinstance(content[0].get("text"), str)
        ):
            part = dict(content[0])
            del part["text"]
            rest["content"] = [part]
    elif kind == "function_call":
        for key in ("call_id", "name"):
            del rest[key]
        if isinstance(rest.get("arguments"), str):
            del rest["arguments"]
    else:
        del rest["call_id"]
        if isinstance(rest.get("output"), str):
            del rest["output"]
    return rest


def _delta(kind: str, skeleton: Item) -> Item | None:
    default = DEFAULTS[kind]
    delta = {k: v for k, v in skeleton.items() if default.get(k, ABSENT) != v}
    absent = [k for k in default if k not in skeleton]
    if absent:
        delta[ABSENT] = absent
    return delta or None


class Recording(NamedTuple):
    """The events recording some items, and those items as the fold gives them back.

    Attributes:
        events: The events, in order.
        turn_id: The turn the next items belong to.
        placed: Per item, in order: the offsets (in ``events``) of the event that
            records it and of the last event recording it, and the item's JSON
            bytes exactly as folding ``events`` gives them back.
    """

    events: list[Event]
    turn_id: str
    placed: list[tuple[int, int, bytes]]


def record_items(
    items: Sequence[Item],
    *,
    turn_id: str,
    first_version: int,
    tool_names: dict[str, str],
) -> Recording:
    """Return the events recording items appended at ``first_version``.

    Args:
        items: Normalized items, in order.
        turn_id: The turn items before the first user message belong to.
        first_version: The stream version the first event will get.
        tool_names: Tool names by call id (calls earlier in the session); updated.

    Returns:
        The events, the turn the next items belong to, and where each item
        lands (see :class:`Recording`).
    """
    events: list[Event] = []
    placed: list[tuple[int, int, bytes]] = []
    index = 0
    while index < len(items):
        item = items[index]
        kind = _kind(item)
        at = len(events)
        version = first_version + at
        if kind is None:
            events.append(_raw(item, turn_id))
            placed.append((at, at, ENCODER.encode(item)))
            index += 1
            continue
        if kind == "user":
            turn_id = f"t{version}"
            text, _ = _text_of(item["content"])
            events.append(
                TurnStarted(turn_id=turn_id, origin="channel", user_input=text)
            )
            group = [(kind, item)]
            index += 1
        elif kind == "function_call_output":
            events.append(_result(item, turn_id, tool_names))
            group = [(kind, item)]
            index += 1
        else:
            group = [(kind, item)]
            index += 1
            while index < len(items) and _kind(items[index]) == "function_call":
                group.append(("function_call", items[index]))
                index += 1
            events.append(_assistant(group, turn_id, tool_names))
        rebuilt = _extras(events, turn_id, group)
        last = len(events) - 1
        placed.extend((at, last, ENCODER.encode(i)) for i in rebuilt)
    return Recording(events, turn_id, placed)


def _result(item: Item, turn_id: str, tool_names: dict[str, str]) -> Event:
    output = item.get("output")
    text = output if isinstance(output, str) else ENCODER.encode(output).decode()
    call_id = str(item["call_id"])
    return ToolResultRecorded(
        turn_id=turn_id,
        call_id=call_id or "?",
        tool=tool_names.get(call_id, ""),
        output=text,
        original_chars=len(text),
        kept_chars=len(text),
    )


def _assistant(
    group: list[tuple[str, Item]], turn_id: str, tool_names: dict[str, str]
) -> AssistantMessage:
    text = ""
    calls = []
    for kind, item in group:
        if kind == "message":
            text = _text_of(item["content"])[0]
            continue
        arguments = item.get("arguments")
        call_id, name = str(item["call_id"]), str(item["name"])
        tool_names[call_id] = name
        calls.append(
            ToolCallRecord(
                id=call_id or "?",
                name=name or "?",
                arguments=arguments if isinstance(arguments, str) else "{}",
            )
        )
    return AssistantMessage(turn_id=turn_id, text=text, tool_calls=tuple(calls))


def _raw(item: Item, turn_id: str) -> ItemRecorded:
    return ItemRecorded(
        turn_id=turn_id,
        framework=FRAMEWORK,
        kind=str(item.get("type", "message")),
        fields=ENCODER.encode(item).decode(),
        typed=False,
    )


def _extras(
    events: list[Event], turn_id: str, group: list[tuple[str, Item]]
) -> list[Item]:
    """Add the ``item.recorded`` completing the typed event, when one is needed.

    Returns the group's items as folding the events gives them back.
    """
    typed = events[-1]
    shapes: list[Any] = [[k, _delta(k, _skeleton(k, item))] for k, item in group]
    rebuilt = list(typed_items(typed, shapes))
    if rebuilt != group:
        shapes = [[k, _delta(k, item) or {}] for k, item in group]
        rebuilt = list(typed_items(typed, shapes))
    usual = usual_kinds(typed) == [k for k, _ in group]
    if not usual or any(delta is not None for _, delta in shapes):
        events.append(
            ItemRecorded(
                turn_id=turn_id,
                framework=FRAMEWORK,
                kind=group[0][0],
                fields=ENCODER.encode(shapes).decode(),
            )
        )
    return [item for _, item in rebuilt]


def is_call(item: Mapping[str, Any]) -> bool:
    """Whether an item is a tool call (it has a ``call_id`` and is no output)."""
    return "call_id" in item and not str(item.get("type", "")).endswith("_output")


def is_output(item: Mapping[str, Any]) -> bool:
    """Whether an item is a tool call's output."""
    return "call_id" in item and str(item.get("type", "")).endswith("_output")
