"""bench_adapters.py's OpenAI Agents SDK section.

OpenAI Agents SDK (``openai-agents``): ``Runner.run`` with a scripted ``Model``
(no network) and two function tools. A turn: a user message (~200 chars); the
model answers with a message and calls both tools (parallel calls); the tools
return ~300 chars each; the model answers (~200 chars). ``Runner.run`` saves that
turn with three ``add_items`` and reads the session once. Stores:
``SQLiteSession`` on a file (WAL, ``synchronous=FULL`` set explicitly) vs
``TurnledgerSession`` on a SQLite ledger (WAL, ``synchronous=FULL``). Two shapes:
``--turns`` turns of one session, and ``--sessions`` sessions each running
``--turns`` turns concurrently (``asyncio.gather``). Goal (issue #13): >= 1.3x
turns/s. Also reported: the same session calls without the Runner (one
``get_items`` and three ``add_items`` of 1, 5 and 1 items per turn), the store's
own share of a turn.

The ceiling: the same ``Runner.run`` turns with no session at all (nothing
loaded, nothing saved), over ``SQLiteSession``: no session store can make the
Runner faster than that. With no session the Runner also has no history to
process, so the ceiling for a session store is lower: the store ceiling, the same
turns on an in-memory session (a list in the process, each item given back as a
fresh copy; nothing durable), a store that costs nothing. Its ratio over
``SQLiteSession`` is the most any session store can reach in the run, and the
``TurnledgerSession`` / in-memory ratio is how close the ledger comes to it. For
one session, also the durable floor: the in-memory session plus one raw durable
SQLite commit per ``add_items`` (what a turn costs when each ``add_items`` costs one
fsync'd commit and nothing else; its spread between repetitions is that of the
disk, as wide as ours).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

# -- OpenAI Agents SDK -----------------------------------------------------------------


def _openai_agent(rng: random.Random, turns: int) -> Any:
    from agents import Agent, function_tool  # noqa: PLC0415
    from agents.testing import (  # noqa: PLC0415
        ScriptedModel,
        assistant_message,
        function_call,
    )

    outputs = [seeded_text(rng, 300) for _ in range(8)]

    @function_tool
    def grep_logs(path: str, pattern: str) -> str:
        """Search a log file."""
        return outputs[len(path + pattern) % len(outputs)]

    @function_tool
    def search_code(path: str, pattern: str) -> str:
        """Search the code."""
        return outputs[(len(path) + len(pattern) + 1) % len(outputs)]

    model = ScriptedModel()
    for turn in range(turns):
        args = {"path": f"/srv/export/logs/nightly-{turn:04d}.log", "pattern": "ERROR"}
        model.enqueue(
            [
                assistant_message(seeded_text(rng, 80), item_id=f"msg_{turn}_a"),
                function_call("grep_logs", args, call_id=f"call_{turn}_0"),
                function_call("search_code", args, call_id=f"call_{turn}_1"),
            ]
        )
        model.enqueue(
            [assistant_message(seeded_text(rng, 200), item_id=f"msg_{turn}_b")]
        )
    return Agent(name="bench", model=model, tools=[grep_logs, search_code])


def _sdk_session(path: Path, key: str) -> tuple[Any, Callable[[], None]]:
    from agents import SQLiteSession  # noqa: PLC0415

    class DurableSQLiteSession(SQLiteSession):  # type: ignore[misc]
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)  # noqa: SLF001 - same setup
            conn.execute("PRAGMA synchronous=FULL")

    session = DurableSQLiteSession(key, path)
    return session, session.close


def _ledger_session(path: Path, key: str) -> tuple[Any, Callable[[], None]]:
    from turnledger.adapters.openai_agents import TurnledgerSession  # noqa: PLC0415

    session = TurnledgerSession(key, str(path), agent="bench")
    return session, session.close


def _no_session(_path: Path, _key: str) -> tuple[Any, Callable[[], None]]:
    return None, lambda: None


def _memory_session(_path: Path, key: str) -> tuple[Any, Callable[[], None]]:
    """A session store that costs nothing: a list, items copied in and out."""
    return _listed(key, None)


def _durable_memory_session(path: Path, key: str) -> tuple[Any, Callable[[], None]]:
    """The in-memory session plus one durable commit per ``add_items``, no more.

    The commit is one raw INSERT (the batch's JSON) into a SQLite file (WAL,
    ``synchronous=FULL``), on the event loop's thread: no thread hop, no schema
    beyond one table: the least a store durable when ``add_items`` returns does.
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS items (data BLOB)")
    session, _ = _listed(key, conn)
    return session, conn.close


