"""The OpenTelemetry GenAI conventions: what a span says, in neutral terms.

:func:`read_span` sorts a :class:`~.decode.Span` by ``gen_ai.operation.name``:
``chat``, ``text_completion`` and ``generate_content`` are model calls (so is
a span without the name that carries OpenLLMetry's ``gen_ai.prompt.N.*`` or
``llm.request.type``), ``execute_tool`` is a tool run; other GenAI operations
(``invoke_agent``, ``create_agent``, ``embeddings``...) are known but carry no
message of their own, and anything else is of no known shape. Nothing is
guessed: a span that is neither a model call nor a tool run is only counted.

A model call's content is read from, in this order: the current attributes
``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
``gen_ai.output.messages`` (JSON text or structured values, on the span or on
its ``gen_ai.client.inference.operation.details`` event); the previous span
events ``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice``;
OpenLLMetry's ``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` attributes.
A span with ``openinference.span.kind`` is OpenInference's: its ``LLM`` spans
are model calls, its ``TOOL`` spans tool runs, its other kinds known. Its
content is its GenAI current-form messages when it carries them, else its own
``llm.*`` attributes (:mod:`.openinference`; tool runs :mod:`.tools`);
a text it hid (:data:`REDACTED`) is a ``redacted`` part, never text.
A Logfire request span of a streamed call is counted: the call is the log
Logfire emits when the stream ends (:mod:`.logfire`). Logfire's OpenAI Agents
SDK spans are read by :mod:`.logfire_agents`: a model call's (its Chat
Completions messages or Responses items) and a function span, a tool run.
A span with ``ai.operationId`` and no ``gen_ai.operation.name`` is the Vercel
AI SDK's: its provider calls (:data:`.ai_sdk.AI_SDK_CALLS`) are model calls read by
:mod:`.ai_sdk`, its ``ai.toolCall`` spans tool runs, its other operations
known.
A span with ``mcp.method.name`` (the conventions' MCP spans, a server's
``tools/call`` one an ``execute_tool`` span) is counted (:data:`MCP_METHOD`).
Google ADK's ``call_llm`` span (its previous form) is its model call's record:
the call span under it in the same batch reads its request and response when
it has no content of its own, and it is counted (:mod:`.adk`,
:func:`read_spans`); without that call span in the batch, it is of no known
shape.
A call with none of them has no content (usage only); so has a call whose
messages come as their structure alone (parts without text, arguments or
results, as some instrumentations send them with capture off), or whose
previous-form events carry no content. A message's text is its text parts
joined by newlines; its other parts (an image, a file, a reasoning part) are
not text: their types are counted (``skipped``), never written as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai.adk import (
    CARRIED,
    LLM_REQUEST,
    LLM_RESPONSE,
    adk_content,
    carried,
    with_request,
)
from turnledger.pipeline.collect.genai.ai_sdk import (
    AI_SDK_MESSAGES,
    AI_SDK_NAMES,
    AI_SDK_OPERATION,
    ai_sdk_content,
    ai_sdk_kind,
    is_ai_sdk,
)
from turnledger.pipeline.collect.genai.current import InputCache, current_content
from turnledger.pipeline.collect.genai.events import (
    CONTENT_EVENTS,
    DETAILS_EVENT,
    MESSAGE_EVENTS,
    carries_content,
    events_content,
)
from turnledger.pipeline.collect.genai.logfire import (
    STREAM_REQUEST,
    stream_duration_ms,
    stream_request,
    with_raw_reasoning,
)
from turnledger.pipeline.collect.genai.logfire_agents import (
    agents_content,
    agents_kind,
    is_agents_call,
    with_agents_usage,
)
from turnledger.pipeline.collect.genai.openinference import (
    CURRENT_MESSAGES,
    OPENINFERENCE_KIND,
    OPENINFERENCE_NAMES,
    REDACTED,
    REDACTED_PART,
    openinference_content,
    openinference_kind,
    unredacted,
)
from turnledger.pipeline.collect.genai.openllmetry import (
    openllmetry_call,
    openllmetry_content,
)
from turnledger.pipeline.collect.genai.readings import (
    GENAI_NAMES,
    ModelCall,
    SpanKind,
    SpanReading,
    ToolRun,
    Usage,
    first_of,
    usage_of,
)
from turnledger.pipeline.collect.genai.said import (
    TEXT_PARTS,
    AssistantSaid,
    Content,
    Said,
    ToolCallSaid,
    ToolSaid,
    UserSaid,
    no_content,
)
from turnledger.pipeline.collect.genai.strands import is_strands, strands_kind
from turnledger.pipeline.collect.genai.tools import read_tool
from turnledger.pipeline.collect.genai.values import string

__all__ = [
    "AI_SDK_OPERATION",
    "CHAT_OPERATIONS",
    "CONTENT_EVENTS",
    "KNOWN_OPERATIONS",
    "MESSAGE_EVENTS",
    "OPENINFERENCE_KIND",
    "REDACTED",
    "REDACTED_PART",
    "TEXT_PARTS",
    "AssistantSaid",
    "InputCache",
    "ModelCall",
    "Said",
    "SpanKind",
    "SpanReading",
    "ToolCallSaid",
    "ToolRun",
    "ToolSaid",
    "Usage",
    "UserSaid",
    "adk_carried",
    "carries_content",
    "classify",
    "conversation_of",
    "model_traffic",
    "read_call",
    "read_span",
    "read_spans",
    "span_kind",
]

CHAT_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call."""


