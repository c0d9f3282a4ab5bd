"""What the framework adapters record of a model call and of the instructions.

A framework tells an adapter, after the fact, which model answered and the
usage it reported; :func:`model_called` records exactly that as ``model.called``
(the tokens the framework gave, priced with the ``[pricing]`` rate sheet the
adapter was given, 0 USD for a model the sheet does not name), never a duration
or a failure the framework did not report. :class:`Instructions` records a
system prompt (``system_prompt.set``) when it differs from the one in effect,
so a framework that re-sends its instructions with every request records them
once per change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from turnledger.ledger.events import ModelCalled, SystemPromptSet, text_digest
from turnledger.ledger.ids import CONTROL_CHARACTERS
from turnledger.policies.pricing import ModelPrice, TokenUsage, price_usage
from turnledger.policies.recordable import text_problem

MAX_MODEL_CHARS: Final = 200
"""The longest model name recorded as given (a longer one: ``unknown``)."""

UNKNOWN_MODEL: Final = "unknown"
"""The model recorded when the framework named none (or one that cannot be stored)."""


def _tokens(value: object) -> int:
    """A token count as the framework gave it: an int >= 0, else 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _model_name(model: str | None) -> str:
    if (
        not model
        or len(model) > MAX_MODEL_CHARS
        or CONTROL_CHARACTERS.search(model) is not None
        or text_problem("model", model) is not None
    ):
        return UNKNOWN_MODEL
    return model


def model_called(
    *,
    turn_id: str,
    provider: str,
    model: str | None,
    pricing: Mapping[str, ModelPrice],
    input_tokens: object = 0,
    output_tokens: object = 0,
    cached_input_tokens: object = 0,
    cache_write_tokens: object = 0,
    reasoning_tokens: object = 0,
    iteration: int = 0,
) -> ModelCalled:
    """The ``model.called`` event of one model response a framework reported.

    Args:
        turn_id: The turn it belongs to.
        provider: The provider the framework named (or the framework's name).
        model: The model the response names (``None``: unknown).
        pricing: The rate sheet (``[pricing]``).
        input_tokens: The whole prompt's tokens.
        output_tokens: The whole completion's tokens.
        cached_input_tokens: Of the prompt, read from the provider's cache.
        cache_write_tokens: Of the prompt, written to the provider's cache.
        reasoning_tokens: Of the completion, reasoning.
        iteration: The model call's number in its turn.
    """
    tokens = TokenUsage(
        model=_model_name(model),
        input_tokens=_tokens(input_tokens),
        output_tokens=_tokens(output_tokens),
        cached_input_tokens=_tokens(cached_input_tokens),
        cache_write_tokens=_tokens(cache_write_tokens),
        reasoning_tokens=_tokens(reasoning_tokens),
    )
    priced = price_usage(tokens, pricing)
    return ModelCalled(
        turn_id=turn_id,
        provider=provider or "unknown",
        model=tokens.model,
        input_tokens=priced.input_tokens,
        output_tokens=priced.output_tokens,
        cached_input_tokens=priced.cached_input_tokens,
        cache_write_tokens=priced.cache_write_tokens,
        reasoning_tokens=priced.reasoning_tokens,
        cost_usd=priced.cost_usd,
        iteration=iteration,
    )


class Instructions:
    """The system prompt in effect in one stream, to record it once per change.

    Args:
        digest: The digest of the one already recorded (``None``: none).
    """

    def __init__(self, digest: str | None = None) -> None:
        self.digest = digest

    def see(self, recorded: object) -> None:
        """Follow an event of the stream (a ``system_prompt.set`` sets the digest)."""
        if isinstance(recorded, SystemPromptSet):
            self.digest = recorded.digest

    def change(self, text: str | None, *, turn_id: str) -> list[SystemPromptSet]:
        """``[system_prompt.set]`` when ``text`` is new here, else ``[]``."""
        if not text or text_digest(text) == self.digest:
            return []
        event = SystemPromptSet.of(text, turn_id=turn_id)
        self.digest = event.digest
        return [event]
