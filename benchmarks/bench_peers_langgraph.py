"""Per-turn persistence: turnledger against LangGraph's SQLite checkpointer.

The workload of every bench_peers_* script (``_peers.py``): N sessions of M
turns, each a user message (~200 chars), an assistant message with 2 tool calls,
the 2 tool results (~300 chars each) and a final answer (~200 chars), the same
seeded texts and ids for every system. Two runs: "single session"
(``--serial-sessions`` sessions, one after another) and "concurrent"
(``--sessions`` sessions at once).

- turnledger: ONE ``append`` of 6 events per turn; single session
  ``EventStore.append`` (sync), concurrent ``AsyncLedger`` (group commit); the
  raw floor (one sqlite3 transaction of the same 6 rows per turn) as info.
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

Fairness rules: one temporary folder on one disk, a fresh file per run; WAL with
``synchronous=FULL`` everywhere (turnledger sets FULL; LangGraph's connection, ours
to open, gets ``PRAGMA synchronous=FULL``); like for like (the sync graph against
sync ``EventStore.append``, ``ainvoke`` against ``AsyncLedger``); what is timed is
the whole ``invoke`` (its checkpoints cannot be written without running the
graph; the in-memory row shows how much of that is graph CPU), payloads built
before the clock starts. Per-turn latency p50/p95 over every timed turn; load
history: one session's messages back through ``get_state`` vs ``read_stream``,
median of several reads; bytes per turn: file + WAL after
``wal_checkpoint(TRUNCATE)`` minus a freshly set-up empty database, over the turns
written. LangGraph stores a full snapshot of the message list per super-step, so
its bytes per turn grow about linearly with M (the LangGraph/turnledger bytes
ratio is ~2.2 x M here: 22x at the default M=10, ~40x at M=20); turnledger's do
not. Rates are medians over repetitions (one warm-up run per case, cases
round-robin); each ratio is the median of per-repetition ratios.

Goals (issue #7): turnledger >= 20x LangGraph in turns/s and >= 20x smaller on
disk, in both runs. The script reports PASS/MISS and always exits 0; without
LangGraph installed it prints one line and exits 0.

Run::

    .venv/bin/python benchmarks/bench_peers_langgraph.py          # full run
    .venv/bin/python benchmarks/bench_peers_langgraph.py --quick  # smoke: tiny sizes
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _harness import Scratch, installed
from _peers import (
    TOOLS,
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
    timed_loads,
    timed_loads_async,
    workload,
    write_figures,
)

if not installed(
    "LangGraph", "langgraph.checkpoint.sqlite", "langgraph.prebuilt", "aiosqlite"
):
    sys.exit(0)

import aiosqlite
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

MESSAGES_PER_TURN = 5  # LangGraph messages per turn (tool calls ride on the AI one)


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


def langgraph_empty_bytes(files: Scratch) -> int:
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
    files: Scratch, w: Workload, sessions: int, *, in_memory: bool = False
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
        load = timed_loads(
            lambda: len(graph.get_state(configs[0]).values["messages"]),
            rounds * MESSAGES_PER_TURN,
        )
        conn.close()
        size, rows = settle(path)
        files.drop(path)
        return Outcome(seconds, latencies, load, size, rounds * sessions, rows=rows)

    return body


def langgraph_async(
    files: Scratch, w: Workload, sessions: int, at_once: bool
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

            load = await timed_loads_async(read, rounds * MESSAGES_PER_TURN)
        return Outcome(seconds, latencies, load, 0, rounds * sessions)

    def body(n: int) -> Outcome:
        path = files.fresh()
        out = asyncio.run(drive(path, max(1, n // sessions)))
        out.bytes_used, out.rows = settle(path)
        files.drop(path)
        return out

    return body


# -- the run ---------------------------------------------------------------------------


LEDGER_ROWS = ("1.raw_floor", "1.turnledger_sync", "2.turnledger_async")
PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "aiosqlite",
)
ORDER = (  # the compared cases run next to each other in every repetition
    "1.langgraph_memory",
    "1.langgraph",
    "1.raw_floor",
    "1.turnledger_sync",
    "2.langgraph",
    "2.turnledger_async",
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
    Goal("1 info: ours sync vs raw floor", "1.turnledger_sync", "1.raw_floor", None),
    Goal("1 info: raw floor vs LangGraph", "1.raw_floor", "1.langgraph", None),
    Goal(
        "1 info: load history, LangGraph / ours (sync)",
        "1.turnledger_sync",
        "1.langgraph",
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
)


def langgraph_rows(
    files: Scratch, w: Workload, args: argparse.Namespace
) -> dict[str, Row]:
    """LangGraph's rows: SqliteSaver and InMemorySaver alone, AsyncSqliteSaver."""
    k, c = args.serial_sessions, args.sessions
    empty = langgraph_empty_bytes(files)
    rows = [
        make_row(
            args,
            "1.langgraph",
            "LangGraph graph + SqliteSaver",
            "graph.invoke/turn, durability=async",
            body=langgraph_sync(files, w, k),
            empty=empty,
        ),
        make_row(
            args,
            "1.langgraph_memory",
            "LangGraph graph + InMemorySaver",
            "info: graph+serde CPU, no disk",
            body=langgraph_sync(files, w, k, in_memory=True),
            empty=0,
        ),
        make_row(
            args,
            "2.langgraph",
            "LangGraph graph + AsyncSqliteSaver",
            f"{c} tasks, graph.ainvoke/turn",
            body=langgraph_async(files, w, c, at_once=True),
            empty=empty,
        ),
    ]
    return {r.key: r for r in rows}


def main(argv: Sequence[str] | None = None) -> int:
    """Run both runs, print the tables and the goal lines; always return 0."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    w = workload(args)
    load_before = os.getloadavg()
    with Scratch("bench_peers_langgraph", args.dir) as files:
        rows = {
            **ledger_rows(
                files,
                w,
                args,
                ("1.raw_floor", "1.turnledger_sync", "2.turnledger_async"),
            ),
            **langgraph_rows(files, w, args),
        }
        measure(rows, ORDER, args)
    meta = base_meta(
        args,
        files,
        load_before,
        (
            "langgraph",
            "langgraph-checkpoint",
            "langgraph-checkpoint-sqlite",
            "aiosqlite",
        ),
    )
    v = meta["versions"]
    report(
        meta,
        rows,
        GOALS,
        intro=(
            (
                f"bench_peers_langgraph: python {meta['python']}, sqlite "
                f"{meta['sqlite']}; langgraph {v['langgraph']} (checkpoint "
                f"{v['langgraph-checkpoint']}, checkpoint-sqlite "
                f"{v['langgraph-checkpoint-sqlite']})"
            ),
            (
                "durability: WAL + synchronous=FULL on both sides (turnledger sets "
                "FULL; LangGraph's connection gets PRAGMA synchronous=FULL)"
            ),
        ),
        stored=(("1.turnledger_sync", "turnledger"), ("1.langgraph", "LangGraph")),
    )
    write_figures(args.json, meta, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
