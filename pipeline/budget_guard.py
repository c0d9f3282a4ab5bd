"""``[budgets]`` enforced before every model call.

The guard learns the current UTC month's spend once, from the ledger's
``model.called`` events, then adds each call the engine makes; before a call it
checks the day and month against the limits
(:func:`policies.pricing.make_budget_checker`). An exceeded budget refuses the
call: the engine records a ``turn.failed`` event of kind ``budget_exceeded``
with the figures, and the turn ends with that failure. Spend by other processes
after the guard was built is not seen until the next engine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from turnledger.ledger.events import ModelCalled
from turnledger.ledger.store import EventStore
from turnledger.pipeline.config import BudgetConfig
from turnledger.policies.pricing import BudgetSpend, BudgetStatus, make_budget_checker

_PAGE = 2_000


def _utc(moment: datetime) -> datetime:
    return (
        moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    )


class BudgetGuard:
    """Day and month spend against ``[budgets]``.

    Args:
        store: The ledger (read once, for the month's spend so far).
        budgets: The limits; ``enabled = false`` makes every check pass.
        clock: The current time (UTC-aware); a test passes a fixed one.

    Raises:
        PricingError: A limit or the warning threshold is out of range.
    """

    def __init__(
        self,
        store: EventStore,
        budgets: BudgetConfig,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._check = make_budget_checker(
            daily_limit_usd=budgets.daily_limit_usd,
            monthly_limit_usd=budgets.monthly_limit_usd,
            warn_at_percent=budgets.warn_at_percent,
            enabled=budgets.enabled,
        )
        self.enabled = budgets.enabled
        self._clock = clock
        self._store = store
        self._spent: dict[str, float] = {}  # "YYYY-MM-DD" -> USD
        self._loaded = False

    def _load(self) -> None:
        month = f"{_utc(self._clock()):%Y-%m}"
        after = 0
        while True:
            page = self._store.read_all(after=after, limit=_PAGE, types=(ModelCalled,))
            for recorded in page:
                day = f"{_utc(recorded.recorded_at):%Y-%m-%d}"
                event = recorded.event
                if day.startswith(month) and isinstance(event, ModelCalled):
                    self._spent[day] = self._spent.get(day, 0.0) + event.cost_usd
            if len(page) < _PAGE:
                break
            after = page[-1].position
        self._loaded = True

    def add(self, cost_usd: float) -> None:
        """Count a call's cost (the engine calls this for every call it makes)."""
        if self.enabled and cost_usd > 0:
            day = f"{_utc(self._clock()):%Y-%m-%d}"
            self._spent[day] = self._spent.get(day, 0.0) + cost_usd

    def status(self) -> BudgetStatus:
        """Return the budget status right now (the next call estimated at 0)."""
        if not self.enabled:
            return self._check(BudgetSpend(day_usd=0.0, month_usd=0.0))
        if not self._loaded:
            self._load()
        now = _utc(self._clock())
        day, month = f"{now:%Y-%m-%d}", f"{now:%Y-%m}"
        return self._check(
            BudgetSpend(
                day_usd=self._spent.get(day, 0.0),
                month_usd=sum(v for k, v in self._spent.items() if k.startswith(month)),
            )
        )


def refusal_text(status: BudgetStatus) -> str:
    """The one-line reason a refused call is recorded with (figures only)."""
    period = "daily" if status.period == "day" else "monthly"
    return (
        f"{period} budget exceeded: spent ${status.current_usd:.6f} of the "
        f"${status.limit_usd or 0.0:.6f} limit; the model was not called"
    )
