"""Day/month budget checks of model spend (§8.1).

:func:`sum_spend` sums the cost ledger's ``(timestamp, cost)`` pairs into the
current UTC day and month (the caller passes ``now``: policies have no clock);
the check built by :func:`make_budget_checker` compares that spend, plus the
estimated cost of the next call, with the limits (defaults 10 and 100 USD, warn
at 80 %) and returns the worst period's :class:`BudgetStatus`. A call's cost is
:mod:`policies.pricing`; both modules raise its
:class:`~policies.pricing.PricingError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.pricing import PricingError

DEFAULT_DAILY_LIMIT_USD: Final = 10.0
"""ZeroClaw's ``cost.daily_limit_usd`` default."""

DEFAULT_MONTHLY_LIMIT_USD: Final = 100.0
"""ZeroClaw's ``cost.monthly_limit_usd`` default."""

DEFAULT_WARN_AT_PERCENT: Final = 80.0
"""ZeroClaw's ``cost.warn_at_percent`` default."""

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
