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
``llm.*`` attributes (:func:`_openinference`; tool runs :func:`_read_tool`);
a text it hid (:data:`REDACTED`) is a ``redacted`` part, never text.
A span with ``ai.operationId`` and no ``gen_ai.operation.name`` is the Vercel
AI SDK's: its provider calls (:data:`AI_SDK_CALLS`) are model calls read by
:func:`_ai_sdk`, its ``ai.toolCall`` spans tool runs, its other operations
known.
A call with none of them has no content (usage only); so has a call whose
messages come as their structure alone (parts without text, arguments or
results, as some instrumentations send them with capture off), or whose
previous-form events carry no content. A message's text is its text parts
joined by newlines; its other parts (an image, a file, a reasoning part) are
not text: their types are counted (``skipped``), never written as text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, NamedTuple, TypeAlias

import msgspec

from turnledger.ledger.numbers import MAX_INTEGER, parse_whole
from turnledger.pipeline.collect.decode import Span, SpanEvent
from turnledger.pipeline.collected import NO_PARTS

CHAT_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call."""

KNOWN_OPERATIONS: Final = frozenset(
    {"invoke_agent", "create_agent", "embeddings", "retrieval", "invoke_workflow"}
)
"""GenAI operations that carry no message of their own (counted, not recorded)."""

_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"


# The structs here hold text, numbers, values decoded from JSON and tuples of
# one another: no reference cycle can pass through them, so the cycle collector
# does not track them (gc=False). A receiver keeps thousands of them between
# batches (each session's last input read), which its full collections would
# otherwise walk again and again.


class UserSaid(msgspec.Struct, frozen=True, gc=False):
    """A user message (``skipped``: the types of its parts that hold no text)."""

    text: str
    skipped: tuple[str, ...] = ()


class ToolCallSaid(msgspec.Struct, frozen=True, gc=False):
    """A tool call an assistant message made."""

    id: str
    name: str
    arguments: str


class AssistantSaid(msgspec.Struct, frozen=True, gc=False):
    """An assistant message, the tool calls it made, the parts it left out.

    ``skipped``: the types of its parts that are neither text nor a tool call
    (a reasoning part, an image...): not recorded, counted.
    """

    text: str
    calls: tuple[ToolCallSaid, ...] = ()
    skipped: tuple[str, ...] = ()


class ToolSaid(msgspec.Struct, frozen=True, gc=False):
    """A tool result (``skipped``: what its message held besides, see :func:`_said`)."""

    call_id: str
    content: str
    name: str = ""
    is_error: bool = False
    skipped: tuple[str, ...] = ()


Said: TypeAlias = UserSaid | AssistantSaid | ToolSaid
"""One message of a conversation, in order."""


class ModelCall(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A model call span, read.

    Attributes:
        model: The response model, else the request model.
        provider: ``gen_ai.provider.name`` (or the older ``gen_ai.system``).
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        cached_input_tokens: Prompt tokens read from the provider's cache.
        duration_ms: End minus start.
        success: Whether the span's status is not an error.
        error: The error type or status message of a failed call.
        system: The system instructions, when sent (their text parts).
        system_skipped: The types of the system instructions' parts that hold
            no text (not recorded, counted).
        inputs: The input messages (system ones excluded), in order.
        outputs: The output messages (the first choice).
        content: Whether any message content was captured.
        without_inputs: Whether the call's output messages came without its
            input messages (``gen_ai.output.messages`` without
            ``gen_ai.input.messages``: an instrumentation that dropped them,
            as OpenLLMetry does for a request holding an image).
        extra_choices: Choices after the first (counted, not recorded).
    """

    model: str = ""
    provider: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    duration_ms: float = 0.0
    success: bool = True
    error: str | None = None
    system: str | None = None
    system_skipped: tuple[str, ...] = ()
    inputs: tuple[Said, ...] = ()
    outputs: tuple[AssistantSaid, ...] = ()
    content: bool = False
    without_inputs: bool = False
    extra_choices: int = 0


