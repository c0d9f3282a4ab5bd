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

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.pipeline.concurrent_agent_child import HANG_GUARD, check_run, run_children
from turnledger.ledger.events import MemoryStored
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.appending import (
    AppendContentionError,
    RetryPolicy,
    append_decided,
)
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.engine.session_lock import SessionBusyError, SessionLocks
from turnledger.pipeline.memory import MemoryService, StaleEntryError

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


def _check(
    ledger: str, sessions: list[str], memory_url: str | None = None, think: float = 0.0
) -> None:
    run = run_children(
        ledger, AGENT, sessions, TURNS, memory_url=memory_url, think=think
    )
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


# In one session the session lock serializes the turns; the children pause
# between turns as users do (the lock is not fair, see session_lock).
SAME_SESSION_PAUSE = 0.03


def test_four_processes_in_the_same_session_on_sqlite(tmp_path: Path):
    _check(str(tmp_path / "ledger.db"), ["s"] * 4, think=SAME_SESSION_PAUSE)


def test_four_processes_in_the_same_session_on_postgres(postgres_url: str):
    _check(postgres_url, ["s"] * 4, memory_url=postgres_url, think=SAME_SESSION_PAUSE)


# -- the session lock -----------------------------------------------------------

HOLDER = """
import asyncio, sys
from uuid import UUID
from turnledger.ledger.store import open_store
from turnledger.pipeline.engine.session_lock import SessionLocks

async def main():
    locks = SessionLocks(open_store(sys.argv[1]))
    async with locks.hold(UUID(sys.argv[2])):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def _stream(name: str):
    return session_stream_id(AGENT, name)


async def _interleaving(
    store: EventStore, other: EventStore, a: str, b: str
) -> list[str]:
    first, second = SessionLocks(store), SessionLocks(other)
    steps: list[str] = []
    entered = asyncio.Event()

    async def one() -> None:
        async with first.hold(_stream(a)):
            steps.append("a in")
            entered.set()
            for _ in range(5):
                await asyncio.sleep(0.01)
            steps.append("a out")

    async def two() -> None:
        await entered.wait()
        async with second.hold(_stream(b)):
            steps.append("b in")
        steps.append("b out")

    try:
        await asyncio.gather(one(), two())
    finally:
        first.close()
        second.close()
    return steps


def _stores(kind: str, request: pytest.FixtureRequest) -> tuple[EventStore, EventStore]:
    if kind == "sqlite":
        path = request.getfixturevalue("sqlite_path")
    else:
        path = request.getfixturevalue("postgres_url")
    store, other = open_store(path), open_store(path)
    request.addfinalizer(store.close)
    request.addfinalizer(other.close)
    return store, other


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_second_writer_of_a_session_waits_for_the_first(kind, request):
    store, other = _stores(kind, request)
    steps = asyncio.run(_interleaving(store, other, "s1", "s1"))
    assert steps == ["a in", "a out", "b in", "b out"]


def test_the_postgres_lock_connection_is_open_only_while_a_lock_is_held(postgres_url):
    store = open_store(postgres_url)
    locks = SessionLocks(store)
    seen: list[object] = []

    async def turn() -> None:
        async with locks.hold(_stream("s1")):
            seen.append(locks._locks._conn)

    try:
        asyncio.run(turn())
        asyncio.run(turn())
    finally:
        locks.close()
        store.close()
    assert all(conn is not None for conn in seen)
    assert seen[0] is not seen[1]
    assert locks._locks._conn is None


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_other_sessions_do_not_wait(kind, request):
    store, other = _stores(kind, request)
    steps = asyncio.run(_interleaving(store, other, "s1", "s2"))
    assert steps == ["a in", "b in", "b out", "a out"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_dead_holder_frees_the_session_and_a_live_one_is_a_typed_busy(kind, request):
    store, _ = _stores(kind, request)
    url = str(
        request.getfixturevalue("sqlite_path" if kind == "sqlite" else "postgres_url")
    )
    stream = _stream("s1")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, str(stream)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        locks = SessionLocks(store, wait=0.05)

        async def enter() -> None:
            async with locks.hold(stream):
                pass

        with pytest.raises(SessionBusyError, match="another writer"):
            asyncio.run(enter())
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        locks.wait = HANG_GUARD  # the server may notice a closed connection late
        asyncio.run(enter())
        locks.close()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_compare_and_set_store_refuses_an_entry_another_writer_rewrote(
    tmp_path: Path,
):
    path = str(tmp_path / "ledger.db")
    config = parse_config(f'data_dir = "{tmp_path}"\n')
    mine, theirs = open_store(path), open_store(path)
    memory = MemoryService(mine, config, ledger_url=path)
    other = MemoryService(theirs, config, ledger_url=path)
    try:
        memory.store_entry(AGENT, "k", "old")
        other.store_entry(AGENT, "k", "new")  # another process rewrites it
        version = mine.stream_version(memory_stream_id(AGENT))
        with pytest.raises(StaleEntryError, match="'k'"):
            memory.store_entry(AGENT, "k", "old, merged", if_content="old")
        assert mine.stream_version(memory_stream_id(AGENT)) == version
        assert memory.get(AGENT, "k").content == "new"
        memory.store_entry(AGENT, "k", "new, merged", if_content="new")
        assert other.get(AGENT, "k").content == "new, merged"
    finally:
        memory.close()
        other.close()
        mine.close()
        theirs.close()
