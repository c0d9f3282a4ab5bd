"""Logfire's OpenAI Agents SDK spans (``logfire.instrument_openai_agents``).

Logfire makes a span of each of the SDK's trace spans, named by a message
template of its own, with the SDK's span data as attributes and
``gen_ai.system`` ``openai``; only a Responses API call's span has a
``gen_ai.operation.name``. Three of them say what was said:

- a model call through the SDK's Chat Completions model (``Chat completion
  with {gen_ai.request.model!r}``): the messages sent in ``input`` (Chat
  Completions messages, the system one first), the answer in ``output`` (the
  API's messages), the usage in ``gen_ai.usage.*``;
- a model call through its Responses model (``Responses API``, ``... with
  {gen_ai.request.model!r}``): the items sent in ``raw_input``, the API's
  response whole in ``response`` (its ``instructions``, its ``output``
  items). Logfire's ``events`` attribute repeats them in a form that writes an
  image's address as text and splits a message's parts into messages: it is
  not read;
- a tool run (``Function: {name}``): the tool's ``name``, its arguments in
  ``input``, its result in ``output``, and no call id. A failed run's status
  is an error, its ``error`` the SDK's (``{"message", "data"}``), its output
  the text the model was sent.

The SDK's other spans (agent, turn, task, handoff, guardrail) hold no message:
the other readers count them, as of no known shape. A call's usage is its
``gen_ai.usage.*``, else the SDK's own ``usage`` (:func:`with_agents_usage`).
With the SDK's ``trace_include_sensitive_data`` off, Logfire sends the inputs
and outputs as JSON ``null``: not captured (a call's usage alone, a tool run
without its arguments and result).

Responses items are read as the API has them: a ``message`` item by its role
(``system`` and ``developer`` ones are system instructions), its text parts
(``input_text``, ``output_text``) as text, another part counted by its type;
a ``function_call`` item a tool call, a ``function_call_output`` its result.
An assistant message and the function calls and reasoning items after it are
one assistant message (one response's output is one), a ``reasoning`` item or
a hosted tool's call (``web_search_call``...) counted in it by its type; an
item of the client's that is neither a message nor a function's result (a
hosted tool's output, an ``item_reference``) is counted on the message before
it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from turnledger.pipeline.collect.genai.events import openai_calls
from turnledger.pipeline.collect.genai.readings import SpanKind, ToolRun
from turnledger.pipeline.collect.genai.said import (
    SYSTEM_ROLES,
    TOOL_ROLES,
    AssistantSaid,
    Content,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    UserSaid,
    message_text,
    no_content,
    system_of,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    json_of,
    seq,
    string,
)

CHAT_TEMPLATE: Final = "Chat completion with {gen_ai.request.model!r}"
"""The message template of a model call through the SDK's Chat Completions model."""

FUNCTION_TEMPLATE: Final = "Function: {name}"
"""The message template of a tool run."""

RESPONSES_TEMPLATE: Final = "Responses API"
"""The start of the message template of a call through the SDK's Responses model."""


def _agents_span(attrs: Mapping[str, object]) -> str:
    """The message template of one of Logfire's Agents SDK spans, else ``""``.

    A Responses API span of Logfire's OpenAI client instrumentation has the
    same template, and the request's ``request_data``: it is not one.
    """
    if "logfire.span_type" not in attrs or attrs.get("gen_ai.system") != "openai":
        return ""
    template = string(attrs.get("logfire.msg_template"))
    if template.startswith(RESPONSES_TEMPLATE):
        return "" if "request_data" in attrs else RESPONSES_TEMPLATE
    return template


def agents_kind(attrs: Mapping[str, object]) -> tuple[SpanKind, str] | None:
    """A model call's span is a call, a function span a tool run; else ``None``."""
    template = _agents_span(attrs)
    if template in (CHAT_TEMPLATE, RESPONSES_TEMPLATE):
        return "chat", "chat"
    if template == FUNCTION_TEMPLATE:
        return "tool", "execute_tool"
    return None


