"""64 concurrent sessions through the turn engine vs raw group commits of the same rows.

``engine``: one runtime built by :func:`turnledger.pipeline.bootstrap.bootstrap`
(SQLite ledger, WAL, ``synchronous=FULL``; zero-latency scripted provider; an
instant tool; autosave off), ``--sessions`` sessions each running ``--turns``
turns concurrently on one event loop; the async ledger group-commits their steps.

``raw``: the rows the engine run wrote (same streams, versions, topics and
bytes), inserted with raw ``sqlite3`` into the same table layout, in
transactions of ``--sessions`` steps each (``BEGIN IMMEDIATE ... COMMIT``, one
fsync each): the group commits of the same events, without the engine.

``minimal`` (an info row, no goal): the engine's floor. The very appends the
engine run made (same streams, events, idempotency keys and expected
versions, read back from the ledger) are made again through
:class:`~turnledger.ledger.aio.AsyncLedger` into a fresh ledger, each
session's appends in order, the sessions concurrently: encoding, validation,
chaining, group commit and the acknowledgements, without the engine (no
recall, prompt, provider, tools or session lock). ``engine / minimal`` is what
the engine itself costs; ``minimal / raw`` is where the limit is before any
engine code runs.

Goal (issue "one read path", item 3): engine turns/s >= 0.7x raw turns/s, the
median of per-repetition ratios. Always exits 0.

Run::

    .venv/bin/python benchmarks/bench_engine_sessions.py            # 64 x 10 turns
    .venv/bin/python benchmarks/bench_engine_sessions.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sqlite3
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import structlog
from _harness import Scratch

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import Event
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse, ToolSpec
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall, starts_turn

GOAL = 0.7
SCHEMA = (
    "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, "
    "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
)


class InstantTool:
    """Answers at once."""

    spec = ToolSpec(name="grep_logs", description="Search the logs.")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Return a fixed output."""
        del arguments, context
        return ToolOutcome(output="ERROR export: no such column: amount_cents\n" * 4)


def answer(request: ChatRequest) -> ChatResponse:
    """One tool call on a turn's first model call, then the answer."""
    messages = request.messages
    start = next(
        i for i in range(len(messages) - 1, -1, -1) if starts_turn(messages[i])
    )
    if any(m.role == "assistant" for m in messages[start:]):
        return ChatResponse(text="The export broke on billing_events; rerun it.")
    call = ToolCall(id=f"call_{uuid4().hex[:12]}", name="grep_logs", arguments="{}")
    return ChatResponse(text="Let me look.", tool_calls=(call,))


async def engine_run(path: Path, sessions: int, turns: int) -> tuple[float, int]:
    """Run the sessions concurrently; return seconds and steps committed."""
    config = parse_config(
        f'ledger = "{path}"\ndata_dir = "{path.parent / "data"}"\n'
        "[memory]\nautosave = false\n"
    )
    provider = ScriptedProvider([answer] * (sessions * turns * 3))
    async with bootstrap(
        config, provider=provider, tools={"grep_logs": InstantTool()}
    ) as runtime:
        for s in range(sessions):  # sessions opened before the clock starts
            await runtime.engine.open_session("bench", f"s{s}")
        runtime.memory.backend("bench")

        async def session(s: int) -> None:
            for t in range(turns):
                outcome = await runtime.engine.run_turn("bench", f"s{s}", f"q {t}")
                if not outcome.completed:
                    msg = f"Expected a completed turn, found {outcome}"
                    raise RuntimeError(msg)

        before = runtime.ledger.appends_committed
        started = time.perf_counter()
        await asyncio.gather(*(session(s) for s in range(sessions)))
        seconds = time.perf_counter() - started
        steps = runtime.ledger.appends_committed - before
    return seconds, steps


