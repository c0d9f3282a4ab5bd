"""Turn-engine cost per step vs one durable commit, measured in the same run.

A *step* is one atomic append of the turn engine (``AsyncLedger.append``: one
durable commit). The workload is a turn with no waiting anywhere else: a
zero-latency scripted provider and an instant tool. Each turn makes 6 steps:
``turn.started``; ``memory.recalled`` with the first ``prompt.assembled``;
``model.called`` with the ``assistant.message`` asking for two parallel tool
calls; their two ``tool_result.recorded`` events; the second
``prompt.assembled``; ``model.called``, the answer and ``turn.completed``. A
session's first turn adds ``session.opened`` (and ``system_prompt.set`` joins
its first prompt). The count is read from the ledger
(``AsyncLedger.appends_committed``), not assumed.

Everything else is the real pipeline: the SQLite ledger (WAL,
``synchronous=FULL``) behind the group-committing writer thread, the session
history fold per prompt, bounding, the budget trim check, pairing repair,
memory recall against a SQLite memory backend seeded with 24 core facts,
pricing, scrubbing. Autosave is off (its ``memory.stored`` is a commit of the
memory service, not an engine step) and logs are filtered at WARNING, as the
CLI runs without ``-v``. Sessions are rotated every ``--session-turns`` turns,
so histories stay a realistic length.

Cases, each timed round-robin per repetition (fresh files per run, one folder,
so one disk for all):

- ``raw_commit``: raw ``sqlite3``, WAL, ``synchronous=FULL``, one autocommit
  INSERT of a 300-byte row into the ledger's table layout: one durable commit.
- ``engine_step``: turns through the engine ``bootstrap`` builds, on a
  durable ledger; the time per step (commit included).
- ``engine_step_nosync``: the same on a ledger with ``synchronous=OFF``: the
  pipeline's own cost per step with the fsync taken out (for the diagnosis).
- ``ledger_step`` (info, the floor): the very appends an engine run made (same
  streams, events, idempotency keys, expected versions; read back from the
  calibration run's ledger) made again one after the other through
  :class:`~turnledger.ledger.aio.AsyncLedger` on a fresh durable ledger:
  validation, encoding, chaining, the writer thread's commit and the
  acknowledgement, with no engine code at all. ``engine_step - ledger_step`` is
  what the engine adds; ``ledger_step / raw_commit`` is the limit before it.
- ``store_step`` (diagnostic): the same appends through ``EventStore.append``
  in the calling thread (no writer thread, no event loop): ``ledger_step -
  store_step`` is what the async facade's hand-off to its writer thread and
  back costs.

Goal: ``engine_step`` time <= 1.5 x ``raw_commit`` time (the median of the
per-repetition ratios). Also printed: the overhead beyond the commit
(``engine_step - raw_commit``) and ``engine_step_nosync / raw_commit``. The
script reports PASS or MISS and always exits 0.

Run::

    .venv/bin/python benchmarks/bench_turn.py              # full run (~1 min)
    .venv/bin/python benchmarks/bench_turn.py --quick      # smoke: a few seconds
    .venv/bin/python benchmarks/bench_turn.py --turns 300 --repeat 7 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import sqlite3
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import structlog
from _harness import (
    Case,
    Scratch,
    Series,
    Stopwatch,
    device_of,
    print_table,
    run_rounds,
)
from _harness import write_json as harness_write_json

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import Event
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall, starts_turn

GOAL = 1.5
"""The most an engine step may cost, in durable commits."""

AGENT = "bench"
RAW_ROW_BYTES = 300
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, "
    "originator_version INTEGER, topic TEXT, state BLOB, "
    "PRIMARY KEY (originator_id, originator_version))"
)
INSERT = "INSERT INTO stored_events VALUES (?,?,?,?)"
USER_TEXT = (
    "the export job failed again last night after the schema migration, can you "
    "check the logs for the nightly run and tell me which table broke, then propose "
    "a fix that keeps the retention policy"
)
ANSWER_TEXT = (
    "The nightly export broke on the billing_events table: the migration renamed "
    "a column the exporter still selects. Rename it back in the view, rerun the "
    "export, and keep the retention policy as it is; nothing touches production."
)
TOOL_OUTPUT = "2024-06-01T02:13:07Z ERROR export: no such column: amount_cents\n" * 5
FACT_WORDS = USER_TEXT.split()
SCRIPT_STEPS = 1_000_000
"""More provider answers than any run asks for (the script plays one per call)."""

INSTANT_SPEC = ToolSpec(
    name="grep_logs",
    description="Search the logs.",
    parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
)


class InstantTool:
    """Answers at once with a fixed ~300-character output."""

    spec = INSTANT_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Return the canned output."""
        del arguments, context
        return ToolOutcome(output=TOOL_OUTPUT)