def _listed(
    key: str, conn: sqlite3.Connection | None
) -> tuple[Any, Callable[[], None]]:
    import msgspec  # noqa: PLC0415
    from agents.memory import SessionABC  # noqa: PLC0415

    def copy(item: Any) -> Any:
        return msgspec.json.decode(msgspec.json.encode(item))

    class MemorySession(SessionABC):  # type: ignore[misc]
        session_settings = None

        def __init__(self) -> None:
            self.session_id = key
            self.items: list[Any] = []

        async def get_items(self, limit: int | None = None) -> list[Any]:
            if limit is None or limit < 0:
                return [copy(item) for item in self.items]
            return [copy(item) for item in self.items[-limit:]] if limit else []

        async def add_items(self, items: list[Any]) -> None:
            if conn is not None:
                conn.execute(
                    "INSERT INTO items VALUES (?)", (msgspec.json.encode(items),)
                )
            self.items.extend(copy(item) for item in items)

        async def pop_item(self) -> Any:
            return self.items.pop() if self.items else None

        async def clear_session(self) -> None:
            self.items.clear()

    return MemorySession(), lambda: None


OPENAI_STORES: dict[str, Callable[[Path, str], tuple[Any, Callable[[], None]]]] = {
    "SQLiteSession": _sdk_session,
    "TurnledgerSession": _ledger_session,
}
CEILING = "no session"
"""The Runner with no session: nothing loaded or saved (``Runner.run`` shapes only)."""
STORE_CEILING = "in-memory session"
"""A session store costing nothing (``Runner.run`` shapes only; diagnostic)."""
DURABLE_FLOOR = "in-memory + 1 commit/add"
"""The store ceiling plus one raw durable commit per ``add_items`` (1 session only)."""
RUNNER_STORES = {
    **OPENAI_STORES,
    CEILING: _no_session,
    STORE_CEILING: _memory_session,
    DURABLE_FLOOR: _durable_memory_session,
}
SPEED_GOAL = 1.3


def openai_sessions(folder: Scratch, store: str, sessions: int, turns: int) -> float:
    """Run ``sessions`` concurrent sessions of ``turns`` Runner.run turns each."""
    from agents import Runner  # noqa: PLC0415

    rng = random.Random(11)
    path = folder.fresh()
    opened = [RUNNER_STORES[store](path, f"s{s}") for s in range(sessions)]
    agents = [_openai_agent(rng, turns) for _ in range(sessions)]
    inputs = [[seeded_text(rng, 200) for _ in range(turns)] for _ in range(sessions)]

    async def one(s: int) -> None:
        session = opened[s][0]
        for turn in range(turns):
            await Runner.run(agents[s], inputs[s][turn], session=session)

    async def everything() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(one(s) for s in range(sessions)))
        return time.perf_counter() - start

    seconds = asyncio.run(everything())
    for _, close in opened:
        close()
    return seconds


RUNNER_CALLS: tuple[int, ...] = (1, 5, 1)
"""Items per ``add_items`` as ``Runner.run`` saves one turn of this workload."""


def session_calls(folder: Scratch, store: str, sessions: int, turns: int) -> float:
    """The session calls ``Runner.run`` makes, without the Runner (store cost)."""
    rng = random.Random(11)
    path = folder.fresh()
    opened = [OPENAI_STORES[store](path, f"s{s}") for s in range(sessions)]
    user = {"role": "user", "content": seeded_text(rng, 200)}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": seeded_text(rng, 200),
                "annotations": [],
                "logprobs": [],
            }
        ],
    }
    call = {"type": "function_call", "name": "grep_logs", "arguments": "{}"}
    output = {"type": "function_call_output", "output": seeded_text(rng, 300)}

    def batches(turn: int) -> list[list[dict[str, Any]]]:
        ids = [f"call_{turn}_{k}" for k in range(2)]
        return [
            [user],
            [
                message,
                *({**call, "call_id": i, "id": i} for i in ids),
                *({**output, "call_id": i} for i in ids),
            ],
            [message],
        ]

    async def one(s: int) -> None:
        session = opened[s][0]
        for turn in range(turns):
            await session.get_items()
            for batch in batches(turn):
                await session.add_items(batch)

    async def everything() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(one(s) for s in range(sessions)))
        return time.perf_counter() - start

    seconds = asyncio.run(everything())
    for _, close in opened:
        close()
    return seconds


