"""``[budgets]`` enforced before every model call, across processes.

What is guarded, exactly: before each model call the engine asks
:meth:`BudgetGuard.status`, which compares the current UTC day's and month's
spend with the limits (:func:`policies.budgets.make_budget_checker`). An
exceeded budget refuses the call: the engine records a ``turn.failed`` event of
kind ``budget_exceeded`` with the figures, and the turn ends with that failure.

The spend is the ledger's: the first check reads every ``model.called`` event,
and each later check reads only those recorded after the last position it has
seen (one typed read of the log's tail, bounded by the settled position, so a
PostgreSQL append still in flight below it is read next time, not skipped).
Calls made by other processes on the same ledger therefore count from the
first check after they were committed. The engine also reports each of its own
calls through :meth:`BudgetGuard.add` the moment it is made, before the event
is committed with the turn's reply; such a cost is counted at once and not a
second time when its event is read (it is matched by amount).

It is a check before the call, not a reservation: the cost of a call is known
only after it, and two processes (or two turns) checking at the same moment can
both pass and together overspend by up to one call each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, ModelCalled
from turnledger.ledger.store import EventStore
from turnledger.pipeline.config.sections import BudgetConfig
from turnledger.policies.budgets import BudgetSpend, BudgetStatus, make_budget_checker
from turnledger.projections.runner import catch_up

_PAGE = 2_000


def _utc(moment: datetime) -> datetime:
    return (
        moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    )


class BudgetGuard:
    """Day and month spend against ``[budgets]``, as recorded in the ledger.

    Args:
        store: The ledger whose ``model.called`` events are the spend.
        budgets: The limits; ``enabled = false`` makes every check pass (and
            reads nothing).
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
        self._unrecorded: Counter[float] = Counter()  # own costs not yet read back
        self.position = 0
        """The last ledger position whose ``model.called`` events are counted."""

    def _count(self, day: str, cost_usd: float) -> None:
        self._spent[day] = self._spent.get(day, 0.0) + cost_usd

    def catch_up(self) -> None:
        """Count the ``model.called`` events recorded since the last read.

        The paging is the projection runner's one catch-up loop
        (:func:`turnledger.projections.runner.catch_up`); the guard is its target.
        """
        catch_up(self._store, _Spend(self), page_size=_PAGE)

    def _read(self, recorded: Recorded) -> None:
        event = recorded.event
        if not isinstance(event, ModelCalled) or event.cost_usd <= 0:
            return
        if self._unrecorded[event.cost_usd] > 0:
            self._unrecorded[event.cost_usd] -= 1  # counted by add()
            return
        self._count(f"{_utc(recorded.recorded_at):%Y-%m-%d}", event.cost_usd)

    def add(self, cost_usd: float) -> None:
        """Count a call this process just made (before its event is committed)."""
        if self.enabled and cost_usd > 0:
            self._count(f"{_utc(self._clock()):%Y-%m-%d}", cost_usd)
            self._unrecorded[cost_usd] += 1

    def status(self) -> BudgetStatus:
        """Return the budget status right now (the next call estimated at 0).

        Reads the ledger's new ``model.called`` events first (see the module
        docstring).
        """
        if not self.enabled:
            return self._check(BudgetSpend(day_usd=0.0, month_usd=0.0))
        self.catch_up()
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


class _Spend:
    """A guard's spend as a tracked target of the runner's catch-up loop."""

    name = "budget guard"
    event_types: tuple[type[Event], ...] = (ModelCalled,)

    def __init__(self, guard: BudgetGuard) -> None:
        self.guard = guard

    def position(self) -> int:
        """The last position the guard has counted."""
        return self.guard.position

    def accepts(self, recorded: Recorded) -> bool:  # noqa: ARG002 - every model call
        """Every ``model.called`` event is read."""
        return True

    def apply(self, page: Sequence[Recorded], reached: int) -> None:
        """Count the page's calls and move the guard to ``reached``."""
        for recorded in page:
            self.guard._read(recorded)  # noqa: SLF001 - the guard's own target
        self.guard.position = reached
