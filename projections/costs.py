"""Cost records: token, call and cost totals per model, session, day and month.

Each ``model.called`` event adds its usage to four buckets, named by the event
alone: ``model:<model>``, ``session:<stream id>``, ``day:<YYYY-MM-DD>`` and
``month:<YYYY-MM>`` (the UTC date of its ``recorded_at``). A model call does not
carry its agent, and keys must be computed from the event alone, so the session
bucket also remembers the agent, session key and channel from ``session.opened``
or ``session.forked`` (the first event of every session stream); per-agent
totals are summed from the session buckets at query time. A fork's bucket holds
its own calls; :func:`turnledger.projections.queries.cost_records` and
``turnledger costs --session`` add the source prefix's calls (what its history
cost) by folding its lineage.

States hold counts, tokens, durations and USD only: never prompt bodies, outputs,
tool payloads, memory content or provider error text (reference §8.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, ModelCalled, SessionForked, SessionOpened
from turnledger.policies.budgets import BudgetChecker, BudgetSpend, BudgetStatus
from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.policies.pricing import PricingError

CostDimension: TypeAlias = Literal["model", "agent", "session", "day", "month"]
"""What cost totals can be grouped by."""

_STORED_DIMENSIONS: Final[frozenset[str]] = frozenset(
    {"model", "session", "day", "month"}
)


class CostTotals(msgspec.Struct, frozen=True, kw_only=True):
    """Usage summed over model calls (no content, by design).

    Attributes:
        calls: Model calls.
        failures: Calls that did not succeed.
        input_tokens: Prompt tokens, cached ones included.
        cached_input_tokens: Cached prompt tokens (each call's clamped to its input).
        cache_write_tokens: Prompt tokens written to the cache (each call's
            clamped to its input left after the cached ones).
        output_tokens: Completion tokens.
        reasoning_tokens: Reasoning tokens (each call's clamped to its output).
        cost_usd: The summed cost the calls were recorded with.
        duration_ms: The summed call durations.
    """

    calls: int = 0
    failures: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``, as ZeroClaw's ``total_tokens``."""
        return self.input_tokens + self.output_tokens


class CostBucket(msgspec.Struct, frozen=True, kw_only=True):
    """The state of one cost key.

    Attributes:
        totals: The usage of the calls in this bucket.
        agent: For ``session:`` keys, the agent from ``session.opened`` ("" when
            the stream never opened as a session); "" for other keys.
        session_key: For ``session:`` keys, the session key; "" otherwise.
        channel: For ``session:`` keys, the channel; "" otherwise.
    """

    totals: CostTotals = msgspec.field(default_factory=CostTotals)
    agent: str = ""
    session_key: str = ""
    channel: str = ""


def add_totals(left: CostTotals, right: CostTotals) -> CostTotals:
    """Return the field-wise sum of two totals."""
    return CostTotals(
        calls=left.calls + right.calls,
        failures=left.failures + right.failures,
        input_tokens=left.input_tokens + right.input_tokens,
        cached_input_tokens=left.cached_input_tokens + right.cached_input_tokens,
        output_tokens=left.output_tokens + right.output_tokens,
        cost_usd=left.cost_usd + right.cost_usd,
        duration_ms=left.duration_ms + right.duration_ms,
        cache_write_tokens=left.cache_write_tokens + right.cache_write_tokens,
        reasoning_tokens=left.reasoning_tokens + right.reasoning_tokens,
    )


def _call_totals(call: ModelCalled) -> CostTotals:
    cached = min(call.cached_input_tokens, call.input_tokens)
    return CostTotals(
        calls=1,
        failures=0 if call.success else 1,
        input_tokens=call.input_tokens,
        cached_input_tokens=cached,
        output_tokens=call.output_tokens,
        cost_usd=call.cost_usd,
        duration_ms=call.duration_ms,
        cache_write_tokens=min(call.cache_write_tokens, call.input_tokens - cached),
        reasoning_tokens=min(call.reasoning_tokens, call.output_tokens),
    )


def _as_utc(moment: datetime) -> datetime:
    # The store records UTC; a naive time can only be a UTC time without its zone.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def day_key(moment: datetime) -> str:
    """Return the key of the UTC day of ``moment`` (naive times are UTC)."""
    return f"day:{_as_utc(moment):%Y-%m-%d}"


def month_key(moment: datetime) -> str:
    """Return the key of the UTC month of ``moment`` (naive times are UTC)."""
    return f"month:{_as_utc(moment):%Y-%m}"


def session_key_of(stream_id: object) -> str:
    """Return the key of a session stream's bucket."""
    return f"session:{stream_id}"


class CostRecords:
    """The cost-records projection (see the module docstring for its keys)."""

    name: str = "cost_records"
    state_type: type[CostBucket] = CostBucket
    event_types: tuple[type[Event], ...] = (SessionOpened, SessionForked, ModelCalled)
    lifecycle: LifecycleDeclaration = LifecycleDeclaration(
        surface="Cost ledger",
        owner="projections.costs (CostRecords fold of model.called)",
        durability="cost",
        scope="install",
        reviewers_check=(
            "Usage records describe model calls: model, tokens, cost, duration, "
            "session and agent. They must never hold prompt bodies, tool outputs, "
            "memory content or provider error text."
        ),
    )

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Return the buckets an event changes.

        A model call changes its model, session, day and month buckets; a session
        opening (or a fork) changes its session bucket; other events change
        nothing.
        """
        match recorded.event:
            case ModelCalled(model=model):
                return (
                    f"model:{model}",
                    session_key_of(recorded.stream_id),
                    day_key(recorded.recorded_at),
                    month_key(recorded.recorded_at),
                )
            case SessionOpened() | SessionForked():
                return (session_key_of(recorded.stream_id),)
            case _:
                return ()

    def initial(self, key: str) -> CostBucket:  # noqa: ARG002 - same for all keys
        """Return an empty bucket."""
        return CostBucket()

    def evolve(self, state: CostBucket, recorded: Recorded) -> CostBucket:
        """Add a call's usage, or remember a session's agent, key and channel."""
        match recorded.event:
            case ModelCalled() as call:
                return msgspec.structs.replace(
                    state, totals=add_totals(state.totals, _call_totals(call))
                )
            case (
                SessionOpened(agent=agent, session_key=key, channel=channel)
                | SessionForked(agent=agent, session_key=key, channel=channel)
            ):
                return msgspec.structs.replace(
                    state, agent=agent, session_key=key, channel=channel
                )
            case _:
                return state


COST_RECORDS: Final = CostRecords()
"""The cost-records projection."""


def totals(
    states: Mapping[str, CostBucket], by: CostDimension
) -> dict[str, CostTotals]:
    """Return cost totals grouped by a dimension, from loaded states.

    Args:
        states: Cost buckets by key (all of them, or those of the wanted keys).
        by: ``model``, ``session``, ``day``, ``month`` (one bucket each), or
            ``agent`` (the sum of the session buckets of each agent; calls on a
            stream that never opened as a session count under ``""``).

    Returns:
        Totals by model name, session stream id, ``YYYY-MM-DD``, ``YYYY-MM`` or
        agent, in sorted order.

    Raises:
        ValueError: ``by`` is not a known dimension.
    """
    if by == "agent":
        grouped: dict[str, CostTotals] = {}
        for key, bucket in sorted(states.items()):
            if key.startswith("session:"):
                before = grouped.get(bucket.agent, CostTotals())
                grouped[bucket.agent] = add_totals(before, bucket.totals)
        return dict(sorted(grouped.items()))
    if by not in _STORED_DIMENSIONS:
        msg = f"Expected a cost dimension in {sorted(_STORED_DIMENSIONS | {'agent'})}"
        msg += f", found {by!r}"
        raise ValueError(msg)
    prefix = f"{by}:"
    return {
        key.removeprefix(prefix): bucket.totals
        for key, bucket in sorted(states.items())
        if key.startswith(prefix)
    }


def grand_total(states: Mapping[str, CostBucket]) -> CostTotals:
    """Return the totals of every call (each call is in exactly one month bucket)."""
    result = CostTotals()
    for month in totals(states, "month").values():
        result = add_totals(result, month)
    return result


def budget_keys(now: datetime) -> tuple[str, str]:
    """Return the day and month keys a budget check at ``now`` reads."""
    return day_key(_aware(now)), month_key(_aware(now))


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        msg = f"Expected a timezone-aware now, found naive {now.isoformat()}"
        raise PricingError(msg)
    return now


def budget_status(
    states: Mapping[str, CostBucket],
    limits: BudgetChecker,
    now: datetime,
    *,
    estimated_usd: float = 0.0,
) -> BudgetStatus:
    """Check the current UTC day's and month's spend against the budget.

    Args:
        states: Cost buckets; at least those of :func:`budget_keys` ``(now)`` when
            they exist (a missing bucket means nothing was spent).
        limits: The check built by :func:`policies.budgets.make_budget_checker`,
            which holds the limits and the warning threshold.
        now: The current time, timezone-aware (projections have no clock).
        estimated_usd: The estimated cost of the call about to be made.

    Returns:
        The budget status of the worst period.

    Raises:
        PricingError: ``now`` is naive, or an amount is not a finite number >= 0.
    """
    day, month = budget_keys(now)
    empty = CostBucket()
    spend = BudgetSpend(
        day_usd=states.get(day, empty).totals.cost_usd,
        month_usd=states.get(month, empty).totals.cost_usd,
        estimated_usd=estimated_usd,
    )
    return limits(spend)


def sessions_of(states: Mapping[str, CostBucket], agent: str) -> tuple[str, ...]:
    """Return the session stream ids whose bucket belongs to ``agent``, sorted."""
    return tuple(
        key.removeprefix("session:")
        for key, bucket in sorted(states.items())
        if key.startswith("session:") and bucket.agent == agent
    )


CostGrouping: TypeAlias = Literal["model", "agent", "session", "day"]
"""What ``turnledger costs --by`` groups rows by."""


class CostRow(msgspec.Struct, frozen=True, kw_only=True):
    """One group of ``turnledger costs``: its name and its totals."""

    group: str
    totals: CostTotals


def summarize_costs(
    events: Iterable[Recorded],
    *,
    by: CostGrouping = "model",
    agent: str | None = None,
    session: str | None = None,
    since: datetime | None = None,
    owners: Mapping[object, tuple[str, str]] | None = None,
) -> tuple[CostTotals, list[CostRow]]:
    """Fold ``session.opened``/``session.forked`` and ``model.called`` into rows.

    Args:
        events: Ledger events in position order (others are ignored).
        by: The grouping.
        agent: Only calls in this agent's sessions.
        session: Only calls in sessions with this session key.
        since: Only calls recorded at or after this time (naive: UTC).
        owners: The ``(agent, session key)`` of streams, fixed: their opening
            events do not change it (a fork's lineage, relabeled with the
            fork's stream, begins with its source's opening).

    Returns:
        The grand total of the calls kept, and one row per group, most costly
        first (then by name).
    """
    fixed = dict(owners or {})
    owners_: dict[object, tuple[str, str]] = dict(fixed)
    groups: dict[str, CostTotals] = {}
    grand = CostTotals()
    floor = None if since is None else _as_utc(since)
    for recorded in events:
        event = recorded.event
        if isinstance(event, SessionOpened | SessionForked):
            if recorded.stream_id not in fixed:
                owners_[recorded.stream_id] = (event.agent, event.session_key)
            continue
        if not isinstance(event, ModelCalled):
            continue
        owner, key = owners_.get(recorded.stream_id, ("", ""))
        if agent is not None and owner != agent:
            continue
        if session is not None and key != session:
            continue
        if floor is not None and _as_utc(recorded.recorded_at) < floor:
            continue
        name = {
            "model": event.model,
            "agent": owner,
            "session": f"{owner}/{key}",
            "day": day_key(recorded.recorded_at).removeprefix("day:"),
        }[by]
        call = _call_totals(event)
        groups[name] = add_totals(groups.get(name, CostTotals()), call)
        grand = add_totals(grand, call)
    rows = [CostRow(group=g, totals=t) for g, t in groups.items()]
    rows.sort(key=lambda row: (-row.totals.cost_usd, row.group))
    return grand, rows
