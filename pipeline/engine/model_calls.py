"""One model call: send the prompt, price the usage, describe the call as an event.

The event (``model.called``) carries the provider, model, token counts, cost and
duration, and for a failure a scrubbed, bounded error summary: never the prompt
or the answer. The model is the one the response names, unless that name is
empty, longer than :data:`MAX_MODEL_CHARS`, holds a control character or text
UTF-8 cannot encode: then it is the provider's configured model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from turnledger.ledger.events import ModelCalled
from turnledger.ledger.ids import CONTROL_CHARACTERS
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    Provider,
    ProviderError,
    ToolSpec,
)
from turnledger.policies.messages import Message
from turnledger.policies.pricing import ModelPrice, TokenUsage, price_usage
from turnledger.policies.recordable import text_problem
from turnledger.policies.scrubbing import scrub_text, summarize

MAX_MODEL_CHARS: Final = 200
"""The longest model name a response may report and have recorded."""


def _recordable_name(model: str) -> bool:
    return (
        0 < len(model) <= MAX_MODEL_CHARS
        and CONTROL_CHARACTERS.search(model) is None
        and text_problem("model", model) is None
    )


class ModelCallFailedError(Exception):
    """A provider call failed; ``event`` records it, ``error`` says why.

    Attributes:
        error: The provider's classified error.
        event: The ``model.called`` event of the failed call.
    """

    def __init__(self, error: ProviderError, event: ModelCalled) -> None:
        super().__init__(str(error))
        self.error = error
        self.event = event


class ModelCall(msgspec.Struct, frozen=True, kw_only=True):
    """A successful model call.

    Attributes:
        response: What the provider answered.
        event: The ``model.called`` event recording it.
    """

    response: ChatResponse
    event: ModelCalled


async def call_model(
    provider: Provider,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    pricing: Mapping[str, ModelPrice],
    turn_id: str,
    iteration: int,
) -> ModelCall:
    """Call the provider once and price what it reports.

    Raises:
        ModelCallFailedError: The provider failed (the event records the failure).
    """
    request = ChatRequest(messages=tuple(messages), tools=tuple(tools))
    started = time.perf_counter()
    try:
        response = await provider.complete(request)
    except ProviderError as e:
        failed = ModelCalled(
            turn_id=turn_id,
            provider=provider.name,
            model=provider.model,
            duration_ms=(time.perf_counter() - started) * 1000,
            success=False,
            error=summarize(scrub_text(f"{e.kind}: {e}")),
            iteration=iteration,
        )
        raise ModelCallFailedError(e, failed) from e
    usage = response.usage
    model = response.model if _recordable_name(response.model) else provider.model
    tokens = TokenUsage(
        model=model,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        cached_input_tokens=usage.cached_input_tokens if usage else 0,
        cache_write_tokens=usage.cache_write_tokens if usage else 0,
        reasoning_tokens=usage.reasoning_tokens if usage else 0,
    )
    cost = price_usage(tokens, pricing).cost_usd if usage is not None else 0.0
    return ModelCall(
        response=response,
        event=ModelCalled(
            turn_id=turn_id,
            provider=provider.name,
            model=model,
            input_tokens=tokens.input_tokens,
            output_tokens=tokens.output_tokens,
            cached_input_tokens=tokens.cached_input_tokens,
            cache_write_tokens=tokens.cache_write_tokens,
            reasoning_tokens=tokens.reasoning_tokens,
            cost_usd=cost,
            duration_ms=(time.perf_counter() - started) * 1000,
            iteration=iteration,
        ),
    )
