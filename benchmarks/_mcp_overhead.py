"""The MCP server's tool call overhead vs calling the memory service directly.

One SQLite ledger holding N memories (default 2,000) of agent ``bench``. Four
cases, timed round-robin in the same run (:func:`_harness.run_rounds`):

- ``direct recall``: ``MemoryService.recall(agent, query, session=..., limit=5)``
  (a session scope, as the tool recalls in its MCP session);
- ``mcp recall``: the ``memory_recall`` tool called by the official SDK's
  client over its in-process transport (JSON-RPC over memory streams, the
  initialize handshake done once), the same queries: argument check, the call
  and its result recorded in the ledger (one append), the answer as JSON;
- ``direct store``: ``MemoryService.store_entry`` of a new key;
- ``mcp store``: the ``memory_store`` tool, the same kind of write, the call
  recorded before it and its result after (two appends besides the write's).

Ratios (reported, no goal): MCP calls/s over direct calls/s per repetition, for
recall and for store; the difference per call is the overhead of the protocol,
the recording and the JSON answer. No process boundary is measured (a stdio or
HTTP client adds its own transport on top).

:func:`measure` returns the harness's :class:`Series` and :class:`Ratio` rows
(another script collects them); run alone it prints them::

    .venv/bin/python benchmarks/_mcp_overhead.py            # ~1 min
    .venv/bin/python benchmarks/_mcp_overhead.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _harness import (
    Case,
    Ratio,
    Scratch,
    Series,
    Stopwatch,
    print_ratios,
    print_table,
    run_rounds,
    seeded_text,
)

AGENT = "bench"


@contextmanager
def _world(scratch: Scratch, entries: int) -> Iterator[tuple[Any, Any, Any]]:
    """A ledger with ``entries`` memories: (store, memory service, MCP server)."""
    from turnledger.ledger.store import open_store  # noqa: PLC0415
    from turnledger.pipeline.config import Config  # noqa: PLC0415
    from turnledger.pipeline.mcp import (  # noqa: PLC0415
        McpRecorder,
        ToolServices,
        build_server,
    )
    from turnledger.pipeline.memory import MemoryService  # noqa: PLC0415

    path = scratch.fresh()
    config = Config(ledger=str(path), data_dir=str(scratch.root / "data"))
    store = open_store(str(path))
    memory = MemoryService(store, config, ledger_url=str(path))
    rng = random.Random(27)
    for i in range(entries):
        memory.store_entry(AGENT, f"seed-{i}", seeded_text(rng, 80))
    services = ToolServices(store=store, memory=memory, config=config, agent=AGENT)
    recorder = McpRecorder(
        store,
        agent=AGENT,
        max_result_chars=config.runtime.max_tool_result_chars,
        shredding=memory.shredding,
    )
    try:
        yield store, memory, build_server(services, recorder, allow_writes=True)
    finally:
        memory.close()
        store.close()


def measure(
    *, calls: int = 200, entries: int = 2_000, repeat: int = 5, warmup: int = 1
) -> tuple[list[Series], list[Ratio]]:
    """Time the four cases; return their series and the two MCP/direct ratios.

    Args:
        calls: Calls per timed run of each case.
        entries: Memories in the ledger before timing.
        repeat: Timed repetitions (round-robin).
        warmup: Untimed runs of each case first.
    """
    import anyio.from_thread  # noqa: PLC0415
    import mcp_types as types  # noqa: PLC0415
    from mcp import Client  # noqa: PLC0415

    rng = random.Random(2027)
    queries = [seeded_text(rng, 24) for _ in range(64)]
    written = iter(range(10**9))
    with (
        Scratch("mcp_overhead") as scratch,
        _world(scratch, entries) as (_, memory, server),
        anyio.from_thread.start_blocking_portal() as portal,
    ):
        client = Client(
            server,
            mode="legacy",
            client_info=types.Implementation(name="bench", version="1"),
        )

        def direct_recall(n: int) -> float:
            with Stopwatch() as watch:
                for i in range(n):
                    query = queries[i % len(queries)]
                    memory.recall(AGENT, query, session="bench", limit=5)
            return watch.seconds

        async def _mcp_recall(n: int) -> float:
            with Stopwatch() as watch:
                for i in range(n):
                    args = {"query": queries[i % len(queries)], "limit": 5}
                    result = await client.call_tool("memory_recall", args)
                    assert not result.is_error  # noqa: S101 - a failed call is no figure
            return watch.seconds

        def direct_store(n: int) -> float:
            with Stopwatch() as watch:
                for _ in range(n):
                    memory.store_entry(AGENT, f"d-{next(written)}", queries[0])
            return watch.seconds

        async def _mcp_store(n: int) -> float:
            with Stopwatch() as watch:
                for _ in range(n):
                    args = {"key": f"m-{next(written)}", "content": queries[0]}
                    result = await client.call_tool("memory_store", args)
                    assert not result.is_error  # noqa: S101 - a failed call is no figure
            return watch.seconds

        with portal.wrap_async_context_manager(client):
            series = run_rounds(
                [
                    Case("direct recall", calls, direct_recall, unit="call"),
                    Case(
                        "mcp recall",
                        calls,
                        lambda n: portal.call(_mcp_recall, n),
                        unit="call",
                        note="SDK client, in-process transport",
                    ),
                    Case("direct store", calls, direct_store, unit="call"),
                    Case(
                        "mcp store",
                        calls,
                        lambda n: portal.call(_mcp_store, n),
                        unit="call",
                        note="call and result recorded too",
                    ),
                ],
                repeat=repeat,
                warmup=warmup,
            )
    by_name = {s.name: s for s in series}
    ratios = [
        Ratio("mcp recall / direct", by_name["mcp recall"], by_name["direct recall"]),
        Ratio("mcp store / direct", by_name["mcp store"], by_name["direct store"]),
    ]
    return series, ratios


def main() -> int:
    """Measure and print the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        series, ratios = measure(calls=10, entries=50, repeat=2, warmup=1)
    else:
        series, ratios = measure(
            calls=args.calls, entries=args.entries, repeat=args.repeat
        )
    print_table(series)
    print_ratios(ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
