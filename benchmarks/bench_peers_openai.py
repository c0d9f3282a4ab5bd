"""Per-turn persistence: turnledger against the OpenAI Agents SDK's SQLiteSession.

The workload of every bench_peers_* script (``_peers.py``): N sessions of M
turns, each a user message (~200 chars), an assistant message with 2 tool calls,
the 2 tool results (~300 chars each) and a final answer (~200 chars), the same
seeded texts and ids for every system. Two runs: "single session"
(``--serial-sessions`` sessions, one after another) and "concurrent"
(``--sessions`` sessions at once).

- turnledger: ONE ``append`` of 6 events per turn: ``EventStore.append`` (sync)
  and ``AsyncLedger.append`` (async, one thread hop) for one session at a time,
  ``AsyncLedger`` (group commit) for the concurrent run; the raw floor (one
  sqlite3 transaction of the same 6 rows per turn) as info.
- OpenAI Agents SDK: ``SQLiteSession(session_id, db_path)``. Two modes: ONE
  ``add_items`` per turn with the 6 items, and the THREE ``add_items`` per turn
  that ``Runner.run`` makes (the user input before the first model call; the 2
  ``function_call`` + 2 ``function_call_output`` items after the tool step; the
  final assistant ``message``; the Runner also reads the whole history once per
  turn with ``get_items``, which is NOT timed here). The script confirms this on
  the installed SDK by running ``Runner.run`` with a scripted model and printing
  what it saved. Concurrent: ``asyncio.gather`` (the SDK is async).

Fairness rules: one temporary folder on one disk, a fresh file per run; WAL with
``synchronous=FULL`` everywhere: turnledger sets FULL itself; the SDK sets no
``synchronous`` and inherits the SQLite build's default, which the script checks
and prints, and if that is not FULL the SDK session gets it through a one-line
subclass; like for like: the async SDK against ``AsyncLedger`` (one thread hop per
call on both sides), sync turnledger against the SDK reported as info. Timed: the
persistence calls of a turn, payloads built before the clock starts. Per-turn
latency p50/p95 over every timed turn (in the concurrent run it includes waiting
for the other sessions); load history: one session's history back, decoded
(``get_items()`` vs ``read_stream``), median of several reads; bytes per turn:
file + WAL after ``wal_checkpoint(TRUNCATE)`` minus a fresh empty database, over
the turns written. Rates are medians over repetitions (one warm-up run per case,
cases round-robin); each ratio is the median of per-repetition ratios.

Goals (issue #7): >= 3x the SDK as its Runner writes; >= 1.3x its
one-``add_items`` mode for one session and >= 5x with 64 concurrent sessions. The
script reports PASS/MISS and always exits 0; without the SDK installed it prints
one line and exits 0.

Run::

    .venv/bin/python benchmarks/bench_peers_openai.py          # full run
    .venv/bin/python benchmarks/bench_peers_openai.py --quick  # smoke: tiny sizes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _harness import Scratch, installed
from _peers import (
    Goal,
    Outcome,
    Row,
    Workload,
    base_meta,
    ledger_rows,
    make_row,
    measure,
    parse_args,
    report,
    run_sessions,
    session_key,
    settle,
    timed_loads_async,
    workload,
    write_figures,
)

if not installed("openai-agents", "agents"):
    sys.exit(0)

from agents import (
    Agent,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

ITEMS_PER_TURN = 6  # SDK items per turn
RUNNER_BATCHES = (1, 4, 1)  # items per add_items call, as Runner.run saves a turn


def sdk_turn(w: Workload, s: int, t: int) -> list[list[dict[str, Any]]]:
    """Return one turn as SDK items, in the 3 batches ``Runner.run`` saves.

    The item shapes are those the Runner stores (checked by :func:`probe_runner`).
    """
    turn = w.turn(s, t)
    key = session_key(s)
    user = {"content": turn.user, "role": "user"}
    calls: list[dict[str, Any]] = [
        {
            "arguments": u.arguments,
            "call_id": w.call_id(key, t, k),
            "name": u.name,
            "type": "function_call",
            "id": f"fc_{key}_{t:05d}_{k}",
            "status": "completed",
        }
        for k, u in enumerate(turn.tools)
    ]
    outputs = [
        {"call_id": c["call_id"], "output": u.output, "type": "function_call_output"}
        for c, u in zip(calls, turn.tools, strict=True)
    ]
    final = {
        "id": f"msg_{key}_{t:05d}",
        "content": [{"annotations": [], "text": turn.answer, "type": "output_text"}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }
    return [[user], calls + outputs, [final]]


def default_synchronous(folder: Path) -> str:
    """Return the ``synchronous`` level a plain WAL connection gets on this build."""
    path = folder / "probe_default.sqlite"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        conn.close()
    Scratch.drop(path)
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))


# -- OpenAI Agents SDK -----------------------------------------------------------------


def sdk_session_class(force_full: bool) -> Any:
    """Return ``SQLiteSession``, or a subclass forcing FULL when the build is not."""
    if not force_full:
        return SQLiteSession

    class DurableSQLiteSession(SQLiteSession):  # type: ignore[misc,valid-type]
        @classmethod
        def _configure_connection(cls, conn: sqlite3.Connection) -> None:
            super()._configure_connection(conn)
            conn.execute("PRAGMA synchronous=FULL")

    return DurableSQLiteSession


def sdk_empty_bytes(files: Scratch, session_class: Any) -> int:
    """Bytes of a freshly initialised, empty SDK database."""
    path = files.fresh()
    session_class("empty", str(path)).close()
    size, _ = settle(path)
    files.drop(path)
    return size


def sdk_sessions(
    files: Scratch,
    w: Workload,
    sessions: int,
    session_class: Any,
    *,
    at_once: bool,
    runner: bool,
) -> Callable[[int], Outcome]:
    """``sessions`` SDK sessions on one file; per turn 1 or 3 ``add_items``."""

    async def drive(path: Path, rounds: int) -> Outcome:
        handles = [session_class(session_key(s), str(path)) for s in range(sessions)]
        work = [
            [
                batches if runner else [[i for b in batches for i in b]]
                for batches in (sdk_turn(w, s, t) for t in range(rounds))
            ]
            for s in range(sessions)
        ]
        # Open the connections first, as Runner.run does with its get_items.
        await asyncio.gather(*(h.get_items() for h in handles))
        latencies: list[float] = []

        async def session(s: int) -> None:
            handle = handles[s]
            for batches in work[s]:
                t0 = time.perf_counter()
                for items in batches:
                    await handle.add_items(items)
                latencies.append(time.perf_counter() - t0)

        seconds = await run_sessions(sessions, at_once, session)

        async def read() -> int:
            return len(await handles[0].get_items())

        load = await timed_loads_async(read, rounds * ITEMS_PER_TURN)
        for handle in handles:
            handle.close()
        return Outcome(seconds, latencies, load, 0, rounds * sessions)

    def body(n: int) -> Outcome:
        path = files.fresh()
        out = asyncio.run(drive(path, max(1, n // sessions)))
        out.bytes_used, out.rows = settle(path)
        files.drop(path)
        return out

    return body


def probe_runner(folder: Path) -> tuple[str, bool]:
    """Run ``Runner.run`` (scripted model, 2 turns); report what it saves per turn.

    Returns a description and whether it matches this script's Runner mode.
    """
    try:
        return asyncio.run(_probe_runner(folder))
    except (AttributeError, TypeError, ValueError, RuntimeError) as e:
        return f"could not run the probe ({type(e).__name__}: {e})", False


async def _probe_runner(folder: Path) -> tuple[str, bool]:
    set_tracing_disabled(disabled=True)

    @function_tool
    def grep_logs(path: str, pattern: str) -> str:
        """Search a log file."""
        return f"{path}: {pattern} " * 10

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, *_args: Any, **_kwargs: Any) -> ModelResponse:
            self.calls += 1
            if self.calls % 2:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"call_{self.calls}_{k}",
                        name="grep_logs",
                        arguments=json.dumps({"path": "/a", "pattern": "E"}),
                        id=f"fc_{self.calls}_{k}",
                        status="completed",
                    )
                    for k in range(2)
                ]
            else:
                text = ResponseOutputText(
                    type="output_text", text="done", annotations=[]
                )
                output = [
                    ResponseOutputMessage(
                        id=f"msg_{self.calls}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *_args: Any, **_kwargs: Any) -> Any:
            raise NotImplementedError

    log: list[str] = []

    class CountingSession(SQLiteSession):  # type: ignore[misc,valid-type]
        async def add_items(self, items: list[Any]) -> None:
            kinds = [str(i.get("type", i.get("role"))) for i in items]
            log.append(f"add_items[{', '.join(kinds)}]")
            await super().add_items(items)

        async def get_items(self, limit: int | None = None) -> list[Any]:
            log.append("get_items(all)" if limit is None else f"get_items({limit})")
            return await super().get_items(limit)

    path = folder / "probe_runner.sqlite"
    session = CountingSession("probe", str(path))
    agent = Agent(name="probe", tools=[grep_logs], model=ScriptedModel())
    try:
        await Runner.run(agent, "first", session=session)
        log.clear()  # keep the second turn: a session with history
        await Runner.run(agent, "second", session=session)
    finally:
        session.close()
        Scratch.drop(path)
    adds = [entry for entry in log if entry.startswith("add_items")]
    sizes = tuple(entry.count(",") + 1 for entry in adds)
    return "; ".join(log), sizes == RUNNER_BATCHES


# -- the run ---------------------------------------------------------------------------


LEDGER_ROWS = (
    "1.raw_floor",
    "1.turnledger_sync",
    "1.turnledger_async",
    "2.turnledger_async",
)
PACKAGES = ("openai-agents", "openai")
ORDER = (  # the compared cases run next to each other in every repetition
    "1.raw_floor",
    "1.turnledger_sync",
    "1.turnledger_async",
    "1.sdk_one_add",
    "1.sdk_runner",
    "2.turnledger_async",
    "2.sdk_one_add",
    "2.sdk_runner",
)

GOALS = (
    Goal("1 turns/s vs SDK as Runner writes", "1.turnledger_async", "1.sdk_runner", 3),
    Goal(
        "1 turns/s vs SDK 1 add_items/turn", "1.turnledger_async", "1.sdk_one_add", 1.3
    ),
    Goal(
        "1 info: sync ours vs SDK 1 add_items",
        "1.turnledger_sync",
        "1.sdk_one_add",
        None,
    ),
    Goal("1 info: ours async vs sync", "1.turnledger_async", "1.turnledger_sync", None),
    Goal("1 info: raw floor vs SDK Runner", "1.raw_floor", "1.sdk_runner", None),
    Goal(
        "1 info: bytes/turn, SDK / ours",
        "1.turnledger_async",
        "1.sdk_one_add",
        None,
        "bytes",
    ),
    Goal(
        "1 info: load history, SDK / ours (async)",
        "1.turnledger_async",
        "1.sdk_one_add",
        None,
        "load",
    ),
    Goal("2 turns/s vs SDK as Runner writes", "2.turnledger_async", "2.sdk_runner", 3),
    Goal("2 turns/s vs SDK 1 add_items/turn", "2.turnledger_async", "2.sdk_one_add", 5),
)


def sdk_rows(
    files: Scratch, w: Workload, args: argparse.Namespace, session_class: Any
) -> dict[str, Row]:
    """The SDK's rows: one and three ``add_items`` per turn, in both runs."""
    k, c = args.serial_sessions, args.sessions
    empty = sdk_empty_bytes(files, session_class)
    rows = [
        make_row(
            args,
            "1.sdk_one_add",
            "Agents SDK SQLiteSession",
            "1 add_items (6 items)/turn",
            body=sdk_sessions(files, w, k, session_class, at_once=False, runner=False),
            empty=empty,
        ),
        make_row(
            args,
            "1.sdk_runner",
            "Agents SDK SQLiteSession",
            "3 add_items/turn, as Runner.run",
            body=sdk_sessions(files, w, k, session_class, at_once=False, runner=True),
            empty=empty,
        ),
        make_row(
            args,
            "2.sdk_one_add",
            "Agents SDK SQLiteSession",
            f"{c} tasks, 1 add_items/turn",
            body=sdk_sessions(files, w, c, session_class, at_once=True, runner=False),
            empty=empty,
        ),
        make_row(
            args,
            "2.sdk_runner",
            "Agents SDK SQLiteSession",
            f"{c} tasks, 3 add_items/turn",
            body=sdk_sessions(files, w, c, session_class, at_once=True, runner=True),
            empty=empty,
        ),
    ]
    return {r.key: r for r in rows}