def is_agents_call(attrs: Mapping[str, object]) -> bool:
    """Whether a model call span is one of Logfire's Agents SDK spans (module doc)."""
    return _agents_span(attrs) in (CHAT_TEMPLATE, RESPONSES_TEMPLATE)


def agents_content(attrs: Mapping[str, object]) -> Content:
    """A call's content from an Agents SDK call span (:func:`is_agents_call`)."""
    if _agents_span(attrs) == CHAT_TEMPLATE:
        return _chat_content(attrs)
    return _responses_content(attrs)


def with_agents_usage(attrs: Mapping[str, object]) -> Mapping[str, object]:
    """A call span's attributes, with the usage the SDK's ``usage`` holds.

    The SDK's usage (``input_tokens``, ``output_tokens``, their details'
    ``cached_tokens``, ``cache_write_tokens`` and ``reasoning_tokens``) under
    the conventions' names, where the span does not name a count itself: a
    Responses call's span holds no other when the SDK keeps the response out
    of its traces, and a Chat Completions one holds no cache or reasoning
    count.
    """
    usage = json_of(attrs.get("usage"))
    if not isinstance(usage, dict):
        return attrs
    inputs = get(usage, "input_tokens_details")
    outputs = get(usage, "output_tokens_details")
    found = {
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.usage.cache_read.input_tokens": get(inputs, "cached_tokens"),
        "gen_ai.usage.cache_creation.input_tokens": get(inputs, "cache_write_tokens"),
        "gen_ai.usage.reasoning.output_tokens": get(outputs, "reasoning_tokens"),
    }
    return {
        **{k: v for k, v in found.items() if v is not None and k not in attrs},
        **attrs,
    }


def agents_tool(attrs: Mapping[str, object], *, failed: bool) -> ToolRun:
    """A function span's run: its name, arguments and result, without a call id.

    An ``input`` or ``output`` the SDK kept out of its traces (sent as JSON
    ``null``) is not captured.
    """
    arguments = _sent(attrs, "input")
    output = _sent(attrs, "output")
    error = json_of(attrs.get("error"))
    reason = string(get(get(error, "data"), "error")) or string(get(error, "message"))
    return ToolRun(
        call_id="",
        name=string(attrs.get("name")),
        arguments=None if arguments is None else arguments_text(arguments),
        result=None if output is None else as_text(json_of(output)),
        success=not failed,
        error=(reason or "error") if failed else None,
    )


def _sent(attrs: Mapping[str, object], key: str) -> object:
    """An attribute's value; ``None`` when absent or JSON ``null``.

    With ``trace_include_sensitive_data`` off, the SDK keeps a span's inputs
    and outputs out, and Logfire sends them as ``null``.
    """
    value = attrs.get(key)
    return None if value == "null" else value


def _chat_content(attrs: Mapping[str, object]) -> Content:
    """Chat Completions messages: those sent (``input``), the answer (``output``)."""
    sent = seq(json_of(_sent(attrs, "input")))
    answers = seq(json_of(_sent(attrs, "output")))
    if not sent and not answers:
        return no_content()
    system: list[Text] = []
    inputs: list[Said] = []
    for message in sent:
        role = string(get(message, "role"))
        text = message_text(get(message, "content"))
        if role in SYSTEM_ROLES:
            system.append(text)
        elif role == "assistant":
            inputs.append(_assistant(message, text))
        elif role in TOOL_ROLES:
            call_id = string(get(message, "tool_call_id"))
            inputs.append(ToolSaid(call_id=call_id, content=text[0], skipped=text[1]))
        else:
            inputs.append(UserSaid(*text))
    outputs = [
        _assistant(answer, message_text(get(answer, "content")))
        for answer in answers[:1]
    ]
    return system_of(system), inputs, outputs, max(0, len(answers) - 1), True


def _assistant(message: object, text: Text) -> AssistantSaid:
    fields = message if isinstance(message, dict) else {}
    return AssistantSaid(text[0], openai_calls(fields), text[1])


