"""What a span is, read: a model call, a tool run, or a span only counted.

And where each convention puts a call's model, provider and usage
(:class:`Names`), read by :func:`first_of` and :func:`count_of`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final, Literal, NamedTuple, TypeAlias

import msgspec

from turnledger.ledger.numbers import MAX_INTEGER, parse_whole
from turnledger.pipeline.collect.genai.said import (
    AssistantSaid,
    Said,
)
from turnledger.pipeline.collect.genai.values import (
    string,
)


class Usage(NamedTuple):
    """A call's token counts (the ledger's ``model.called`` meaning).

    The input tokens are the whole prompt, of which the cache reads and
    writes; the output tokens the whole completion, of which the reasoning.
    """

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


NO_USAGE: Final = Usage(0, 0, 0, 0, 0)
"""A call that reported no token count."""


class ModelCall(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A model call span, read.

    Attributes:
        model: The response model, else the request model.
        provider: ``gen_ai.provider.name`` (or the older ``gen_ai.system``).
        usage: Its token counts (:func:`usage_of`).
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
        without_outputs: Whether the call's input messages came without any
            output message, the call not failed (the answer is not in the
            ledger).
        extra_choices: Choices after the first (counted, not recorded).
    """

    model: str = ""
    provider: str = ""
    usage: Usage = NO_USAGE
    duration_ms: float = 0.0
    success: bool = True
    error: str | None = None
    system: str | None = None
    system_skipped: tuple[str, ...] = ()
    inputs: tuple[Said, ...] = ()
    outputs: tuple[AssistantSaid, ...] = ()
    content: bool = False
    without_inputs: bool = False
    without_outputs: bool = False
    extra_choices: int = 0


class ToolRun(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An ``execute_tool`` span, read (``arguments``, ``result``: None if not sent).

    ``called_with``: when the span's arguments are an instrumentation's record
    of the function call that ran the tool (OpenInference's ``{"args": [],
    "kwargs": {...}}``), its keyword arguments as JSON text, which are what the
    model's call sent; a run without a call id is paired by them too.
    """

    call_id: str
    name: str
    arguments: str | None = None
    result: str | None = None
    success: bool = True
    error: str | None = None
    called_with: str | None = None


SpanKind: TypeAlias = Literal["chat", "tool", "known", "unknown"]


class SpanReading(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a span is: its kind, a label to count it by, and what it says."""

    kind: SpanKind
    label: str
    call: ModelCall | None = None
    tool: ToolRun | None = None
    conversation: str | None = None
    response: str = ""  # a model call's gen_ai.response.id


class Names(NamedTuple):
    """Where a convention puts a call's model, provider and usage (first found)."""

    model: tuple[str, ...]
    provider: tuple[str, ...]
    input_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]
    cached_input_tokens: tuple[str, ...]
    cache_write_tokens: tuple[str, ...]
    reasoning_tokens: tuple[str, ...]


GENAI_NAMES: Final = Names(
    model=("gen_ai.response.model", "gen_ai.request.model"),
    provider=("gen_ai.provider.name", "gen_ai.system"),
    input_tokens=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    output_tokens=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    # The conventions' names, then the older ones OpenLLMetry and Strands send.
    cached_input_tokens=(
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
    ),
    cache_write_tokens=(
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.usage.cache_write_input_tokens",
    ),
    # The conventions' name; OpenLLMetry's; Pydantic AI's usage details.
    reasoning_tokens=(
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.usage.reasoning_tokens",
        "gen_ai.usage.details.reasoning_tokens",
    ),
)


def usage_of(attrs: Mapping[str, object], names: Names) -> Usage:
    """A call's usage, as the span reports it under a convention's ``names``.

    The conventions count the cache reads and writes in the input tokens (as
    OpenAI's API does; OpenLLMetry, OpenInference, Logfire and Pydantic AI add
    Anthropic's to its ``input_tokens``), and the reasoning tokens in the
    output tokens. A span whose cache reads and writes together exceed its
    input tokens reports them beside its input, as Anthropic's API does: its
    whole prompt is then their sum. A reasoning count above the output tokens
    is added to them likewise. Otherwise the counts are kept as sent, each
    part within its whole (as pricing clamps them).
    """
    input_tokens = count_of(attrs, names.input_tokens)
    output_tokens = count_of(attrs, names.output_tokens)
    cached = count_of(attrs, names.cached_input_tokens)
    written = count_of(attrs, names.cache_write_tokens)
    reasoning = count_of(attrs, names.reasoning_tokens)
    if cached + written > input_tokens:
        input_tokens = min(input_tokens + cached + written, MAX_INTEGER)
    if reasoning > output_tokens:
        output_tokens = min(output_tokens + reasoning, MAX_INTEGER)
    cached = min(cached, input_tokens)
    written = min(written, input_tokens - cached)
    reasoning = min(reasoning, output_tokens)
    return Usage(input_tokens, output_tokens, cached, written, reasoning)


def first_of(attrs: Mapping[str, object], keys: Sequence[str]) -> str:
    """The first of ``keys`` whose value is a non-empty text, else ``""``."""
    for key in keys:
        if found := string(attrs.get(key)):
            return found
    return ""


def count_of(attrs: Mapping[str, object], keys: Sequence[str]) -> int:
    """A token count (the first of ``keys`` sent): a non-negative integer, else 0.

    An integer, an integral part of a finite float, or ASCII digits; a
    negative, non-finite or larger than :data:`~ledger.numbers.MAX_INTEGER`
    one reads as 0 (not reported).
    """
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            break
    else:
        return 0  # none sent (most spans: no cache or reasoning count)
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
