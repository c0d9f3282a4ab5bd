"""[budgets] across processes: spend recorded by another process counts.

Two runtimes (each with its own store, memory and engine) share one SQLite
ledger file; the second runs in a real child process
(``tests/pipeline/budget_spender_child.py``). The guard reads the ledger's new
``model.called`` events before every check, so a runtime that was built, and
had already checked, before the other process spent still refuses once the
shared spend is over the limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.pipeline.budget_spender_child import config_for
from tests.pipeline.test_engine import FakeProvider, answer, events_of
from turnledger.ledger.events import ModelCalled, TurnFailed
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config.sections import BudgetConfig
from turnledger.pipeline.engine.budget_guard import BudgetGuard

REPO_ROOT = Path(__file__).resolve().parents[2]
ONE_CALL = 0.12  # the child's pricing: 100 input and 10 output tokens


def spend_in_child(ledger: Path, session: str, limit: float) -> dict:
    """Run one turn in a real second process on the same ledger file."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.pipeline.budget_spender_child",
            str(ledger),
            str(ledger.parent / "child-data"),
            session,
            repr(limit),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def model_spend(store) -> float:
    return sum(
        r.event.cost_usd
        for r in store.read_all(limit=10_000, types=(ModelCalled,))
        if isinstance(r.event, ModelCalled)
    )


async def test_a_runtime_refuses_once_another_process_spent_the_budget(tmp_path):
    ledger = tmp_path / "shared.db"
    config = config_for(str(tmp_path / "parent-data"), 1.5 * ONE_CALL)
    provider = FakeProvider([answer("first"), answer("never")])
    async with bootstrap(config, provider=provider, ledger_url=str(ledger)) as parent:
        first = await parent.engine.run_turn("ops", "p1", "spend a little")
        assert first.completed  # nothing spent yet
        # The child's own guard starts from the ledger: the parent's call counts,
        # and one call is still under the limit, so the child's call is allowed.
        child = spend_in_child(ledger, "c1", 1.5 * ONE_CALL)
        assert child == {"completed": True, "failure": None, "model_calls": 1}
        # The parent's guard was built (and checked) before the child spent.
        second = await parent.engine.run_turn("ops", "p1", "and once more")
        assert second.failure == "budget_exceeded"
        assert len(provider.requests) == 1  # the model was not called again
        refused = [
            e for e in events_of(parent.store, key="p1") if isinstance(e, TurnFailed)
        ]
        assert [f.kind for f in refused] == ["budget_exceeded"]
        assert refused[0].error.startswith("daily budget exceeded: spent $0.240000")
        assert model_spend(parent.store) == pytest.approx(2 * ONE_CALL)


async def test_a_child_refuses_once_the_parent_spent_the_budget(tmp_path):
    ledger = tmp_path / "shared.db"
    config = config_for(str(tmp_path / "parent-data"), 0.5 * ONE_CALL)
    provider = FakeProvider([answer("paid")])
    async with bootstrap(config, provider=provider, ledger_url=str(ledger)) as parent:
        assert (await parent.engine.run_turn("ops", "p1", "spend it all")).completed
        child = spend_in_child(ledger, "c1", 0.5 * ONE_CALL)
        assert child == {
            "completed": False,
            "failure": "budget_exceeded",
            "model_calls": 0,
        }
        (failed,) = [
            e for e in events_of(parent.store, key="c1") if isinstance(e, TurnFailed)
        ]
        assert failed.kind == "budget_exceeded"


def test_a_guard_sees_spend_appended_after_its_first_check(tmp_path):
    """Guard level: the spend of a real second process, read before each check."""
    ledger = tmp_path / "shared.db"
    store = open_store(str(ledger))
    guard = BudgetGuard(store, BudgetConfig(enabled=True, daily_limit_usd=0.2))
    assert guard.status().state == "ok"
    seen = guard.position
    spend_in_child(ledger, "c1", 10.0)
    spend_in_child(ledger, "c2", 10.0)
    status = guard.status()
    assert (status.state, status.period) == ("exceeded", "day")
    assert status.current_usd == pytest.approx(2 * ONE_CALL)
    assert guard.position > seen
    assert guard.status().current_usd == pytest.approx(2 * ONE_CALL)  # read once
    store.close()


async def test_own_calls_count_once_when_their_events_are_read_back(tmp_path):
    """add() counts a call at once; reading its committed event does not add it again."""
    ledger = tmp_path / "own.db"
    config = config_for(str(tmp_path / "data"), 100.0)
    provider = FakeProvider([answer("a"), answer("b"), answer("c")])
    async with bootstrap(config, provider=provider, ledger_url=str(ledger)) as runtime:
        for n in range(3):
            assert (await runtime.engine.run_turn("ops", "s1", f"turn {n}")).completed
        spent = runtime.engine.budget.status().current_usd
        assert spent == pytest.approx(model_spend(runtime.store))
        assert spent == pytest.approx(3 * ONE_CALL)


def test_only_this_utc_month_counts(tmp_path):
    """Spend of an earlier month is read but does not count toward this one."""
    ledger = tmp_path / "months.db"
    spend_in_child(ledger, "c1", 10.0)  # recorded now
    store = open_store(str(ledger))
    later = datetime.now(UTC).replace(day=1)
    later = later.replace(year=later.year + 1)
    guard = BudgetGuard(
        store,
        BudgetConfig(enabled=True, monthly_limit_usd=0.1),
        clock=lambda: later,
    )
    status = guard.status()
    assert status.state == "ok"
    assert status.current_usd == 0.0
    store.close()
