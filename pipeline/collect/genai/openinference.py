"""OpenInference's own attributes, read.

``openinference.span.kind``, ``llm.input_messages.N.message.*`` and
``llm.output_messages.N.message.*``, ``llm.token_count.*``.

A text its instrumentation hid (:data:`REDACTED`) is a ``redacted`` part,
never text, in its own attributes and in the GenAI messages it may add.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from turnledger.pipeline.collect.genai.readings import (
    Names,
    SpanKind,
)
from turnledger.pipeline.collect.genai.said import (
    ASSISTANT_ROLES,
    NO_PARTS_TEXT,
    NO_TEXT,
    SYSTEM_ROLES,
    TOOL_ROLES,
    AssistantSaid,
    Content,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    UserSaid,
    calls_of,
    no_content,
    system_of,
    text_of_parts,
)
from turnledger.pipeline.collect.genai.values import (
    string,
)

OPENINFERENCE_NAMES: Final = Names(
    model=("llm.response.model_name", "llm.model_name", "llm.request.model_name"),
    provider=("llm.provider", "llm.system"),
    input_tokens=("llm.token_count.prompt",),
    output_tokens=("llm.token_count.completion",),
    cached_input_tokens=("llm.token_count.prompt_details.cache_read",),
    cache_write_tokens=("llm.token_count.prompt_details.cache_write",),
    reasoning_tokens=("llm.token_count.completion_details.reasoning",),
)


OPENINFERENCE_KIND: Final = "openinference.span.kind"
"""The attribute that makes a span OpenInference's: read by its own attributes."""


REDACTED: Final = "__REDACTED__"
"""OpenInference's stand-in for a value its instrumentation hid
(``OPENINFERENCE_HIDE_INPUT_TEXT`` and the like): not text. A message part
holding it is counted as a ``redacted`` part, never recorded as words."""


REDACTED_PART: Final = "redacted"


_OI_MESSAGE: Final = re.compile(
    r"llm\.(input|output)_messages\.([0-9]{1,9})\.message\.(.+)"
)


_OI_CONTENT: Final = re.compile(r"contents\.([0-9]{1,9})\.message_content\.(.+)")


_OI_CALL: Final = re.compile(r"([0-9]{1,9})\.tool_call\.(.+)")


_OI_PROMPT: Final = re.compile(r"llm\.prompts\.([0-9]{1,9})\.prompt\.text")


_OI_CHOICE: Final = re.compile(r"llm\.choices\.([0-9]{1,9})\.completion\.text")


CURRENT_MESSAGES: Final = ("gen_ai.input.messages", "gen_ai.output.messages")


def unredacted(found: Content) -> Content:
    """The GenAI form's content of an OpenInference span, hidden texts left out.

    Such a span carries the current form's messages either as the source its
    instrumentation converted (Pydantic AI's spans under OpenInference's
    processor: read first, they are whole) or as its own conversion
    (``OPENINFERENCE_ENABLE_GENAI_SEMCONV``), which carries a hidden text as
    the words :data:`REDACTED`: such a text is a ``redacted`` part, never
    text. Nothing left to say: usage only.
    """
    (system, system_skipped), inputs, outputs, extra, carry = found
    if system == REDACTED:
        system, system_skipped = None, (*system_skipped, REDACTED_PART)
    said = [_unhidden(s) for s in inputs]
    replies = [_unhidden(s) for s in outputs]
    if not (
        system is not None
        or any(_says(s) for s in said)
        or any(_says(s) for s in replies)
    ):
        return no_content()
    kept = [s for s in replies if isinstance(s, AssistantSaid)]
    return (system, system_skipped), said, kept, extra, carry


def _unhidden(said: Said) -> Said:
    if isinstance(said, ToolSaid):
        if said.content != REDACTED:
            return said
        skipped = (*said.skipped, REDACTED_PART)
        return msgspec.structs.replace(said, content="", skipped=skipped)
    if said.text != REDACTED:
        return said
    skipped = (*said.skipped, REDACTED_PART)
    return msgspec.structs.replace(said, text="", skipped=skipped)


def _says(said: Said) -> bool:
    """Whether a message says anything: it was not hidden, or it made a call."""
    if isinstance(said, AssistantSaid) and said.calls:
        return True
    return REDACTED_PART not in said.skipped


NOT_A_CALL: Final = "openinference LLM without messages or usage"
"""The label of an ``LLM`` span that holds neither messages nor token counts."""

_CALL_KEYS: Final = (
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts",
    "llm.choices",
    "llm.token_count.",
    *CURRENT_MESSAGES,
    "gen_ai.usage.",
)
"""The attributes (by prefix) an ``LLM`` span of a model call holds one of."""


def openinference_kind(kind: str, attrs: Mapping[str, object]) -> tuple[SpanKind, str]:
    """An OpenInference span kind: ``LLM`` a model call, ``TOOL`` a tool run.

    Its other kinds (``AGENT``, ``CHAIN``, ``RETRIEVER``...) hold no message
    of a conversation: counted by kind. So is an ``LLM`` span holding neither
    messages nor token counts (:data:`NOT_A_CALL`): OpenInference's LlamaIndex
    instrumentation makes one of every method of a model object it traces,
    ``_prepare_chat_with_tools`` among them, whose call is another span.
    """
    if kind == "LLM":
        if not any(key.startswith(_CALL_KEYS) for key in attrs):
            return "known", NOT_A_CALL
        return "chat", "chat"
    if kind == "TOOL":
        return "tool", "execute_tool"
    return "known", f"openinference {kind[:64]}"