def answer(request: ChatRequest) -> ChatResponse:
    """Two parallel tool calls on a turn's first call, then the final answer."""
    messages = request.messages
    start = next(
        i for i in range(len(messages) - 1, -1, -1) if starts_turn(messages[i])
    )
    usage = Usage(input_tokens=1200, output_tokens=80, cached_input_tokens=600)
    if any(m.role == "assistant" for m in messages[start:]):
        return ChatResponse(text=ANSWER_TEXT, usage=usage)
    calls = tuple(
        ToolCall(
            id=f"call_{uuid4().hex[:16]}",
            name="grep_logs",
            arguments=f'{{"pattern": "ERROR|Traceback", "file": "nightly-{i}.log"}}',
        )
        for i in range(2)
    )
    return ChatResponse(text="Let me look.", tool_calls=calls, usage=usage)


# -- the cases ------------------------------------------------------------------


def raw_commits(files: Scratch) -> Callable[[int], float]:
    """Raw: n autocommit INSERTs of one row each (WAL, FULL): n durable commits."""

    def run(n: int) -> float:
        path = files.fresh()
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(SCHEMA)
        stream = uuid4().hex
        rows = [
            (stream, i + 1, "tool_result.recorded", os.urandom(RAW_ROW_BYTES))
            for i in range(n)
        ]
        with Stopwatch() as sw:
            for row in rows:
                conn.execute(INSERT, row)
        conn.close()
        files.drop(path)
        return sw.seconds

    return run


Step = tuple[UUID, str, int, list[Event]]
"""One engine append: stream, idempotency key, first version, events."""


def engine_appends(path: Path) -> list[Step]:
    """The keyed appends (the engine's steps) of a ledger, in commit order."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT key, stream, first_version, last_version "
            "FROM turnledger_appends ORDER BY rowid"
        ).fetchall()
    store = open_store(str(path))
    try:
        events: dict[UUID, list[Event]] = {}
        steps: list[Step] = []
        for key, stream_hex, first, last in rows:
            stream = UUID(stream_hex)
            if stream not in events:
                events[stream] = [r.event for r in store.read_stream(stream)]
            steps.append((stream, key, first, events[stream][first - 1 : last]))
    finally:
        store.close()
    return steps


def ledger_steps(files: Scratch, steps: Sequence[Step]) -> Callable[[int], float]:
    """Floor: the first n engine appends again, in order, through AsyncLedger."""

    async def replay(path: Path, n: int) -> float:
        async with AsyncLedger(open_store(str(path))) as ledger:
            with Stopwatch() as sw:
                for stream, key, first, events in steps[:n]:
                    await ledger.append(
                        stream, events, expected_version=first - 1, idempotency_key=key
                    )
        return sw.seconds

    def run(n: int) -> float:
        if n > len(steps):
            msg = f"Expected at most {len(steps)} steps to replay, found {n}"
            raise ValueError(msg)
        path = files.fresh()
        seconds = asyncio.run(replay(path, n))
        files.drop(path)
        return seconds

    return run


def store_steps(files: Scratch, steps: Sequence[Step]) -> Callable[[int], float]:
    """Diagnostic: the same appends through ``EventStore.append``, no thread hop."""

    def run(n: int) -> float:
        if n > len(steps):
            msg = f"Expected at most {len(steps)} steps to replay, found {n}"
            raise ValueError(msg)
        path = files.fresh()
        with open_store(str(path)) as store, Stopwatch() as sw:
            for stream, key, first, events in steps[:n]:
                store.append(
                    stream, events, expected_version=first - 1, idempotency_key=key
                )
        files.drop(path)
        return sw.seconds

    return run


class StepCounter:
    """Steps and turns run by the engine cases, per case (for the report)."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}
        self.turns: dict[str, int] = {}

    def add(self, case: str, steps: int, turns: int) -> None:
        """Count one run."""
        self.steps[case] = self.steps.get(case, 0) + steps
        self.turns[case] = self.turns.get(case, 0) + turns

    def per_turn(self, case: str) -> float:
        """Steps per turn, over every run of the case."""
        return self.steps[case] / self.turns[case] if self.turns.get(case) else 0.0


