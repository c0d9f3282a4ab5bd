"""Cost of a model call, and day/month budget checks (§8.1).

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
The budget check compares the spend of the current UTC day and month, plus the
estimated cost of the next call, with the limits (defaults 10 and 100 USD, warn
at 80 %).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError

PER_MILLION: Final = 1_000_000
"""Rates are in USD per million tokens."""

DEFAULT_DAILY_LIMIT_USD: Final = 10.0
"""ZeroClaw's ``cost.daily_limit_usd`` default."""

DEFAULT_MONTHLY_LIMIT_USD: Final = 100.0
"""ZeroClaw's ``cost.monthly_limit_usd`` default."""

DEFAULT_WARN_AT_PERCENT: Final = 80.0
"""ZeroClaw's ``cost.warn_at_percent`` default."""


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


BudgetPeriod: TypeAlias = Literal["day", "month"]
"""A budget period (UTC calendar day or month)."""

BudgetState: TypeAlias = Literal["ok", "warning", "exceeded"]
"""Where the spend stands against a limit."""

_SEVERITY: Final[Mapping[BudgetState, int]] = {"ok": 0, "warning": 1, "exceeded": 2}


class BudgetSpend(msgspec.Struct, frozen=True, kw_only=True):
    """What has been spent, and what the next call is expected to cost.

    Attributes:
        day_usd: The spend of the current UTC day.
        month_usd: The spend of the current UTC month.
        estimated_usd: The estimated cost of the call about to be made.
    """

    day_usd: float
    month_usd: float
    estimated_usd: float = 0.0


class BudgetStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a budget check, with its figures.

    Attributes:
        state: ``ok``, ``warning`` or ``exceeded``.
        period: The period the figures are for (the worst one; the day first on a
            tie); ``None`` when no limit applies.
        current_usd: The spend of that period so far.
        projected_usd: ``current_usd`` plus the estimated call.
        limit_usd: That period's limit.
        percent_used: ``projected_usd`` as a percentage of ``limit_usd``.
    """

    state: BudgetState
    period: BudgetPeriod | None = None
    current_usd: float = 0.0
    projected_usd: float = 0.0
    limit_usd: float | None = None
    percent_used: float | None = None


BudgetChecker: TypeAlias = Callable[[BudgetSpend], BudgetStatus]
"""``check(spend)``, as built by :func:`make_budget_checker`."""


def _limit(name: str, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        msg = f"Expected {name} to be a finite number > 0 or None, found {value!r}"
        raise PricingError(msg)
    return value


def _amount(name: str, value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        msg = f"Expected {name} to be a finite number >= 0, found {value!r}"
        raise PricingError(msg)
    return value


def _period_status(
    period: BudgetPeriod, current: float, estimated: float, limit: float, warn_at: float
) -> BudgetStatus:
    projected = current + estimated
    percent = projected * 100 / limit
    state: BudgetState = "ok"
    if projected > limit:
        state = "exceeded"
    elif percent >= warn_at:
        state = "warning"
    return BudgetStatus(
        state=state,
        period=period,
        current_usd=current,
        projected_usd=projected,
        limit_usd=limit,
        percent_used=percent,
    )


def make_budget_checker(
    *,
    daily_limit_usd: float | None = DEFAULT_DAILY_LIMIT_USD,
    monthly_limit_usd: float | None = DEFAULT_MONTHLY_LIMIT_USD,
    warn_at_percent: float = DEFAULT_WARN_AT_PERCENT,
    enabled: bool = True,
) -> BudgetChecker:
    """Build the day/month budget check.

    Args:
        daily_limit_usd: The day's limit; ``None`` for none.
        monthly_limit_usd: The month's limit; ``None`` for none.
        warn_at_percent: The share of a limit (0 to 100) from which the state is
            ``warning``.
        enabled: ``cost.enabled``; when false every check is ``ok``.

    Returns:
        ``check(spend)``: ``exceeded`` when the projected spend of a period is
        over its limit, ``warning`` when it reaches the threshold, else ``ok``;
        the figures are those of the worst period.

    Raises:
        PricingError: A limit is not a finite number > 0, or the threshold is
            outside 0 to 100. The checker raises it for a spend that is not a
            finite number >= 0.
    """
    limits: tuple[tuple[BudgetPeriod, float | None], ...] = (
        ("day", _limit("daily_limit_usd", daily_limit_usd)),
        ("month", _limit("monthly_limit_usd", monthly_limit_usd)),
    )
    if not (math.isfinite(warn_at_percent) and 0 <= warn_at_percent <= 100):
        msg = f"Expected warn_at_percent in [0, 100], found {warn_at_percent!r}"
        raise PricingError(msg)
    active = tuple((period, limit) for period, limit in limits if limit is not None)

    def check(spend: BudgetSpend) -> BudgetStatus:
        current = {
            "day": _amount("day_usd", spend.day_usd),
            "month": _amount("month_usd", spend.month_usd),
        }
        estimated = _amount("estimated_usd", spend.estimated_usd)
        if not enabled or not active:
            return BudgetStatus(state="ok")
        statuses = [
            _period_status(period, current[period], estimated, limit, warn_at_percent)
            for period, limit in active
        ]
        # max() keeps the first of equals: the day wins a tie.
        return max(statuses, key=lambda status: _SEVERITY[status.state])

    return check


def _utc(moment: datetime, what: str) -> datetime:
    if moment.tzinfo is None:
        msg = f"Expected a timezone-aware {what}, found naive {moment.isoformat()}"
        raise PricingError(msg)
    return moment.astimezone(UTC)


def sum_spend(
    costs: Iterable[tuple[datetime, float]],
    *,
    now: datetime,
    estimated_usd: float = 0.0,
) -> BudgetSpend:
    """Sum recorded costs into the current UTC day and month.

    Args:
        costs: ``(timestamp, cost_usd)`` pairs of the cost ledger; timestamps
            must be timezone-aware.
        now: The current time (timezone-aware); policies have no clock.
        estimated_usd: The estimated cost of the next call.

    Returns:
        The spend to pass to a budget check.

    Raises:
        PricingError: A timestamp is naive, or a cost is not a finite number
            >= 0.
    """
    today = _utc(now, "now")
    day = month = 0.0
    for stamp, cost in costs:
        moment = _utc(stamp, "cost timestamp")
        amount = _amount("cost_usd", cost)
        if (moment.year, moment.month) == (today.year, today.month):
            month += amount
            if moment.day == today.day:
                day += amount
    return BudgetSpend(day_usd=day, month_usd=month, estimated_usd=estimated_usd)