def rows_of(path: Path, skip: int) -> list[tuple[str, int, str, bytes]]:
    """The rows the engine wrote after the first ``skip`` (the session openings)."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM "
            "stored_events WHERE rowid > ? ORDER BY rowid",
            (skip,),
        ).fetchall()


def raw_run(path: Path, rows: Sequence[tuple[Any, ...]], commits: int) -> float:
    """Insert the rows in ``commits`` BEGIN IMMEDIATE..COMMIT groups; seconds."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(SCHEMA)
    size = max(1, -(-len(rows) // max(1, commits)))
    started = time.perf_counter()
    for start in range(0, len(rows), size):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO stored_events VALUES (?,?,?,?)", rows[start : start + size]
        )
        conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


Step = tuple[str, int, list[Event]]
"""One append: its idempotency key, its first version, its events."""


def appends_of(path: Path) -> dict[UUID, list[Step]]:
    """Every append the engine made, per stream in order, read from the ledger.

    Raises:
        RuntimeError: Some event was appended without an idempotency key (the
            appends could not be told apart).
    """
    steps: dict[UUID, list[Step]] = {}
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT key, stream, first_version, last_version "
            "FROM turnledger_appends ORDER BY first_version"
        ).fetchall()
        total = conn.execute("SELECT count(*) FROM stored_events").fetchone()[0]
    store = open_store(str(path))
    try:
        events: dict[UUID, list[Event]] = {}
        for key, stream_hex, first, last in rows:
            stream = UUID(stream_hex)
            if stream not in events:
                events[stream] = [r.event for r in store.read_stream(stream)]
            steps.setdefault(stream, []).append(
                (key, first, events[stream][first - 1 : last])
            )
    finally:
        store.close()
    if sum(len(e) for _, _, e in (s for v in steps.values() for s in v)) != total:
        msg = "Expected every event appended under an idempotency key, found fewer"
        raise RuntimeError(msg)
    return steps


async def minimal_run(path: Path, steps: dict[UUID, list[Step]]) -> float:
    """Make the same appends through AsyncLedger (openings before the clock)."""
    async with AsyncLedger(open_store(str(path))) as ledger:

        async def replay(stream: UUID, mine: Sequence[Step]) -> None:
            for key, first, events in mine:
                await ledger.append(
                    stream, events, expected_version=first - 1, idempotency_key=key
                )

        await asyncio.gather(*(replay(s, v[:1]) for s, v in steps.items()))
        started = time.perf_counter()
        await asyncio.gather(*(replay(s, v[1:]) for s, v in steps.items()))
        return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    """Run both cases ``--repeat`` times; print the ratio and the verdict."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--turns", type=int, default=10, help="turns per session")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.turns, args.repeat = 4, 2, 1
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )
    scratch = Scratch("bench_engine_sessions")
    root = scratch.root
    ratios, engine_rates, raw_rates, minimal_rates = [], [], [], []
    load_before = os.getloadavg()[0]
    try:
        for i in range(args.repeat):
            run_dir = root / f"r{i}"
            run_dir.mkdir()
            ledger = run_dir / "ledger.db"
            seconds, steps = asyncio.run(engine_run(ledger, args.sessions, args.turns))
            turns = args.sessions * args.turns
            rows = rows_of(ledger, skip=args.sessions)
            commits = max(1, steps // args.sessions)
            raw_seconds = raw_run(run_dir / "raw.db", rows, commits)
            minimal_seconds = asyncio.run(
                minimal_run(run_dir / "minimal.db", appends_of(ledger))
            )
            engine_rates.append(turns / seconds)
            raw_rates.append(turns / raw_seconds)
            minimal_rates.append(turns / minimal_seconds)
            ratios.append(engine_rates[-1] / raw_rates[-1])
    finally:
        scratch.cleanup()
    ratio = statistics.median(ratios)
    engine, raw = statistics.median(engine_rates), statistics.median(raw_rates)
    minimal = statistics.median(minimal_rates)
    print(
        f"bench_engine_sessions: {args.sessions} sessions x {args.turns} turns, "
        f"SQLite FULL; repeat {args.repeat}; load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        f"({os.cpu_count()} CPUs)"
    )
    print(
        f"engine {engine:,.0f} turns/s vs raw group commits {raw:,.0f} turns/s "
        f"({1e6 / engine:,.0f} vs {1e6 / raw:,.0f} µs per turn)"
    )
    print(
        f"info  minimal engine (the same appends through AsyncLedger, no engine): "
        f"{minimal:,.0f} turns/s ({1e6 / minimal:,.0f} µs per turn) = "
        f"{minimal / raw:.2f}x raw; engine / minimal = {engine / minimal:.2f}"
    )
    print(
        f"{'PASS' if ratio >= GOAL else 'MISS'}  engine / raw = {ratio:.2f} "
        f"(per-repeat {min(ratios):.2f}-{max(ratios):.2f}); goal >= {GOAL}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