KNOWN_OPERATIONS: Final = frozenset(
    {"invoke_agent", "create_agent", "embeddings", "retrieval", "invoke_workflow"}
)
"""GenAI operations that carry no message of their own (counted, not recorded)."""


def read_span(span: Span, cache: InputCache | None = None) -> SpanReading:
    """Read a span by the GenAI conventions (see the module's doc).

    ``cache`` remembers each conversation's last input messages, so a later
    span's input, which repeats them, is read from where they end.
    """
    kind, label = classify(span.attributes, failed=span.failed)
    if kind == "unknown":
        return SpanReading(kind=kind, label=label)
    attrs = span.attributes
    conversation = conversation_of(attrs)
    if kind == "chat":
        return SpanReading(
            kind=kind,
            label=label,
            call=read_call(span, cache, conversation or span.trace_id),
            conversation=conversation,
            response=string(attrs.get(RESPONSE_ID)),
        )
    if kind == "tool":
        return SpanReading(
            kind=kind, label=label, tool=read_tool(span), conversation=conversation
        )
    return SpanReading(kind=kind, label=label, conversation=conversation)


def conversation_of(attrs: Mapping[str, object]) -> str | None:
    """The conversation a span names (``gen_ai.conversation.id``, ``session.id``)."""
    return (
        string(attrs.get("gen_ai.conversation.id"))
        or string(attrs.get("session.id"))
        or None
    )


def read_spans(
    spans: Sequence[Span], cache: InputCache | None = None
) -> list[tuple[Span, SpanReading]]:
    """:func:`read_span` of each span of a batch, each as it was read.

    ADK's ``call_llm`` spans whose model call span is in the batch are counted
    (:data:`~.adk.CARRIED`), and that call span reads their request and
    response (:func:`~.adk.with_request`).
    """
    wrappers = adk_carried(spans)
    if not wrappers:
        return [(span, read_span(span, cache)) for span in spans]
    found: list[tuple[Span, SpanReading]] = []
    for span in spans:
        if span.span_id in wrappers:
            found.append((span, SpanReading(kind="known", label=CARRIED)))
            continue
        wrapper = wrappers.get(span.parent_id)
        if wrapper is not None and span_kind(span)[0] == "chat":
            span = with_request(span, wrapper)  # noqa: PLW2901 - the span as read
        found.append((span, read_span(span, cache)))
    return found


def adk_carried(spans: Sequence[Span]) -> dict[str, Span]:
    """ADK's ``call_llm`` spans whose model call span is among ``spans``, by id."""
    return carried(spans, (s for s in spans if span_kind(s)[0] == "chat"))


def span_kind(
    span: Span, wrappers: Mapping[str, Span] | None = None
) -> tuple[SpanKind, str]:
    """A span's kind and label (:func:`classify`); counted when one of ``wrappers``."""
    if wrappers and span.span_id in wrappers:
        return "known", CARRIED
    return classify(span.attributes, failed=span.failed)


MCP_METHOD: Final = "mcp.method.name"
"""The attribute of the conventions' MCP spans: a client's request, or a
server's handling of one (``tools/call`` an ``execute_tool`` span without a
call id). They are counted, not recorded: the conversation the tool call
belongs to is the model's, in the agent's spans; the MCP server's span of it,
exported by another service or with the call's content opted out, would be
a run of no call, or the same run twice."""


RESPONSE_ID: Final = "gen_ai.response.id"
"""A model call's response id (a later call may name it as its conversation)."""


