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
``TurnledgerSession`` / in-memory ratio is how close the ledger comes to it.
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

try:
    from benchmarks._bench_common import Folder, ceiling_line, text
    from benchmarks._harness import Case, Ratio, print_ratios, print_table, run_rounds
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _bench_common import Folder, ceiling_line, text  # type: ignore[no-redef]
    from _harness import (  # type: ignore[no-redef]
        Case,
        Ratio,
        print_ratios,
        print_table,
        run_rounds,
    )


# -- OpenAI Agents SDK -----------------------------------------------------------------


def _openai_agent(rng: random.Random, turns: int) -> Any:
    from agents import Agent, function_tool  # noqa: PLC0415
    from agents.testing import (  # noqa: PLC0415
        ScriptedModel,
        assistant_message,
        function_call,
    )

    outputs = [text(rng, 300) for _ in range(8)]

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
                assistant_message(text(rng, 80), item_id=f"msg_{turn}_a"),
                function_call("grep_logs", args, call_id=f"call_{turn}_0"),
                function_call("search_code", args, call_id=f"call_{turn}_1"),
            ]
        )
        model.enqueue([assistant_message(text(rng, 200), item_id=f"msg_{turn}_b")])
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
RUNNER_STORES = {
    **OPENAI_STORES,
    CEILING: _no_session,
    STORE_CEILING: _memory_session,
}
SPEED_GOAL = 1.3


def openai_sessions(folder: Folder, store: str, sessions: int, turns: int) -> float:
    """Run ``sessions`` concurrent sessions of ``turns`` Runner.run turns each."""
    from agents import Runner  # noqa: PLC0415

    rng = random.Random(11)
    path = folder.fresh()
    opened = [RUNNER_STORES[store](path, f"s{s}") for s in range(sessions)]
    agents = [_openai_agent(rng, turns) for _ in range(sessions)]
    inputs = [[text(rng, 200) for _ in range(turns)] for _ in range(sessions)]

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


def session_calls(folder: Folder, store: str, sessions: int, turns: int) -> float:
    """The session calls ``Runner.run`` makes, without the Runner (store cost)."""
    rng = random.Random(11)
    path = folder.fresh()
    opened = [OPENAI_STORES[store](path, f"s{s}") for s in range(sessions)]
    user = {"role": "user", "content": text(rng, 200)}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": text(rng, 200),
                "annotations": [],
                "logprobs": [],
            }
        ],
    }
    call = {"type": "function_call", "name": "grep_logs", "arguments": "{}"}
    output = {"type": "function_call_output", "output": text(rng, 300)}

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


def bench_openai_agents(args: argparse.Namespace) -> list[str]:
    """The OpenAI Agents SDK section; returns its goal lines."""
    try:
        import agents  # noqa: F401, PLC0415
    except ImportError:
        print("openai-agents: not installed (pip install -e '.[openai-agents]')")
        return []
    import logging  # noqa: PLC0415

    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    from agents import set_tracing_disabled  # noqa: PLC0415

    set_tracing_disabled(disabled=True)
    folder = Folder()
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
            ratios = [speed]
            if runner:
                ratios += [
                    Ratio(
                        f"ceiling: Runner.run turns/s, {sessions} session(s), "
                        f"{CEILING} / SQLiteSession",
                        by_name[CEILING],
                        by_name["SQLiteSession"],
                    ),
                    Ratio(
                        f"store ceiling: Runner.run turns/s, {sessions} session(s), "
                        f"{STORE_CEILING} / SQLiteSession",
                        by_name[STORE_CEILING],
                        by_name["SQLiteSession"],
                    ),
                    Ratio(
                        f"Runner.run turns/s, {sessions} session(s), "
                        f"TurnledgerSession / {STORE_CEILING} (1.00: costs nothing)",
                        by_name["TurnledgerSession"],
                        by_name[STORE_CEILING],
                    ),
                ]
            print_ratios(ratios)
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
                lines.append(ceiling_line(ratios[2], SPEED_GOAL, "TurnledgerSession"))
                near = ratios[3]
                lines.append(
                    f"info {near.name}: ratio {near.median:.2f} (per-repeat "
                    f"{min(near.values):.2f}-{max(near.values):.2f})"
                )
        for line in lines:
            print(line)
        return lines
    finally:
        folder.cleanup()