async def drive_turns(
    path: Path, synchronous: str, turns: int, session_turns: int
) -> tuple[float, int]:
    """Run ``turns`` turns; return the seconds they took and the steps they made."""
    config = parse_config(
        f'data_dir = "{path.parent / (path.stem + "-data")}"\n'
        "[memory]\nautosave = false\n"
    )
    store = open_store(str(path), synchronous=synchronous)
    runtime = bootstrap(
        config,
        provider=ScriptedProvider([answer] * SCRIPT_STEPS),
        store=store,
        ledger_url=str(path),
        tools={"grep_logs": InstantTool()},
    )
    memory = runtime.memory
    for i in range(24):
        words = " ".join(FACT_WORDS[i % 7 : i % 7 + 6])
        memory.store_entry(AGENT, f"fact_{i}", f"{words} (note {i})", category="core")
    memory.backend(AGENT)  # caught up before the clock starts
    try:
        with Stopwatch() as sw:
            for i in range(turns):
                outcome = await runtime.engine.run_turn(
                    AGENT, f"session-{i // session_turns}", USER_TEXT
                )
                if not outcome.completed:
                    msg = f"Expected a completed turn, found {outcome}"
                    raise RuntimeError(msg)
        steps = runtime.ledger.appends_committed
    finally:
        await runtime.aclose()
        store.close()
    return sw.seconds, steps


def engine_steps(
    files: Scratch,
    synchronous: str,
    *,
    case: str,
    session_turns: int,
    counter: StepCounter,
    steps_per_turn: float,
) -> Callable[[int], float]:
    """Engine: enough turns for about n steps; seconds scaled to exactly n steps."""

    def run(n: int) -> float:
        path = files.fresh()
        turns = max(1, round(n / steps_per_turn))
        seconds, steps = asyncio.run(
            drive_turns(path, synchronous, turns, session_turns)
        )
        files.drop(path)
        counter.add(case, steps, turns)
        return seconds * n / steps

    return run


