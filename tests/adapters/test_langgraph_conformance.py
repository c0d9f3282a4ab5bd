"""LangGraph's own checkpointer conformance suite, run against TurnledgerSaver.

``langgraph-checkpoint-conformance`` 0.0.2 (PyPI) detects which capabilities a
saver implements and runs its spec for each. TurnledgerSaver implements all eight
(the base put, put_writes, get_tuple, list, delete_thread and the extended
delete_for_runs, copy_thread, prune): every one must be detected and pass (81
tests). Run on a SQLite ledger file and on the real PostgreSQL server (never skipped
under CI=true).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from turnledger.adapters.langgraph import TurnledgerSaver


def run_suite(url: str) -> dict[str, tuple[bool | None, int, int, list[str]]]:
    @checkpointer_test(name=f"TurnledgerSaver({url.split(':', 1)[0]})")
    async def factory() -> AsyncGenerator[TurnledgerSaver, None]:
        saver = TurnledgerSaver.from_url(url)
        yield saver
        saver.close()

    report = asyncio.run(validate(factory))
    return {
        name: (r.passed, r.tests_passed, r.tests_failed, list(r.failures))
        for name, r in report.results.items()
    }


def check(results: dict[str, tuple[bool | None, int, int, list[str]]]) -> None:
    assert {c.value for c in ALL_CAPABILITIES} == set(results)
    for capability in ALL_CAPABILITIES:
        passed, count, failed, failures = results[capability.value]
        assert passed is True, (capability, failures)
        assert count > 0
        assert failed == 0
    total = sum(r[1] for r in results.values())
    print(f"conformance: {total} passed, {results}")


def test_conformance_sqlite(sqlite_path: str) -> None:
    """Every detected capability passes on a SQLite ledger."""
    check(run_suite(sqlite_path))


@pytest.mark.postgres
def test_conformance_postgres(postgres_url: str) -> None:
    """Every detected capability passes on PostgreSQL."""
    check(run_suite(postgres_url))
