"""LangGraph's own checkpointer conformance suite, run against TurnledgerSaver.

``langgraph-checkpoint-conformance`` (PyPI) detects which capabilities a saver
implements and runs its spec for each; every detected capability must pass, and the
base ones (put, put_writes, get_tuple, list, delete_thread) must be detected. Run on
a SQLite ledger file and on the real PostgreSQL server (never skipped under CI=true).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES

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
    for capability in BASE_CAPABILITIES:
        passed, count, failed, failures = results[capability.value]
        assert passed is True, (capability, failures)
        assert count > 0
        assert failed == 0
    for name, (passed, _, failed, failures) in results.items():
        assert passed is not False, (name, failures)
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
