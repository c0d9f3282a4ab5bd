"""The framework adapters side by side with each framework's own backend.

One section per framework (a function each; ``--only NAME`` runs one). Every
section runs the same workload through the framework twice, once on its own
SQLite backend and once on the turnledger adapter, in the same run, and prints the
ratios.

LangGraph (``langgraph``): a compiled ``StateGraph`` shaped like
``create_react_agent`` (``MessagesState``; an "agent" node, a scripted model with no
network, routed by ``tools_condition`` to a ``ToolNode`` with two tools and back).
Each turn is one ``graph.invoke`` with a user message (~200 chars); the model asks
for both tools (JSON arguments), the tools return ~300 chars each, the model
answers (~200 chars): 5 messages, 4 checkpoints and their task writes per turn,
``durability="async"`` (LangGraph's default; ``invoke`` returns once the saves
have committed). Savers:

- ``SqliteSaver`` (langgraph-checkpoint-sqlite) on its own connection with WAL and
  ``PRAGMA synchronous=FULL`` (set explicitly, so both sides fsync each commit);
- ``TurnledgerSaver`` on a SQLite ledger (WAL, ``synchronous=FULL``);
- the ceiling, ``InMemorySaver`` (nothing persisted; the thread's state still
  carries over between turns): its turns/s over SqliteSaver's is the most any
  backend could reach, and the output says when the goal lies above it;
- ``NullSaver``, a ``BaseCheckpointSaver`` that persists nothing (``put`` and
  ``put_writes`` return at once, ``get_tuple`` returns ``None``), each turn fed
  the whole conversation as input so the graph does the same work: the ceiling
  with no saver cost at all, reported beside InMemorySaver's.

Measures: turns/s over ``--turns`` turns of one thread (the whole ``invoke``
timed; median of per-repetition ratios), bytes per turn at ``--turns`` (database
file + WAL after ``wal_checkpoint(TRUNCATE)`` minus the empty database, over the
turns), and how bytes per turn grow along one long thread: the bytes the turns in
a window added, per turn, early (turns 6-15) vs late (the last 10 of
``--long-turns``). Goals (issue #13): >= 5x turns/s, >= 20x fewer bytes per turn
at 25 turns, and flat bytes per turn (late / early <= 1.10) up to turn 100.

``--diagnose`` (no goal; instead of the sections) runs the LangGraph thread above
on TurnledgerSaver (same graph, same seeded inputs, ``--turns`` turns) and prints
where its bytes and time go, in three tables:

- ``bytes``: per kind of ledger row, the rows and stored bytes per turn, split
  into the frame header and hash-chain tail, the event body and, for
  ``item.recorded``, the record inside it; then the row's stream id text and
  the SQLite pages of the table and of its stream index (``dbstat``), against
  the file's growth per turn (what the section counts);
- ``timeline``: one turn's saver calls and ledger transactions, in order, with
  their start times and how long each took, and the transactions per turn over
  the thread;
- ``cpu``: the saver calls LangGraph made for the thread, replayed in one thread
  on TurnledgerSaver (``synchronous=OFF``: no fsync) and on InMemorySaver, as
  CPU microseconds per turn per method (median of 7 repetitions).

Run::

    .venv/bin/python benchmarks/bench_adapters.py              # full (~1-2 min)
    .venv/bin/python benchmarks/bench_adapters.py --quick      # smoke: tiny sizes
    .venv/bin/python benchmarks/bench_adapters.py --diagnose   # the three tables
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from _bench_frameworks import FRAMEWORK_SECTIONS
from _harness import (
    Case,
    Ratio,
    Scratch,
    ceiling_line,
    installed,
    print_ratios,
    print_table,
    run_rounds,
    seeded_text,
)

SPEED_GOAL = 5.0  # turns/s, TurnledgerSaver / SqliteSaver
CEILING = "InMemorySaver"  # no persistence: no backend can run the graph faster
NULL_SAVER = "NullSaver"  # persists nothing: get_tuple None, put returns at once
BYTES_GOAL = 20  # bytes per turn, SqliteSaver / TurnledgerSaver
GROWTH_GOAL = 1.10  # bytes per turn late / early in one long thread


def settle(path: Path) -> int:
    """Return the database's bytes (file + WAL after a TRUNCATE checkpoint)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


# -- LangGraph -------------------------------------------------------------------------


