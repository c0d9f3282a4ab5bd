"""Pydantic AI conversation entries and records <-> ledger events.

See :mod:`turnledger.adapters.pydantic_ai` for the layout of a conversation stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from turnledger.adapters._usage import Instructions, model_called
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.policies.pricing import ModelPrice

FRAMEWORK: Final = "pydantic-ai"
"""The ``framework`` (and session channel) of the adapter's events."""

ENTRY: Final = "entry"
RECORD: Final = "record"


def entry_events(
    entry: ConversationEntry,
    version: int,
    *,
    instructions: Instructions,
    pricing: Mapping[str, ModelPrice],
) -> list[Event]:
    """The typed events of what an entry's message shows the providers.

    A request's system prompt parts (joined by a blank line) and its
    ``instructions`` are each recorded as ``system_prompt.set`` when they
    differ from the ones in effect (Pydantic AI sends the instructions with
    every request: they are recorded once per change). A response the model
    named or reported usage for is a ``model.called`` (its ``model_name``,
    ``provider_name`` and ``RequestUsage``, priced with ``pricing``) before its
    ``assistant.message``.

    Args:
        entry: The entry.
        version: The stream version the first event will get.
        instructions: The system prompt in effect in the stream (updated).
        pricing: The rate sheet model calls are priced with.
    """
    message = entry.message
    turn = f"t{version}"
    out: list[Event] = []
    if isinstance(message, ModelResponse):
        usage = message.usage
        if message.model_name or usage.has_values():
            out.append(
                model_called(
                    turn_id=turn,
                    provider=message.provider_name or FRAMEWORK,
                    model=message.model_name,
                    pricing=pricing,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cached_input_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    reasoning_tokens=usage.output_reasoning_tokens,
                )
            )
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
    system = [p.content for p in message.parts if isinstance(p, SystemPromptPart)]
    out.extend(instructions.change("\n\n".join(system), turn_id=turn))
    out.extend(instructions.change(message.instructions, turn_id=turn))
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            content = part.content
            text = content if isinstance(content, str) else _text_of(content)
            out.append(TurnStarted(turn_id=turn, origin="channel", user_input=text))
        elif isinstance(part, ToolReturnPart) and part.outcome in ERROR_OUTCOMES:
            # The tool raised or asked for a retry: the model saw an error.
            out.append(_failed(part, part.model_response_str(), turn))
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
            out.append(_failed(part, part.model_response(), turn))
    return out


def _failed(
    part: ToolReturnPart | RetryPromptPart, error: str, turn: str
) -> ToolResultRecorded:
    """The failed result of a tool call: what the model was told of the error."""
    return ToolResultRecorded(
        turn_id=turn,
        call_id=part.tool_call_id or "?",
        tool=part.tool_name or "",
        success=False,
        error=error,
    )


def _text_of(content: object) -> str:
    """A user prompt's text: its strings joined by newlines.

    An image or a file is not text: the entry, kept verbatim, holds it.
    """
    if isinstance(content, list | tuple):
        return "\n".join(c for c in content if isinstance(c, str))
    return str(content)


@dataclass
class ConversationFold:
    """One conversation as its stream tells it.

    Attributes:
        record: The current record's JSON (``None``: none, or deleted).
        revision: Its ``revision`` token.
        head: Its ``head_id``.
        version: The last stream version folded.
        instructions: The digest of the system prompt in effect (``None``: none).
    """

    record: str | None = None
    revision: str | None = None
    head: str | None = None
    version: int = 0
    instructions: str | None = None

    def apply(self, recorded: Recorded) -> None:
        """Fold one event of the conversation stream."""
        self.version = recorded.version
        event = recorded.event
        if isinstance(event, SystemPromptSet):
            self.instructions = event.digest
        elif isinstance(event, ItemsRemoved) and event.reason == "delete":
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
