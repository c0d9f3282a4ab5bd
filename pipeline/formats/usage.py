"""Model usage as the transcript formats that carry it write it, both ways.

A format that records model responses may record what each one used: a
LangChain ``AIMessage`` its ``usage_metadata`` (and the model in
``response_metadata``), a Pydantic AI ``ModelResponse`` its ``usage``,
``model_name`` and ``provider_name``, an ADK event its ``usageMetadata`` and
``modelVersion`` (``usage_metadata`` and ``model_version`` when dumped without
aliases), a Claude Code assistant line its Anthropic ``message.usage`` and
``message.model``. The readers here turn each into a :class:`ModelUsage` in the neutral
meaning of :class:`~turnledger.ledger.events.ModelCalled` (the input includes
the cached tokens, the output the reasoning ones); the ``*_fields`` functions
write one back, so export -> import keeps it.

A usage object whose counts are not integers >= 0 is left out whole and
counted as skipped (``malformed usage``): a count is never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec

from turnledger.pipeline.formats._common import JSONObject, get_object, get_str
from turnledger.pipeline.formats.model import ModelUsage

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import Indexed, Sink
    from turnledger.pipeline.formats.model import Conversation

Json: TypeAlias = dict[str, Any]

MALFORMED: Final = "malformed usage"
"""The skipped kind a usage object with a count that is not an int >= 0 counts as."""


UNMATCHED_USAGE: Final = "unmatched model usage"
"""The skipped kind of a reported usage given to no message (its message is
not in the conversation, or was re-sent changed)."""


class _MalformedError(ValueError):
    """A token count that is not an integer >= 0."""


def _count(obj: JSONObject | None, *keys: str) -> int:
    """The first of ``keys`` present in ``obj`` (0 when none is)."""
    if obj is None:
        return 0
    for key in keys:
        if key in obj and obj[key] is not None:
            value = obj[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _MalformedError(key)
            return value
    return 0


def _checked(usage: JSONObject, build: Any, sink: Sink) -> ModelUsage | None:
    try:
        found: ModelUsage = build(usage)
    except _MalformedError:
        sink.skip(MALFORMED)
        return None
    return found


def langchain_usage(data: JSONObject, sink: Sink) -> ModelUsage | None:
    """An ``AIMessage``'s ``usage_metadata`` and model (``None``: it has none)."""
    usage = get_object(data, "usage_metadata")
    if usage is None:
        return None
    meta = get_object(data, "response_metadata") or {}
    model = get_str(meta, "model_name") or get_str(meta, "model") or ""
    provider = get_str(meta, "model_provider") or ""

    def build(u: JSONObject) -> ModelUsage:
        inputs = get_object(u, "input_token_details")
        outputs = get_object(u, "output_token_details")
        return ModelUsage(
            model=model,
            provider=provider,
            input_tokens=_count(u, "input_tokens"),
            output_tokens=_count(u, "output_tokens"),
            cached_input_tokens=_count(inputs, "cache_read"),
            cache_write_tokens=_count(inputs, "cache_creation"),
            reasoning_tokens=_count(outputs, "reasoning"),
        )

    return _checked(usage, build, sink)


def langchain_usage_fields(usage: ModelUsage) -> Json:
    """The ``usage_metadata`` and ``response_metadata`` of an ``AIMessage``."""
    metadata: Json = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cached_input_tokens or usage.cache_write_tokens:
        metadata["input_token_details"] = {
            "cache_read": usage.cached_input_tokens,
            "cache_creation": usage.cache_write_tokens,
        }
    if usage.reasoning_tokens:
        metadata["output_token_details"] = {"reasoning": usage.reasoning_tokens}
    response: Json = {"model_name": usage.model} if usage.model else {}
    if usage.provider:
        response["model_provider"] = usage.provider
    return {"usage_metadata": metadata, "response_metadata": response}


def pydantic_ai_usage(item: JSONObject, sink: Sink) -> ModelUsage | None:
    """A ``ModelResponse``'s ``usage``, ``model_name`` and ``provider_name``.

    Reads both the current names (``input_tokens``, ``output_tokens``,
    ``cache_read_tokens``, ``cache_write_tokens``) and the older ones
    (``request_tokens``, ``response_tokens``); the reasoning tokens are
    ``details.reasoning_tokens`` when reported.
    """
    usage = get_object(item, "usage")
    if usage is None:
        return None
    model = get_str(item, "model_name") or ""
    provider = get_str(item, "provider_name") or ""

    def build(u: JSONObject) -> ModelUsage:
        return ModelUsage(
            model=model,
            provider=provider,
            input_tokens=_count(u, "input_tokens", "request_tokens"),
            output_tokens=_count(u, "output_tokens", "response_tokens"),
            cached_input_tokens=_count(u, "cache_read_tokens"),
            cache_write_tokens=_count(u, "cache_write_tokens"),
            reasoning_tokens=_count(get_object(u, "details"), "reasoning_tokens"),
        )

    return _checked(usage, build, sink)


