"""Logfire's model call spans: a streamed call is a request span and a log.

Logfire's LLM instrumentations (``logfire.instrument_openai``,
``instrument_anthropic``) write a call's GenAI attributes on a span around
the request, with Logfire's own ``request_data`` and ``logfire.msg_template``
beside them. A call answered whole sets its answer, usage and response id on
that span. A streamed call does not: its span ends when the stream is handed
back, holding the request alone, and when the stream ends Logfire emits a
zero-length span of type ``log`` (``streaming response from ... took ...s``)
holding the call whole (the messages sent, the answer, the usage), the
stream's length in ``duration`` (seconds).

So a Logfire request span that did not fail and holds no answer, usage or
response id is that stream's request: counted (:data:`STREAM_REQUEST`), its
call recorded from the log. A stream the application never reads emits no
log: that call is then counted, not recorded. A span Logfire's tracer made
for another instrumentation also has a ``logfire.span_type``, but no
``request_data`` and no message template: it is read as that instrumentation's.

Logfire sends the provider's usage whole as JSON in ``gen_ai.usage.raw``
beside the conventions' counts, and an OpenAI call's reasoning tokens only
there (:func:`with_raw_reasoning`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

import msgspec

from turnledger.pipeline.collect.genai.values import string

SPAN_TYPE: Final = "logfire.span_type"
"""Logfire's kind of span: ``span``, or ``log`` for a zero-length record."""

STREAM_REQUEST: Final = "logfire streamed request"
"""The label a streamed call's request span is counted by."""

_ANSWERED: Final = (
    "gen_ai.output.messages",
    "gen_ai.response.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "response_data",
)
"""What Logfire sets on a request span once the call's answer is read."""


def _logfire_call(attrs: Mapping[str, object]) -> bool:
    """Whether a span is one of Logfire's LLM instrumentations' own."""
    return "request_data" in attrs and bool(string(attrs.get("logfire.msg_template")))


def stream_request(attrs: Mapping[str, object], *, failed: bool) -> bool:
    """Whether a span is the request span of a call Logfire streamed (module doc)."""
    return (
        not failed
        and attrs.get(SPAN_TYPE) == "span"
        and _logfire_call(attrs)
        and not any(key in attrs for key in _ANSWERED)
    )


def stream_duration_ms(attrs: Mapping[str, object]) -> float | None:
    """A Logfire stream log's ``duration`` in milliseconds; ``None`` for any other span.

    A duration that is not a finite non-negative number reads as ``None``.
    """
    if attrs.get(SPAN_TYPE) != "log" or not _logfire_call(attrs):
        return None
    seconds = attrs.get("duration")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds * 1000.0


RAW_USAGE: Final = "gen_ai.usage.raw"
"""Where Logfire puts the provider's usage, as the provider sent it (JSON)."""

REASONING: Final = "gen_ai.usage.reasoning.output_tokens"

_REASONING_DETAILS: Final = ("completion_tokens_details", "output_tokens_details")
"""Where OpenAI's usage holds ``reasoning_tokens``: Chat Completions', Responses'."""


def with_raw_reasoning(attrs: Mapping[str, object]) -> Mapping[str, object]:
    """A span's attributes, with the reasoning count its ``gen_ai.usage.raw`` holds.

    Logfire's OpenAI instrumentation sends a call's reasoning tokens only in
    the raw usage (``completion_tokens_details`` of Chat Completions,
    ``output_tokens_details`` of the Responses API). The attributes are
    returned as they are when they name the reasoning count already, hold no
    raw usage, or it holds no such count (or is not JSON).
    """
    raw = attrs.get(RAW_USAGE)
    if not isinstance(raw, str) or REASONING in attrs:
        return attrs
    try:
        usage = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return attrs
    if not isinstance(usage, dict):
        return attrs
    for details in _REASONING_DETAILS:
        found = usage.get(details)
        if isinstance(found, dict) and "reasoning_tokens" in found:
            return {**attrs, REASONING: found["reasoning_tokens"]}
    return attrs
