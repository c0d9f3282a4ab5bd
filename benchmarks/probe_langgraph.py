"""Where a LangGraph turn's bytes and time go on TurnledgerSaver (a probe, no goal).

Runs the LangGraph thread of ``bench_adapters.py`` (same graph, same seeded
inputs) and prints three tables:

- ``bytes``: per kind of ledger row, the rows and stored bytes per turn, split
  into the frame header and hash-chain tail, the event body and, for
  ``item.recorded``, the record inside it; then the row's stream id text and
  the SQLite pages of the table and of its stream index (``dbstat``), against
  the file's growth per turn (what bench_adapters counts);
- ``timeline``: one turn's saver calls and ledger transactions, in order, with
  their start times and how long each took, and the transactions per turn over
  the thread;
- ``cpu``: the saver calls LangGraph made for the thread, replayed in one thread
  on TurnledgerSaver (``synchronous=OFF``: no fsync) and on InMemorySaver, as
  CPU microseconds per turn per method (median of the repetitions).

Run::

    .venv/bin/python benchmarks/probe_langgraph.py           # 25 turns
    .venv/bin/python benchmarks/probe_langgraph.py --quick   # smoke: tiny sizes
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
from typing import Any

import msgspec

try:
    from benchmarks._bench_common import Folder, text
    from benchmarks.bench_adapters import langgraph_graph, langgraph_thread, settle
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _bench_common import Folder, text  # type: ignore[no-redef]
    from bench_adapters import (  # type: ignore[no-redef]
        langgraph_graph,
        langgraph_thread,
        settle,
    )


def probe_bytes(folder: Folder, turns: int) -> None:
    """Print where the bytes of a turn go."""
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


def probe_timeline(folder: Folder, turns: int) -> None:
    """Print one turn's saver calls and transactions, and transactions per turn."""
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
    inputs = [HumanMessage(text(rng, 200)) for _ in range(turns)]
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
    for message in [HumanMessage(text(rng, 200)) for _ in range(turns)]:
        graph.invoke({"messages": [message]}, config, durability="sync")
    return calls


def probe_cpu(folder: Folder, turns: int, repeat: int) -> None:
    """Print the saver's CPU per turn per method, replayed, vs InMemorySaver."""
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


def main(argv: list[str] | None = None) -> int:
    """Run the three probes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--turns", type=int, default=25, help="turns of the thread")
    parser.add_argument("--repeat", type=int, default=7, help="cpu repetitions")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.repeat = 3, 1
    try:
        import langgraph.prebuilt  # noqa: F401, PLC0415
    except ImportError:
        print("langgraph: not installed (pip install -e '.[bench]')")
        return 0
    folder = Folder()
    try:
        probe_bytes(folder, args.turns)
        probe_timeline(folder, args.turns)
        probe_cpu(folder, args.turns, args.repeat)
    finally:
        folder.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
