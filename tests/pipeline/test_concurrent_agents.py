"""Concurrent writers of one agent never crash each other (issue #10 item 5).

Processes running turns of the same agent share its memory stream: autosave,
the memory and knowledge tools and consolidation all append to it. Those
appends go through :func:`~turnledger.pipeline.appending.append_decided`, which
re-decides and retries on a version conflict. Here real child processes
(``tests/pipeline/concurrent_agent_child.py``) run real engine turns against
one SQLite file or one PostgreSQL schema, in different sessions and in the same
session, and the checks of that module prove: no crashed or failed turn, every
turn complete and none interleaved with another, every memory write recorded
once and readable, forgets only of live entries, ``verify`` clean.
Full sizes (4 x 200) run in ``benchmarks/stress_agents.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.pipeline.concurrent_agent_child import check_run, run_children
from turnledger.ledger.events import MemoryStored
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.appending import (
    AppendContentionError,
    RetryPolicy,
    append_decided,
)

AGENT = "ops"
TURNS = 12


def _fact(n: int) -> MemoryStored:
    return MemoryStored(agent=AGENT, key=f"k{n}", content=f"fact {n}")


def _rival_writes(path: str, times: int):
    """A decide that lets a second real handle append first, ``times`` times."""
    rival = open_store(path)
    stream = memory_stream_id(AGENT)
    seen: list[int] = []

    def decide(head: int):
        seen.append(head)
        if len(seen) <= times:
            rival.append(
                stream,
                [_fact(100 + len(seen))],
                expected_version=rival.stream_version(stream),
            )
        return [_fact(len(seen))]

    return rival, seen, decide


def test_a_conflict_is_decided_again_at_the_new_head(
    sqlite_store: EventStore, sqlite_path: str
):
    rival, seen, decide = _rival_writes(sqlite_path, times=2)
    slept: list[float] = []
    try:
        result = append_decided(
            sqlite_store, memory_stream_id(AGENT), decide, sleep=slept.append
        )
    finally:
        rival.close()
    assert result is not None
    assert seen == [0, 1, 2]  # each retry saw the rival's write
    assert len(slept) == 2
    events = [r.event for r in sqlite_store.read_stream(memory_stream_id(AGENT))]
    assert [e.key for e in events if isinstance(e, MemoryStored)] == [
        "k101",
        "k102",
        "k3",
    ]


def test_deciding_nothing_writes_nothing(sqlite_store: EventStore):
    assert (
        append_decided(sqlite_store, memory_stream_id(AGENT), lambda _head: None)
        is None
    )
    assert sqlite_store.stream_version(memory_stream_id(AGENT)) == 0


def test_endless_contention_is_a_typed_error_with_nothing_written(
    sqlite_store: EventStore, sqlite_path: str
):
    rival, seen, decide = _rival_writes(sqlite_path, times=10**6)
    try:
        with pytest.raises(AppendContentionError, match="within 5 attempts") as caught:
            append_decided(
                sqlite_store,
                memory_stream_id(AGENT),
                decide,
                policy=RetryPolicy(attempts=5),
                sleep=lambda _s: None,
            )
    finally:
        rival.close()
    assert caught.value.attempts == 5
    assert len(seen) == 5
    keys = [
        r.event.key
        for r in sqlite_store.read_stream(memory_stream_id(AGENT))
        if isinstance(r.event, MemoryStored)
    ]
    assert keys == [f"k{100 + n}" for n in range(1, 6)]  # only the rival's


@given(
    first=st.floats(1e-6, 1.0),
    ceiling=st.floats(1e-6, 5.0),
    retry=st.integers(0, 10_000),
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
def test_delays_are_jittered_around_a_capped_doubling(first, ceiling, retry, draw):
    policy = RetryPolicy(first_delay=first, max_delay=ceiling)
    nominal = min(ceiling, first * 2.0 ** min(retry, 30))
    delay = policy.delay(retry, draw)
    assert 0.5 * nominal <= delay < 1.5 * nominal + 1e-12
    assert policy.delay(retry + 1, draw) >= delay  # never shrinks


def _check(ledger: str, sessions: list[str], memory_url: str | None = None) -> None:
    run = run_children(ledger, AGENT, sessions, TURNS, memory_url=memory_url)
    check_run(run, ledger, AGENT, memory_url=memory_url)
    total = len(sessions) * TURNS
    assert run.problems == [], run.problems
    assert run.counts["completed"] == total
    assert run.counts["turns_recorded_complete"] == total
    assert run.counts["fact_writes"] == total
    assert run.counts["facts_lost_in_memory"] == 0
    assert run.counts["shared_stores"] > 0
    assert run.counts["shared_forgets"] > 0


def test_four_processes_in_different_sessions_on_sqlite(tmp_path: Path):
    _check(str(tmp_path / "ledger.db"), ["s0", "s1", "s2", "s3"])


def test_four_processes_in_different_sessions_on_postgres(postgres_url: str):
    _check(postgres_url, ["s0", "s1", "s2", "s3"], memory_url=postgres_url)