def _responses_content(attrs: Mapping[str, object]) -> Content:
    """Responses items: those sent (``raw_input``), the response's output."""
    response = json_of(_sent(attrs, "response"))
    raw = _sent(attrs, "raw_input")
    if raw is None and not isinstance(response, dict):
        return no_content()
    system: list[Text] = []
    instructions = get(response, "instructions")
    if isinstance(instructions, str) and instructions:
        system.append((instructions, ()))
    sent = json_of(raw)
    if isinstance(raw, str) and not (
        isinstance(sent, list) and all(isinstance(i, dict) for i in sent)
    ):
        text = [{"type": "input_text", "text": raw}]  # the SDK's text input
        sent = [{"role": "user", "content": text}]
    items = seq(sent)
    inputs = _items_said(items, system)
    outputs = [
        s
        for s in _items_said(seq(get(response, "output")), system)
        if isinstance(s, AssistantSaid)
    ]
    return system_of(system), inputs, outputs[:1], max(0, len(outputs) - 1), True


_RESULTS: Final = frozenset({"function_call_output", "custom_tool_call_output"})
"""The items holding a function's result (for its ``call_id``)."""

_CALLS: Final = frozenset({"function_call", "custom_tool_call"})
"""The items holding a function call: its ``arguments`` (a custom tool's
``input``)."""


def _models(kind: str) -> bool:
    """Whether an item of this type is the model's own (part of its message).

    A message, a function call, a reasoning item, a hosted tool's call (web
    search, file search, a computer, code interpreter, MCP...).
    """
    return kind in (
        "",
        "message",
        "reasoning",
        "mcp_list_tools",
        "mcp_approval_request",
    ) or kind.endswith("_call")


def _items_said(items: Sequence[object], system: list[Text]) -> list[Said]:
    """Responses items as messages, in order (system ones added to ``system``).

    An item of the client's neither a message nor a result (a hosted tool's
    output, an ``item_reference``) is counted on the message before it.
    """
    said: list[Said | _Turn] = []
    turn: _Turn | None = None  # the assistant's message being gathered
    for item in items:
        kind = string(get(item, "type"))
        role = string(get(item, "role"))
        if kind in ("", "message") and role and role != "assistant":
            text = message_text(get(item, "content"))
            if role in SYSTEM_ROLES:
                system.append(text)
            else:
                turn = None
                said.append(UserSaid(*text))
        elif kind in _RESULTS:
            turn = None
            output = message_text(get(item, "output"))
            call_id = string(get(item, "call_id"))
            said.append(ToolSaid(call_id=call_id, content=output[0], skipped=output[1]))
        elif _models(kind):
            if turn is None:
                turn = _Turn()
                said.append(turn)
            turn.add(item, kind)
        elif said:
            said[-1] = _counted(said[-1], kind or "untyped")
    return [s.said() if isinstance(s, _Turn) else s for s in said]


def _counted(message: Said | _Turn, kind: str) -> Said | _Turn:
    """The message with one more item counted in it (not recorded)."""
    if isinstance(message, _Turn):
        message.skipped.append(kind)
        return message
    return msgspec.structs.replace(message, skipped=(*message.skipped, kind))


class _Turn:
    """An assistant message gathered from consecutive Responses items."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCallSaid] = []
        self.skipped: list[str] = []

    def add(self, item: object, kind: str) -> None:
        """Add an assistant message's text, a function call, or another item."""
        if kind in ("", "message"):
            text, skipped = message_text(get(item, "content"))
            if text:
                self.texts.append(text)
            self.skipped += skipped
        elif kind in _CALLS:
            arguments = get(item, "arguments" if kind == "function_call" else "input")
            call = ToolCallSaid(
                id=string(get(item, "call_id")),
                name=string(get(item, "name")),
                arguments=arguments_text(arguments),
            )
            self.calls.append(call)
        else:
            self.skipped.append(kind)

    def said(self) -> AssistantSaid:
        """The message gathered."""
        return AssistantSaid(
            "\n".join(self.texts), tuple(self.calls), tuple(self.skipped)
        )
