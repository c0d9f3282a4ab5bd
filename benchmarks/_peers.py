"""What the bench_peers_* scripts share: the workload, turnledger's cases, the report.

The workload is N sessions of M turns, each turn a user message (~200 chars), an
assistant message with 2 tool calls (JSON arguments), the 2 tool results (~300
chars each) and a final answer (~200 chars); the texts, tool names, arguments and
call ids come from one seeded pool, the same for every system. turnledger writes a
turn as ONE ``append`` of 6 events (TurnStarted, AssistantMessage with 2
ToolCallRecord, 2 ToolResultRecorded, AssistantMessage with the answer,
TurnCompleted): ``EventStore.append`` (sync), ``AsyncLedger.append`` (async, one
thread hop; concurrent sessions are group-committed), and the raw floor, one
sqlite3 transaction of the same 6 rows per turn (WAL + FULL).

A case body returns an :class:`Outcome` (seconds, per-turn latencies, history load
time, bytes, rows); a :class:`Recorder` keeps those of timed runs; a
:class:`Goal` compares two rows (rates: ours / theirs; bytes and load: theirs /
ours) and :func:`report` prints the tables and the goal lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from _harness import (
    Case,
    Ratio,
    Scratch,
    Series,
    device_of,
    percentile,
    run_rounds,
    seeded_text,
    write_json,
)

from turnledger.ledger import (
    AssistantMessage,
    Event,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
    session_stream_id,
)
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.store import open_store

AGENT = "bench"
TOOLS = ("grep_logs", "search_code")
TEXT = (
    "the export job failed again last night after the schema migration, can you "
    "check logs for the nightly run and tell me which table broke, then propose a "
    "fix that keeps the retention policy and does not touch production credentials "
    "please also summarise what changed since Tuesday in the billing service repo"
)
WORDS = TEXT.split()
EVENTS_PER_TURN = 6  # turnledger events per turn


# -- workload --------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    """One tool call of a turn and its result."""

    name: str
    args: dict[str, Any]
    arguments: str  # the same args as JSON text
    output: str


@dataclass(frozen=True)
class Turn:
    """The payload texts of one turn (ids are made per session and turn)."""

    user: str
    tools: tuple[ToolUse, ToolUse]
    answer: str


def make_pool(rng: random.Random, count: int) -> list[Turn]:
    """Return ``count`` distinct turn payloads."""
    pool = []
    for i in range(count):
        uses = []
        for k, name in enumerate(TOOLS):
            args = {
                "path": f"/srv/export/logs/nightly-{i:03d}-{k}.log",
                "pattern": "ERROR|Traceback|IntegrityError",
                "context_lines": 5,
            }
            uses.append(
                ToolUse(name, args, json.dumps(args), seeded_text(rng, 300, WORDS))
            )
        pool.append(
            Turn(
                seeded_text(rng, 200, WORDS),
                (uses[0], uses[1]),
                seeded_text(rng, 200, WORDS),
            )
        )
    return pool


class Workload:
    """Which payload each (session, turn) gets, and its ids."""

    def __init__(self, pool: Sequence[Turn]) -> None:
        self.pool = list(pool)
        self.by_user = {t.user: t for t in self.pool}
        self.outputs = {u.args["path"]: u.output for t in self.pool for u in t.tools}

    def turn(self, session: int, index: int) -> Turn:
        """Return the payload of a session's turn."""
        return self.pool[(session * 7 + index) % len(self.pool)]

    @staticmethod
    def call_id(session: str, index: int, k: int) -> str:
        """Return the id of the k-th tool call of a turn (same for every system)."""
        return f"call_{session}_{index:05d}_{k}"


def session_key(s: int) -> str:
    """Return the name of session ``s``."""
    return f"s{s:03d}"


