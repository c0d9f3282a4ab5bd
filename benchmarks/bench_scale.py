"""Scale-out on PostgreSQL: append throughput with 1, 2, 4 and 8 writer processes,
and projection lag under that load.

Each writer process runs S concurrent sessions through the async facade
(``AsyncLedger``: one writer thread per process, group commit), each session
appending T turns of 8 events. Throughput is total turns / wall time, from the
moment all writers are ready to the last acknowledgement. Writers commit in
parallel (no table lock; followers read below a high-water mark). Goals, as ratios
in one run on one server: 4 writers >= 2.5x one; 8 writers >= 1.0x four. The
machine's CPU busy share while writing is printed beside each figure (on a 2-core
machine the CPU, not the disk, is what caps the scaling). Projection lag: a
projection worker follows the ledger (tracking in the same database) while 4
writers write; the lag (ledger position minus tracking position)
is sampled every 50 ms, and the time to catch up after the last write is reported.

Run: python benchmarks/bench_scale.py [--quick] [--url URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import (
    AssistantMessage,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views_pg import PostgresViewStore

DEFAULT_URL = os.environ.get(
    "TURNLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def turn(turn_id: str) -> list:
    calls = tuple(
        ToolCallRecord(
            id=f"{turn_id}-{i}", name="file_read", arguments='{"path": "a.txt"}'
        )
        for i in range(2)
    )
    return [
        TurnStarted(turn_id=turn_id, origin="interactive", user_input="question " * 20),
        ModelCalled(turn_id=turn_id, provider="p", model="m", input_tokens=900),
        AssistantMessage(turn_id=turn_id, tool_calls=calls),
        *(
            ToolResultRecorded(
                turn_id=turn_id, call_id=c.id, tool=c.name, output="x" * 300
            )
            for c in calls
        ),
        ModelCalled(turn_id=turn_id, provider="p", model="m", iteration=1),
        AssistantMessage(turn_id=turn_id, text="answer " * 25, iteration=1),
        TurnCompleted(turn_id=turn_id),
    ]


async def _write(url: str, tag: str, sessions: int, turns: int, start: float) -> int:
    ledger = AsyncLedger(open_store(url))

    async def session(i: int) -> None:
        stream = session_stream_id(tag, f"s{i}")
        result = await ledger.append(
            stream, [SessionOpened(agent=tag, session_key=f"s{i}")], expected_version=0
        )
        version = result.last_version
        for t in range(turns):
            result = await ledger.append(
                stream, turn(f"{tag}-{i}-{t}"), expected_version=version
            )
            version = result.last_version

    await asyncio.sleep(max(0.0, start - time.time()))  # start together
    await asyncio.gather(*(session(i) for i in range(sessions)))
    await ledger.aclose()
    return sessions * turns


def writer_main(job: tuple[str, str, int, int, float], out: Any) -> None:
    url, tag, sessions, turns, start = job
    done = asyncio.run(_write(url, tag, sessions, turns, start))
    out.put((done, time.time(), time.process_time()))


def run_writers(url: str, writers: int, sessions: int, turns: int) -> float:
    """Return turns/s for ``writers`` processes writing together."""
    rate, _ = run_writers_cpu(url, writers, sessions, turns)
    return rate


def run_writers_cpu(
    url: str, writers: int, sessions: int, turns: int
) -> tuple[float, float]:
    """Return turns/s and the machine's CPU busy share while writing."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 2.0  # time to spawn and import
    procs = [
        ctx.Process(
            target=writer_main,
            args=(
                (url, f"w{writers}-{i}-{uuid.uuid4().hex[:6]}", sessions, turns, start),
                out,
            ),
        )
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    busy_before = _cpu_times()
    results = [out.get(timeout=600) for _ in procs]
    busy_after = _cpu_times()
    for p in procs:
        p.join()
    total = sum(r[0] for r in results)
    end = max(r[1] for r in results)
    busy = (busy_after[0] - busy_before[0]) / max(1e-9, busy_after[1] - busy_before[1])
    return total / (end - start), busy


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (0s elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split()[1:9]]
    except OSError:
        return 0.0, 1.0
    idle = fields[3] + fields[4]
    return float(sum(fields) - idle), float(sum(fields))


def measure_lag(url: str, sessions: int, turns: int) -> dict[str, float]:
    """Follow the ledger with a worker while 4 writers write; sample the lag."""
    store = open_store(url)
    views = PostgresViewStore(url)
    runner = ProjectionRunner(store, views, [SESSION_HISTORY])
    stop = threading.Event()
    worker = threading.Thread(target=runner.work, args=(stop,), daemon=True)
    worker.start()
    samples: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            samples.append(store.max_position() - views.tracking(SESSION_HISTORY.name))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    run_writers(url, 4, sessions, turns)
    written = time.perf_counter()
    target = store.max_position()
    while views.tracking(SESSION_HISTORY.name) < target:
        time.sleep(0.01)
    catch_up = time.perf_counter() - written
    sampling.set()
    stop.set()
    worker.join()
    sampler.join()
    views.close()
    store.close()
    return {
        "lag_events_p50": statistics.median(samples) if samples else 0.0,
        "lag_events_max": float(max(samples, default=0)),
        "catch_up_s": catch_up,
    }


def fresh_url(base: str) -> str:
    schema = f"tl_bench_{uuid.uuid4().hex[:10]}"
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def drop(url: str) -> None:
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", maxsplit=1)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--sessions", type=int, default=16, help="sessions per writer")
    parser.add_argument("--turns", type=int, default=20, help="turns per session")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.turns = 2, 2
    try:
        psycopg.connect(args.url, connect_timeout=3).close()
    except psycopg.Error as e:
        print(f"PostgreSQL not available at {args.url}: {e}; nothing measured")
        return
    figures: dict[str, float] = {}
    shape = f"{args.sessions} sessions x {args.turns} turns per writer"
    print(f"bench_scale: PostgreSQL, {shape}")
    for writers in (1, 2, 4, 8):
        url = fresh_url(args.url)
        try:
            open_store(url).close()
            rate, busy = run_writers_cpu(url, writers, args.sessions, args.turns)
        finally:
            drop(url)
        figures[f"writers_{writers}_turns_per_s"] = rate
        figures[f"writers_{writers}_cpu_busy"] = busy
        print(
            f"  {writers} writer(s): {rate:8.0f} turns/s; machine CPU busy "
            f"{busy:.0%} of {os.cpu_count()} cores"
        )
    ratios: dict[str, dict[str, Any]] = {}
    for label, more, fewer, goal in (
        ("4 writer processes vs 1 (turns/s)", 4, 1, 2.5),
        ("8 writer processes vs 4 (turns/s)", 8, 4, 1.0),
    ):
        high = figures[f"writers_{more}_turns_per_s"]
        low = figures[f"writers_{fewer}_turns_per_s"]
        ratio = high / low
        verdict = "PASS" if ratio >= goal else "MISS"
        figures[f"ratio_{more}_vs_{fewer}"] = ratio
        ratios[label] = {"ratio": ratio, "goal": goal, "verdict": verdict}
        print(
            f"{verdict}  {label}: {high:,.0f} vs {low:,.0f} "
            f"-> ratio {ratio:.2f}; goal >= {goal:.2f}"
        )
    url = fresh_url(args.url)
    try:
        open_store(url).close()
        figures.update(measure_lag(url, args.sessions, args.turns))
    finally:
        drop(url)
    p50, top = figures["lag_events_p50"], figures["lag_events_max"]
    caught = figures["catch_up_s"] * 1000
    print(
        f"  projection lag under 4 writers: p50 {p50:.0f} events, max {top:.0f}; "
        f"caught up {caught:.0f} ms after the last write"
    )
    if args.json:
        doc = {"series": figures, "ratios": ratios}
        Path(args.json).write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