def langgraph_graph(checkpointer: Any, rng: random.Random) -> Any:
    """The react-shaped graph: scripted agent node, two tools, tools_condition."""
    from langchain_core.messages import AIMessage, ToolMessage  # noqa: PLC0415
    from langchain_core.tools import tool  # noqa: PLC0415
    from langgraph.graph import START, MessagesState, StateGraph  # noqa: PLC0415
    from langgraph.prebuilt import ToolNode, tools_condition  # noqa: PLC0415

    outputs = [seeded_text(rng, 300) for _ in range(64)]
    answers = [seeded_text(rng, 200) for _ in range(64)]

    @tool
    def grep_logs(path: str, pattern: str) -> str:
        """Search a log file."""
        return outputs[hash((path, pattern, 1)) % len(outputs)]

    @tool
    def search_code(path: str, pattern: str) -> str:
        """Search the code."""
        return outputs[hash((path, pattern, 2)) % len(outputs)]

    def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        turn = len(state["messages"])
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(answers[turn % len(answers)])]}
        args = {"path": f"/srv/export/logs/nightly-{turn:04d}.log", "pattern": "ERROR"}
        calls = [
            {"name": name, "args": args, "id": f"call_{turn}_{k}", "type": "tool_call"}
            for k, name in enumerate(("grep_logs", "search_code"))
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([grep_logs, search_code]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _sqlite_saver(path: Path) -> tuple[Any, Callable[[], None]]:
    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn.close


def _in_memory_saver(_path: Path) -> tuple[Any, Callable[[], None]]:
    from langgraph.checkpoint.memory import InMemorySaver  # noqa: PLC0415

    return InMemorySaver(), lambda: None


def _null_saver(_path: Path) -> tuple[Any, Callable[[], None]]:
    """A checkpointer that persists nothing: put/put_writes return at once."""
    from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: PLC0415

    class NullSaver(BaseCheckpointSaver):  # type: ignore[type-arg]
        def get_tuple(self, _config: Any) -> None:
            return None

        def list(self, *_args: Any, **_kwargs: Any) -> Any:
            return iter(())

        def put(self, config: Any, checkpoint: Any, *_args: Any) -> Any:
            conf = {**config["configurable"], "checkpoint_id": checkpoint["id"]}
            return {"configurable": conf}

        def put_writes(self, *_args: Any, **_kwargs: Any) -> None:
            return None

    return NullSaver(), lambda: None


def _turnledger_saver(path: Path) -> tuple[Any, Callable[[], None]]:
    from turnledger.adapters.langgraph import TurnledgerSaver  # noqa: PLC0415

    saver = TurnledgerSaver.from_url(str(path), agent="bench")
    return saver, saver.close


SAVERS: dict[str, Callable[[Path], tuple[Any, Callable[[], None]]]] = {
    "SqliteSaver": _sqlite_saver,
    "TurnledgerSaver": _turnledger_saver,
    # The ceiling: the same graph with nothing persisted (LangGraph's own saver
    # in memory, so the thread's state still carries over between turns).
    CEILING: _in_memory_saver,
    # The true ceiling: nothing stored at all, so each turn is fed the whole
    # conversation (the state InMemorySaver would have carried over) as input.
    NULL_SAVER: _null_saver,
}
DURABLE = ("SqliteSaver", "TurnledgerSaver")


def langgraph_thread(
    folder: Scratch,
    saver_name: str,
    turns: int,
    *,
    marks: tuple[int, ...] = (),
) -> tuple[float, int, dict[int, int]]:
    """Run ``turns`` turns of one thread on a fresh database.

    Returns the seconds the invokes took, the bytes the turns added, and the
    bytes added after each turn in ``marks`` (measured with the saver open).
    """
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    rng = random.Random(7)
    path = folder.fresh()
    saver, close = SAVERS[saver_name](path)
    empty = settle(path)
    graph = langgraph_graph(saver, rng)
    inputs = [HumanMessage(seeded_text(rng, 200)) for _ in range(turns)]
    config = {"configurable": {"thread_id": "bench-thread"}}
    seconds = 0.0
    at: dict[int, int] = {}
    history: list[Any] = []  # carried by the benchmark for NullSaver only
    for i, message in enumerate(inputs, start=1):
        start = time.perf_counter()
        result = graph.invoke({"messages": [*history, message]}, config)
        seconds += time.perf_counter() - start
        if saver_name == NULL_SAVER:
            history = result["messages"]
        if i in marks:
            at[i] = settle(path) - empty
    close()
    used = settle(path) - empty
    return seconds, used, at


def bench_langgraph(args: argparse.Namespace) -> list[str]:
    """The LangGraph section; returns its goal lines."""
    if not installed("langgraph", "langgraph.checkpoint.sqlite", "langgraph.prebuilt"):
        return []
    folder = Scratch("bench_adapters")
    try:
        turns = args.turns
        bytes_seen: dict[str, list[float]] = {name: [] for name in DURABLE}

        def case(name: str) -> Case:
            def run(n: int) -> float:
                seconds, used, _ = langgraph_thread(folder, name, n)
                if n == turns and name in bytes_seen:
                    bytes_seen[name].append(used / n)
                return seconds

            return Case(name, turns, run, unit="turn", warmup_n=min(turns, 3))

        series = run_rounds(
            [case(name) for name in SAVERS], repeat=args.repeat, warmup=1
        )
        print(f"LangGraph: {turns} turns of one thread, {args.repeat} repetitions")
        print_table(series)
        by_name = {s.name: s for s in series}
        speed = Ratio(
            f"turns/s at {turns} turns, TurnledgerSaver / SqliteSaver",
            by_name["TurnledgerSaver"],
            by_name["SqliteSaver"],
            goal=SPEED_GOAL,
        )
        ceiling = Ratio(
            f"ceiling: turns/s at {turns} turns, {CEILING} (no persistence) / "
            "SqliteSaver",
            by_name[CEILING],
            by_name["SqliteSaver"],
        )
        null = Ratio(
            f"ceiling: turns/s at {turns} turns, {NULL_SAVER} (persists nothing, "
            "whole conversation as input) / SqliteSaver",
            by_name[NULL_SAVER],
            by_name["SqliteSaver"],
        )
        print_ratios([speed, ceiling, null])
        theirs = statistics.median(bytes_seen["SqliteSaver"])
        ours = statistics.median(bytes_seen["TurnledgerSaver"])
        per = [
            a / b
            for a, b in zip(
                bytes_seen["SqliteSaver"], bytes_seen["TurnledgerSaver"], strict=True
            )
        ]
        ratio = statistics.median(per)
        verdict = "PASS" if ratio >= BYTES_GOAL else "MISS"
        lines = [
            ceiling_line(ceiling, SPEED_GOAL, "TurnledgerSaver"),
            ceiling_line(null, SPEED_GOAL, "TurnledgerSaver"),
            (
                f"{verdict} bytes/turn at {turns} turns, SqliteSaver / "
                f"TurnledgerSaver: {theirs:,.0f} B vs {ours:,.0f} B per turn -> "
                f"ratio {ratio:.2f} (per-repeat {min(per):.2f}-{max(per):.2f}); "
                f"goal >= {BYTES_GOAL}"
            ),
        ]
        lines.extend(_flatness(folder, args.long_turns))
        for line in lines:
            print(line)
        return lines
    finally:
        folder.cleanup()


def _flatness(folder: Scratch, long_turns: int) -> list[str]:
    """Bytes per turn early and late in one long thread, for both savers."""
    early = (5, 15)
    late = (long_turns - 10, long_turns)
    marks = (*early, *late)
    out = []
    for name in ("TurnledgerSaver", "SqliteSaver"):
        _, _, at = langgraph_thread(folder, name, long_turns, marks=marks)
        first = (at[early[1]] - at[early[0]]) / (early[1] - early[0])
        last = (at[late[1]] - at[late[0]]) / (late[1] - late[0])
        growth = last / first
        if name == "TurnledgerSaver":
            verdict = "PASS" if growth <= GROWTH_GOAL else "MISS"
            goal = f"goal <= {GROWTH_GOAL:.2f}"
        else:
            verdict, goal = "info", "reported"
        out.append(
            f"{verdict} bytes/turn growth, {name}: turns {early[0] + 1}-{early[1]} "
            f"{first:,.0f} B/turn vs turns {late[0] + 1}-{late[1]} {last:,.0f} "
            f"B/turn -> late/early {growth:.2f}; {goal}"
        )
    return out


# -- --diagnose: where a LangGraph turn's bytes and time go ------------------------


def diagnose_bytes(folder: Scratch, turns: int) -> None:
    """--diagnose: print where the bytes of a turn go."""
    from turnledger.ledger.events import ItemRecorded  # noqa: PLC0415
    from turnledger.ledger.store import open_store  # noqa: PLC0415

    _, used, _ = langgraph_thread(folder, "TurnledgerSaver", turns)
    path = folder.root / f"db{folder.count}.sqlite"
    rows: Counter[str] = Counter()
    body: Counter[str] = Counter()
    fields: Counter[str] = Counter()
    with open_store(str(path)) as store:
        for recorded in store.iter_all():
            event = recorded.event
            kind = type(event).__name__
            if isinstance(event, ItemRecorded):
                kind += f":{event.kind}"
                fields[kind] += len(msgspec.json.encode(event.fields)) - 2
            rows[kind] += 1
            body[kind] += len(msgspec.json.encode(event))
    conn = sqlite3.connect(path)
    try:
        state, ids, topics, count = conn.execute(
            "SELECT sum(length(state)), sum(length(originator_id)), "
            "sum(length(topic)), count(*) FROM stored_events"
        ).fetchone()
        try:
            pages = conn.execute(
                "SELECT name, sum(pgsize), sum(payload) FROM dbstat "
                "WHERE name LIKE '%stored_events%' GROUP BY name"
            ).fetchall()
        except sqlite3.Error:
            pages = []
    finally:
        conn.close()
    print(
        f"bytes: {turns} turns, {count / turns:.2f} rows/turn, file growth "
        f"{used / turns:,.0f} B/turn"
    )
    print(f"{'row kind':34} {'rows/turn':>9} {'body B/turn':>11} {'record B/turn':>13}")
    for kind in sorted(rows, key=lambda k: -body[k]):
        record = f"{fields[kind] / turns:13,.0f}" if kind in fields else f"{'':13}"
        print(
            f"{kind:34} {rows[kind] / turns:9.2f} {body[kind] / turns:11,.0f} {record}"
        )
    frames = state - sum(body.values())
    print(
        f"frame header + chain tail: {frames / turns:,.0f} B/turn "
        f"({frames / count:.0f} B/row); stream id text in each row "
        f"{ids / count:.0f} B ({ids / turns:,.0f} B/turn, and again in the index); "
        f"topic text {topics / turns:,.0f} B/turn"
    )
    for name, size, payload in pages:
        print(
            f"  {name}: {size / turns:,.0f} B/turn of pages, "
            f"{payload / turns:,.0f} B/turn of cell payload"
        )


def diagnose_timeline(folder: Scratch, turns: int) -> None:
    """--diagnose: one turn's saver calls and transactions; transactions per turn."""
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    from turnledger.adapters.langgraph import TurnledgerSaver  # noqa: PLC0415

    path = folder.fresh()
    saver = TurnledgerSaver.from_url(str(path), agent="bench")
    log: list[tuple[float, str]] = []
    clock = [time.perf_counter()]
    lock = threading.Lock()

    def timed(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                took = (time.perf_counter() - start) * 1e3
                with lock:
                    log.append((start - clock[0], f"{name} ({took:.2f} ms)"))

        return run

    saver.put = timed("put", saver.put)  # type: ignore[method-assign]
    saver.put_writes = timed("put_writes", saver.put_writes)  # type: ignore[method-assign]
    saver.store.append_batch = timed(  # type: ignore[method-assign]
        "  transaction", saver.store.append_batch
    )
    rng = random.Random(7)
    graph = langgraph_graph(saver, rng)
    config = {"configurable": {"thread_id": "bench-thread"}}
    inputs = [HumanMessage(seeded_text(rng, 200)) for _ in range(turns)]
    for message in inputs[:-1]:
        graph.invoke({"messages": [message]}, config)
    transactions = sum(1 for _, what in log if what.startswith("  transaction"))
    log.clear()
    clock[0] = time.perf_counter()
    graph.invoke({"messages": [inputs[-1]]}, config)
    returned = (time.perf_counter() - clock[0]) * 1e3
    transactions += sum(1 for _, what in log if what.startswith("  transaction"))
    saver.close()
    settle(path)
    print(f"timeline: turn {turns} (start times, ms)")
    for at, what in sorted(log):
        print(f"  {at * 1e3:7.2f} {what}")
    print(f"  {returned:7.2f} invoke returned")
    print(
        f"transactions per turn over {turns} turns: {transactions / turns:.2f} "
        "(saver calls per turn: 9)"
    )


def recorded_calls(turns: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The saver calls LangGraph makes for the thread (recorded on InMemorySaver)."""
    from langchain_core.messages import HumanMessage  # noqa: PLC0415
    from langgraph.checkpoint.memory import InMemorySaver  # noqa: PLC0415

    calls: list[tuple[str, tuple[Any, ...]]] = []

    class Recording(InMemorySaver):
        def put(self, *args: Any) -> Any:
            calls.append(("put", args))
            return super().put(*args)

        def put_writes(self, *args: Any) -> None:
            calls.append(("put_writes", args))
            super().put_writes(*args)

        def get_tuple(self, *args: Any) -> Any:
            calls.append(("get_tuple", args))
            return super().get_tuple(*args)

    rng = random.Random(7)
    graph = langgraph_graph(Recording(), rng)
    config = {"configurable": {"thread_id": "bench-thread"}}
    for message in [HumanMessage(seeded_text(rng, 200)) for _ in range(turns)]:
        graph.invoke({"messages": [message]}, config, durability="sync")
    return calls


def diagnose_cpu(folder: Scratch, turns: int, repeat: int) -> None:
    """--diagnose: the saver's CPU per turn per method, replayed, vs InMemorySaver."""
    from langgraph.checkpoint.memory import InMemorySaver  # noqa: PLC0415

    from turnledger.adapters.langgraph import TurnledgerSaver  # noqa: PLC0415
    from turnledger.ledger.store import open_store  # noqa: PLC0415

    calls = recorded_calls(turns)
    makers: dict[str, Callable[[], Any]] = {
        "InMemorySaver": InMemorySaver,
        "TurnledgerSaver (sync OFF)": lambda: TurnledgerSaver(
            open_store(str(folder.fresh()), synchronous="OFF"), close_store=True
        ),
    }
    per: dict[str, dict[str, list[float]]] = {name: {} for name in makers}
    for _ in range(repeat):
        for name, make in makers.items():
            saver = make()
            spent: Counter[str] = Counter()
            for method, args in calls:
                start = time.process_time()
                getattr(saver, method)(*args)
                spent[method] += time.process_time() - start
            for method, seconds in spent.items():
                per[name].setdefault(method, []).append(seconds / turns * 1e6)
            if hasattr(saver, "close"):
                saver.close()
    print(f"cpu: {len(calls)} replayed calls ({turns} turns), median of {repeat}")
    for name, methods in per.items():
        cells = ", ".join(
            f"{m} {statistics.median(v):,.0f}" for m, v in sorted(methods.items())
        )
        total = sum(statistics.median(v) for v in methods.values())
        print(f"  {name}: {cells}; total {total:,.0f} us/turn")


DIAGNOSE_REPEAT = 7  # --diagnose: repetitions of the cpu table (1 with --quick)


def diagnose(args: argparse.Namespace) -> int:
    """--diagnose: the bytes, timeline and cpu tables of the LangGraph thread."""
    if not installed("langgraph", "langgraph.prebuilt"):
        return 0
    with Scratch("bench_adapters") as folder:
        diagnose_bytes(folder, args.turns)
        diagnose_timeline(folder, args.turns)
        diagnose_cpu(folder, args.turns, 1 if args.quick else DIAGNOSE_REPEAT)
    return 0


SECTIONS: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "langgraph": bench_langgraph,
    # OpenAI Agents SDK, ADK and Pydantic AI sections: benchmarks/_bench_frameworks.py
    **FRAMEWORK_SECTIONS,
}


def main(argv: list[str] | None = None) -> int:
    """Run the sections; always exit 0 (the lines say PASS or MISS)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--turns", type=int, default=25, help="turns per thread")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions")
    parser.add_argument(
        "--long-turns", type=int, default=100, help="turns of the growth thread"
    )
    parser.add_argument(
        "--sessions", type=int, default=16, help="concurrent sessions (frameworks)"
    )
    parser.add_argument(
        "--only", choices=sorted(SECTIONS), action="append", help="run one section"
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="instead of the sections, where a LangGraph turn's bytes and time go",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.repeat, args.long_turns = 3, 1, 20
        args.sessions = 4
    if args.diagnose:
        return diagnose(args)
    for name in args.only or list(SECTIONS):
        SECTIONS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