def ledger_turn(w: Workload, s: int, t: int) -> list[Event]:
    """Return one turn as turnledger events (appended in ONE call)."""
    turn = w.turn(s, t)
    key = session_key(s)
    turn_id = f"turn_{key}_{t:05d}"
    calls = tuple(
        ToolCallRecord(id=w.call_id(key, t, k), name=u.name, arguments=u.arguments)
        for k, u in enumerate(turn.tools)
    )
    return [
        TurnStarted(turn_id=turn_id, origin="interactive", user_input=turn.user),
        AssistantMessage(turn_id=turn_id, tool_calls=calls),
        *(
            ToolResultRecorded(
                turn_id=turn_id,
                call_id=call.id,
                tool=call.name,
                output=u.output,
                original_chars=len(u.output),
                kept_chars=len(u.output),
            )
            for call, u in zip(calls, turn.tools, strict=True)
        ),
        AssistantMessage(turn_id=turn_id, text=turn.answer, iteration=1),
        TurnCompleted(turn_id=turn_id, iterations=2, duration_ms=1234.5),
    ]


# -- measures ----------------------------------------------------------------


def settle(path: Path) -> tuple[int, dict[str, int]]:
    """Return the database's bytes on disk and the row count of each table.

    Bytes are the file plus its WAL after a TRUNCATE checkpoint; call it with every
    other connection closed.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        rows = {
            t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables
        }
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    return size, rows


@dataclass
class Extras:
    """What a case measures besides its rate (timed runs only, not warm-ups)."""

    latencies_s: list[float] = field(default_factory=list)
    load_s: list[float] = field(default_factory=list)
    bytes_per_turn: list[float] = field(default_factory=list)
    groups: list[float] = field(default_factory=list)  # mean appends per commit
    rows_per_turn: dict[str, float] = field(default_factory=dict)  # last timed run

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON."""
        return {
            "latency_p50_ms": percentile(self.latencies_s, 50) * 1e3,
            "latency_p95_ms": percentile(self.latencies_s, 95) * 1e3,
            "load_history_ms": _median(self.load_s) * 1e3,
            "bytes_per_turn": _median(self.bytes_per_turn),
            "bytes_per_turn_per_repeat": self.bytes_per_turn,
            "mean_group": _median(self.groups),
            "rows_per_turn": self.rows_per_turn,
        }


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Outcome:
    """What one run of a case returns to its recorder."""

    seconds: float
    latencies_s: list[float]
    load_s: float
    bytes_used: int
    turns: int
    group: float = float("nan")
    rows: dict[str, int] = field(default_factory=dict)


class Recorder:
    """Turns a case body into a harness ``run(n)``; keeps the extras of timed runs."""

    def __init__(self, empty_bytes: int) -> None:
        self.extras = Extras()
        self.empty_bytes = empty_bytes

    def wrap(
        self, full_n: int, body: Callable[[int], Outcome]
    ) -> Callable[[int], float]:
        """Return ``run(n)`` for :class:`Case`; records extras when ``n == full_n``."""

        def run(n: int) -> float:
            out = body(n)
            if n == full_n:
                self.extras.latencies_s.extend(out.latencies_s)
                self.extras.load_s.append(out.load_s)
                used = out.bytes_used - self.empty_bytes
                self.extras.bytes_per_turn.append(used / out.turns)
                self.extras.groups.append(out.group)
                self.extras.rows_per_turn = {
                    table: count / out.turns for table, count in out.rows.items()
                }
            return out.seconds

        return run


LOAD_READS = 5  # full-history reads per run; the median is kept


def timed_loads(read: Callable[[], int], expected: int) -> float:
    times = []
    for _ in range(LOAD_READS):
        start = time.perf_counter()
        count = read()
        times.append(time.perf_counter() - start)
        if count != expected:
            msg = f"Expected a history of {expected}, found {count}"
            raise RuntimeError(msg)
    return statistics.median(times)


async def timed_loads_async(read: Callable[[], Awaitable[int]], expected: int) -> float:
    times = []
    for _ in range(LOAD_READS):
        start = time.perf_counter()
        count = await read()
        times.append(time.perf_counter() - start)
        if count != expected:
            msg = f"Expected a history of {expected}, found {count}"
            raise RuntimeError(msg)
    return statistics.median(times)


# -- turnledger ------------------------------------------------------------------------


