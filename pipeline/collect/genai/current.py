"""The GenAI conventions' current form, read.

``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
``gen_ai.output.messages``: JSON text or structured values.

:class:`InputCache` reads a conversation's growing input from where the
previous call's ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

from turnledger.pipeline.collect.genai.events import openai_calls
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
    no_content,
    parts_text,
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
from turnledger.pipeline.collected import NO_PARTS


class _Part(msgspec.Struct, gc=False):
    """A message part of the current form, as sent (fields of other kinds ignored)."""

    type: str = ""
    content: object = None
    text: object = None
    id: object = None
    name: object = None
    arguments: object = None
    response: object = None
    result: object = None


class _Message(msgspec.Struct, gc=False):
    """A message of the current form: its role and parts.

    And fields of OpenAI's message some instrumentations add beside its
    parts: an assistant message's ``tool_calls`` (``{id, function: {name,
    arguments}}``), a tool message's ``tool_call_id`` (LiteLLM's), a legacy
    ``function`` message's ``name`` (Logfire's).
    """

    role: str = ""
    parts: list[_Part | str] = msgspec.field(default_factory=list)
    tool_calls: object = None
    tool_call_id: object = None
    name: object = None


_MESSAGES: Final = msgspec.json.Decoder(list[_Message])


def _messages(value: object) -> list[_Message] | None:
    """The messages of a current-form attribute (JSON text or structured).

    ``None`` when they are not shaped as the conventions say (read then by the
    generic walk).
    """
    try:
        if isinstance(value, str):
            return _MESSAGES.decode(value)
        if isinstance(value, (list, tuple)):
            return msgspec.convert(list(value), list[_Message])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return []


_Read: TypeAlias = tuple[Text | None, list[Said]]
"""One input message read: its text when a system message, else what it says."""


_Inputs: TypeAlias = tuple[tuple[Text, ...], tuple[Said, ...], bool]
"""Input messages read: the system messages' texts, the others' said, in order,
and whether any of their parts carries content (see :func:`_typed_carry`)."""


def _inputs_of(messages: Sequence[_Message]) -> tuple[int, _Inputs]:
    """How many messages, and what they say (system texts apart)."""
    systems: list[Text] = []
    inputs: list[Said] = []
    carry = False
    for message in messages:
        system_text, said = _read(message)
        if system_text is not None:
            systems.append(system_text)
        inputs.extend(said)
        carry = carry or _typed_carry(message.parts)
    return len(messages), (tuple(systems), tuple(inputs), carry)


def _typed_carry(parts: Sequence[_Part | str]) -> bool:
    """Whether any part carries content (text, arguments, a result...).

    With content capture off, some instrumentations (Pydantic AI's) still send
    the messages' structure: parts with their type, ids and names, and no
    text, arguments or result. That says what was called, not what was said:
    the call is then recorded as one without content (usage only).
    """
    for part in parts:
        if (
            isinstance(part, str)
            or part.content is not None
            or part.text is not None
            or part.arguments is not None
            or part.response is not None
            or part.result is not None
        ):
            return True
    return False


def _parts_carry(parts: Sequence[object]) -> bool:
    """:func:`_typed_carry` of parts as decoded JSON."""
    return any(
        isinstance(part, str) or any(get(part, k) is not None for k in _CARRYING)
        for part in parts
    )


_CARRYING: Final = ("content", "text", "arguments", "response", "result")


class InputCache:
    """The last input messages read per conversation (at most ``size`` of them).

    A chat span's ``gen_ai.input.messages`` repeats the conversation so far: when
    its JSON text begins with the previous span's messages (that text without
    its closing ``]``, then a comma or the end), only the messages after them
    are decoded and read, and added to what was read before. Anything else is
    read whole. The system instructions last read are remembered too.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._last: dict[str, tuple[str, int, _Inputs]] = {}
        self._instructions: tuple[object, list[Text]] = ("", [])

    def read(self, key: str, text: str) -> _Inputs | None:
        """The messages of ``text`` read, or ``None`` when not of the form."""
        found = self._last.pop(key, None)
        read = None
        if found is not None:
            read = _continued(found, text)
        if read is None:
            messages = _messages(text)
            if messages is None:
                return None
            read = _inputs_of(messages)
        self._last[key] = (text, *read)
        if len(self._last) > self.size:
            del self._last[next(iter(self._last))]
        return read[1]

    def instructions(self, value: object) -> list[Text]:
        """The texts of ``gen_ai.system_instructions`` (the last value's kept)."""
        last, texts = self._instructions
        if type(value) is str and value == last:
            return list(texts)
        texts = _instruction_texts(value)
        if type(value) is str:
            self._instructions = (value, texts)
        return list(texts)


