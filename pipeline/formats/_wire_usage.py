"""The usage a recorded model response reports, per API.

A cassette or HAR file holds each model response's body; most APIs report in
it what the call used, and the model that answered:

- Chat Completions (and Mistral's, Groq's, ...): ``usage.prompt_tokens``,
  ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens`` and ``model``; streamed, the
  chunk carrying ``usage`` (or Groq's ``x_groq.usage``), the last one wins.
- Responses: ``usage.input_tokens``, ``output_tokens``,
  ``input_tokens_details.cached_tokens``,
  ``output_tokens_details.reasoning_tokens``; streamed, the ``response`` of the
  last event that carries one with ``usage`` (``response.completed``).
- Anthropic Messages: ``usage`` with the cache reads and writes (the neutral
  input is their sum with ``input_tokens``); streamed, ``message_start``'s
  ``message.usage`` updated by each ``message_delta``'s ``usage`` (its counts
  are cumulative).
- Gemini: ``usageMetadata`` and ``modelVersion`` (streamed: the last chunk
  with ``usageMetadata``; its counts are cumulative).
- Cohere v2: ``usage.tokens`` (else ``usage.billed_units``); streamed, the
  ``message-end`` event's ``delta.usage``. The response names no model: the
  request body's ``model`` is used.
- Bedrock Converse: ``usage.inputTokens``, ``outputTokens``,
  ``cacheReadInputTokens``, ``cacheWriteInputTokens`` (the input is their
  sum, as Anthropic's); streamed, the ``metadata`` event's ``usage``. The
  model is the id in the request URI.
- Ollama: ``prompt_eval_count``, ``eval_count`` and ``model`` (streamed: the
  last line with counts).

Only what the body reports is read; a usage object with a count that is not
an integer >= 0 is left out and counted as skipped (``malformed usage``), as
:mod:`pipeline.formats.usage` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    as_list,
    as_object,
    get_object,
    get_str,
)
from turnledger.pipeline.formats.model import ModelUsage
from turnledger.pipeline.formats.usage import (
    MALFORMED,
    adk_usage,
    anthropic_usage,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from turnledger.pipeline.formats._common import JSONObject, Sink


def response_usage(
    api: str,
    body: object,
    events: list[JSONObject] | None,
    request: JSONObject,
    sink: Sink,
    *,
    uri_model: str = "",
) -> ModelUsage | None:
    """The usage one recorded response reports (``None``: it reports none).

    Args:
        api: The API shape's format name.
        body: The decoded response body (when not streamed).
        events: The stream's event payloads (when streamed), else ``None``.
        request: The request body (Cohere's model is named there).
        sink: Counts a malformed usage as skipped.
        uri_model: The model id of the request URI (Bedrock's).

    Returns:
        The usage, or ``None``.
    """
    reader = _READERS.get(api)
    if reader is None:
        return None
    if events is None:
        listed = as_list(body)
        if listed is None:
            obj = as_object(body)
            events = [] if obj is None else [obj]
        else:  # a Gemini stream saved as a JSON array
            events = [item for item in listed if isinstance(item, dict)]
    try:
        found = reader(events, request, uri_model, sink)
    except _MalformedError:
        sink.skip(MALFORMED)
        return None
    return found


class _MalformedError(ValueError):
    """A token count that is not an integer >= 0."""


def _count(obj: JSONObject | None, key: str) -> int:
    if obj is None or obj.get(key) is None:
        return 0
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _MalformedError(key)
    return value


def _last(events: list[JSONObject], pick: Callable[[JSONObject], object]) -> object:
    found: object = None
    for event in events:
        value = pick(event)
        if value is not None:
            found = value
    return found


def _chat(
    events: list[JSONObject], _request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    def pick(event: JSONObject) -> JSONObject | None:
        return get_object(event, "usage") or get_object(
            get_object(event, "x_groq") or {}, "usage"
        )

    usage = as_object(_last(events, pick))
    if usage is None:
        return None
    model = _last(events, lambda event: get_str(event, "model"))
    return ModelUsage(
        model=model if isinstance(model, str) else "",
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        cached_input_tokens=_count(
            get_object(usage, "prompt_tokens_details"), "cached_tokens"
        ),
        reasoning_tokens=_count(
            get_object(usage, "completion_tokens_details"), "reasoning_tokens"
        ),
    )


def _responses(
    events: list[JSONObject], _request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    def pick(event: JSONObject) -> JSONObject | None:
        if "usage" in event and "output" in event:  # a whole response body
            return event
        response = get_object(event, "response")
        return response if response is not None and "usage" in response else None

    response = as_object(_last(events, pick))
    usage = get_object(response, "usage") if response is not None else None
    if response is None or usage is None:
        return None
    return ModelUsage(
        model=get_str(response, "model") or "",
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cached_input_tokens=_count(
            get_object(usage, "input_tokens_details"), "cached_tokens"
        ),
        reasoning_tokens=_count(
            get_object(usage, "output_tokens_details"), "reasoning_tokens"
        ),
    )


def _anthropic(
    events: list[JSONObject], _request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    merged: JSONObject | None = None
    model = ""
    for event in events:
        kind = get_str(event, "type")
        if kind == "message" and get_object(event, "usage") is not None:
            merged = dict(get_object(event, "usage") or {})
            model = get_str(event, "model") or ""
        elif kind == "message_start":
            message = get_object(event, "message") or {}
            merged = dict(get_object(message, "usage") or {})
            model = get_str(message, "model") or ""
        elif kind == "message_delta" and merged is not None:
            merged.update(get_object(event, "usage") or {})
    if merged is None:
        return None
    return anthropic_usage({"usage": merged, "model": model}, _sink)


def _gemini(
    events: list[JSONObject], _request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    last = as_object(_last(events, lambda e: e if "usageMetadata" in e else None))
    if last is None:
        return None
    model = _last(events, lambda event: get_str(event, "modelVersion"))
    event = {"usageMetadata": last["usageMetadata"], "modelVersion": model}
    return adk_usage(event, _sink)


def _cohere(
    events: list[JSONObject], request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    def pick(event: JSONObject) -> JSONObject | None:
        usage = get_object(event, "usage")
        if usage is None and get_str(event, "type") == "message-end":
            usage = get_object(get_object(event, "delta") or {}, "usage")
        return usage

    usage = as_object(_last(events, pick))
    if usage is None:
        return None
    counts = get_object(usage, "tokens") or get_object(usage, "billed_units")
    if counts is None:
        return None
    return ModelUsage(
        model=get_str(request, "model") or "",
        provider="cohere",
        input_tokens=_count(counts, "input_tokens"),
        output_tokens=_count(counts, "output_tokens"),
    )


def _bedrock(
    events: list[JSONObject], _request: JSONObject, uri: str, _sink: Sink
) -> ModelUsage | None:
    def pick(event: JSONObject) -> JSONObject | None:
        metadata = get_object(event, "metadata")
        return get_object(metadata if metadata is not None else event, "usage")

    usage = as_object(_last(events, pick))
    if usage is None:
        return None
    cached = _count(usage, "cacheReadInputTokens")
    written = _count(usage, "cacheWriteInputTokens")
    return ModelUsage(
        model=uri,
        provider="bedrock",
        input_tokens=_count(usage, "inputTokens") + cached + written,
        output_tokens=_count(usage, "outputTokens"),
        cached_input_tokens=cached,
        cache_write_tokens=written,
    )


def _ollama(
    events: list[JSONObject], _request: JSONObject, _uri: str, _sink: Sink
) -> ModelUsage | None:
    last = as_object(
        _last(
            events,
            lambda e: e if "eval_count" in e or "prompt_eval_count" in e else None,
        )
    )
    if last is None:
        return None
    return ModelUsage(
        model=get_str(last, "model") or "",
        provider="ollama",
        input_tokens=_count(last, "prompt_eval_count"),
        output_tokens=_count(last, "eval_count"),
    )


_READERS: dict[
    str, Callable[[list[JSONObject], JSONObject, str, Sink], ModelUsage | None]
] = {
    "openai-chat": _chat,
    "mistral": _chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "cohere": _cohere,
    "bedrock-converse": _bedrock,
    "ollama": _ollama,
}
