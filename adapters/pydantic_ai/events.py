"""Pydantic AI conversation entries and records <-> ledger events.

See :mod:`turnledger.adapters.pydantic_ai` for the layout of a conversation stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)

FRAMEWORK: Final = "pydantic-ai"
"""The ``framework`` (and session channel) of the adapter's events."""

ENTRY: Final = "entry"
RECORD: Final = "record"


def entry_events(entry: ConversationEntry, version: int) -> list[Event]:
    """The typed events of what an entry's message shows the providers.

    Args:
        entry: The entry.
        version: The stream version the first event will get.
    """
    message = entry.message
    turn = f"t{version}"
    out: list[Event] = []
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = tuple(
            ToolCallRecord(
                id=p.tool_call_id or "?",
                name=p.tool_name or "?",
                arguments=p.args_as_json_str(),
            )
            for p in message.parts
            if isinstance(p, ToolCallPart)
        )
        if text or calls:
            out.append(AssistantMessage(turn_id=turn, text=text, tool_calls=calls))
        return out
    if not isinstance(message, ModelRequest):
        return out
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            content = part.content
            text = content if isinstance(content, str) else _text_of(content)
            out.append(TurnStarted(turn_id=turn, origin="channel", user_input=text))
        elif isinstance(part, ToolReturnPart):
            output = part.model_response_str()
            out.append(
                ToolResultRecorded(
                    turn_id=turn,
                    call_id=part.tool_call_id or "?",
                    tool=part.tool_name,
                    output=output,
                    original_chars=len(output),
                    kept_chars=len(output),
                )
            )
        elif isinstance(part, RetryPromptPart) and part.tool_name:
            error = part.model_response()
            out.append(
                ToolResultRecorded(
                    turn_id=turn,
                    call_id=part.tool_call_id or "?",
                    tool=part.tool_name,
                    success=False,
                    error=error,
                )
            )
    return out


def _text_of(content: object) -> str:
    if isinstance(content, list | tuple):
        return "\n".join(
            c if isinstance(c, str) else f"[{type(c).__name__}]" for c in content
        )
    return str(content)


@dataclass
class ConversationFold:
    """One conversation as its stream tells it.

    Attributes:
        record: The current record's JSON (``None``: none, or deleted).
        revision: Its ``revision`` token.
        head: Its ``head_id``.
        version: The last stream version folded.
    """

    record: str | None = None
    revision: str | None = None
    head: str | None = None
    version: int = 0

    def apply(self, recorded: Recorded) -> None:
        """Fold one event of the conversation stream."""
        self.version = recorded.version
        event = recorded.event
        if isinstance(event, ItemsRemoved) and event.reason == "delete":
            self.record = self.revision = self.head = None
        elif (
            isinstance(event, ItemRecorded)
            and event.framework == FRAMEWORK
            and event.kind == RECORD
        ):
            data = json.loads(event.fields)
            self.record = event.fields
            self.revision = data["revision"]
            self.head = data["head_id"]