def _continued(
    found: tuple[str, int, _Inputs], text: str
) -> tuple[int, _Inputs] | None:
    old, count, (systems, inputs, carry) = found
    head = old.rstrip()
    if not count or not head.endswith("]"):
        return None
    head = head[:-1].rstrip()
    if not text.startswith(head):
        return None
    rest = text[len(head) :].lstrip()
    if rest.startswith("]") and not rest[1:].strip():
        return count, (systems, inputs, carry)
    if not rest.startswith(","):
        return None
    more = _messages("[" + rest[1:])
    if more is None:
        return None
    added, (more_systems, more_inputs, more_carry) = _inputs_of(more)
    merged = (systems + more_systems, inputs + more_inputs, carry or more_carry)
    return count + added, merged


def _read(message: _Message) -> _Read:
    if message.role in SYSTEM_ROLES:
        return _typed_texts(message.parts), []
    said = _said_of_typed(message.role, message.parts)
    if message.tool_calls is not None or message.tool_call_id is not None:
        said = _with_openai_fields(
            message.role, said, message.tool_calls, message.tool_call_id
        )
    if message.name is not None and message.role in TOOL_ROLES:
        said = [_named(s, string(message.name)) for s in said]
    return None, said


def _named(said: Said, name: str) -> Said:
    """A tool's result named by its message's ``name`` when its part named none."""
    if isinstance(said, ToolSaid) and not said.name:
        return msgspec.structs.replace(said, name=name)
    return said


def _with_openai_fields(
    role: str, said: list[Said], tool_calls: object, tool_call_id: object
) -> list[Said]:
    """What a message says, with the OpenAI fields sent beside its parts.

    An assistant message without ``tool_call`` parts makes the calls of its
    ``tool_calls``; a ``tool`` message without ``tool_call_response`` parts is
    the result of its ``tool_call_id``, its text the content.
    """
    match said:
        case [AssistantSaid(calls=()) as only] if role in ASSISTANT_ROLES:
            calls = openai_calls({"tool_calls": tool_calls})
            if calls:
                return [AssistantSaid(only.text, calls, _no_parts_dropped(only))]
        case [ToolSaid(call_id="") as only] if string(tool_call_id):
            return [msgspec.structs.replace(only, call_id=string(tool_call_id))]
    return said


def _no_parts_dropped(said: AssistantSaid) -> tuple[str, ...]:
    """A message's skipped part types but "no parts": its calls are its content."""
    return tuple(kind for kind in said.skipped if kind != NO_PARTS)


def _instruction_texts(value: object) -> list[Text]:
    system_parts = json_of(value)
    if isinstance(system_parts, str):
        return [(system_parts, ())]
    return [parts_text([p]) for p in seq(system_parts)]


