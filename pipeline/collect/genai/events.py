"""The GenAI conventions' message events, read.

The previous form's ``gen_ai.*.message`` and ``gen_ai.choice`` span events,
and the current form's ``gen_ai.client.inference.operation.details`` event
(both also sent as log records). A message's content (a choice's message) that
is Converse content blocks, as Strands Agents sends it, is read as those
blocks (:mod:`.strands`); one that is a Gemini ``Content`` object, as ADK's
previous form sends it, as that object (:mod:`.gemini`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from turnledger.pipeline.collect.decode import Span, SpanEvent
from turnledger.pipeline.collect.genai.gemini import (
    ELIDED,
    gemini_answer,
    gemini_content,
    gemini_said,
    gemini_text,
)
from turnledger.pipeline.collect.genai.said import (
    AssistantSaid,
    Content,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    UserSaid,
    message_text,
    system_of,
)
from turnledger.pipeline.collect.genai.strands import (
    answer_of,
    blocks_said,
    blocks_text,
    converse_blocks,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    json_of,
    seq,
    string,
)

DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"


MESSAGE_EVENTS: Final = frozenset(
    {
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
    }
)
"""The previous form's message events (on a span, or log records in its context)."""


CONTENT_EVENTS: Final = MESSAGE_EVENTS | {DETAILS_EVENT}
"""The events that may hold a model call's content, on its span or as log records
emitted in its context: the previous form's message events and the current
form's ``gen_ai.client.inference.operation.details``."""


_BLOCK_ROLES: Final = {
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""The role of each message event whose content may be Converse blocks."""


_CONTENT_KEYS: Final = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
)


def carries_content(event: SpanEvent) -> bool:
    """Whether a content event holds what was said, not only that it was.

    With content capture off, instrumentations still emit the events (a user
    message without ``content``, a tool call without ``arguments``, the
    details event without messages): those say nothing to record. A message
    event holds content when its fields (its ``body``, else its attributes)
    hold ``content``, or a tool call with its ``arguments``; for
    ``gen_ai.choice``, its ``message`` does. The details event holds content
    when it carries the input or output messages or the system instructions.
    """
    if event.name == DETAILS_EVENT:
        return any(key in event.attributes for key in _CONTENT_KEYS)
    if event.name not in MESSAGE_EVENTS:
        return False
    body = json_of(event.attributes.get("body"))
    fields: Mapping[str, object] = body if isinstance(body, dict) else event.attributes
    if event.name == "gen_ai.choice":
        message = json_of(fields.get("message"))
        if converse_blocks(message) is not None:
            return True
        fields = message if isinstance(message, dict) else fields
    content = fields.get("content")
    if content is not None and content != ELIDED:
        return True
    return any(
        get(get(call, "function"), "arguments") is not None
        for call in seq(json_of(fields.get("tool_calls")))
    )


def events_content(span: Span) -> Content:
    """A call's content from its previous-form message events, in order."""
    system: list[Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    extra = 0
    for event in span.events:
        attrs = event.attributes
        body = json_of(attrs.get("body"))
        fields: Mapping[str, object] = body if isinstance(body, dict) else attrs
        content = json_of(fields.get("content"))  # decoded once, read below
        if content == ELIDED:
            continue  # content capture off (ADK): nothing said here
        match event.name:
            case "gen_ai.system.message":
                system.append(_system_text(content))
            case "gen_ai.choice":
                if outputs:
                    extra += 1
                    continue
                outputs.append(_choice(fields))
            case name:
                inputs += _message_said(name, fields, content)
    return system_of(system), inputs, outputs, extra, True


def _system_text(content: object) -> Text:
    """A system message event's text: Converse blocks, a ``Content``, or its content."""
    blocks = converse_blocks(content)
    if blocks is not None:
        return blocks_text(blocks)
    gemini = gemini_content(content)
    if gemini is not None:
        return gemini_text(gemini)
    return message_text(content)


def _message_said(
    name: str, fields: Mapping[str, object], content: object
) -> list[Said]:
    """What a user, assistant or tool message event says (another event: nothing)."""
    blocks = converse_blocks(content)
    if name in _BLOCK_ROLES and blocks is not None:
        return blocks_said(_BLOCK_ROLES[name], blocks)
    gemini = gemini_content(content) if name in _BLOCK_ROLES else None
    if gemini is not None:
        return gemini_said(gemini)
    match name:
        case "gen_ai.user.message":
            return [UserSaid(*message_text(content))]
        case "gen_ai.assistant.message":
            text, skipped = message_text(content)
            return [AssistantSaid(text, openai_calls(fields), skipped)]
        case "gen_ai.tool.message":
            call_id = string(fields.get("id")) or string(fields.get("tool_call_id"))
            return [ToolSaid(call_id=call_id, content=as_text(content))]
        case _:
            return []


def _choice(fields: Mapping[str, object]) -> AssistantSaid:
    """A ``gen_ai.choice`` event's message: Converse blocks, or the API's message."""
    message = json_of(fields.get("message"))
    blocks = converse_blocks(message)
    if blocks is not None:
        return answer_of(blocks)
    inner = message if isinstance(message, dict) else fields
    gemini = gemini_content(json_of(inner.get("content")))
    if gemini is not None:
        return gemini_answer(gemini)
    text, skipped = message_text(inner.get("content"))
    return AssistantSaid(text, openai_calls(inner), skipped)


def openai_calls(fields: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    """A message's OpenAI ``tool_calls`` (``{id, function: {name, arguments}}``)."""
    calls: list[ToolCallSaid] = []
    for call in seq(json_of(fields.get("tool_calls"))):
        function = get(call, "function")
        calls.append(
            ToolCallSaid(
                id=string(get(call, "id")),
                name=string(get(function, "name")),
                arguments=arguments_text(get(function, "arguments")),
            )
        )
    return tuple(calls)
