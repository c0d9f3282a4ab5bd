"""Tool runs, read.

An ``execute_tool`` span, OpenInference's ``TOOL`` span, the AI SDK's
``ai.toolCall`` span; a LangChain ``ToolMessage`` result names its call.
"""

from __future__ import annotations

from typing import Final

from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai.ai_sdk import (
    ai_sdk_result,
    is_ai_sdk,
)
from turnledger.pipeline.collect.genai.openinference import (
    OPENINFERENCE_KIND,
    shown,
)
from turnledger.pipeline.collect.genai.readings import (
    ToolRun,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    json_of,
    seq,
    string,
)


def read_tool(span: Span) -> ToolRun:
    """A tool run: by the GenAI attributes, or OpenInference's own.

    OpenInference's: ``tool.name``, the call's id in ``tool_call.id`` (or
    ``tool.id``), its arguments in ``input.value``, its result in
    ``output.value`` (a hidden one, :data:`REDACTED`, is not captured).
    """
    attrs = span.attributes
    if OPENINFERENCE_KIND in attrs:
        call_id = string(attrs.get("tool_call.id")) or string(attrs.get("tool.id"))
        name = string(attrs.get("tool.name"))
        arguments = shown(attrs.get("input.value"))
        result = shown(attrs.get("output.value"))
    elif is_ai_sdk(attrs):
        call_id = string(attrs.get("ai.toolCall.id"))
        name = string(attrs.get("ai.toolCall.name"))
        arguments = attrs.get("ai.toolCall.args")
        result = ai_sdk_result(attrs.get("ai.toolCall.result"))
    else:
        call_id = string(attrs.get("gen_ai.tool.call.id"))
        name = string(attrs.get("gen_ai.tool.name"))
        arguments = attrs.get("gen_ai.tool.call.arguments")
        result = attrs.get("gen_ai.tool.call.result")
    failed = span.failed
    message = None if call_id else _langchain_tool_message(result)
    if message is not None:
        call_id, result, errored = message
        failed = failed or errored
        arguments = None  # LangChain's record of the run, not the call's
    return ToolRun(
        call_id=call_id,
        name=name,
        arguments=None if arguments is None else arguments_text(arguments),
        result=None if result is None else as_text(result),
        success=not failed,
        error=(string(attrs.get("error.type")) or span.status_message or "error")
        if failed
        else None,
    )


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