def classify(attrs: Mapping[str, object], *, failed: bool) -> tuple[SpanKind, str]:
    """A span's kind and the label it is counted by, from its attributes and status.

    ``failed``: whether the span's status is an error. The first step of
    :func:`read_span` (which reads nothing more to decide).
    """
    oi_kind = string(attrs.get(OPENINFERENCE_KIND))
    if oi_kind:
        return openinference_kind(oi_kind, attrs)
    if is_ai_sdk(attrs):
        return ai_sdk_kind(string(attrs.get(AI_SDK_OPERATION)))
    op = string(attrs.get("gen_ai.operation.name"))
    if is_strands(attrs):
        return strands_kind(op)
    if (agents := agents_kind(attrs)) is not None:
        return agents
    if op in CHAT_OPERATIONS and stream_request(attrs, failed=failed):
        return "known", STREAM_REQUEST
    if op in CHAT_OPERATIONS or (op == "" and openllmetry_call(attrs)):
        return "chat", op or string(attrs.get("llm.request.type")) or "chat"
    if method := string(attrs.get(MCP_METHOD)):
        return "known", f"mcp {method[:64]}"
    if op == "execute_tool":
        return "tool", op
    if op in KNOWN_OPERATIONS:
        return "known", op
    return "unknown", f"operation {op[:64]}" if op else "no gen_ai.operation.name"


_TRAFFIC_KEYS: Final = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
)


_TRAFFIC_PREFIXES: Final = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages",
    "llm.output_messages",
    "llm.prompts",
    "llm.token_count.",
)


def model_traffic(span: Span) -> str | None:
    """What model traffic a span holds (the first such attribute or event), or ``None``.

    Messages, tool call arguments or results, or token usage, by the GenAI
    conventions (current and previous), OpenLLMetry's indexed attributes or
    OpenInference's ``llm.*`` ones. A span of no known shape holding them is
    model traffic no reader understands; one without them (an HTTP server
    span, a database span) is not model traffic.
    """
    for key in span.attributes:
        if key in _TRAFFIC_KEYS or key.startswith(_TRAFFIC_PREFIXES):
            return f"the attribute {key[:100]}"
    for event in span.events:
        if event.name in MESSAGE_EVENTS or event.name == DETAILS_EVENT:
            return f"the event {event.name}"
    return None


def read_call(span: Span, cache: InputCache | None = None, key: str = "") -> ModelCall:
    """Read a model call span's model, usage, status and content."""
    attrs: Mapping[str, object] = span.attributes
    if OPENINFERENCE_KIND in attrs and not any(k in attrs for k in CURRENT_MESSAGES):
        names = OPENINFERENCE_NAMES
        found = openinference_content(attrs)
        without_inputs = bool(found[2]) and not any(
            k.startswith("llm.input_messages.") for k in attrs
        )
    elif is_ai_sdk(attrs):
        names = AI_SDK_NAMES
        found = ai_sdk_content(attrs)
        without_inputs = bool(found[2]) and AI_SDK_MESSAGES not in attrs
    elif is_agents_call(attrs):
        names = GENAI_NAMES
        attrs = with_agents_usage(attrs)
        found = agents_content(attrs)
        without_inputs = False
    else:
        if any(event.name == DETAILS_EVENT for event in span.events):
            merged = dict(attrs)
            for event in span.events:
                if event.name == DETAILS_EVENT:
                    merged.update(event.attributes)
            attrs = merged
        names = GENAI_NAMES
        attrs = with_raw_reasoning(attrs)
        found = _content(span, attrs, cache, key)
        if OPENINFERENCE_KIND in attrs:
            found = unredacted(found)
        without_inputs = (
            bool(found[2])
            and "gen_ai.output.messages" in attrs
            and "gen_ai.input.messages" not in attrs
        )
    (system, system_skipped), inputs, outputs, extra, content = found
    failed = span.failed
    error = (
        string(attrs.get("error.type")) or span.status_message or "error"
        if failed
        else None
    )
    return ModelCall(
        model=first_of(attrs, names.model),
        provider=first_of(attrs, names.provider),
        usage=usage_of(attrs, names),
        duration_ms=_duration_ms(span),
        success=not failed,
        error=error,
        system=system,
        system_skipped=system_skipped,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        content=content,
        without_inputs=without_inputs,
        without_outputs=content and bool(inputs) and not outputs and not failed,
        extra_choices=extra,
    )


def _duration_ms(span: Span) -> float:
    """End minus start; a Logfire stream log's own ``duration`` (:mod:`.logfire`)."""
    logged = stream_duration_ms(span.attributes)
    if logged is not None:
        return logged
    return max(0.0, (span.end_ns - span.start_ns) / 1e6)


def _content(
    span: Span, attrs: Mapping[str, object], cache: InputCache | None, key: str
) -> Content:
    if (
        "gen_ai.input.messages" in attrs
        or "gen_ai.output.messages" in attrs
        or "gen_ai.system_instructions" in attrs
    ):
        return current_content(attrs, cache, key)
    if any(e.name in MESSAGE_EVENTS for e in span.events) and any(
        carries_content(e) for e in span.events
    ):  # with capture off, the events say nothing: read on
        return events_content(span)
    if "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs:
        return openllmetry_content(attrs)
    if LLM_REQUEST in attrs or LLM_RESPONSE in attrs:
        return adk_content(attrs)  # its ADK call_llm span's (see .adk)
    return no_content()
