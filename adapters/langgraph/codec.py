"""LangGraph values as ledger data: messages as typed events, the rest as blobs.

A LangChain message of the four kinds the ledger models becomes its typed event
(``HumanMessage`` -> :class:`TurnStarted`, ``AIMessage`` -> :class:`AssistantMessage`
with its tool calls, ``ToolMessage`` -> :class:`ToolResultRecorded`,
``SystemMessage`` -> :class:`SystemPromptSet`) plus a
*residual*: the JSON of the message's fields that differ from what the event alone
rebuilds (its id, metadata, usage...). A message is mapped only when the event and
the residual rebuild an equal message (checked on every write); any other value,
or a message that does not rebuild exactly, is kept as the serializer's typed blob
(base64 in JSON). Nothing is lost either way.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Final

import msgspec
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)

Blob = list[str]
"""A serializer blob in JSON: ``[type, base64 bytes]``."""

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder()
_MAPPED_KINDS: Final = (HumanMessage, AIMessage, ToolMessage, SystemMessage)


def dump_blob(serde: SerializerProtocol, value: object) -> Blob:
    """Serialize a value with the saver's serializer, as ``[type, base64]``."""
    kind, data = serde.dumps_typed(value)
    return [kind, base64.b64encode(data).decode("ascii")]


def load_blob(serde: SerializerProtocol, blob: Sequence[str]) -> Any:
    """Deserialize a ``[type, base64]`` blob with the saver's serializer."""
    kind, data = blob
    return serde.loads_typed((kind, base64.b64decode(data)))


def encode_json(value: object) -> str:
    """Encode a JSON value as text."""
    return _ENCODER.encode(value).decode("utf-8")


def decode_json(text: str) -> Any:
    """Decode JSON text."""
    return _DECODER.decode(text)


class TurnCursor(msgspec.Struct, kw_only=True):
    """Where a thread's conversation is: how many turns, which one is open.

    Attributes:
        turns: User messages recorded so far (turn ids are ``lg1``, ``lg2``...).
        turn_id: The current turn (``lg0`` before the first user message).
        assistant_messages: Assistant messages in the current turn.
        open_calls: Tool calls recorded without a recorded result, in the
            order they were called (the keys; the values are unused).
    """

    turns: int = 0
    turn_id: str = "lg0"
    assistant_messages: int = 0
    open_calls: dict[str, None] = msgspec.field(default_factory=dict)

    def copy(self) -> TurnCursor:
        """A copy to advance while encoding (the fold advances the original)."""
        return TurnCursor(
            turns=self.turns,
            turn_id=self.turn_id,
            assistant_messages=self.assistant_messages,
            open_calls=dict(self.open_calls),
        )

    def resume(self, kept: Sequence[Event]) -> None:
        """Go back to where a branch's messages (``kept``, in order) leave it.

        The turn count is kept (a turn id is never given twice); the open turn,
        its assistant messages and the unanswered calls are those of ``kept``.
        """
        self.turn_id, self.assistant_messages = "lg0", 0
        self.open_calls = {}
        turns = self.turns
        for event in kept:
            self.observe(event)
        self.turns = turns

    def comes_next(self, message: BaseMessage) -> bool:
        """Whether recording ``message`` now keeps the conversation well-formed.

        A tool result needs its call to be the first unanswered one, in the
        order the calls were made: that is the order LangGraph's tool node
        puts results in the state, whichever task finishes first (a result
        that does not come next is recorded by its checkpoint, in the state's
        order). Anything else needs every recorded call answered.
        """
        if isinstance(message, ToolMessage):
            first = next(iter(self.open_calls), None)
            return first is not None and message.tool_call_id == first
        return not self.open_calls

    def observe(self, event: Event) -> None:
        """Advance over a typed event recorded in the thread's stream."""
        if isinstance(event, TurnStarted):
            self.turns += 1
            self.turn_id = event.turn_id
            self.assistant_messages = 0
        elif isinstance(event, AssistantMessage):
            self.assistant_messages += 1
            self.open_calls.update(dict.fromkeys(c.id for c in event.tool_calls))
        elif isinstance(event, ToolResultRecorded):
            self.open_calls.pop(event.call_id, None)