def openinference_content(attrs: Mapping[str, object]) -> Content:
    """An OpenInference LLM span's messages, from its own attributes.

    ``llm.input_messages.N.message.*`` and ``llm.output_messages.N.message.*``
    (the chat form), else ``llm.prompts`` and ``llm.choices`` (the completion
    form). Read when the span carries no GenAI current-form messages (those
    are read first, :func:`unredacted`).
    """
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for key, value in attrs.items():
        if key.startswith("llm.") and (match := _OI_MESSAGE.fullmatch(key)):
            side, index, field = match.groups()
            rows.setdefault((side, int(index)), {})[field] = value
    if not rows:
        return _openinference_completion(attrs)
    system: list[Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    carry = False
    for (side, _index), row in sorted(rows.items()):
        role = string(row.get("role"))
        calls = _oi_calls(row)
        text = _oi_text(row, calls)
        carry = carry or bool(text[0]) or bool(calls)
        if side == "output":
            outputs.append(AssistantSaid(text[0], calls, text[1]))
        elif role in SYSTEM_ROLES:
            system.append(text)
        else:
            inputs.append(_oi_said(role, row, text, calls))
    if not carry:
        return no_content()  # every text hidden: usage only
    return system_of(system), inputs, outputs[:1], max(0, len(outputs) - 1), True


def _oi_said(
    role: str, row: Mapping[str, object], text: Text, calls: tuple[ToolCallSaid, ...]
) -> Said:
    """An input message of a role other than the system's."""
    words, skipped = text
    if role in ASSISTANT_ROLES:
        return AssistantSaid(words, calls, skipped)
    if role in TOOL_ROLES:
        call_id = string(row.get("tool_call_id"))
        name = string(row.get("name"))
        return ToolSaid(call_id=call_id, content=words, name=name, skipped=skipped)
    return UserSaid(words, skipped)


def _oi_text(row: Mapping[str, object], calls: Sequence[ToolCallSaid]) -> Text:
    """A message's text: its ``content``, else its ``contents`` parts.

    A hidden text (:data:`REDACTED`) is a ``redacted`` part; an image (or any
    part of another type) is counted by its type. A message with neither, and
    no tool call, has no parts.
    """
    content = row.get("content")
    if isinstance(content, str):
        return _oi_words(content)
    parts: dict[int, dict[str, object]] = {}
    for field, value in row.items():
        if match := _OI_CONTENT.fullmatch(field):
            parts.setdefault(int(match[1]), {})[match[2]] = value
    for index in _oi_calls_in(row, "contents."):
        parts.pop(index, None)  # a call's part: the message's tool calls
    if not parts:
        return NO_TEXT if calls else NO_PARTS_TEXT
    return text_of_parts(
        (REDACTED_PART, None)
        if part.get("text") == REDACTED
        else (string(part.get("type")), part.get("text"))
        for _, part in sorted(parts.items())
    )


def _oi_calls(row: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    """A message's tool calls: ``tool_calls.M.tool_call.*``, else its calls' parts.

    Else its one call of OpenAI's legacy function calling, without an id
    (``function_call_name``, ``function_call_arguments_json``). A part that
    is a call is ``contents.M.tool_call.*`` (OpenInference's Anthropic
    instrumentation sends a ``tool_use`` block so, beside the same call in
    ``tool_calls``): the message's call, never a part left out.
    """
    found = _oi_calls_in(row, "tool_calls.") or _oi_calls_in(row, "contents.")
    if not found and "function_call_name" in row:
        # OpenAI's legacy function calling: one call, without an id.
        arguments = row.get("function_call_arguments_json")
        found = {
            0: {
                "function.name": row["function_call_name"],
                "function.arguments": arguments,
            }
        }
    return calls_of(found, "function.name", "function.arguments")


def _oi_calls_in(
    row: Mapping[str, object], prefix: str
) -> dict[int, dict[str, object]]:
    """The fields of the tool calls under ``prefix`` (``M.tool_call.*``), by ``M``."""
    found: dict[int, dict[str, object]] = {}
    for field, value in row.items():
        if field.startswith(prefix) and (
            match := _OI_CALL.fullmatch(field, len(prefix))
        ):
            found.setdefault(int(match[1]), {})[match[2]] = value
    return found


def _openinference_completion(attrs: Mapping[str, object]) -> Content:
    """The completion form: each prompt a user message, the first choice the reply."""
    prompts: dict[int, object] = {}
    choices: dict[int, object] = {}
    for key, value in attrs.items():
        if match := _OI_PROMPT.fullmatch(key):
            prompts[int(match[1])] = value
        elif match := _OI_CHOICE.fullmatch(key):
            choices[int(match[1])] = value
    listed = attrs.get("llm.prompts")
    if not prompts and isinstance(listed, (list, tuple)):
        prompts = dict(enumerate(listed))
    said = [_oi_words(v) for _, v in sorted(prompts.items())]
    replies = [_oi_words(v) for _, v in sorted(choices.items())]
    if not any(text for text, _ in [*said, *replies]):
        return no_content()
    inputs: list[Said] = [UserSaid(text, skipped) for text, skipped in said]
    outputs = [AssistantSaid(text, (), skipped) for text, skipped in replies[:1]]
    return (None, ()), inputs, outputs, max(0, len(replies) - 1), True


def _oi_words(value: object) -> Text:
    if value == REDACTED:
        return "", (REDACTED_PART,)
    return string(value), ()


def shown(value: object) -> object:
    """A value an instrumentation did not hide (``None`` for :data:`REDACTED`)."""
    return None if value == REDACTED else value
