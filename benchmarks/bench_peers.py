"""Per-turn persistence: turnledger against LangGraph and the OpenAI Agents SDK.

The same workload goes through every system: N sessions of M turns, each turn a
user message (~200 chars), an assistant message with 2 tool calls (JSON arguments),
the 2 tool results (~300 chars each) and a final answer (~200 chars). The texts,
tool names, arguments and call ids are the same everywhere (one seeded pool). Two
runs: "single session" (``--serial-sessions`` sessions, one after another, so one
session writes at a time) and "concurrent" (``--sessions`` sessions at once).

Systems (the peers are optional: ``pip install -e '.[bench]'``; a missing one
prints "not installed" and the script still exits 0):

- turnledger: ONE ``append`` per turn of 6 events (TurnStarted, AssistantMessage
  with 2 ToolCallRecord, 2 ToolResultRecorded, AssistantMessage with the answer,
  TurnCompleted). Single session: ``EventStore.append`` (sync) and
  ``AsyncLedger.append`` (async, one thread hop); concurrent: ``AsyncLedger``,
  whose writer group-commits the sessions' appends.
- LangGraph: a compiled ``StateGraph`` shaped like ``create_react_agent``: state
  ``messages: Annotated[list[AnyMessage], add_messages]``, an "agent" node (a
  scripted fake model: no network) routed by ``tools_condition`` to a
  ``ToolNode`` "tools" node and back. One ``graph.invoke`` per turn writes what a
  LangGraph agent writes: a checkpoint per super-step (input, __start__, agent,
  tools, agent: 5 per turn) plus each task's writes (4 ``put_writes``), each its
  own commit, through ``SqliteSaver`` (langgraph-checkpoint-sqlite) with the
  default ``durability="async"`` (invoke returns only after its background
  checkpoint saves have committed, so a returned turn is durable). Concurrent: the
  async saver ``AsyncSqliteSaver`` (aiosqlite), ``graph.ainvoke`` under
  ``asyncio.gather`` (no threads of our own). Info row: the same graph with the
  in-memory saver (graph + serialization CPU, nothing on disk).
- OpenAI Agents SDK: ``SQLiteSession(session_id, db_path)``. Two modes: ONE
  ``add_items`` per turn with the 6 items, and the THREE ``add_items`` per turn
  that ``Runner.run`` makes (the user input before the first model call; the 2
  ``function_call`` + 2 ``function_call_output`` items after the tool step; the
  final assistant ``message``; the Runner also reads the whole history once per
  turn with ``get_items``, which is NOT timed here). The script confirms this on
  the installed SDK by running ``Runner.run`` with a scripted model and printing
  what it saved. Concurrent: ``asyncio.gather`` (the SDK is async).

Fairness rules:

- one temporary folder on one disk for every database file; a fresh file per run;
- durable commits: every SQLite connection runs WAL with ``synchronous=FULL``.
  turnledger sets FULL itself. Neither peer sets ``synchronous``: they inherit the
  SQLite build's default, which the script checks and prints; LangGraph's
  connection (ours to open) gets ``PRAGMA synchronous=FULL`` explicitly, and if
  the build default is not FULL the SDK session gets it too (a one-line
  subclass), so all run durable; the report says what each default is;
- like for like: the sync LangGraph graph is compared with sync
  ``EventStore.append``; the async SDK with ``AsyncLedger`` (one thread hop per
  call on both sides); sync turnledger against the SDK is reported as info;
- what is timed: the persistence call of a turn (for LangGraph, the whole
  ``invoke``: its checkpoints cannot be written without running the graph; the
  in-memory row shows how much of that is graph CPU). Payloads are built before
  the clock starts;
- per-turn latency: p50/p95 over every timed turn of every repetition (in the
  concurrent run it includes waiting for the other sessions);
- load history: one session's full history back, decoded (turnledger
  ``read_stream``; SDK ``get_items()``; LangGraph ``get_state(...)`` messages),
  median of several reads at the end of each run;
- bytes per turn: database file + WAL after ``PRAGMA wal_checkpoint(TRUNCATE)``
  with every connection closed, minus the same for a freshly initialised empty
  database of that system, divided by the turns written. LangGraph stores a full
  snapshot of the message list per super-step, so its bytes per turn grow about
  linearly with M (the LangGraph/turnledger bytes ratio is ~2.2 x M here: 22x at
  the default M=10, ~40x at M=20); turnledger's and the SDK's do not;
- rates are medians over repetitions (``time.perf_counter``, one warm-up run per
  case, cases round-robin); each ratio is the median of per-repetition ratios.

Goals (issue #7): turnledger >= 20x LangGraph in turns/s and >= 20x smaller on
disk; >= 3x the SDK as its Runner writes; >= 1.3x its one-``add_items`` mode for
one session and >= 5x with 64 concurrent sessions. The script reports PASS/MISS
and always exits 0.

Run::

    .venv/bin/python benchmarks/bench_peers.py              # full run (~2.5-3.5 min)
    .venv/bin/python benchmarks/bench_peers.py --quick      # smoke: tiny sizes
    .venv/bin/python benchmarks/bench_peers.py --sessions 64 --turns 20 --json o.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

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

try:
    from benchmarks._harness import (
        Case,
        Ratio,
        Series,
        device_of,
        run_rounds,
        write_json,
    )
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _harness import (  # type: ignore[no-redef]
        Case,
        Ratio,
        Series,
        device_of,
        run_rounds,
        write_json,
    )

try:
    import aiosqlite
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    HAVE_LANGGRAPH = True
except ImportError:
    HAVE_LANGGRAPH = False

try:
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

    HAVE_SDK = True
except ImportError:
    HAVE_SDK = False

NOT_INSTALLED = "not installed (pip install -e '.[bench]')"
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
ITEMS_PER_TURN = 6  # SDK items per turn
MESSAGES_PER_TURN = 5  # LangGraph messages per turn (tool calls ride on the AI one)
RUNNER_BATCHES = (1, 4, 1)  # items per add_items call, as Runner.run saves a turn


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


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


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
            uses.append(ToolUse(name, args, json.dumps(args), _text(rng, 300)))
        pool.append(Turn(_text(rng, 200), (uses[0], uses[1]), _text(rng, 200)))
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


# -- files and measures ----------------------------------------------------------------


class Files:
    """Fresh database paths in one temporary folder (one disk for every system)."""

    def __init__(self, parent: str | None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench_peers_", dir=parent))
        self._count = 0

    def fresh(self) -> Path:
        """Return a new, unused database path."""
        self._count += 1
        return self.root / f"db{self._count}.sqlite"

    @staticmethod
    def drop(path: Path) -> None:
        """Delete a database and its WAL and shared-memory files."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Delete the folder."""
        shutil.rmtree(self.root, ignore_errors=True)


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