class ToolRun(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An ``execute_tool`` span, read (``arguments``, ``result``: None if not sent)."""

    call_id: str
    name: str
    arguments: str | None = None
    result: str | None = None
    success: bool = True
    error: str | None = None


SpanKind: TypeAlias = Literal["chat", "tool", "known", "unknown"]


class SpanReading(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a span is: its kind, a label to count it by, and what it says."""

    kind: SpanKind
    label: str
    call: ModelCall | None = None
    tool: ToolRun | None = None
    conversation: str | None = None


def read_span(span: Span, cache: InputCache | None = None) -> SpanReading:
    """Read a span by the GenAI conventions (see the module's doc).

    ``cache`` remembers each conversation's last input messages, so a later
    span's input, which repeats them, is read from where they end.
    """
    kind, label = classify(span.attributes)
    if kind == "unknown":
        return SpanReading(kind=kind, label=label)
    attrs = span.attributes
    conversation = (
        _str(attrs.get("gen_ai.conversation.id"))
        or (_str(attrs.get("session.id")) if OPENINFERENCE_KIND in attrs else "")
        or None
    )
    if kind == "chat":
        return SpanReading(
            kind=kind,
            label=label,
            call=read_call(span, cache, conversation or span.trace_id),
            conversation=conversation,
        )
    if kind == "tool":
        return SpanReading(
            kind=kind, label=label, tool=_read_tool(span), conversation=conversation
        )
    return SpanReading(kind=kind, label=label, conversation=conversation)


def classify(attrs: Mapping[str, object]) -> tuple[SpanKind, str]:
    """A span's kind and the label it is counted by, from its attributes alone.

    The first step of :func:`read_span` (which reads nothing more to decide).
    """
    oi_kind = _str(attrs.get(OPENINFERENCE_KIND))
    if oi_kind:
        return _openinference_kind(oi_kind)
    op = _str(attrs.get("gen_ai.operation.name"))
    if op == "" and AI_SDK_OPERATION in attrs:
        return _ai_sdk_kind(_str(attrs.get(AI_SDK_OPERATION)))
    if op in CHAT_OPERATIONS or (op == "" and _openllmetry_call(attrs)):
        return "chat", op or _str(attrs.get("llm.request.type")) or "chat"
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
        if event.name in MESSAGE_EVENTS or event.name == _DETAILS_EVENT:
            return f"the event {event.name}"
    return None


def _openllmetry_call(attrs: Mapping[str, object]) -> bool:
    if _str(attrs.get("llm.request.type")) in ("chat", "completion"):
        return True
    return "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs


def read_call(span: Span, cache: InputCache | None = None, key: str = "") -> ModelCall:
    """Read a model call span's model, usage, status and content."""
    attrs = span.attributes
    if OPENINFERENCE_KIND in attrs and not any(k in attrs for k in _CURRENT_MESSAGES):
        names = _OPENINFERENCE_NAMES
        found = _openinference(attrs)
        without_inputs = bool(found[2]) and not any(
            k.startswith("llm.input_messages.") for k in attrs
        )
    elif _ai_sdk_call(attrs):
        names = _AI_SDK_NAMES
        found = _ai_sdk(attrs)
        without_inputs = bool(found[2]) and _AI_SDK_MESSAGES not in attrs
    else:
        if any(event.name == _DETAILS_EVENT for event in span.events):
            attrs = dict(attrs)
            for event in span.events:
                if event.name == _DETAILS_EVENT:
                    attrs.update(event.attributes)
        names = _GENAI_NAMES
        found = _content(span, attrs, cache, key)
        if OPENINFERENCE_KIND in attrs:
            found = _unredacted(found)
        without_inputs = (
            bool(found[2])
            and "gen_ai.output.messages" in attrs
            and "gen_ai.input.messages" not in attrs
        )
    (system, system_skipped), inputs, outputs, extra, content = found
    failed = span.status_code == 2
    error = (
        _str(attrs.get("error.type")) or span.status_message or "error"
        if failed
        else None
    )
    return ModelCall(
        model=_first(attrs, names.model),
        provider=_first(attrs, names.provider),
        input_tokens=_count(attrs, names.input_tokens),
        output_tokens=_count(attrs, names.output_tokens),
        cached_input_tokens=_count(attrs, names.cached_input_tokens),
        duration_ms=max(0.0, (span.end_ns - span.start_ns) / 1e6),
        success=not failed,
        error=error,
        system=system,
        system_skipped=system_skipped,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        content=content,
        without_inputs=without_inputs,
        extra_choices=extra,
    )


class _Names(NamedTuple):
    """Where a convention puts a call's model, provider and usage (first found)."""

    model: tuple[str, ...]
    provider: tuple[str, ...]
    input_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    cached_input_tokens: tuple[str, ...]


_GENAI_NAMES: Final = _Names(
    model=("gen_ai.response.model", "gen_ai.request.model"),
    provider=("gen_ai.provider.name", "gen_ai.system"),
    input_tokens=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    output_tokens=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    cached_input_tokens=("gen_ai.usage.cache_read.input_tokens",),
)
_OPENINFERENCE_NAMES: Final = _Names(
    model=("llm.response.model_name", "llm.model_name", "llm.request.model_name"),
    provider=("llm.provider", "llm.system"),
    input_tokens=("llm.token_count.prompt",),
    output_tokens=("llm.token_count.completion",),
    cached_input_tokens=("llm.token_count.prompt_details.cache_read",),
)


def _first(attrs: Mapping[str, object], keys: Sequence[str]) -> str:
    """The first of ``keys`` whose value is a non-empty text, else ``""``."""
    for key in keys:
        if found := _str(attrs.get(key)):
            return found
    return ""


def _count(attrs: Mapping[str, object], keys: Sequence[str]) -> int:
    """A token count (the first of ``keys`` sent): a non-negative integer, else 0.

    An integer, an integral part of a finite float, or ASCII digits; a
    negative, non-finite or larger than :data:`~ledger.numbers.MAX_INTEGER`
    one reads as 0 (not reported).
    """
    value = None
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            break
    count = 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        count = value
    elif isinstance(value, float) and math.isfinite(value):
        count = int(value)
    elif isinstance(value, str):
        count = parse_whole(value) or 0
    return count if 0 <= count <= MAX_INTEGER else 0


_System: TypeAlias = tuple[str | None, tuple[str, ...]]
"""The system instructions' text (``None``: none sent), and their skipped parts."""

_Content: TypeAlias = tuple[_System, list[Said], list[AssistantSaid], int, bool]


def _content(
    span: Span, attrs: Mapping[str, object], cache: InputCache | None, key: str
) -> _Content:
    if (
        "gen_ai.input.messages" in attrs
        or "gen_ai.output.messages" in attrs
        or "gen_ai.system_instructions" in attrs
    ):
        return _current(attrs, cache, key)
    if any(e.name in MESSAGE_EVENTS for e in span.events):
        if not any(carries_content(e) for e in span.events):
            return (None, ()), [], [], 0, False  # capture off: events, no content
        return _from_events(span)
    if "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs:
        return _openllmetry(attrs)
    return (None, ()), [], [], 0, False


# --- the current form: gen_ai.input.messages / output.messages -------------


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
    """A message of the current form: its role and parts."""

    role: str = ""
    parts: list[_Part | str] = msgspec.field(default_factory=list)


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


_Text: TypeAlias = tuple[str, tuple[str, ...]]
"""Text read from message parts, and the types of the parts that hold none."""

TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
"""The part types whose ``content`` (or ``text``) is text. A part of another type
(``blob``, ``file``, ``uri``, ``reasoning``...) is not recorded as text: its type
is counted, and ``audit`` reports it (:data:`~pipeline.collected.PART_NOT_RECORDED`)."""

_Read: TypeAlias = tuple[_Text | None, list[Said]]
"""One input message read: its text when a system message, else what it says."""

_Inputs: TypeAlias = tuple[tuple[_Text, ...], tuple[Said, ...], bool]
"""Input messages read: the system messages' texts, the others' said, in order,
and whether any of their parts carries content (see :func:`_typed_carry`)."""


def _inputs_of(messages: Sequence[_Message]) -> tuple[int, _Inputs]:
    """How many messages, and what they say (system texts apart)."""
    systems: list[_Text] = []
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
        isinstance(part, str) or any(_get(part, k) is not None for k in _CARRYING)
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
        self._instructions: tuple[object, list[_Text]] = ("", [])

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

    def instructions(self, value: object) -> list[_Text]:
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
    if message.role == "system":
        return _typed_texts(message.parts), []
    return None, _said_of_typed(message.role, message.parts)


def _instruction_texts(value: object) -> list[_Text]:
    system_parts = _json(value)
    if isinstance(system_parts, str):
        return [(system_parts, ())]
    return [_parts_text([p]) for p in _seq(system_parts)]


def _current(
    attrs: Mapping[str, object], cache: InputCache | None, key: str
) -> _Content:
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
        for message in _seq(_json(raw_inputs)):
            role = _str(_get(message, "role"))
            parts = _seq(_get(message, "parts"))
            carry = carry or _parts_carry(parts)
            if role == "system":
                system_texts.append(_parts_text(parts))
            else:
                inputs.extend(_said_of_parts(role, parts))
    outputs, extra, output_carry = _outputs(attrs.get("gen_ai.output.messages"))
    system = _system(system_texts)
    if not (carry or output_carry or system[0] is not None):
        return (None, ()), [], [], 0, False  # the structure without content
    return system, inputs, outputs, extra, True


def _system(texts: Sequence[_Text]) -> _System:
    """The system messages' texts as one (``None``: no text), their skipped parts."""
    if len(texts) == 1:
        only, skipped = texts[0]
        return only or None, skipped
    joined = "\n".join(t for t, _ in texts if t) or None
    return joined, tuple(kind for _, skipped in texts for kind in skipped)


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
    choices = _seq(_json(value))
    for message in choices[:1]:
        parts = _seq(_get(message, "parts"))
        said = _said_of_parts("assistant", parts)
        outputs.extend(s for s in said if isinstance(s, AssistantSaid))
        carry = _parts_carry(parts)
    return outputs, max(0, len(choices) - 1), carry


_NO_TEXT: Final[_Text] = ("", ())
_NO_PARTS: Final[_Text] = ("", (NO_PARTS,))
"""A message sent without any part: no text, and its content counted missing."""


def _typed_texts(parts: Sequence[_Part | str]) -> _Text:
    """The text of typed parts (joined by newlines), the types of the others."""
    return _texts(
        p
        if isinstance(p, str)
        else (p.type, p.text if p.content is None else p.content)
        for p in parts
    )


def _said_of_typed(role: str, parts: list[_Part | str]) -> list[Said]:
    """:func:`_said_of_parts` over typed parts (the fast path)."""
    if not parts:
        return _said(role, _NO_PARTS, [], [])
    if len(parts) == 1:  # most messages: one text part
        part = parts[0]
        if type(part) is _Part and part.type == "text" and type(part.content) is str:
            if role == "assistant":
                return [AssistantSaid(part.content)]
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
                    id=_str(part.id),
                    name=_str(part.name),
                    arguments=_arguments(part.arguments),
                )
            )
        elif part.type == "tool_call_response":
            response = part.result if part.response is None else part.response
            results.append(ToolSaid(call_id=_str(part.id), content=_as_text(response)))
        else:
            others.append(part)
    return _said(role, _typed_texts(others) if others else _NO_TEXT, calls, results)