# -- main -----------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=100, help="turns per run (100)")
    p.add_argument(
        "--session-turns", type=int, default=20, help="turns per session (20)"
    )
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (1)")
    p.add_argument("--dir", default=None, help="folder for the database files (/tmp)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.session_turns, args.repeat = 6, 3, 1
    return args


def time_ratios(numerator: Series, denominator: Series) -> list[float]:
    """Per-repetition ratio of time per unit (numerator / denominator)."""
    return [
        (a / numerator.n) / (b / denominator.n)
        for a, b in zip(numerator.seconds, denominator.seconds, strict=True)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases, print the table and the verdict; always return 0."""
    args = parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )
    files = Scratch("bench_turn", args.dir)
    counter = StepCounter()
    load_before = os.getloadavg()
    try:
        # Calibrate: how many steps a turn makes (read from the ledger); the
        # run's appends are what ledger_step makes again.
        probe = files.fresh()
        _, probe_steps = asyncio.run(
            drive_turns(probe, "OFF", args.turns, args.session_turns)
        )
        recorded = engine_appends(probe)
        files.drop(probe)
        steps_per_turn = probe_steps / args.turns
        n = max(1, round(args.turns * steps_per_turn))
        warmup_n = max(1, round(min(args.turns, 10) * steps_per_turn))
        cases = [
            Case("raw_commit", n, raw_commits(files), "step", "sqlite3 INSERT, FULL"),
            Case(
                "engine_step",
                n,
                engine_steps(
                    files,
                    "FULL",
                    case="engine_step",
                    session_turns=args.session_turns,
                    counter=counter,
                    steps_per_turn=steps_per_turn,
                ),
                "step",
                "TurnEngine, ledger FULL",
                warmup_n=warmup_n,
            ),
            Case(
                "engine_step_nosync",
                n,
                engine_steps(
                    files,
                    "OFF",
                    case="engine_step_nosync",
                    session_turns=args.session_turns,
                    counter=counter,
                    steps_per_turn=steps_per_turn,
                ),
                "step",
                "TurnEngine, ledger OFF",
                warmup_n=warmup_n,
            ),
            Case(
                "ledger_step",
                n,
                ledger_steps(files, recorded),
                "step",
                "same appends, AsyncLedger only",
                warmup_n=warmup_n,
            ),
        ]
        cases.append(
            Case(
                "store_step",
                n,
                store_steps(files, recorded),
                "step",
                "same appends, EventStore.append, no thread",
                warmup_n=warmup_n,
            )
        )
        series = run_rounds(cases, repeat=args.repeat, warmup=args.warmup)
    finally:
        files.cleanup()
    by = {s.name: s for s in series}
    raw, engine, nosync = by["raw_commit"], by["engine_step"], by["engine_step_nosync"]
    floor = by["ledger_step"]
    ratios = time_ratios(engine, raw)
    ratio = statistics.median(ratios)
    verdict = "PASS" if ratio <= GOAL else "MISS"
    figures = {
        "raw_commit_us": raw.us_per_op,
        "engine_step_us": engine.us_per_op,
        "engine_step_nosync_us": nosync.us_per_op,
        "overhead_beyond_commit_us": engine.us_per_op - raw.us_per_op,
        "ratio": ratio,
        "ratio_per_repeat": ratios,
        "nosync_ratio": statistics.median(time_ratios(nosync, raw)),
        "ledger_step_us": floor.us_per_op,
        "ledger_ratio": statistics.median(time_ratios(floor, raw)),
        "engine_beyond_ledger_us": engine.us_per_op - floor.us_per_op,
        "store_step_us": by["store_step"].us_per_op,
        "store_ratio": statistics.median(time_ratios(by["store_step"], raw)),
        "hop_us": floor.us_per_op - by["store_step"].us_per_op,
        "goal": GOAL,
        "verdict": verdict,
        "steps_per_turn": counter.per_turn("engine_step") or steps_per_turn,
    }
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "folder": str(files.root),
        "device": device_of(files.root.parent),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "per_step": figures,
    }
    report(meta, series, figures)
    if args.json:
        harness_write_json(args.json, meta=meta, series=series)
        print(f"\nfigures written to {args.json}")
    return 0


def report(
    meta: dict[str, Any], series: Sequence[Series], figures: dict[str, Any]
) -> None:
    """Print the context, the table and the verdict."""
    a = meta["args"]
    print(
        f"bench_turn: python {meta['python']}, sqlite {meta['sqlite']}; "
        "WAL, synchronous=FULL for the raw commit and the engine's ledger"
    )
    before, after = meta["loadavg_before"][0], meta["loadavg_after"][0]
    print(
        f"machine: {meta['cpus']} CPUs, load average {before:.1f} before, "
        f"{after:.1f} after"
    )
    print(f"disk: {meta['folder']} on {meta['device']}")
    print(
        f"workload: {a['turns']} turns per run, {a['session_turns']} per session, "
        f"{figures['steps_per_turn']:.2f} steps per turn; repeat {a['repeat']}, "
        f"warm-up {a['warmup']}{', QUICK sizes' if a['quick'] else ''}\n"
    )
    print_table(series)
    values = figures["ratio_per_repeat"]
    print(
        f"\nper step: engine {figures['engine_step_us']:,.0f} µs, durable commit "
        f"{figures['raw_commit_us']:,.0f} µs, overhead beyond the commit "
        f"{figures['overhead_beyond_commit_us']:,.0f} µs; without fsync the engine "
        f"takes {figures['engine_step_nosync_us']:,.0f} µs "
        f"({figures['nosync_ratio']:.2f}x a commit)"
    )
    print(
        f"info  floor: the same appends through AsyncLedger alone take "
        f"{figures['ledger_step_us']:,.0f} µs per step "
        f"({figures['ledger_ratio']:.2f}x a commit); the engine adds "
        f"{figures['engine_beyond_ledger_us']:,.0f} µs per step beyond them"
    )
    print(
        f"info  diagnostic: the same appends through EventStore.append in the "
        f"calling thread take {figures['store_step_us']:,.0f} µs per step "
        f"({figures['store_ratio']:.2f}x a commit); the async facade's hand-off "
        f"to its writer thread and back adds {figures['hop_us']:,.0f} µs"
    )
    print(
        f"{figures['verdict']}  engine step / durable commit = "
        f"{figures['ratio']:.2f}x (per-repeat {min(values):.2f}-{max(values):.2f}); "
        f"goal <= {figures['goal']:.1f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