def default_synchronous(folder: Path) -> str:
    """Return the ``synchronous`` level a plain WAL connection gets on this build."""
    path = folder / "probe_default.sqlite"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        conn.close()
    Files.drop(path)
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100), linear between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


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


def _timed_loads(read: Callable[[], int], expected: int) -> float:
    times = []
    for _ in range(LOAD_READS):
        start = time.perf_counter()
        count = read()
        times.append(time.perf_counter() - start)
        if count != expected:
            msg = f"Expected a history of {expected}, found {count}"
            raise RuntimeError(msg)
    return statistics.median(times)


async def _timed_loads_async(
    read: Callable[[], Awaitable[int]], expected: int
) -> float:
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


def ledger_empty_bytes(files: Files) -> int:
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


def raw_floor(files: Files, w: Workload, sessions: int) -> Callable[[int], Outcome]:
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


def raw_empty_bytes(files: Files) -> int:
    """Bytes of an empty raw table."""
    path = files.fresh()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(RAW_SCHEMA)
    conn.close()
    size, _ = settle(path)
    files.drop(path)
    return size


def ledger_sync(files: Files, w: Workload, sessions: int) -> Callable[[int], Outcome]:
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
        load = _timed_loads(
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
    files: Files, w: Workload, sessions: int, at_once: bool
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

        load = await _timed_loads_async(read, rounds * EVENTS_PER_TURN)
        await ledger.aclose()
        return Outcome(seconds, latencies, load, 0, rounds * sessions, group)

    def body(n: int) -> Outcome:
        path = files.fresh()
        out = asyncio.run(drive(path, max(1, n // sessions)))
        out.bytes_used, out.rows = settle(path)
        files.drop(path)
        return out

    return body


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


def sdk_empty_bytes(files: Files, session_class: Any) -> int:
    """Bytes of a freshly initialised, empty SDK database."""
    path = files.fresh()
    session_class("empty", str(path)).close()
    size, _ = settle(path)
    files.drop(path)
    return size


def sdk_sessions(
    files: Files,
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

        load = await _timed_loads_async(read, rounds * ITEMS_PER_TURN)
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
    except (ImportError, AttributeError, TypeError, ValueError, RuntimeError) as e:
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
        Files.drop(path)
    adds = [entry for entry in log if entry.startswith("add_items")]
    sizes = tuple(entry.count(",") + 1 for entry in adds)
    return "; ".join(log), sizes == RUNNER_BATCHES


# -- LangGraph -------------------------------------------------------------------------


def build_graph(w: Workload, checkpointer: Any) -> Any:
    """Return the compiled react-style graph: agent -> tools -> agent -> end."""

    def outputs_of(name: str) -> Callable[..., str]:
        def run_tool(path: str, pattern: str, context_lines: int) -> str:
            del pattern, context_lines
            return w.outputs[path]

        run_tool.__name__ = name
        run_tool.__doc__ = f"{name}: search a file for a pattern."
        return run_tool

    tools = [tool(outputs_of(name)) for name in TOOLS]

    def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        # A scripted model: tool calls after the user message, then the answer.
        messages = state["messages"]
        last = messages[-1]
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        turn = w.by_user[humans[-1].content]
        if isinstance(last, HumanMessage):
            key = config["configurable"]["thread_id"]
            calls = [
                {
                    "name": u.name,
                    "args": u.args,
                    "id": w.call_id(key, len(humans) - 1, k),
                    "type": "tool_call",
                }
                for k, u in enumerate(turn.tools)
            ]
            return {"messages": [AIMessage(content="", tool_calls=calls)]}
        return {"messages": [AIMessage(content=turn.answer)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def langgraph_empty_bytes(files: Files) -> int:
    """Bytes of a freshly set-up, empty SqliteSaver database."""
    path = files.fresh()
    conn = sqlite3.connect(path, check_same_thread=False)
    SqliteSaver(conn).setup()
    conn.close()
    size, _ = settle(path)
    files.drop(path)
    return size


def _lg_input(w: Workload, s: int, t: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=w.turn(s, t).user)]}


def _lg_config(s: int) -> RunnableConfig:
    return {"configurable": {"thread_id": session_key(s)}}


def langgraph_sync(
    files: Files, w: Workload, sessions: int, *, in_memory: bool = False
) -> Callable[[int], Outcome]:
    """Sessions one after another, ``graph.invoke`` per turn, ``SqliteSaver``."""

    def body(n: int) -> Outcome:
        path = files.fresh()
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("PRAGMA synchronous=FULL")
        saver: Any
        if in_memory:
            saver = InMemorySaver()
        else:
            saver = SqliteSaver(conn)
            saver.setup()
        graph = build_graph(w, saver)
        rounds = max(1, n // sessions)
        configs = [_lg_config(s) for s in range(sessions)]
        work = [[_lg_input(w, s, t) for t in range(rounds)] for s in range(sessions)]
        latencies = []
        start = time.perf_counter()
        for config, inputs in zip(configs, work, strict=True):
            for value in inputs:
                t0 = time.perf_counter()
                graph.invoke(value, config)
                latencies.append(time.perf_counter() - t0)
        seconds = time.perf_counter() - start
        load = _timed_loads(
            lambda: len(graph.get_state(configs[0]).values["messages"]),
            rounds * MESSAGES_PER_TURN,
        )
        conn.close()
        size, rows = settle(path)
        files.drop(path)
        return Outcome(seconds, latencies, load, size, rounds * sessions, rows=rows)

    return body


def langgraph_async(
    files: Files, w: Workload, sessions: int, at_once: bool
) -> Callable[[int], Outcome]:
    """Sessions on one ``AsyncSqliteSaver``, ``graph.ainvoke`` per turn."""

    async def drive(path: Path, rounds: int) -> Outcome:
        async with aiosqlite.connect(path) as conn:
            await conn.execute("PRAGMA synchronous=FULL")
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            graph = build_graph(w, saver)
            configs = [_lg_config(s) for s in range(sessions)]
            work = [
                [_lg_input(w, s, t) for t in range(rounds)] for s in range(sessions)
            ]
            latencies: list[float] = []

            async def session(s: int) -> None:
                for value in work[s]:
                    t0 = time.perf_counter()
                    await graph.ainvoke(value, configs[s])
                    latencies.append(time.perf_counter() - t0)

            seconds = await run_sessions(sessions, at_once, session)

            async def read() -> int:
                state = await graph.aget_state(configs[0])
                return len(state.values["messages"])

            load = await _timed_loads_async(read, rounds * MESSAGES_PER_TURN)
        return Outcome(seconds, latencies, load, 0, rounds * sessions)

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
    """One system in one run: its case (None when the peer is missing)."""

    key: str
    label: str
    note: str
    case: Case | None = None
    recorder: Recorder | None = None
    series: Series | None = None


@dataclass
class Goal:
    """A goal line: ours / theirs (rates) or theirs / ours (bytes)."""

    name: str
    ours: str
    theirs: str
    goal: float | None
    kind: str = "rate"  # rate: ours / theirs; bytes, load: theirs / ours


def build_rows(
    files: Files, w: Workload, args: argparse.Namespace, sdk_class: Any
) -> tuple[list[Row], list[Row]]:
    """Return the rows of the single-session run and of the concurrent run."""
    m, c, k = args.turns, args.sessions, args.serial_sessions
    ledger_empty = ledger_empty_bytes(files)
    raw_empty = raw_empty_bytes(files)
    lg_empty = langgraph_empty_bytes(files) if HAVE_LANGGRAPH else 0
    sdk_empty = sdk_empty_bytes(files, sdk_class) if HAVE_SDK else 0

    def row(
        key: str,
        label: str,
        note: str,
        make: Callable[[], Callable[[int], Outcome]] | None,
        empty: int,
    ) -> Row:
        r = Row(key, label, note)
        if make is None:
            return r
        sessions = k if key.startswith("1.") else c
        n = m * sessions
        r.recorder = Recorder(empty)
        warm = sessions * max(1, m // 10)
        r.case = Case(key, n, r.recorder.wrap(n, make()), "turn", note, warm)
        return r

    lg, sdk = HAVE_LANGGRAPH, HAVE_SDK
    single = [
        row(
            "1.raw_floor",
            "raw sqlite3 (floor)",
            "1 txn of the 6 rows/turn, WAL+FULL",
            lambda: raw_floor(files, w, k),
            raw_empty,
        ),
        row(
            "1.turnledger_sync",
            "turnledger EventStore.append",
            "sync, 1 append (6 events)/turn",
            lambda: ledger_sync(files, w, k),
            ledger_empty,
        ),
        row(
            "1.turnledger_async",
            "turnledger AsyncLedger.append",
            "async, 1 append (6 events)/turn",
            lambda: ledger_async(files, w, k, at_once=False),
            ledger_empty,
        ),
        row(
            "1.langgraph",
            "LangGraph graph + SqliteSaver",
            "graph.invoke/turn, durability=async",
            (lambda: langgraph_sync(files, w, k)) if lg else None,
            lg_empty,
        ),
        row(
            "1.langgraph_memory",
            "LangGraph graph + InMemorySaver",
            "info: graph+serde CPU, no disk",
            (lambda: langgraph_sync(files, w, k, in_memory=True)) if lg else None,
            0,
        ),
        row(
            "1.sdk_one_add",
            "Agents SDK SQLiteSession",
            "1 add_items (6 items)/turn",
            (lambda: sdk_sessions(files, w, k, sdk_class, at_once=False, runner=False))
            if sdk
            else None,
            sdk_empty,
        ),
        row(
            "1.sdk_runner",
            "Agents SDK SQLiteSession",
            "3 add_items/turn, as Runner.run",
            (lambda: sdk_sessions(files, w, k, sdk_class, at_once=False, runner=True))
            if sdk
            else None,
            sdk_empty,
        ),
    ]
    concurrent = [
        row(
            "2.turnledger_async",
            "turnledger AsyncLedger.append",
            f"{c} tasks, group commit",
            lambda: ledger_async(files, w, c, at_once=True),
            ledger_empty,
        ),
        row(
            "2.langgraph",
            "LangGraph graph + AsyncSqliteSaver",
            f"{c} tasks, graph.ainvoke/turn",
            (lambda: langgraph_async(files, w, c, at_once=True)) if lg else None,
            lg_empty,
        ),
        row(
            "2.sdk_one_add",
            "Agents SDK SQLiteSession",
            f"{c} tasks, 1 add_items/turn",
            (lambda: sdk_sessions(files, w, c, sdk_class, at_once=True, runner=False))
            if sdk
            else None,
            sdk_empty,
        ),
        row(
            "2.sdk_runner",
            "Agents SDK SQLiteSession",
            f"{c} tasks, 3 add_items/turn",
            (lambda: sdk_sessions(files, w, c, sdk_class, at_once=True, runner=True))
            if sdk
            else None,
            sdk_empty,
        ),
    ]
    return single, concurrent


RUN_ORDER = (  # the compared cases run next to each other in every repetition
    "1.langgraph_memory",
    "1.langgraph",
    "1.raw_floor",
    "1.turnledger_sync",
    "1.turnledger_async",
    "1.sdk_one_add",
    "1.sdk_runner",
    "2.langgraph",
    "2.turnledger_async",
    "2.sdk_one_add",
    "2.sdk_runner",
)

GOALS = (
    Goal("1 turns/s vs LangGraph (sync)", "1.turnledger_sync", "1.langgraph", 20),
    Goal(
        "1 bytes/turn, LangGraph / ours",
        "1.turnledger_sync",
        "1.langgraph",
        20,
        "bytes",
    ),
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
    Goal("1 info: ours sync vs raw floor", "1.turnledger_sync", "1.raw_floor", None),
    Goal("1 info: raw floor vs LangGraph", "1.raw_floor", "1.langgraph", None),
    Goal("1 info: raw floor vs SDK Runner", "1.raw_floor", "1.sdk_runner", None),
    Goal(
        "1 info: bytes/turn, SDK / ours",
        "1.turnledger_async",
        "1.sdk_one_add",
        None,
        "bytes",
    ),
    Goal(
        "1 info: load history, LangGraph / ours (sync)",
        "1.turnledger_sync",
        "1.langgraph",
        None,
        "load",
    ),
    Goal(
        "1 info: load history, SDK / ours (async)",
        "1.turnledger_async",
        "1.sdk_one_add",
        None,
        "load",
    ),
    Goal("2 turns/s vs LangGraph (async)", "2.turnledger_async", "2.langgraph", 20),
    Goal(
        "2 bytes/turn, LangGraph / ours",
        "2.turnledger_async",
        "2.langgraph",
        20,
        "bytes",
    ),
    Goal("2 turns/s vs SDK as Runner writes", "2.turnledger_async", "2.sdk_runner", 3),
    Goal("2 turns/s vs SDK 1 add_items/turn", "2.turnledger_async", "2.sdk_one_add", 5),
)


@dataclass
class GoalResult:
    """A goal's outcome."""

    goal: Goal
    ratio: float | None = None
    per_repeat: list[float] = field(default_factory=list)
    verdict: str = "n/a"
    detail: str = ""

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
    out = GoalResult(goal)
    ours, theirs = rows[goal.ours], rows[goal.theirs]
    if ours.series is None or theirs.series is None:
        out.detail = f"{theirs.label}: {NOT_INSTALLED}"
        return out
    if goal.kind in ("bytes", "load"):
        if ours.recorder is None or theirs.recorder is None:
            return out
        x, y = ours.recorder.extras, theirs.recorder.extras
        a, b = (
            (x.bytes_per_turn, y.bytes_per_turn)
            if goal.kind == "bytes"
            else (
                x.load_s,
                y.load_s,
            )
        )
        out.per_repeat = [q / p for p, q in zip(a, b, strict=True)]
        out.ratio = statistics.median(out.per_repeat)
        out.detail = (
            f"{_median(b):,.0f} B vs {_median(a):,.0f} B per turn"
            if goal.kind == "bytes"
            else f"{_median(b) * 1e3:.2f} ms vs {_median(a) * 1e3:.2f} ms"
        )
    else:
        ratio = Ratio(goal.name, ours.series, theirs.series, goal.goal)
        out.per_repeat = ratio.values
        out.ratio = ratio.median
        out.detail = (
            f"{ours.series.ops_per_s:,.0f} vs {theirs.series.ops_per_s:,.0f} turns/s"
        )
    if goal.goal is None:
        out.verdict = "info"
    else:
        out.verdict = "PASS" if out.ratio >= goal.goal else "MISS"
    return out


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
        if r.series is None or r.recorder is None:
            lines.append((r.label, r.note, NOT_INSTALLED, "", "", "", "", ""))
            continue
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
    measured = [x for x in [header, *lines] if x[2] != NOT_INSTALLED]
    widths = [max(len(x[i]) for x in measured) for i in range(len(header))]
    for line in [header, tuple("-" * wd for wd in widths), *lines]:
        if line[2] == NOT_INSTALLED:
            print(f"{line[0].ljust(widths[0])}  {line[1].ljust(widths[1])}  {line[2]}")
            continue
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
        if r.ratio is None:
            print(f"n/a   {r.goal.name}: {r.detail}; {goal}")
            continue
        spread = f"per-repeat {min(r.per_repeat):.2f}-{max(r.per_repeat):.2f}"
        print(
            f"{r.verdict:<4}  {r.goal.name}: {r.detail} -> ratio {r.ratio:.2f} "
            f"({spread}); {goal}"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
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


def versions() -> dict[str, str]:
    """Return the installed versions of the peers (or "not installed")."""
    found = {}
    for name in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "openai-agents",
        "aiosqlite",
        "eventsourcing",
    ):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run both runs, print the tables and the goal lines; always return 0."""
    args = parse_args(argv)
    w = Workload(make_pool(random.Random(args.seed), 64))
    files = Files(args.dir)
    load_before = os.getloadavg()
    try:
        default_sync = default_synchronous(files.root)
        sdk_class = sdk_session_class(default_sync != "FULL") if HAVE_SDK else None
        probe, probe_ok = (
            probe_runner(files.root) if HAVE_SDK else (NOT_INSTALLED, True)
        )
        single, concurrent = build_rows(files, w, args, sdk_class)
        rows = {r.key: r for r in [*single, *concurrent]}
        ordered = [rows[key] for key in RUN_ORDER]
        cases = [r.case for r in ordered if r.case is not None]
        for prefix, repeat in (("1.", args.repeat_single), ("2.", args.repeat)):
            run = [c for c in cases if c.name.startswith(prefix)]
            for s in run_rounds(run, repeat=repeat, warmup=args.warmup):
                rows[s.name].series = s
    finally:
        files.cleanup()
    results = [judge(g, rows) for g in GOALS]
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions(),
        "default_synchronous": default_sync,
        "runner_probe": probe,
        "runner_probe_matches": probe_ok,
        "folder": str(files.root),
        "device": device_of(files.root.parent),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "extras": {
            r.key: r.recorder.extras.as_dict()
            for r in rows.values()
            if r.recorder is not None and r.series is not None
        },
        "goals": {r.goal.name: r.as_dict() for r in results},
    }
    report(meta, single, concurrent, results)
    if args.json:
        series = [r.series for r in rows.values() if r.series is not None]
        write_json(args.json, meta=meta, series=series)
        print(f"\nfigures written to {args.json}")
    return 0


def report(
    meta: dict[str, Any],
    single: Sequence[Row],
    concurrent: Sequence[Row],
    results: Sequence[GoalResult],
) -> None:
    """Print the context, both tables and the goal lines."""
    a, v = meta["args"], meta["versions"]
    print(
        f"bench_peers: python {meta['python']}, sqlite {meta['sqlite']}; "
        f"langgraph {v['langgraph']} (checkpoint {v['langgraph-checkpoint']}, "
        f"checkpoint-sqlite {v['langgraph-checkpoint-sqlite']}); "
        f"openai-agents {v['openai-agents']}"
    )
    print(
        f"durability: WAL + synchronous=FULL everywhere (turnledger sets FULL; "
        f"LangGraph's connection gets PRAGMA synchronous=FULL; the SDK sets none and "
        f"inherits this build's default for WAL connections: "
        f"{meta['default_synchronous']}"
        + (
            ", so it runs as shipped)"
            if meta["default_synchronous"] == "FULL"
            else ", so a subclass sets FULL)"
        )
    )
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
    mark = "matches" if meta["runner_probe_matches"] else "DOES NOT match"
    print(
        f"SDK Runner.run per turn (probed; {mark} the Runner mode): "
        f"{meta['runner_probe']}"
    )
    print(
        "bytes/turn: file + WAL after wal_checkpoint(TRUNCATE), all connections "
        "closed, minus an empty database of the same system\n"
    )
    print_run(
        f"single session: {a['serial_sessions']} sessions x {a['turns']} turns, "
        "one session at a time",
        single,
    )
    print_run(
        f"concurrent: {a['sessions']} sessions x {a['turns']} turns at once", concurrent
    )
    ext = meta["extras"].get("2.turnledger_async")
    if ext is not None:
        print(f"AsyncLedger mean group: {ext['mean_group']:.1f} appends per commit")
    stored = []
    for key, label in (
        ("1.turnledger_sync", "turnledger"),
        ("1.langgraph", "LangGraph"),
        ("1.sdk_runner", "SDK"),
    ):
        if key in meta["extras"]:
            tables = meta["extras"][key]["rows_per_turn"].items()
            stored.append(f"{label} " + ", ".join(f"{t} {n:.2f}" for t, n in tables))
    if stored:
        print("rows written per turn: " + "; ".join(stored))
    print()
    print_goals(results)
    missed = [r.goal.name for r in results if r.verdict == "MISS"]
    unmeasured = sum(1 for r in results if r.verdict == "n/a")
    print(
        f"\n{len(missed)} goal(s) MISSED: " + "; ".join(missed)
        if missed
        else "\nno goal missed"
    )
    if unmeasured:
        print(f"{unmeasured} line(s) not measured: a peer is not installed")


if __name__ == "__main__":
    sys.exit(main())