def _said(
    role: str, text: _Text, calls: list[ToolCallSaid], results: list[ToolSaid]
) -> list[Said]:
    """What one message says.

    A message holding tool results is those results, and a user message of
    its text when it is a user's and has text too. What else it holds is then
    the last result's ``skipped`` (counted when that result is recorded):
    parts without text, and the text of a message of another role (a tool
    message's text besides its results).
    """
    words, skipped = text
    if results:
        found: list[Said] = list(results)
        if words and role == "user":
            found.append(UserSaid(words, skipped))
            return found
        if words:
            skipped = (*skipped, "text")
        if skipped:
            found[-1] = msgspec.structs.replace(results[-1], skipped=skipped)
        return found
    if role == "assistant":
        return [AssistantSaid(words, tuple(calls), skipped)]
    return [UserSaid(words, skipped)]


def _said_of_parts(role: str, parts: Sequence[object]) -> list[Said]:
    if not parts:
        return _said(role, _NO_PARTS, [], [])
    calls: list[ToolCallSaid] = []
    results: list[ToolSaid] = []
    others: list[object] = []
    for part in parts:
        kind = _str(_get(part, "type"))
        if kind == "tool_call":
            calls.append(
                ToolCallSaid(
                    id=_str(_get(part, "id")),
                    name=_str(_get(part, "name")),
                    arguments=_arguments(_get(part, "arguments")),
                )
            )
        elif kind == "tool_call_response":
            response = _get(part, "response")
            if response is None:
                response = _get(part, "result")
            results.append(
                ToolSaid(call_id=_str(_get(part, "id")), content=_as_text(response))
            )
        else:
            others.append(part)
    return _said(role, _parts_text(others), calls, results)


