"""[budgets] enforced by the engine before a model call (a refusal is an event)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.pipeline.test_engine import FakeProvider, answer, call, events_of
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import ModelCalled, TurnFailed
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import Runtime, bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.config.sections import BudgetConfig
from turnledger.pipeline.engine.budget_guard import BudgetGuard

PRICED = (
    "[runtime]\nmax_tool_iterations = 3\ncontext_budget_tokens = 0\n"
    "[pricing.fake-1]\ninput_per_million = 1000\noutput_per_million = 2000\n"
)


@pytest.fixture(name="engine_with")
async def _engine_with(tmp_path):
    path = str(tmp_path / "l.db")
    store = open_store(path)
    ledger = AsyncLedger(store)
    made: list[Runtime] = []

    def make(budgets: str, steps):
        cfg = parse_config(f'data_dir = "{tmp_path / "d"}"\n{PRICED}{budgets}')
        provider = FakeProvider(steps)
        runtime = bootstrap(
            cfg,
            provider=provider,
            store=store,
            ledger_url=path,
            tools={},
            ledger=ledger,
        )
        made.append(runtime)
        return runtime.engine, provider

    yield make, store
    for runtime in made:
        await runtime.aclose()
    await ledger.aclose()


async def test_a_tiny_daily_limit_refuses_the_next_call(engine_with):
    """The issue: a $0.000001 daily limit changed nothing. Now the call is refused."""
    make, store = engine_with
    budgets = "[budgets]\nenabled = true\ndaily_limit_usd = 0.000001\n"
    engine, provider = make(budgets, [answer("first"), answer("second")])
    first = await engine.run_turn("ops", "s1", "hello there")
    assert first.completed  # nothing spent yet: the first call is allowed
    second = await engine.run_turn("ops", "s1", "and again")
    assert not second.completed
    assert second.failure == "budget_exceeded"
    assert len(provider.requests) == 1  # the model was never called
    failed = [e for e in events_of(store) if isinstance(e, TurnFailed)]
    assert [f.kind for f in failed] == ["budget_exceeded"]
    assert failed[0].error.startswith("daily budget exceeded: spent $0.")
    assert "the model was not called" in failed[0].error
    calls = [e for e in events_of(store) if isinstance(e, ModelCalled)]
    assert len(calls) == 1


async def test_spend_already_in_the_ledger_counts(engine_with):
    """A fresh engine learns the month's spend from the ledger."""
    make, store = engine_with
    engine, _ = make("", [answer("paid")])
    assert (await engine.run_turn("ops", "s1", "spend a little")).completed
    budgets = "[budgets]\nenabled = true\nmonthly_limit_usd = 0.0000001\n"
    fresh, provider = make(budgets, [answer("never")])
    outcome = await fresh.run_turn("ops", "s2", "one more")
    assert outcome.failure == "budget_exceeded"
    assert provider.requests == []
    (failed,) = [e for e in events_of(store, key="s2") if isinstance(e, TurnFailed)]
    assert failed.error.startswith("monthly budget exceeded")


async def test_a_refusal_mid_turn_stops_tool_loops(engine_with):
    """The check runs before every call of a turn, not only the first."""
    make, _store = engine_with
    budgets = "[budgets]\nenabled = true\ndaily_limit_usd = 0.000001\n"
    engine, provider = make(budgets, [_with_call(), answer("never")])
    outcome = await engine.run_turn("ops", "s1", "use a tool")
    assert outcome.failure == "budget_exceeded"
    assert outcome.iterations == 1
    assert len(provider.requests) == 1


def _with_call():
    response = answer("calling")
    return type(response)(
        text="", tool_calls=(call(1, text="x"),), usage=response.usage
    )


async def test_disabled_budgets_never_refuse(engine_with):
    make, _ = engine_with
    budgets = "[budgets]\nenabled = false\ndaily_limit_usd = 0.000001\n"
    engine, provider = make(budgets, [answer("a"), answer("b")])
    assert (await engine.run_turn("ops", "s1", "one")).completed
    assert (await engine.run_turn("ops", "s1", "two")).completed
    assert len(provider.requests) == 2


def test_guard_counts_the_day_and_the_month(tmp_path):
    store = open_store(str(tmp_path / "g.db"))
    now = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    guard = BudgetGuard(
        store,
        BudgetConfig(enabled=True, daily_limit_usd=1.0, monthly_limit_usd=2.0),
        clock=lambda: now,
    )
    assert guard.status().state == "ok"
    guard.add(0.9)
    assert guard.status().state == "warning"
    guard.add(0.2)
    status = guard.status()
    assert (status.state, status.period) == ("exceeded", "day")
    assert status.current_usd == pytest.approx(1.1)
    store.close()