def ledger_empty_bytes(files: Scratch) -> int:
    """Bytes of a freshly opened, empty ledger."""
    path = files.fresh()
    open_store(str(path)).close()
    size, _ = settle(path)
    files.drop(path)
    return size


RAW_SCHEMA = (
    "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, "
    "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
)


def raw_floor(files: Scratch, w: Workload, sessions: int) -> Callable[[int], Outcome]:
    """The floor of one commit per turn: raw sqlite3, WAL + FULL, BEGIN, 6 rows, COMMIT.

    The rows are the ledger's own (pre-encoded, so only SQLite is timed).
    """

    def body(n: int) -> Outcome:
        rounds = max(1, n // sessions)
        scratch = files.fresh()
        with open_store(str(scratch)) as store:
            work = [
                [
                    [
                        (stream.hex, r.originator_version, r.topic, r.state)
                        for r in store.encode(
                            stream, ledger_turn(w, s, t), t * EVENTS_PER_TURN + 1, 0
                        ).rows
                    ]
                    for t in range(rounds)
                ]
                for s, stream in (
                    (s, session_stream_id(AGENT, session_key(s)))
                    for s in range(sessions)
                )
            ]
        files.drop(scratch)
        path = files.fresh()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(RAW_SCHEMA)
        latencies = []
        start = time.perf_counter()
        for turns in work:
            for rows in turns:
                t0 = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows)
                conn.execute("COMMIT")
                latencies.append(time.perf_counter() - t0)
        seconds = time.perf_counter() - start
        conn.close()
        size, table_rows = settle(path)
        files.drop(path)
        return Outcome(
            seconds, latencies, float("nan"), size, rounds * sessions, rows=table_rows
        )

    return body


def raw_empty_bytes(files: Scratch) -> int:
    """Bytes of an empty raw table."""
    path = files.fresh()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(RAW_SCHEMA)
    conn.close()
    size, _ = settle(path)
    files.drop(path)
    return size