def _parts_text(parts: Sequence[object]) -> _Text:
    """The text of parts as decoded JSON (strings, or objects with a ``type``).

    A part's words are its ``content``, else its ``text`` (as the previous
    form's content arrays have them); see :func:`_texts`.
    """
    return _texts(
        p
        if isinstance(p, str)
        else (
            _str(_get(p, "type")),
            _get(p, "text") if _get(p, "content") is None else _get(p, "content"),
        )
        for p in parts
    )


def _texts(parts: Iterable[str | tuple[str, object]]) -> _Text:
    """Parts (a string, or a type and its words) as text and skipped types.

    A string, or a part of a text type (or of none) whose words are a string,
    is text; any other part is skipped, by its type (a text part without
    words adds nothing).
    """
    texts: list[str] = []
    skipped: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind, words = part
        if isinstance(words, str) and (kind in TEXT_PARTS or not kind):
            texts.append(words)
        elif words is not None or kind not in TEXT_PARTS:
            skipped.append(kind or "untyped")
    return _joined(texts), tuple(skipped)


def _joined(texts: Sequence[str]) -> str:
    """Text parts as one text: joined by newlines, empty ones left out."""
    if len(texts) == 1:
        return texts[0]
    return "\n".join(t for t in texts if t)


# --- the previous form: span events ----------------------------------------

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

