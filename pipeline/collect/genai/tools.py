"""Tool runs, read.

An ``execute_tool`` span, OpenInference's ``TOOL`` span, the AI SDK's
``ai.toolCall`` span, Strands Agents' ``execute_tool`` span (its arguments and
result in its events in the previous form, its result as Converse blocks),
Logfire's OpenAI Agents SDK function span (:mod:`.logfire_agents`); a
LangChain ``ToolMessage`` result names its call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from turnledger.pipeline.collect.decode import Span, SpanEvent
from turnledger.pipeline.collect.genai.ai_sdk import (
    ai_sdk_result,
    is_ai_sdk,
)
from turnledger.pipeline.collect.genai.events import DETAILS_EVENT
from turnledger.pipeline.collect.genai.logfire_agents import agents_kind, agents_tool
from turnledger.pipeline.collect.genai.openinference import (
    OPENINFERENCE_KIND,
    shown,
)
from turnledger.pipeline.collect.genai.readings import (
    ToolRun,
)
from turnledger.pipeline.collect.genai.strands import is_strands, result_text
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    joined,
    json_of,
    seq,
    string,
)


def read_tool(span: Span) -> ToolRun:
    """A tool run: by the GenAI attributes, OpenInference's own, or others'.

    OpenInference's: ``tool.name``, the call's id in ``tool_call.id`` (or
    ``tool.id``), its arguments in ``input.value``, its result in
    ``output.value`` (a hidden one, :data:`REDACTED`, is not captured).
    """
    attrs = span.attributes
    if agents_kind(attrs) is not None:
        return agents_tool(attrs, failed=span.failed)
    call_id, name, arguments, result = _fields(attrs)
    failed = span.failed
    if is_strands(attrs):
        logged_arguments, logged_result = _strands_tool_events(span.events)
        if arguments is None:
            arguments = logged_arguments
        if result is None:
            result = logged_result
        if result is not None:
            result = result_text(result)[0]
        failed = failed or attrs.get("gen_ai.tool.status") == "error"
    called_with = None
    if OPENINFERENCE_KIND in attrs:
        called_with = _keywords(arguments)
        output = _llama_index_output(result)
        if output is not None:
            result, errored, raw_input = output
            failed = failed or errored
            called_with = called_with or _keywords(raw_input)
    message = None if call_id else _langchain_tool_message(result)
    if message is not None:
        call_id, result, errored = message
        failed = failed or errored
        arguments = None  # LangChain's record of the run, not the call's
    return ToolRun(
        call_id=call_id,
        name=name,
        arguments=None if arguments is None else arguments_text(arguments),
        called_with=called_with,
        result=None if result is None else as_text(result),
        success=not failed,
        error=(string(attrs.get("error.type")) or span.status_message or "error")
        if failed
        else None,
    )


def _fields(attrs: Mapping[str, object]) -> tuple[str, str, object, object]:
    """A run's call id, tool name, arguments and result, as its convention has them.

    OpenInference's, the AI SDK's, else the GenAI conventions'.
    """
    if OPENINFERENCE_KIND in attrs:
        call_id = string(attrs.get("tool_call.id")) or string(attrs.get("tool.id"))
        name = string(attrs.get("tool.name"))
        return (
            call_id,
            name,
            shown(attrs.get("input.value")),
            shown(attrs.get("output.value")),
        )
    if is_ai_sdk(attrs):
        return (
            string(attrs.get("ai.toolCall.id")),
            string(attrs.get("ai.toolCall.name")),
            attrs.get("ai.toolCall.args"),
            ai_sdk_result(attrs.get("ai.toolCall.result")),
        )
    return (
        string(attrs.get("gen_ai.tool.call.id")),
        string(attrs.get("gen_ai.tool.name")),
        attrs.get("gen_ai.tool.call.arguments"),
        attrs.get("gen_ai.tool.call.result"),
    )


def _keywords(arguments: object) -> str | None:
    """The keyword arguments of OpenInference's record of a tool's Python call.

    OpenInference records the call that ran a tool by its bound parameters:
    smolagents' tools, called as ``tool(*args, sanitize_inputs_outputs=...,
    **kwargs)``, as ``{"args": [], "sanitize_inputs_outputs": true, "kwargs":
    {...}}``; LlamaIndex's ``FunctionTool.acall(**kwargs)`` as ``{"kwargs":
    {...}}``. With no positional argument, the ``kwargs`` object is what the
    model's call sent (as JSON text); any other value: ``None``.
    """
    bound = json_of(arguments)
    if not isinstance(bound, dict) or bound.get("args", []) != []:
        return None
    keywords = bound.get("kwargs")
    if not isinstance(keywords, dict):
        return None
    return arguments_text(keywords)


_LLAMA_INDEX_OUTPUT: Final = frozenset(
    {"tool_name", "raw_input", "raw_output", "is_error"}
)


def _llama_index_output(value: object) -> tuple[str, bool, object] | None:
    """The content, failure and recorded call of a LlamaIndex ``ToolOutput`` result.

    OpenInference's LlamaIndex instrumentation sends a tool run's result as
    the ``ToolOutput`` LlamaIndex made, as JSON: ``{"blocks": [{"text": ...}],
    "tool_name", "raw_input", "raw_output", "is_error"}`` (``content`` before
    its blocks). Its content is what the model is sent: its text blocks'
    texts, joined by newlines (else its ``content``); ``is_error`` a failure;
    ``raw_input`` the tool's Python call. Anything else: ``None`` (the result
    as sent).
    """
    found = json_of(value)
    if not isinstance(found, dict) or not set(found) >= _LLAMA_INDEX_OUTPUT:
        return None
    blocks = found.get("blocks")
    if isinstance(blocks, list):
        texts = [get(b, "text") for b in blocks]
        content = joined([t for t in texts if isinstance(t, str)])
    else:
        content = as_text(found.get("content"))
    return content, found.get("is_error") is True, found.get("raw_input")


_LANGCHAIN_WRAPPER: Final = frozenset({"output", "kwargs"})


def _langchain_tool_message(value: object) -> tuple[str, object, bool] | None:
    """The call id, content and failure of a LangChain ``ToolMessage`` result.

    LangChain's instrumentations send a tool span without the call's id, its
    result the ``ToolMessage`` the tool run made, as LangChain serializes it:
    ``{"type": "tool", "data": {...}}`` (OpenInference's), or
    ``{"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs":
    {...}}`` inside ``{"output": ..., "kwargs": ...}`` (OpenLLMetry's). Its
    ``tool_call_id`` is the call's id, its ``content`` the result, its
    ``status`` ``"error"`` a failure. Anything else: ``None`` (the result as
    sent).
    """
    found = json_of(value)
    if isinstance(found, dict) and set(found) == _LANGCHAIN_WRAPPER:
        found = found["output"]
    fields: object = None
    if get(found, "type") == "tool":
        fields = get(found, "data")
    elif get(found, "lc") == 1 and get(found, "type") == "constructor":
        path = seq(get(found, "id"))
        if path and path[-1] == "ToolMessage":
            fields = get(found, "kwargs")
    call_id = string(get(fields, "tool_call_id"))
    if not call_id or not isinstance(fields, dict) or "content" not in fields:
        return None
    return call_id, fields["content"], fields.get("status") == "error"


def _strands_tool_events(events: Sequence[SpanEvent]) -> tuple[object, object]:
    """A Strands tool span's arguments and result from its events (``None``: absent).

    In the previous form, the ``content`` of its ``gen_ai.tool.message`` event
    and the ``message`` of its ``gen_ai.choice`` event. In the current form,
    the ``response`` of the ``tool_call_response`` part of the output messages
    of its ``gen_ai.client.inference.operation.details`` event (where a failed
    run's result is: its ``gen_ai.tool.call.result`` is sent on success only).
    """
    arguments: object = None
    result: object = None
    for event in events:
        attrs = event.attributes
        if event.name == "gen_ai.tool.message":
            arguments = attrs.get("content")
        elif event.name == "gen_ai.choice":
            result = attrs.get("message")
        elif event.name == DETAILS_EVENT and "gen_ai.output.messages" in attrs:
            for message in seq(json_of(attrs["gen_ai.output.messages"])):
                for part in seq(get(message, "parts")):
                    if get(part, "type") == "tool_call_response":
                        result = get(part, "response")
    return arguments, result
