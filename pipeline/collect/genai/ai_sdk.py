"""The Vercel AI SDK's own telemetry, read.

Its spans name their operation in ``ai.operationId``; a provider call holds
``ai.prompt.messages`` and ``ai.response.*``, a tool run ``ai.toolCall.*``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from turnledger.pipeline.collect.genai.readings import (
    Names,
    SpanKind,
)
from turnledger.pipeline.collect.genai.said import (
    NO_PARTS_TEXT,
    SYSTEM_ROLES,
    AssistantSaid,
    Content,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    no_content,
    said_of,
    system_of,
    text_of_parts,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    json_of,
    seq,
    string,
)

AI_SDK_OPERATION: Final = "ai.operationId"
"""The attribute naming a Vercel AI SDK span's operation (its own telemetry)."""


AI_SDK_CALLS: Final = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
"""Its operations that are one model call (the provider's request)."""


AI_SDK_MESSAGES: Final = "ai.prompt.messages"


AI_SDK_NAMES: Final = Names(
    model=(
        "ai.response.model",
        "gen_ai.response.model",
        "ai.model.id",
        "gen_ai.request.model",
    ),
    provider=("gen_ai.system", "ai.model.provider"),
    input_tokens=(
        "ai.usage.inputTokens",
        "ai.usage.promptTokens",
        "gen_ai.usage.input_tokens",
    ),
    output_tokens=(
        "ai.usage.outputTokens",
        "ai.usage.completionTokens",
        "gen_ai.usage.output_tokens",
    ),
    cached_input_tokens=(
        "ai.usage.cachedInputTokens",
        "ai.usage.inputTokenDetails.cacheReadTokens",
    ),
    cache_write_tokens=("ai.usage.inputTokenDetails.cacheWriteTokens",),
    reasoning_tokens=(
        "ai.usage.outputTokenDetails.reasoningTokens",
        "ai.usage.reasoningTokens",
    ),
)


_AI_SDK_ERRORS: Final = frozenset({"error-text", "error-json"})


def ai_sdk_kind(operation: str) -> tuple[SpanKind, str]:
    """An AI SDK operation: a provider call, a tool call, or another (counted)."""
    if operation in AI_SDK_CALLS:
        return "chat", operation
    if operation == "ai.toolCall":
        return "tool", operation
    return "known", operation[:64] or "ai.operationId"


def is_ai_sdk(attrs: Mapping[str, object]) -> bool:
    """Whether a span is the AI SDK's: ``ai.operationId``, no GenAI operation."""
    return AI_SDK_OPERATION in attrs and not string(attrs.get("gen_ai.operation.name"))


def ai_sdk_content(attrs: Mapping[str, object]) -> Content:
    """A provider call's messages, as the AI SDK records them.

    ``ai.prompt.messages`` (its own message form: ``content`` a text or parts
    of type ``text``, ``tool-call``, ``tool-result``, ``image``, ``file``,
    ``reasoning``...), and the reply: ``ai.response.text`` and
    ``ai.response.toolCalls``. Neither sent (``recordInputs`` and
    ``recordOutputs`` off): usage only.
    """
    messages = attrs.get(AI_SDK_MESSAGES)
    text = attrs.get("ai.response.text")
    calls = attrs.get("ai.response.toolCalls")
    if messages is None and text is None and calls is None:
        return no_content()
    system: list[Text] = []
    inputs: list[Said] = []
    for message in seq(json_of(messages)):
        role = string(get(message, "role"))
        content = get(message, "content")
        if isinstance(content, str):
            parts: Sequence[object] = [{"type": "text", "text": content}]
        else:
            parts = seq(content)
        if role in SYSTEM_ROLES:
            system.append(_ai_sdk_texts(parts))
        else:
            inputs.extend(_ai_sdk_said(role, parts))
    outputs: list[AssistantSaid] = []
    if text is not None or calls is not None:
        said = _ai_sdk_calls(seq(json_of(calls)))
        outputs.append(AssistantSaid(string(text), said))
    return system_of(system), inputs, outputs, 0, True


def _ai_sdk_said(role: str, parts: Sequence[object]) -> list[Said]:
    """What one AI SDK message says (as :func:`said_of` reads a message)."""
    if not parts:
        return said_of(role, NO_PARTS_TEXT, [], [])
    calls = [p for p in parts if get(p, "type") == "tool-call"]
    results = [_ai_sdk_tool_result(p) for p in parts if get(p, "type") == "tool-result"]
    others = [p for p in parts if get(p, "type") not in ("tool-call", "tool-result")]
    return said_of(role, _ai_sdk_texts(others), list(_ai_sdk_calls(calls)), results)


def _ai_sdk_texts(parts: Sequence[object]) -> Text:
    return text_of_parts(
        p if isinstance(p, str) else (string(get(p, "type")), get(p, "text"))
        for p in parts
    )


def _ai_sdk_calls(calls: Sequence[object]) -> tuple[ToolCallSaid, ...]:
    """Tool calls: ``toolCallId``, ``toolName``, ``input`` (``args`` before 5.0)."""
    return tuple(
        ToolCallSaid(
            id=string(get(c, "toolCallId")),
            name=string(get(c, "toolName")),
            arguments=arguments_text(
                get(c, "args") if get(c, "input") is None else get(c, "input")
            ),
        )
        for c in calls
    )


def _ai_sdk_tool_result(part: object) -> ToolSaid:
    """A ``tool-result`` part as a result.

    Its ``output`` (``{"type", "value"}``; an ``error-text`` or ``error-json``
    one is an error), or its ``result`` (before 5.0).
    """
    output = get(part, "output")
    kind = string(get(output, "type"))
    value = get(output, "value") if isinstance(output, dict) else get(part, "result")
    return ToolSaid(
        call_id=string(get(part, "toolCallId")),
        content=as_text(value),
        name=string(get(part, "toolName")),
        is_error=kind in _AI_SDK_ERRORS,
    )


def ai_sdk_result(value: object) -> object:
    """A tool span's ``ai.toolCall.result`` (the result as JSON text).

    A string result is its text, as the model is sent it; any other stays JSON.
    """
    if isinstance(value, str) and value[:1] == '"':
        try:
            decoded = msgspec.json.decode(value)
        except msgspec.DecodeError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value