CONTENT_EVENTS: Final = MESSAGE_EVENTS | {_DETAILS_EVENT}
"""The events that may hold a model call's content, on its span or as log records
emitted in its context: the previous form's message events and the current
form's ``gen_ai.client.inference.operation.details``."""

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
    if event.name == _DETAILS_EVENT:
        return any(key in event.attributes for key in _CONTENT_KEYS)
    if event.name not in MESSAGE_EVENTS:
        return False
    body = _json(event.attributes.get("body"))
    fields: Mapping[str, object] = body if isinstance(body, dict) else event.attributes
    if event.name == "gen_ai.choice":
        message = _json(fields.get("message"))
        fields = message if isinstance(message, dict) else fields
    if fields.get("content") is not None:
        return True
    return any(
        _get(_get(call, "function"), "arguments") is not None
        for call in _seq(_json(fields.get("tool_calls")))
    )


def _from_events(span: Span) -> _Content:
    system: list[_Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    extra = 0
    for event in span.events:
        attrs = event.attributes
        body = _json(attrs.get("body"))
        fields: Mapping[str, object] = body if isinstance(body, dict) else attrs
        content = fields.get("content")
        match event.name:
            case "gen_ai.system.message":
                system.append(_message_text(content))
            case "gen_ai.user.message":
                inputs.append(UserSaid(*_message_text(content)))
            case "gen_ai.assistant.message":
                text, skipped = _message_text(content)
                inputs.append(AssistantSaid(text, _openai_calls(fields), skipped))
            case "gen_ai.tool.message":
                call_id = _str(fields.get("id")) or _str(fields.get("tool_call_id"))
                text = _as_text(_json(content))
                inputs.append(ToolSaid(call_id=call_id, content=text))
            case "gen_ai.choice":
                if outputs:
                    extra += 1
                    continue
                message = _json(fields.get("message"))
                inner = message if isinstance(message, dict) else fields
                text, skipped = _message_text(inner.get("content"))
                outputs.append(AssistantSaid(text, _openai_calls(inner), skipped))
            case _:
                continue
    return _system(system), inputs, outputs, extra, True


def _message_text(value: object) -> _Text:
    """A message's ``content`` (previous form, OpenLLMetry) as text.

    Text as it is; an array of parts (strings and objects, as the provider's
    API has them: ``{"type": "text", "text": ...}``, an image...) as
    :func:`_parts_text` reads it; any other value as JSON.
    """
    content = _json(value)
    if isinstance(content, (list, tuple)) and all(
        isinstance(p, (str, dict)) for p in content
    ):
        return _parts_text(content)
    return _as_text(content), ()


def _openai_calls(fields: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    calls: list[ToolCallSaid] = []
    for call in _seq(_json(fields.get("tool_calls"))):
        function = _get(call, "function")
        calls.append(
            ToolCallSaid(
                id=_str(_get(call, "id")),
                name=_str(_get(function, "name")),
                arguments=_arguments(_get(function, "arguments")),
            )
        )
    return tuple(calls)


# --- OpenLLMetry: gen_ai.prompt.N.* / gen_ai.completion.N.* -----------------

_INDEXED: Final = re.compile(r"gen_ai\.(prompt|completion)\.([0-9]{1,9})\.(.+)")
"""OpenLLMetry's indexed attributes (an index of ASCII digits, at most nine)."""
_INDEX: Final = re.compile("[0-9]{1,9}")


def _openllmetry(attrs: Mapping[str, object]) -> _Content:
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for key, value in attrs.items():
        match = _INDEXED.fullmatch(key)
        if match is not None:
            side, index, field = match.groups()
            rows.setdefault((side, int(index)), {})[field] = value
    system: list[_Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    extra = 0
    for (side, _index), row in sorted(rows.items()):
        role = _str(row.get("role"))
        content = row.get("content")
        text, skipped = _message_text(content)
        calls = _indexed_calls(row)
        if side == "completion":
            if outputs:
                extra += 1
            else:
                outputs.append(AssistantSaid(text, calls, skipped))
        elif role == "system":
            system.append((text, skipped))
        elif role == "assistant":
            inputs.append(AssistantSaid(text, calls, skipped))
        elif role == "tool":
            call_id = _str(row.get("tool_call_id"))
            inputs.append(ToolSaid(call_id=call_id, content=_as_text(_json(content))))
        else:
            inputs.append(UserSaid(text, skipped))
    return _system(system), inputs, outputs, extra, True


def _indexed_calls(row: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    found: dict[int, dict[str, object]] = {}
    for field, value in row.items():
        head, _, rest = field.partition(".")
        number, _, name = rest.partition(".")
        if head == "tool_calls" and _INDEX.fullmatch(number):
            found.setdefault(int(number), {})[name] = value
    return _calls_of(found, "name", "arguments")


def _calls_of(
    found: Mapping[int, Mapping[str, object]], name: str, arguments: str
) -> tuple[ToolCallSaid, ...]:
    """Indexed calls' fields (by index) as calls, in order.

    ``id``, then ``name`` and ``arguments`` under the keys each form gives them.
    """
    return tuple(
        ToolCallSaid(
            id=_str(c.get("id")),
            name=_str(c.get(name)),
            arguments=_arguments(c.get(arguments)),
        )
        for _, c in sorted(found.items())
    )


# --- OpenInference: llm.input_messages.N.message.* -------------------------

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


_CURRENT_MESSAGES: Final = ("gen_ai.input.messages", "gen_ai.output.messages")


def _unredacted(found: _Content) -> _Content:
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
        return (None, ()), [], [], 0, False
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


def _openinference_kind(kind: str) -> tuple[SpanKind, str]:
    """An OpenInference span kind: ``LLM`` a model call, ``TOOL`` a tool run.

    Its other kinds (``AGENT``, ``CHAIN``, ``RETRIEVER``...) hold no message
    of a conversation: counted by kind.
    """
    if kind == "LLM":
        return "chat", "chat"
    if kind == "TOOL":
        return "tool", "execute_tool"
    return "known", f"openinference {kind[:64]}"


def _openinference(attrs: Mapping[str, object]) -> _Content:
    """An OpenInference LLM span's messages, from its own attributes.

    ``llm.input_messages.N.message.*`` and ``llm.output_messages.N.message.*``
    (the chat form), else ``llm.prompts`` and ``llm.choices`` (the completion
    form). Read when the span carries no GenAI current-form messages (those
    are read first, :func:`_unredacted`).
    """
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for key, value in attrs.items():
        if key.startswith("llm.") and (match := _OI_MESSAGE.fullmatch(key)):
            side, index, field = match.groups()
            rows.setdefault((side, int(index)), {})[field] = value
    if not rows:
        return _openinference_completion(attrs)
    system: list[_Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    carry = False
    for (side, _index), row in sorted(rows.items()):
        role = _str(row.get("role"))
        calls = _oi_calls(row)
        text = _oi_text(row, calls)
        carry = carry or bool(text[0]) or bool(calls)
        if side == "output":
            outputs.append(AssistantSaid(text[0], calls, text[1]))
        elif role == "system":
            system.append(text)
        else:
            inputs.append(_oi_said(role, row, text, calls))
    if not carry:
        return (None, ()), [], [], 0, False  # every text hidden: usage only
    return _system(system), inputs, outputs[:1], max(0, len(outputs) - 1), True


def _oi_said(
    role: str, row: Mapping[str, object], text: _Text, calls: tuple[ToolCallSaid, ...]
) -> Said:
    """An input message of a role other than the system's."""
    words, skipped = text
    if role == "assistant":
        return AssistantSaid(words, calls, skipped)
    if role == "tool":
        call_id = _str(row.get("tool_call_id"))
        return ToolSaid(call_id=call_id, content=words, skipped=skipped)
    return UserSaid(words, skipped)


def _oi_text(row: Mapping[str, object], calls: Sequence[ToolCallSaid]) -> _Text:
    """A message's text: its ``content``, else its ``contents`` parts.

    A hidden text (:data:`REDACTED`) is a ``redacted`` part; an image (or any
    part of another type) is counted by its type. A message with neither, and
    no tool call, has no parts.
    """
    content = row.get("content")
    if isinstance(content, str):
        return ("", (REDACTED_PART,)) if content == REDACTED else (content, ())
    parts: dict[int, dict[str, object]] = {}
    for field, value in row.items():
        if match := _OI_CONTENT.fullmatch(field):
            parts.setdefault(int(match[1]), {})[match[2]] = value
    for index in _oi_calls_in(row, "contents."):
        parts.pop(index, None)  # a call's part: the message's tool calls
    if not parts:
        return _NO_TEXT if calls else _NO_PARTS
    return _texts(
        (REDACTED_PART, None)
        if part.get("text") == REDACTED
        else (_str(part.get("type")), part.get("text"))
        for _, part in sorted(parts.items())
    )


def _oi_calls(row: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    """A message's tool calls: ``tool_calls.M.tool_call.*``, else its calls' parts.

    A part that is a call is ``contents.M.tool_call.*`` (OpenInference's
    Anthropic instrumentation sends a ``tool_use`` block so, beside the same
    call in ``tool_calls``): the message's call, never a part left out.
    """
    found = _oi_calls_in(row, "tool_calls.") or _oi_calls_in(row, "contents.")
    return _calls_of(found, "function.name", "function.arguments")


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


def _openinference_completion(attrs: Mapping[str, object]) -> _Content:
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
        return (None, ()), [], [], 0, False
    inputs: list[Said] = [UserSaid(text, skipped) for text, skipped in said]
    outputs = [AssistantSaid(text, (), skipped) for text, skipped in replies[:1]]
    return (None, ()), inputs, outputs, max(0, len(replies) - 1), True


def _oi_words(value: object) -> _Text:
    if value == REDACTED:
        return "", (REDACTED_PART,)
    return _str(value), ()


# --- the Vercel AI SDK: ai.prompt.messages / ai.response.* ------------------

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
_AI_SDK_MESSAGES: Final = "ai.prompt.messages"
_AI_SDK_NAMES: Final = _Names(
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
)
_AI_SDK_ERRORS: Final = frozenset({"error-text", "error-json"})


def _ai_sdk_kind(operation: str) -> tuple[SpanKind, str]:
    """An AI SDK operation: a provider call, a tool call, or another (counted)."""
    if operation in AI_SDK_CALLS:
        return "chat", operation
    if operation == "ai.toolCall":
        return "tool", operation
    return "known", operation[:64] or "ai.operationId"


def _ai_sdk_call(attrs: Mapping[str, object]) -> bool:
    return (
        "gen_ai.operation.name" not in attrs
        and _str(attrs.get(AI_SDK_OPERATION)) in AI_SDK_CALLS
    )


def _ai_sdk(attrs: Mapping[str, object]) -> _Content:
    """A provider call's messages, as the AI SDK records them.

    ``ai.prompt.messages`` (its own message form: ``content`` a text or parts
    of type ``text``, ``tool-call``, ``tool-result``, ``image``, ``file``,
    ``reasoning``...), and the reply: ``ai.response.text`` and
    ``ai.response.toolCalls``. Neither sent (``recordInputs`` and
    ``recordOutputs`` off): usage only.
    """
    messages = attrs.get(_AI_SDK_MESSAGES)
    text = attrs.get("ai.response.text")
    calls = attrs.get("ai.response.toolCalls")
    if messages is None and text is None and calls is None:
        return (None, ()), [], [], 0, False
    system: list[_Text] = []
    inputs: list[Said] = []
    for message in _seq(_json(messages)):
        role = _str(_get(message, "role"))
        content = _get(message, "content")
        if isinstance(content, str):
            parts: Sequence[object] = [{"type": "text", "text": content}]
        else:
            parts = _seq(content)
        if role == "system":
            system.append(_ai_sdk_texts(parts))
        else:
            inputs.extend(_ai_sdk_said(role, parts))
    outputs: list[AssistantSaid] = []
    if text is not None or calls is not None:
        said = _ai_sdk_calls(_seq(_json(calls)))
        outputs.append(AssistantSaid(_str(text), said))
    return _system(system), inputs, outputs, 0, True


def _ai_sdk_said(role: str, parts: Sequence[object]) -> list[Said]:
    """What one AI SDK message says (as :func:`_said` reads a message)."""
    if not parts:
        return _said(role, _NO_PARTS, [], [])
    calls = [p for p in parts if _get(p, "type") == "tool-call"]
    results = [
        _ai_sdk_tool_result(p) for p in parts if _get(p, "type") == "tool-result"
    ]
    others = [p for p in parts if _get(p, "type") not in ("tool-call", "tool-result")]
    return _said(role, _ai_sdk_texts(others), list(_ai_sdk_calls(calls)), results)


def _ai_sdk_texts(parts: Sequence[object]) -> _Text:
    return _texts(
        p if isinstance(p, str) else (_str(_get(p, "type")), _get(p, "text"))
        for p in parts
    )


def _ai_sdk_calls(calls: Sequence[object]) -> tuple[ToolCallSaid, ...]:
    """Tool calls: ``toolCallId``, ``toolName``, ``input`` (``args`` before 5.0)."""
    return tuple(
        ToolCallSaid(
            id=_str(_get(c, "toolCallId")),
            name=_str(_get(c, "toolName")),
            arguments=_arguments(
                _get(c, "args") if _get(c, "input") is None else _get(c, "input")
            ),
        )
        for c in calls
    )


def _ai_sdk_tool_result(part: object) -> ToolSaid:
    """A ``tool-result`` part as a result.

    Its ``output`` (``{"type", "value"}``; an ``error-text`` or ``error-json``
    one is an error), or its ``result`` (before 5.0).
    """
    output = _get(part, "output")
    kind = _str(_get(output, "type"))
    value = _get(output, "value") if isinstance(output, dict) else _get(part, "result")
    return ToolSaid(
        call_id=_str(_get(part, "toolCallId")),
        content=_as_text(value),
        name=_str(_get(part, "toolName")),
        is_error=kind in _AI_SDK_ERRORS,
    )


def _ai_sdk_result(value: object) -> object:
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


# --- tool runs --------------------------------------------------------------


def _read_tool(span: Span) -> ToolRun:
    """A tool run: by the GenAI attributes, or OpenInference's own.

    OpenInference's: ``tool.name``, the call's id in ``tool_call.id`` (or
    ``tool.id``), its arguments in ``input.value``, its result in
    ``output.value`` (a hidden one, :data:`REDACTED`, is not captured).
    """
    attrs = span.attributes
    if OPENINFERENCE_KIND in attrs:
        call_id = _str(attrs.get("tool_call.id")) or _str(attrs.get("tool.id"))
        name = _str(attrs.get("tool.name"))
        arguments = _shown(attrs.get("input.value"))
        result = _shown(attrs.get("output.value"))
    elif AI_SDK_OPERATION in attrs and "gen_ai.operation.name" not in attrs:
        call_id = _str(attrs.get("ai.toolCall.id"))
        name = _str(attrs.get("ai.toolCall.name"))
        arguments = attrs.get("ai.toolCall.args")
        result = _ai_sdk_result(attrs.get("ai.toolCall.result"))
    else:
        call_id = _str(attrs.get("gen_ai.tool.call.id"))
        name = _str(attrs.get("gen_ai.tool.name"))
        arguments = attrs.get("gen_ai.tool.call.arguments")
        result = attrs.get("gen_ai.tool.call.result")
    failed = span.status_code == 2
    message = None if call_id else _langchain_tool_message(result)
    if message is not None:
        call_id, result, errored = message
        failed = failed or errored
        arguments = None  # LangChain's record of the run, not the call's
    return ToolRun(
        call_id=call_id,
        name=name,
        arguments=None if arguments is None else _arguments(arguments),
        result=None if result is None else _as_text(result),
        success=not failed,
        error=(_str(attrs.get("error.type")) or span.status_message or "error")
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
    found = _json(value)
    if isinstance(found, dict) and set(found) == _LANGCHAIN_WRAPPER:
        found = found["output"]
    fields: object = None
    if _get(found, "type") == "tool":
        fields = _get(found, "data")
    elif _get(found, "lc") == 1 and _get(found, "type") == "constructor":
        path = _seq(_get(found, "id"))
        if path and path[-1] == "ToolMessage":
            fields = _get(found, "kwargs")
    call_id = _str(_get(fields, "tool_call_id"))
    if not call_id or not isinstance(fields, dict) or "content" not in fields:
        return None
    return call_id, fields["content"], fields.get("status") == "error"


# --- values -----------------------------------------------------------------


def _shown(value: object) -> object:
    """A value an instrumentation did not hide (``None`` for :data:`REDACTED`)."""
    return None if value == REDACTED else value


def _json(value: object) -> object:
    """A JSON text value parsed (structured values pass as they are)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):
            return value
    return value


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, (list, tuple)) else ()


def _get(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, dict) else None


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _as_text(value: object) -> str:
    """Content as text: text as it is, text parts joined by newlines, else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(p, dict) and isinstance(p.get("text", p.get("content")), str)
        for p in value
    ):
        return _joined([str(p.get("text", p.get("content"))) for p in value])
    return msgspec.json.encode(value, enc_hook=repr).decode()


def _arguments(value: object) -> str:
    if isinstance(value, str):
        return value or "{}"
    if value is None:
        return "{}"
    return msgspec.json.encode(value, enc_hook=repr).decode()