def ledger_sync(files: Scratch, w: Workload, sessions: int) -> Callable[[int], Outcome]:
    """Sessions one after another; ``EventStore.append`` of one turn per call."""

    def body(n: int) -> Outcome:
        path = files.fresh()
        store = open_store(str(path))
        rounds = max(1, n // sessions)
        streams = [session_stream_id(AGENT, session_key(s)) for s in range(sessions)]
        work = [[ledger_turn(w, s, t) for t in range(rounds)] for s in range(sessions)]
        latencies = []
        start = time.perf_counter()
        for stream, turns in zip(streams, work, strict=True):
            version = 0
            for events in turns:
                t0 = time.perf_counter()
                result = store.append(stream, events, expected_version=version)
                latencies.append(time.perf_counter() - t0)
                version = result.last_version
        seconds = time.perf_counter() - start
        load = timed_loads(
            lambda: len(store.read_stream(streams[0])), rounds * EVENTS_PER_TURN
        )
        store.close()
        size, rows = settle(path)
        files.drop(path)
        return Outcome(seconds, latencies, load, size, rounds * sessions, 1.0, rows)

    return body


async def run_sessions(
    sessions: int, at_once: bool, session: Callable[[int], Awaitable[None]]
) -> float:
    """Run ``session(s)`` for every session, all at once or one after another."""
    start = time.perf_counter()
    if at_once:
        await asyncio.gather(*(session(s) for s in range(sessions)))
    else:
        for s in range(sessions):
            await session(s)
    return time.perf_counter() - start


def ledger_async(
    files: Scratch, w: Workload, sessions: int, at_once: bool
) -> Callable[[int], Outcome]:
    """Sessions awaiting ``AsyncLedger.append`` turn by turn (group commit)."""

    async def drive(path: Path, rounds: int) -> Outcome:
        ledger = AsyncLedger(open_store(str(path)))
        streams = [session_stream_id(AGENT, session_key(s)) for s in range(sessions)]
        work = [[ledger_turn(w, s, t) for t in range(rounds)] for s in range(sessions)]
        latencies: list[float] = []

        async def session(s: int) -> None:
            version = 0
            for events in work[s]:
                t0 = time.perf_counter()
                result = await ledger.append(
                    streams[s], events, expected_version=version
                )
                latencies.append(time.perf_counter() - t0)
                version = result.last_version

        seconds = await run_sessions(sessions, at_once, session)
        group = ledger.appends_committed / max(1, ledger.groups_committed)

        async def read() -> int:
            return len(await ledger.read_stream(streams[0]))

        load = await timed_loads_async(read, rounds * EVENTS_PER_TURN)
        await ledger.aclose()
        return Outcome(seconds, latencies, load, 0, rounds * sessions, group)

    def body(n: int) -> Outcome:
        path = files.fresh()
        out = asyncio.run(drive(path, max(1, n // sessions)))
        out.bytes_used, out.rows = settle(path)
        files.drop(path)
        return out

    return body


# -- the runs --------------------------------------------------------------------------


@dataclass
class Row:
    """One system in one run: its case, what it recorded, its timings once run."""

    key: str  # "1.<name>": the single-session run; "2.<name>": the concurrent run
    label: str
    note: str
    case: Case
    recorder: Recorder
    series: Series | None = None


def make_row(
    args: argparse.Namespace,
    key: str,
    label: str,
    note: str,
    *,
    body: Callable[[int], Outcome],
    empty: int,
) -> Row:
    """A row whose case runs ``body``: every session of its run, ``--turns`` each."""
    sessions = args.serial_sessions if key.startswith("1.") else args.sessions
    n = args.turns * sessions
    recorder = Recorder(empty)
    warm = sessions * max(1, args.turns // 10)
    return Row(
        key,
        label,
        note,
        Case(key, n, recorder.wrap(n, body), "turn", note, warm),
        recorder,
    )


def ledger_rows(
    files: Scratch, w: Workload, args: argparse.Namespace, keys: Sequence[str]
) -> dict[str, Row]:
    """turnledger's rows (and the raw floor's) among ``keys``, in the order given."""
    k, c = args.serial_sessions, args.sessions
    ledger_empty = ledger_empty_bytes(files)
    makers: dict[str, Callable[[], Row]] = {
        "1.raw_floor": lambda: make_row(
            args,
            "1.raw_floor",
            "raw sqlite3 (floor)",
            "1 txn of the 6 rows/turn, WAL+FULL",
            body=raw_floor(files, w, k),
            empty=raw_empty_bytes(files),
        ),
        "1.turnledger_sync": lambda: make_row(
            args,
            "1.turnledger_sync",
            "turnledger EventStore.append",
            "sync, 1 append (6 events)/turn",
            body=ledger_sync(files, w, k),
            empty=ledger_empty,
        ),
        "1.turnledger_async": lambda: make_row(
            args,
            "1.turnledger_async",
            "turnledger AsyncLedger.append",
            "async, 1 append (6 events)/turn",
            body=ledger_async(files, w, k, at_once=False),
            empty=ledger_empty,
        ),
        "2.turnledger_async": lambda: make_row(
            args,
            "2.turnledger_async",
            "turnledger AsyncLedger.append",
            f"{c} tasks, group commit",
            body=ledger_async(files, w, c, at_once=True),
            empty=ledger_empty,
        ),
    }
    return {key: makers[key]() for key in keys}


def measure(
    rows: dict[str, Row], order: Sequence[str], args: argparse.Namespace
) -> None:
    """Run the rows' cases, each run round-robin in ``order``; keep their series.

    The compared cases sit next to each other in ``order``, so they run close in
    time in every repetition.
    """
    cases = [rows[key].case for key in order]
    for prefix, repeat in (("1.", args.repeat_single), ("2.", args.repeat)):
        run = [c for c in cases if c.name.startswith(prefix)]
        for s in run_rounds(run, repeat=repeat, warmup=args.warmup):
            rows[s.name].series = s


@dataclass
class Goal:
    """A goal line: ours / theirs (rates) or theirs / ours (bytes)."""

    name: str
    ours: str
    theirs: str
    goal: float | None
    kind: str = "rate"  # rate: ours / theirs; bytes, load: theirs / ours


@dataclass
class GoalResult:
    """A goal's outcome."""

    goal: Goal
    ratio: float
    per_repeat: list[float]
    verdict: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON."""
        return {
            "ours": self.goal.ours,
            "theirs": self.goal.theirs,
            "kind": self.goal.kind,
            "goal": self.goal.goal,
            "ratio": self.ratio,
            "ratio_per_repeat": self.per_repeat,
            "verdict": self.verdict,
            "detail": self.detail,
        }


def judge(goal: Goal, rows: dict[str, Row]) -> GoalResult:
    """Compute one goal's ratio from the rows' series and extras."""
    ours, theirs = rows[goal.ours], rows[goal.theirs]
    if goal.kind in ("bytes", "load"):
        x, y = ours.recorder.extras, theirs.recorder.extras
        a, b = (
            (x.bytes_per_turn, y.bytes_per_turn)
            if goal.kind == "bytes"
            else (x.load_s, y.load_s)
        )
        per_repeat = [q / p for p, q in zip(a, b, strict=True)]
        ratio = statistics.median(per_repeat)
        detail = (
            f"{_median(b):,.0f} B vs {_median(a):,.0f} B per turn"
            if goal.kind == "bytes"
            else f"{_median(b) * 1e3:.2f} ms vs {_median(a) * 1e3:.2f} ms"
        )
    else:
        assert ours.series is not None  # noqa: S101 - measure() ran
        assert theirs.series is not None  # noqa: S101
        rates = Ratio(goal.name, ours.series, theirs.series, goal.goal)
        per_repeat, ratio = rates.values, rates.median
        detail = (
            f"{ours.series.ops_per_s:,.0f} vs {theirs.series.ops_per_s:,.0f} turns/s"
        )
    verdict = "info"
    if goal.goal is not None:
        verdict = "PASS" if ratio >= goal.goal else "MISS"
    return GoalResult(goal, ratio, per_repeat, verdict, detail)


def _fmt(value: float, digits: int = 2) -> str:
    if math.isnan(value):
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def print_run(title: str, rows: Sequence[Row]) -> None:
    """Print one run's table."""
    print(title)
    header = (
        "system",
        "mode",
        "turns/s",
        "min-max",
        "p50 ms",
        "p95 ms",
        "load ms",
        "B/turn",
    )
    lines = []
    for r in rows:
        assert r.series is not None  # noqa: S101 - measure() ran
        x = r.recorder.extras.as_dict()
        rates = r.series.rates
        lines.append(
            (
                r.label,
                r.note,
                _fmt(r.series.ops_per_s),
                f"{_fmt(min(rates))}-{_fmt(max(rates))}",
                _fmt(x["latency_p50_ms"]),
                _fmt(x["latency_p95_ms"]),
                _fmt(x["load_history_ms"]),
                "-" if "memory" in r.key else _fmt(x["bytes_per_turn"], 0),
            )
        )
    widths = [max(len(x[i]) for x in [header, *lines]) for i in range(len(header))]
    for line in [header, tuple("-" * wd for wd in widths), *lines]:
        cells = [
            cell.ljust(wd) if i < 2 else cell.rjust(wd)
            for i, (cell, wd) in enumerate(zip(line, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
    print()


def print_goals(results: Sequence[GoalResult]) -> None:
    """Print one line per goal."""
    for r in results:
        goal = "no goal" if r.goal.goal is None else f"goal >= {r.goal.goal:g}"
        spread = f"per-repeat {min(r.per_repeat):.2f}-{max(r.per_repeat):.2f}"
        print(
            f"{r.verdict:<4}  {r.goal.name}: {r.detail} -> ratio {r.ratio:.2f} "
            f"({spread}); {goal}"
        )


def parse_args(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line (the same options for every bench_peers_* script)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--sessions", type=int, default=64, help="concurrent sessions (64)")
    p.add_argument("--turns", type=int, default=10, help="turns per session (10)")
    p.add_argument(
        "--serial-sessions",
        type=int,
        default=8,
        help="sessions of the single-session run, one after another (8)",
    )
    p.add_argument(
        "--repeat", type=int, default=3, help="repetitions, concurrent run (3)"
    )
    p.add_argument(
        "--repeat-single",
        type=int,
        default=7,
        help="repetitions, single-session run (7: cheap, and disk noise hits it)",
    )
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (1)")
    p.add_argument("--dir", default=None, help="folder for the database files (/tmp)")
    p.add_argument("--seed", type=int, default=20240607)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.turns, args.serial_sessions = 4, 3, 2
        args.repeat = args.repeat_single = 1
    return args


def workload(args: argparse.Namespace) -> Workload:
    """The seeded pool of 64 turn payloads every system writes."""
    return Workload(make_pool(random.Random(args.seed), 64))


def base_meta(
    args: argparse.Namespace,
    files: Scratch,
    load_before: tuple[float, float, float],
    packages: Sequence[str],
) -> dict[str, Any]:
    """The run's context: versions (of ``packages``), disk, machine, arguments."""
    found = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "versions": found,
        "folder": str(files.root),
        "device": device_of(files.root.parent),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
    }


def report(
    meta: dict[str, Any],
    rows: dict[str, Row],
    goals: Sequence[Goal],
    *,
    intro: Sequence[str],
    notes: Sequence[str] = (),
    stored: Sequence[tuple[str, str]] = (),
) -> None:
    """Print the context, both tables and the goal lines; add the extras to ``meta``.

    ``intro`` lines come first (versions, durability), ``notes`` after the
    workload line; ``stored`` names the (row, label) pairs whose rows written per
    turn are printed.
    """
    results = [judge(g, rows) for g in goals]
    meta["extras"] = {key: r.recorder.extras.as_dict() for key, r in rows.items()}
    meta["goals"] = {r.goal.name: r.as_dict() for r in results}
    a = meta["args"]
    for line in intro:
        print(line)
    print(f"disk: every file in {meta['folder']} on {meta['device']}")
    before, after = meta["loadavg_before"][0], meta["loadavg_after"][0]
    print(
        f"machine: {meta['cpus']} CPUs, load average {before:.1f} before, "
        f"{after:.1f} after; repeat {a['repeat_single']} (single) and "
        f"{a['repeat']} (concurrent), warm-up {a['warmup']}"
        + (", QUICK sizes" if a["quick"] else "")
    )
    print(
        "workload: per turn a user message (200 chars), an assistant message with 2 "
        "tool calls, 2 tool results (300 chars), a final answer (200 chars); "
        "turnledger: ONE append of 6 events per turn"
    )
    for line in notes:
        print(line)
    print(
        "bytes/turn: file + WAL after wal_checkpoint(TRUNCATE), all connections "
        "closed, minus an empty database of the same system\n"
    )
    print_run(
        f"single session: {a['serial_sessions']} sessions x {a['turns']} turns, "
        "one session at a time",
        [r for key, r in rows.items() if key.startswith("1.")],
    )
    print_run(
        f"concurrent: {a['sessions']} sessions x {a['turns']} turns at once",
        [r for key, r in rows.items() if key.startswith("2.")],
    )
    ext = meta["extras"].get("2.turnledger_async")
    if ext is not None:
        print(f"AsyncLedger mean group: {ext['mean_group']:.1f} appends per commit")
    written = []
    for key, label in stored:
        tables = meta["extras"][key]["rows_per_turn"].items()
        written.append(f"{label} " + ", ".join(f"{t} {n:.2f}" for t, n in tables))
    if written:
        print("rows written per turn: " + "; ".join(written))
    print()
    print_goals(results)
    missed = [r.goal.name for r in results if r.verdict == "MISS"]
    print(
        f"\n{len(missed)} goal(s) MISSED: " + "; ".join(missed)
        if missed
        else "\nno goal missed"
    )


def write_figures(path: str | None, meta: dict[str, Any], rows: dict[str, Row]) -> None:
    """Write the figures as JSON when ``--json`` named a path."""
    if path:
        series = [r.series for r in rows.values() if r.series is not None]
        write_json(path, meta=meta, series=series)
        print(f"\nfigures written to {path}")