def main(argv: Sequence[str] | None = None) -> int:
    """Run both runs, print the tables and the goal lines; always return 0."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    w = workload(args)
    load_before = os.getloadavg()
    with Scratch("bench_peers_openai", args.dir) as files:
        default_sync = default_synchronous(files.root)
        session_class = sdk_session_class(default_sync != "FULL")
        probe, probe_ok = probe_runner(files.root)
        rows = {
            **ledger_rows(files, w, args, LEDGER_ROWS),
            **sdk_rows(files, w, args, session_class),
        }
        measure(rows, ORDER, args)
    meta = base_meta(args, files, load_before, PACKAGES)
    meta |= {
        "default_synchronous": default_sync,
        "runner_probe": probe,
        "runner_probe_matches": probe_ok,
    }
    v = meta["versions"]
    inherits = (
        ", so it runs as shipped)"
        if default_sync == "FULL"
        else ", so a subclass sets FULL)"
    )
    mark = "matches" if probe_ok else "DOES NOT match"
    report(
        meta,
        rows,
        GOALS,
        intro=(
            (
                f"bench_peers_openai: python {meta['python']}, sqlite "
                f"{meta['sqlite']}; openai-agents {v['openai-agents']}"
            ),
            (
                "durability: WAL + synchronous=FULL on both sides (turnledger sets "
                "FULL; the SDK sets none and inherits this build's default for WAL "
                f"connections: {default_sync}{inherits}"
            ),
        ),
        notes=(f"SDK Runner.run per turn (probed; {mark} the Runner mode): {probe}",),
        stored=(("1.turnledger_sync", "turnledger"), ("1.sdk_runner", "SDK")),
    )
    write_figures(args.json, meta, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