def message_event(message: BaseMessage, cursor: TurnCursor) -> Event | None:
    """Return the typed event modelling a message, or ``None`` when none does.

    ``cursor`` is not advanced (the caller observes the event once recorded).
    """
    if type(message) not in _MAPPED_KINDS or not isinstance(message.content, str):
        return None
    if isinstance(message, SystemMessage):
        return SystemPromptSet.of(message.content, turn_id=cursor.turn_id)
    if isinstance(message, HumanMessage):
        return TurnStarted(
            turn_id=f"lg{cursor.turns + 1}",
            origin="interactive",
            user_input=message.content,
        )
    if isinstance(message, AIMessage):
        calls = []
        for call in message.tool_calls:
            call_id = call.get("id")
            if not call_id or not call.get("name"):
                return None
            try:
                arguments = encode_json(call["args"])
            except (TypeError, msgspec.EncodeError):
                return None
            calls.append(
                ToolCallRecord(id=call_id, name=call["name"], arguments=arguments)
            )
        return AssistantMessage(
            turn_id=cursor.turn_id,
            text=message.content,
            tool_calls=tuple(calls),
            iteration=cursor.assistant_messages,
        )
    if isinstance(message, ToolMessage) and message.tool_call_id:
        return ToolResultRecorded(
            turn_id=cursor.turn_id,
            call_id=message.tool_call_id,
            tool=message.name or "",
            success=message.status != "error",
            output=message.content,
            original_chars=len(message.content),
            kept_chars=len(message.content),
        )
    return None


def _mapped_fields(event: Event) -> tuple[type[BaseMessage], dict[str, Any]]:
    """The message class and constructor fields a typed event gives back."""
    if isinstance(event, SystemPromptSet):
        return SystemMessage, {"content": event.text}
    if isinstance(event, TurnStarted):
        return HumanMessage, {"content": event.user_input}
    if isinstance(event, AssistantMessage):
        calls = [
            {
                "name": c.name,
                "args": decode_json(c.arguments),
                "id": c.id,
                "type": "tool_call",
            }
            for c in event.tool_calls
        ]
        return AIMessage, {"content": event.text, "tool_calls": calls}
    if isinstance(event, ToolResultRecorded):
        return ToolMessage, {
            "content": event.output,
            "tool_call_id": event.call_id,
            "name": event.tool or None,
            "status": "success" if event.success else "error",
        }
    msg = (
        "Expected a turn, assistant, tool-result or system-prompt event, found "
        f"{type(event).__name__}"
    )
    raise TypeError(msg)


_FOUND: dict[int, tuple[Event, dict[str, Any], BaseMessage]] = {}
"""The last residual found per typed event (by identity; events are immutable):
the event, the residual and the message they rebuild (treat both as read-only)."""
_FOUND_MAX: Final = 4096


def residual_of(message: BaseMessage, event: Event) -> dict[str, Any] | None:
    """Return the JSON residual that, with ``event``, rebuilds ``message`` exactly.

    ``None`` when no JSON residual does (the message is then kept as a blob). A
    message equal to the one the event's last residual rebuilt gets that residual
    again without building anything (the same equality the first call checked).
    """
    found = _FOUND.get(id(event))
    if found is not None and found[0] is event and found[2] == message:
        return found[1]
    cls, mapped = _mapped_fields(event)
    probe = cls(**mapped)
    residual = {
        name: getattr(message, name)
        for name in type(message).model_fields
        if getattr(message, name) != getattr(probe, name)
    }
    try:
        data: dict[str, Any] = decode_json(encode_json(residual))
    except (TypeError, msgspec.EncodeError, msgspec.DecodeError):
        return None
    if data != residual:
        return None
    try:
        rebuilt = cls(**{**mapped, **data})
    except (TypeError, ValueError):
        return None
    if rebuilt != message:
        return None
    if len(_FOUND) >= _FOUND_MAX:
        _FOUND.clear()
    _FOUND[id(event)] = (event, data, rebuilt)
    return data


def rebuild_message(event: Event, residual: dict[str, Any]) -> BaseMessage:
    """Return the message a typed event and its residual stand for."""
    cls, mapped = _mapped_fields(event)
    return cls(**{**mapped, **residual})
