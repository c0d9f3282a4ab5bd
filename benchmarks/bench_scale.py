"""Scale-out on PostgreSQL: append throughput with 1, 2, 4 and 8 writer processes,
and projection lag under that load.

Each writer process runs S concurrent sessions through the async facade
(``AsyncLedger``: one writer thread per process, group commit), each session
appending T turns of 8 events. Throughput is total turns / wall time, from the
moment every writer has spawned, imported and connected (a ready barrier) to the
last acknowledgement. Writers commit in parallel (no table lock; followers read
below a high-water mark). Goals, as ratios in one run on one server: 4 writers >=
2.5x one; 8 writers >= 1.0x four; each ratio is the median over ``--repeat``
rounds that each measure 1, 2, 4 and 8 writers.

Where the CPU caps it: each figure prints the CPU seconds per turn of the writer
processes (``time.process_time``) and of their own PostgreSQL backends (named
through ``PGAPPNAME``, read from ``/proc``), the turns/s that CPU allows if every
core did nothing else, and the machine's busy share while writing. One writer's
cap (cores / its CPU per turn, over its turns/s) bounds what any number of
writers can reach on this machine. Projection lag: a
projection worker follows the ledger (tracking in the same database) while 4
writers write; the lag (ledger position minus tracking position)
is sampled every 50 ms, and the time to catch up after the last write is reported.

``--diagnose`` (no goal; instead of the writers) shows why the ledger does not
NOTIFY inside its write transactions. PostgreSQL serialises every transaction that
sent a NOTIFY on one cluster-wide lock, taken at pre-commit and held until its
commit's WAL flush (``PreCommit_Notify`` in ``src/backend/commands/async.c``).
``--threads`` threads commit one-row transactions as fast as they can, for
``--seconds`` each, in three ways, round-robin within every repetition: ``none``
(``BEGIN; INSERT; COMMIT``); ``inside`` (the same with a ``NOTIFY`` in the
transaction: the old write path); ``after`` (the same, followed in the same
message by ``BEGIN; SET LOCAL synchronous_commit TO off; NOTIFY; COMMIT``, as
``wake_followers`` in ``ledger.postgres.order`` is sent with the write's COMMIT).
It prints commits/s and, per repetition, each way's ratio to ``none``.

Run: python benchmarks/bench_scale.py [--quick] [--repeat N] [--url URL] [--json PATH]
[--diagnose [--threads N] [--seconds S]]
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
from typing import Any, NamedTuple

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
from turnledger.projections.views.postgres import PostgresViewStore

APP_NAME = "turnledger_bench_scale"
"""The application name of the writers' connections (their backends' CPU is read)."""

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


async def _write(job: tuple[str, str, int, int], queues: tuple[Any, ...]) -> None:
    """Open the ledger, say ready, wait for go, write; report turns, start, end, CPU.

    ``queues``: ready (a queue), go (an event), out (a queue), measured (an event).
    """
    url, tag, sessions, turns = job
    ready, go, out, measured = queues
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

    ready.put(os.getpid())
    await asyncio.to_thread(go.wait)  # every writer starts at once
    started, cpu = time.time(), time.process_time()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    ended, cpu = time.time(), time.process_time() - cpu
    out.put((sessions * turns, started, ended, cpu))
    await asyncio.to_thread(measured.wait)  # our backends' CPU is read first
    await ledger.aclose()


def writer_main(job: tuple[str, str, int, int], queues: tuple[Any, ...]) -> None:
    """One writer process."""
    os.environ["PGAPPNAME"] = APP_NAME  # libpq names our backends
    asyncio.run(_write(job, queues))


class Run(NamedTuple):
    """One run of ``writers`` processes writing together."""

    writers: int
    turns: int
    seconds: float
    writer_cpu: float
    server_cpu: float
    machine_busy: float
    waits: dict[str, int]

    @property
    def rate(self) -> float:
        """Turns per second, from the common start to the last acknowledgement."""
        return self.turns / self.seconds

    @property
    def cpu_per_turn(self) -> float:
        """CPU seconds per turn: the writer processes plus the PostgreSQL server."""
        return (self.writer_cpu + self.server_cpu) / self.turns

    @property
    def cpu_cap(self) -> float:
        """Turns/s if every core of this machine did nothing but this work."""
        return (os.cpu_count() or 1) / self.cpu_per_turn


def run_writers(url: str, writers: int, sessions: int, turns: int) -> float:
    """Return turns/s for ``writers`` processes writing together."""
    return run_writers_cpu(url, writers, sessions, turns).rate


def run_writers_cpu(url: str, writers: int, sessions: int, turns: int) -> Run:
    """Run the writers from a common start; their CPU, the server's, the machine's."""
    ctx = mp.get_context("spawn")
    ready, go, out, measured = ctx.Queue(), ctx.Event(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=writer_main,
            args=(
                (url, f"w{writers}-{i}-{uuid.uuid4().hex[:6]}", sessions, turns),
                (ready, go, out, measured),
            ),
        )
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # spawned, imported and connected: not part of the figure
        ready.get(timeout=600)
    ours_before = _backend_cpu(url)
    busy_before = _cpu_times()
    sampler = WaitSampler(url)
    go.set()
    sampler.start()
    results = [out.get(timeout=600) for _ in procs]
    sampler.stop()
    busy_after = _cpu_times()
    ours_after = _backend_cpu(url)  # before the writers close their connections
    measured.set()
    for p in procs:
        p.join()
    server = sum(cpu - ours_before.get(pid, 0.0) for pid, cpu in ours_after.items())
    busy = (busy_after[0] - busy_before[0]) / max(1e-9, busy_after[1] - busy_before[1])
    start = min(r[1] for r in results)
    end = max(r[2] for r in results)
    return Run(
        writers,
        sum(r[0] for r in results),
        end - start,
        sum(r[3] for r in results),
        server,
        busy,
        sampler.waits,
    )


class WaitSampler(threading.Thread):
    """Samples what our writers' backends are doing (``pg_stat_activity``), 50/s."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url.split("?", maxsplit=1)[0]
        self.waits: dict[str, int] = {}
        self._done = threading.Event()

    def run(self) -> None:
        """Count each backend's state (and wait event) every 20 ms."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._done.wait(0.02):
                for state, kind, event in conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (APP_NAME,),
                ).fetchall():
                    if state == "active":
                        label = f"{kind}:{event}" if kind else "active on CPU"
                    else:
                        label = str(
                            state
                        )  # idle, idle in transaction: the client's turn
                    self.waits[label] = self.waits.get(label, 0) + 1

    def stop(self) -> None:
        """Stop sampling."""
        self._done.set()
        self.join()


def _waits_line(waits: dict[str, int]) -> str:
    total = sum(waits.values()) or 1
    top = sorted(waits.items(), key=lambda kv: -kv[1])[:5]
    return ", ".join(f"{label} {count / total:.0%}" for label, count in top)


def _backend_cpu(url: str) -> dict[int, float]:
    """CPU seconds (user + system) of each PostgreSQL backend serving our writers.

    The writers name their connections (``PGAPPNAME``); a backend's CPU is read
    from ``/proc`` (the server runs on this machine). Empty when unreadable.
    """
    with psycopg.connect(url.split("?", maxsplit=1)[0], autocommit=True) as conn:
        pids = [
            int(row[0])
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                (APP_NAME,),
            ).fetchall()
        ]
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        found[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return found


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


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def fresh_url(base: str) -> str:
    schema = f"tl_bench_{uuid.uuid4().hex[:10]}"
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def drop(url: str) -> None:
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", maxsplit=1)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def measure(args: argparse.Namespace) -> dict[int, list[Run]]:
    """Run 1, 2, 4 and 8 writers, ``args.repeat`` rounds interleaved."""
    runs: dict[int, list[Run]] = {1: [], 2: [], 4: [], 8: []}
    for _ in range(args.repeat):
        for writers, done in runs.items():
            url = fresh_url(args.url)
            try:
                open_store(url).close()
                done.append(run_writers_cpu(url, writers, args.sessions, args.turns))
            finally:
                drop(url)
    return runs


# -- --diagnose: why the writes do not NOTIFY inside their transactions --------


NOTIFY_WAYS = ("none", "inside", "after")


def _notify_commit(
    conn: psycopg.Connection[tuple[object, ...]], table: str, way: str
) -> None:
    insert = f"INSERT INTO {table} VALUES (1)"
    if way == "inside":
        conn.execute(f"BEGIN; {insert}; NOTIFY tl_probe_notify; COMMIT")
        return
    if way == "after":  # in the same message, as the ledger sends it
        conn.execute(
            f"BEGIN; {insert}; COMMIT; BEGIN; SET LOCAL synchronous_commit TO off; "
            "NOTIFY tl_probe_notify; COMMIT"
        )
        return
    conn.execute(f"BEGIN; {insert}; COMMIT")


def notify_rate(url: str, table: str, way: str, threads: int, seconds: float) -> float:
    """--diagnose: commits/s of ``threads`` committers, each on its own connection."""
    stop = threading.Event()
    counts = [0] * threads

    def worker(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                _notify_commit(conn, table, way)
                counts[i] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - started)


def diagnose(args: argparse.Namespace) -> None:
    """--diagnose: commits/s with no NOTIFY, one inside the write, one after it."""
    table = f"public.tl_probe_notify_{uuid.uuid4().hex[:8]}"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"bench_scale --diagnose: {args.threads} committers x {args.seconds} s per "
        f"way, {args.repeat} repetition(s), load {load}"
    )
    rates: dict[str, list[float]] = {way: [] for way in NOTIFY_WAYS}
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (x int)")
        try:
            for _ in range(args.repeat):
                for way in NOTIFY_WAYS:
                    rates[way].append(
                        notify_rate(args.url, table, way, args.threads, args.seconds)
                    )
        finally:
            conn.execute(f"DROP TABLE {table}")
    for way in NOTIFY_WAYS:
        ratios = [r / n for r, n in zip(rates[way], rates["none"], strict=True)]
        print(
            f"  {way:6s} {statistics.median(rates[way]):8,.0f} commits/s; vs none "
            f"per repetition: {', '.join(f'{x:.2f}' for x in ratios)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--sessions", type=int, default=16, help="sessions per writer")
    parser.add_argument("--turns", type=int, default=20, help="turns per session")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="instead of the writers, commits/s with a NOTIFY inside or after",
    )
    parser.add_argument(
        "--threads", type=int, default=4, help="--diagnose: committers (4)"
    )
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="--diagnose: seconds per way (2)"
    )
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.turns, args.repeat = 2, 2, 1
        args.seconds = 0.2
    try:
        psycopg.connect(args.url, connect_timeout=3).close()
    except psycopg.Error as e:
        print(f"PostgreSQL not available at {args.url}: {e}; nothing measured")
        return
    if args.diagnose:
        diagnose(args)
        return
    shape = f"{args.sessions} sessions x {args.turns} turns per writer"
    cores = os.cpu_count() or 1
    print(
        f"bench_scale: PostgreSQL, {shape}, {args.repeat} round(s) of 1, 2, 4, 8 "
        f"writers (medians), {cores} cores, load {_load()}"
    )
    runs = measure(args)
    figures: dict[str, float] = {}
    waits: dict[int, dict[str, int]] = {}
    for writers, done in runs.items():
        merged = waits[writers] = {}
        for r in done:
            for label, count in r.waits.items():
                merged[label] = merged.get(label, 0) + count
        rate = statistics.median(r.rate for r in done)
        writer_ms = statistics.median(1000 * r.writer_cpu / r.turns for r in done)
        server_ms = statistics.median(1000 * r.server_cpu / r.turns for r in done)
        cpu_cap = cores / ((writer_ms + server_ms) / 1000)
        figures[f"writers_{writers}_turns_per_s"] = rate
        figures[f"writers_{writers}_cpu_busy"] = statistics.median(
            r.machine_busy for r in done
        )
        figures[f"writers_{writers}_writer_cpu_ms_per_turn"] = writer_ms
        figures[f"writers_{writers}_server_cpu_ms_per_turn"] = server_ms
        figures[f"writers_{writers}_cpu_cap_turns_per_s"] = cpu_cap
        print(
            f"  {writers} writer(s): {rate:6.0f} turns/s; CPU per turn "
            f"{writer_ms:.2f} ms writers + {server_ms:.2f} ms their server backends "
            f"-> at most {cpu_cap:,.0f} turns/s on {cores} idle cores; cores used "
            f"{rate * (writer_ms + server_ms) / 1000:.2f}; machine busy "
            f"{figures[f'writers_{writers}_cpu_busy']:.0%}"
        )
    print("  what the writers' backends were doing (sampled every 20 ms):")
    for writers, merged in waits.items():
        print(f"    {writers} writer(s): {_waits_line(merged)}")
    one_cap = figures["writers_1_cpu_cap_turns_per_s"]
    cap = one_cap / figures["writers_1_turns_per_s"]
    figures["cpu_cap_ratio_vs_1"] = cap
    print(
        f"  CPU cap: one writer's turn costs "
        f"{1000 * cores / one_cap:.2f} ms of CPU (writer + server), so with "
        f"{cores} idle cores N writers reach at most {cap:.2f}x one writer; every "
        "other process's CPU (machine busy above) lowers that cap"
    )
    ratios: dict[str, dict[str, Any]] = {}
    for label, more, fewer, goal in (
        ("4 writer processes vs 1 (turns/s)", 4, 1, 2.5),
        ("8 writer processes vs 4 (turns/s)", 8, 4, 1.0),
    ):
        high = figures[f"writers_{more}_turns_per_s"]
        low = figures[f"writers_{fewer}_turns_per_s"]
        # The median of the per-round ratios (each round measures both).
        ratio = statistics.median(
            m.rate / f.rate for m, f in zip(runs[more], runs[fewer], strict=True)
        )
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