def current_content(
    attrs: Mapping[str, object], cache: InputCache | None, key: str
) -> Content:
    """A call's content in the current form (``key``: its conversation, for ``cache``).

    Messages sent as their structure alone (no text, arguments or results)
    are no content: usage only.
    """
    raw_system = attrs.get("gen_ai.system_instructions")
    if cache is None:
        system_texts = _instruction_texts(raw_system)
    else:
        system_texts = cache.instructions(raw_system)
    inputs: list[Said] = []
    raw_inputs = attrs.get("gen_ai.input.messages")
    read: _Inputs | None
    if cache is not None and isinstance(raw_inputs, str):
        read = cache.read(key, raw_inputs)
    else:
        typed = _messages(raw_inputs)
        read = None if typed is None else _inputs_of(typed)[1]
    carry = False
    if read is not None:
        system_texts.extend(read[0])
        inputs = list(read[1])
        carry = read[2]
    else:
        for message in seq(json_of(raw_inputs)):
            role = string(get(message, "role"))
            parts = seq(get(message, "parts"))
            carry = carry or _parts_carry(parts)
            if role in SYSTEM_ROLES:
                system_texts.append(parts_text(parts))
            else:
                inputs.extend(_said_of_parts(role, parts))
    outputs, extra, output_carry = _outputs(attrs.get("gen_ai.output.messages"))
    system = system_of(system_texts)
    if not (carry or output_carry or system[0] is not None):
        return no_content()  # the structure without content
    return system, inputs, outputs, extra, True


def _outputs(value: object) -> tuple[list[AssistantSaid], int, bool]:
    """The first choice's messages, the choices after it, whether it carries content."""
    typed = _messages(value) if isinstance(value, str) and value[:1] == "[" else None
    if typed is not None:
        if not typed:
            return [], 0, False
        first = typed[0].parts
        said = _said_of_typed("assistant", first)
        found = [s for s in said if isinstance(s, AssistantSaid)]
        return found, len(typed) - 1, _typed_carry(first)
    outputs: list[AssistantSaid] = []
    carry = False
    choices = seq(json_of(value))
    for message in choices[:1]:
        parts = seq(get(message, "parts"))
        said = _said_of_parts("assistant", parts)
        outputs.extend(s for s in said if isinstance(s, AssistantSaid))
        carry = _parts_carry(parts)
    return outputs, max(0, len(choices) - 1), carry


def _typed_texts(parts: Sequence[_Part | str]) -> Text:
    """The text of typed parts (joined by newlines), the types of the others."""
    return text_of_parts(
        p
        if isinstance(p, str)
        else (p.type, p.text if p.content is None else p.content)
        for p in parts
    )


def _said_of_typed(role: str, parts: list[_Part | str]) -> list[Said]:
    """:func:`_said_of_parts` over typed parts (the fast path)."""
    if not parts:
        return said_of(role, NO_PARTS_TEXT, [], [])
    if len(parts) == 1:  # most messages: one text part
        part = parts[0]
        if type(part) is _Part and part.type == "text" and type(part.content) is str:
            if role in ASSISTANT_ROLES:
                return [AssistantSaid(part.content)]
            if role not in TOOL_ROLES:
                return [UserSaid(part.content)]
    calls: list[ToolCallSaid] = []
    results: list[ToolSaid] = []
    others: list[_Part | str] = []
    for part in parts:
        if isinstance(part, str):
            others.append(part)
        elif part.type == "tool_call":
            calls.append(
                ToolCallSaid(
                    id=string(part.id),
                    name=string(part.name),
                    arguments=arguments_text(part.arguments),
                )
            )
        elif part.type == "tool_call_response":
            response = part.result if part.response is None else part.response
            results.append(ToolSaid(call_id=string(part.id), content=as_text(response)))
        else:
            others.append(part)
    return said_of(role, _typed_texts(others) if others else NO_TEXT, calls, results)


def _said_of_parts(role: str, parts: Sequence[object]) -> list[Said]:
    if not parts:
        return said_of(role, NO_PARTS_TEXT, [], [])
    calls: list[ToolCallSaid] = []
    results: list[ToolSaid] = []
    others: list[object] = []
    for part in parts:
        kind = string(get(part, "type"))
        if kind == "tool_call":
            calls.append(
                ToolCallSaid(
                    id=string(get(part, "id")),
                    name=string(get(part, "name")),
                    arguments=arguments_text(get(part, "arguments")),
                )
            )
        elif kind == "tool_call_response":
            response = get(part, "response")
            if response is None:
                response = get(part, "result")
            results.append(
                ToolSaid(call_id=string(get(part, "id")), content=as_text(response))
            )
        else:
            others.append(part)
    return said_of(role, parts_text(others), calls, results)