def pydantic_ai_usage_fields(usage: ModelUsage) -> Json:
    """The ``usage``, ``model_name`` and ``provider_name`` of a ``ModelResponse``."""
    fields: Json = {
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "details": (
                {"reasoning_tokens": usage.reasoning_tokens}
                if usage.reasoning_tokens
                else {}
            ),
        }
    }
    if usage.model:
        fields["model_name"] = usage.model
    if usage.provider:
        fields["provider_name"] = usage.provider
    return fields


SYNTHETIC_MODEL: Final = "<synthetic>"
"""The model Claude Code names on a message it made itself (no model call)."""


def anthropic_usage(message: JSONObject, sink: Sink) -> ModelUsage | None:
    """An Anthropic message's ``usage`` and ``model`` (``None``: it has none).

    Anthropic counts the cache reads and writes apart from ``input_tokens``;
    the neutral input is their sum. A message of the ``<synthetic>`` model
    (Claude Code's own, no model was called) has no usage.
    """
    usage = get_object(message, "usage")
    model = get_str(message, "model") or ""
    if usage is None or model == SYNTHETIC_MODEL:
        return None

    def build(u: JSONObject) -> ModelUsage:
        cached = _count(u, "cache_read_input_tokens")
        written = _count(u, "cache_creation_input_tokens")
        return ModelUsage(
            model=model,
            provider="anthropic",
            input_tokens=_count(u, "input_tokens") + cached + written,
            output_tokens=_count(u, "output_tokens"),
            cached_input_tokens=cached,
            cache_write_tokens=written,
        )

    return _checked(usage, build, sink)


def adk_usage(event: JSONObject, sink: Sink) -> ModelUsage | None:
    """An ADK event's ``usageMetadata`` (Gemini's) and ``modelVersion``.

    Gemini counts the thoughts apart from the candidates; the neutral output
    is their sum, of which the thoughts are the reasoning.
    """
    usage = get_object(event, "usageMetadata") or get_object(event, "usage_metadata")
    if usage is None:
        return None
    model = get_str(event, "modelVersion") or get_str(event, "model_version") or ""

    def build(u: JSONObject) -> ModelUsage:
        thoughts = _count(u, "thoughtsTokenCount", "thoughts_token_count")
        candidates = _count(u, "candidatesTokenCount", "candidates_token_count")
        return ModelUsage(
            model=model,
            input_tokens=_count(u, "promptTokenCount", "prompt_token_count"),
            output_tokens=candidates + thoughts,
            cached_input_tokens=_count(
                u, "cachedContentTokenCount", "cached_content_token_count"
            ),
            reasoning_tokens=thoughts,
        )

    return _checked(usage, build, sink)


def adk_usage_fields(usage: ModelUsage) -> Json:
    """The ``usageMetadata`` and ``modelVersion`` of an ADK event."""
    metadata: Json = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if usage.cached_input_tokens:
        metadata["cachedContentTokenCount"] = usage.cached_input_tokens
    if usage.reasoning_tokens:
        metadata["thoughtsTokenCount"] = usage.reasoning_tokens
    fields: Json = {"usageMetadata": metadata}
    if usage.model:
        fields["modelVersion"] = usage.model
    return fields


def attach_usage(
    found: Conversation, indexed: list[Indexed], usage_at: dict[int, ModelUsage]
) -> Conversation:
    """Give each source item's usage to the first assistant message it produced.

    Args:
        found: The conversation built from ``indexed``.
        indexed: Its messages, each with the index of its source item.
        usage_at: The usage read from each source item that reports one.

    Returns:
        ``found`` with :attr:`Conversation.usage` set (unchanged when no item
        reports usage).
    """
    if not usage_at:
        return found
    given: set[int] = set()
    usage: list[ModelUsage | None] = []
    for index, message in indexed:
        value = usage_at.get(index)
        if message.role == "assistant" and value is not None and index not in given:
            given.add(index)
            usage.append(value)
        else:
            usage.append(None)
    return msgspec.structs.replace(found, usage=tuple(usage))