def _store_ceilings(by_name: dict[str, Any], sessions: int) -> list[Ratio]:
    """The Runner shapes' ceilings, first the no-session one (diagnostics)."""
    shape = f"Runner.run turns/s, {sessions} session(s)"
    pairs = [
        ("ceiling", CEILING, "SQLiteSession"),
        ("store ceiling", STORE_CEILING, "SQLiteSession"),
        ("how close", "TurnledgerSession", STORE_CEILING),
        ("durable floor", DURABLE_FLOOR, "SQLiteSession"),
    ]
    return [
        Ratio(f"{label}: {shape}, {top} / {bottom}", by_name[top], by_name[bottom])
        for label, top, bottom in pairs
        if top in by_name
    ]


def _diagnostic_line(ratio: Ratio) -> str:
    """A diagnostic ratio's line, saying what it bounds."""
    values = ratio.values
    head = (
        f"{ratio.name}: ratio {ratio.median:.2f} "
        f"(per-repeat {min(values):.2f}-{max(values):.2f})"
    )
    if ratio.name.startswith("store ceiling"):
        verdict = "CEILING" if ratio.median < SPEED_GOAL else "info"
        return (
            f"{verdict} {head}: a session store costing nothing; none can pass it"
            f" (goal {SPEED_GOAL:g}x)"
        )
    if ratio.name.startswith("durable floor"):
        return (
            f"info {head}: the in-memory session plus one raw durable SQLite "
            "commit per add_items on the loop's thread, i.e. what a store reaches "
            "when each add_items costs one durable commit and nothing more "
            f"(goal {SPEED_GOAL:g}x)"
        )
    return f"info {head} (1.00: TurnledgerSession costs as little as nothing)"


def bench_openai_agents(args: argparse.Namespace) -> list[str]:
    """The OpenAI Agents SDK section; returns its goal lines."""
    if not installed(
        "openai-agents", "agents", hint="pip install -e '.[openai-agents]'"
    ):
        return []
    import logging  # noqa: PLC0415

    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    from agents import set_tracing_disabled  # noqa: PLC0415

    set_tracing_disabled(disabled=True)
    folder = Scratch("bench_adapters")
    lines: list[str] = []
    try:
        shapes = [(runner, n) for runner in (True, False) for n in (1, args.sessions)]
        for runner, sessions in shapes:
            turns = args.turns
            work = openai_sessions if runner else session_calls

            def case(
                name: str,
                sessions: int = sessions,
                turns: int = turns,
                work: Any = work,
            ) -> Case:
                def run(n: int) -> float:
                    return work(folder, name, sessions, n)

                return Case(
                    name, turns, run, unit=f"turn x{sessions}", warmup_n=min(turns, 3)
                )

            names = list(RUNNER_STORES if runner else OPENAI_STORES)
            if sessions > 1 and DURABLE_FLOOR in names:
                names.remove(DURABLE_FLOOR)  # its commits would block the others
            series = run_rounds(
                [case(name) for name in names], repeat=args.repeat, warmup=1
            )
            what = "Runner.run" if runner else "the Runner's session calls alone"
            print(
                f"OpenAI Agents SDK, {what}: {sessions} session(s) x {turns} turns, "
                f"{args.repeat} repetitions"
            )
            print_table(series)
            by_name = {s.name: s for s in series}
            speed = Ratio(
                f"{what} turns/s, {sessions} session(s), "
                "TurnledgerSession / SQLiteSession",
                by_name["TurnledgerSession"],
                by_name["SQLiteSession"],
                goal=SPEED_GOAL if runner else None,
            )
            diagnostics = _store_ceilings(by_name, sessions) if runner else []
            ratios = [speed, *diagnostics]
            # A runner section's goal line is printed once, below, in turns/s.
            print_ratios(diagnostics if runner else ratios)
            values = speed.values
            ours = sessions * by_name["TurnledgerSession"].ops_per_s
            theirs = sessions * by_name["SQLiteSession"].ops_per_s
            lines.append(
                f"{speed.verdict} {speed.name}: {ours:,.0f} "
                f"vs {theirs:,.0f} turns/s -> ratio "
                f"{speed.median:.2f} (per-repeat {min(values):.2f}-{max(values):.2f}); "
                + (
                    f"goal >= {SPEED_GOAL}"
                    if runner
                    else "reported (the store's share of a turn)"
                )
            )
            if runner:
                lines.append(ceiling_line(ratios[1], SPEED_GOAL, "TurnledgerSession"))
                lines += [_diagnostic_line(r) for r in diagnostics[1:]]
        for line in lines:
            print(line)
        return lines
    finally:
        folder.cleanup()
