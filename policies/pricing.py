"""Cost of a model call (§8.1).

Token counts have the neutral meaning: the input includes the tokens read from
the prompt cache (cached input) and written to it (cache write); the output
includes the reasoning tokens. Each token is priced once, at the rate of its
part:

    cost = (input - cached - cache write) / 1e6 * input rate
         + cached / 1e6 * (cached rate, or the input rate when that is 0)
         + cache write / 1e6 * (cache-write rate, or the input rate when unset)
         + (output - reasoning) / 1e6 * output rate
         + reasoning / 1e6 * (reasoning rate, or the output rate when unset)

A rate that is not a finite positive number counts as 0 (an explicit cache-write
or reasoning rate of 0 makes those tokens free); cached input is clamped to the
input, cache writes to the input left after it, reasoning to the output.
:func:`check_price` refuses negative and non-finite rates (the configuration
loader calls it).
The day/month budget checks of the spend are :mod:`policies.budgets`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

import msgspec

from turnledger.policies.errors import PolicyError

PER_MILLION: Final = 1_000_000
"""Rates are in USD per million tokens."""


class PricingError(PolicyError):
    """Usage, spend or budget settings that cannot be priced or checked."""


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """The tokens a model call used, as the provider reported them.

    Attributes:
        model: The model name, the key into the rate sheet.
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Completion tokens.
        cached_input_tokens: The part of the input read from the cache.
        cache_write_tokens: The part of the input written to the cache.
        reasoning_tokens: The part of the output spent on reasoning.
    """

    model: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class ModelPrice(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The rates of one model, in USD per million tokens.

    Attributes:
        input_per_million: The input rate.
        output_per_million: The output rate.
        cached_input_per_million: The cached-input (cache read) rate; 0 means
            "the input rate".
        cache_write_per_million: The cache-write rate; unset (``None``) means
            "the input rate".
        reasoning_per_million: The reasoning-token rate; unset (``None``) means
            "the output rate".
    """

    input_per_million: float
    output_per_million: float
    cached_input_per_million: float = 0.0
    cache_write_per_million: float | None = None
    reasoning_per_million: float | None = None


class CostBreakdown(msgspec.Struct, frozen=True, kw_only=True):
    """The priced usage of one call (no prompt or output content, by design).

    Attributes:
        model: The model name.
        input_tokens: Prompt tokens.
        cached_input_tokens: Cached prompt tokens, clamped to ``input_tokens``.
        cache_write_tokens: Prompt tokens written to the cache, clamped to the
            input left after the cached ones.
        output_tokens: Completion tokens.
        reasoning_tokens: Reasoning tokens, clamped to ``output_tokens``.
        total_tokens: ``input_tokens + output_tokens``.
        cost_usd: The cost, finite and >= 0.
        pricing_available: Whether the model was in the rate sheet (if not,
            ``cost_usd`` is 0).
    """

    model: str
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost_usd: float
    pricing_available: bool


def _tokens(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = f"Expected {name} to be an int >= 0, found {value!r}"
        raise PricingError(msg)
    return value


def _rate(value: float) -> float:
    return value if math.isfinite(value) and value > 0 else 0.0


def check_price(price: ModelPrice) -> None:
    """Refuse a rate that is negative or not finite.

    Args:
        price: The rates of one model.

    Raises:
        PricingError: A rate is negative, NaN or infinite; the message names
            the rate and its value.
    """
    for name in price.__struct_fields__:
        value = getattr(price, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            msg = f"{name}: expected a finite number >= 0, found {value!r}"
            raise PricingError(msg)


class _Parts(msgspec.Struct, frozen=True):
    uncached: int
    cached: int
    written: int
    plain_output: int
    reasoning: int


def _parts(usage: TokenUsage) -> _Parts:
    input_tokens = _tokens("input_tokens", usage.input_tokens)
    cached = min(
        _tokens("cached_input_tokens", usage.cached_input_tokens), input_tokens
    )
    written = min(
        _tokens("cache_write_tokens", usage.cache_write_tokens), input_tokens - cached
    )
    output_tokens = _tokens("output_tokens", usage.output_tokens)
    reasoning = min(_tokens("reasoning_tokens", usage.reasoning_tokens), output_tokens)
    return _Parts(
        input_tokens - cached - written,
        cached,
        written,
        output_tokens - reasoning,
        reasoning,
    )


def compute_cost(usage: TokenUsage, price: ModelPrice) -> float:
    """Return the USD cost of a call.

    Args:
        usage: The reported usage.
        price: The model's rates.

    Returns:
        The cost, finite and >= 0.

    Raises:
        PricingError: A token count is not an int >= 0, or the rates are so large
            that the cost overflows.
    """
    parts = _parts(usage)
    input_rate = _rate(price.input_per_million)
    output_rate = _rate(price.output_per_million)
    cached_rate = _rate(price.cached_input_per_million) or input_rate
    write = price.cache_write_per_million
    write_rate = input_rate if write is None else _rate(write)
    thinking = price.reasoning_per_million
    reasoning_rate = output_rate if thinking is None else _rate(thinking)
    cost = (
        parts.uncached / PER_MILLION * input_rate
        + parts.cached / PER_MILLION * cached_rate
        + parts.written / PER_MILLION * write_rate
        + parts.plain_output / PER_MILLION * output_rate
        + parts.reasoning / PER_MILLION * reasoning_rate
    )
    if not math.isfinite(cost):
        msg = f"Expected a finite cost for model {usage.model!r}, found {cost}"
        raise PricingError(msg)
    return cost


_UNPRICED: Final = ModelPrice(input_per_million=0.0, output_per_million=0.0)


def price_usage(usage: TokenUsage, rates: Mapping[str, ModelPrice]) -> CostBreakdown:
    """Price a call against a rate sheet.

    Args:
        usage: The reported usage.
        rates: The rate sheet, by model name.

    Returns:
        The breakdown; a model missing from the sheet costs 0 with
        ``pricing_available`` false.

    Raises:
        PricingError: As :func:`compute_cost`.
    """
    price = rates.get(usage.model)
    cost = compute_cost(usage, _UNPRICED if price is None else price)
    parts = _parts(usage)
    return CostBreakdown(
        model=usage.model,
        input_tokens=usage.input_tokens,
        cached_input_tokens=parts.cached,
        cache_write_tokens=parts.written,
        output_tokens=usage.output_tokens,
        reasoning_tokens=parts.reasoning,
        total_tokens=usage.input_tokens + usage.output_tokens,
        cost_usd=cost,
        pricing_available=price is not None,
    )
