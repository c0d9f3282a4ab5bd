"""bench_adapters.py sections for the OpenAI Agents SDK, Google ADK and Pydantic AI.

Each section runs one workload through the framework's real runner twice in the
same run, once on the framework's own store and once on the turnledger adapter,
and prints the ratio (median of per-repetition ratios).

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

Google ADK (``adk``): an ADK ``Runner`` with a scripted ``BaseLlm`` and two tools,
the same turn shape, ``--turns`` turns of one session, on
``InMemorySessionService``, ``SqliteSessionService`` (ADK's own, aiosqlite) and
``TurnledgerSessionService``. Ratios reported.

Pydantic AI (``pydantic-ai``): per turn ``store.load``, ``Agent.run`` with a
``FunctionModel`` and two tools (same shape), ``store.save``; on pydantic-ai's
``InMemoryConversationStore`` (it ships no durable one) and on
``TurnledgerConversationStore``. Ratio reported.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from benchmarks._harness import Case, Ratio, print_ratios, print_table, run_rounds
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _harness import (  # type: ignore[no-redef]
        Case,
        Ratio,
        print_ratios,
        print_table,
        run_rounds,
    )

_SENTENCE = (
    "the export job failed again last night after the schema migration can you "
    "check logs for the nightly run and tell me which table broke then propose a "
    "fix that keeps the retention policy and does not touch production credentials"
)
WORDS = _SENTENCE.split()


def text(rng: random.Random, chars: int) -> str:
    """Return ``chars`` characters of seeded words."""
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:chars]


class Folder:
    """Fresh database paths in one temporary folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench_frameworks_"))
        self.count = 0

    def fresh(self) -> Path:
        """Return a new database path."""
        self.count += 1
        return self.root / f"db{self.count}.sqlite"

    def cleanup(self) -> None:
        """Delete the folder."""
        shutil.rmtree(self.root, ignore_errors=True)


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


OPENAI_STORES: dict[str, Callable[[Path, str], tuple[Any, Callable[[], None]]]] = {
    "SQLiteSession": _sdk_session,
    "TurnledgerSession": _ledger_session,
}


def openai_sessions(folder: Folder, store: str, sessions: int, turns: int) -> float:
    """Run ``sessions`` concurrent sessions of ``turns`` Runner.run turns each."""
    from agents import Runner  # noqa: PLC0415

    rng = random.Random(11)
    path = folder.fresh()
    opened = [OPENAI_STORES[store](path, f"s{s}") for s in range(sessions)]
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

            series = run_rounds(
                [case(name) for name in OPENAI_STORES], repeat=args.repeat, warmup=1
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
                goal=1.3 if runner else None,
            )
            print_ratios([speed])
            values = speed.values
            ours = sessions * by_name["TurnledgerSession"].ops_per_s
            theirs = sessions * by_name["SQLiteSession"].ops_per_s
            lines.append(
                f"{speed.verdict} {speed.name}: {ours:,.0f} "
                f"vs {theirs:,.0f} turns/s -> ratio "
                f"{speed.median:.2f} (per-repeat {min(values):.2f}-{max(values):.2f}); "
                + (
                    "goal >= 1.3"
                    if runner
                    else "reported (the store's share of a turn)"
                )
            )
        for line in lines:
            print(line)
        return lines
    finally:
        folder.cleanup()


# -- Google ADK ------------------------------------------------------------------------


def _adk_runner(service: Any, rng: random.Random) -> Any:
    from google.adk.agents import LlmAgent  # noqa: PLC0415
    from google.adk.models.base_llm import BaseLlm  # noqa: PLC0415
    from google.adk.models.llm_response import LlmResponse  # noqa: PLC0415
    from google.adk.runners import Runner  # noqa: PLC0415
    from google.genai import types  # noqa: PLC0415

    outputs = [text(rng, 300) for _ in range(8)]
    answers = [text(rng, 200) for _ in range(8)]

    class ScriptedLlm(BaseLlm):  # type: ignore[misc]
        model: str = "scripted"

        async def generate_content_async(
            self,
            llm_request: Any,
            stream: bool = False,  # noqa: ARG002 - the interface
        ) -> Any:
            last = llm_request.contents[-1]
            if any(p.function_response for p in last.parts or ()):
                part = types.Part(text=answers[len(llm_request.contents) % 8])
                yield LlmResponse(content=types.Content(role="model", parts=[part]))
                return
            args = {"path": "/srv/export/logs/nightly.log", "pattern": "ERROR"}
            parts = [
                types.Part(text=text(rng, 80)),
                types.Part(
                    function_call=types.FunctionCall(name="grep_logs", args=args)
                ),
                types.Part(
                    function_call=types.FunctionCall(name="search_code", args=args)
                ),
            ]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    def grep_logs(path: str, pattern: str) -> dict[str, str]:
        """Search a log file."""
        return {"out": outputs[len(path + pattern) % 8]}

    def search_code(path: str, pattern: str) -> dict[str, str]:
        """Search the code."""
        return {"out": outputs[(len(path + pattern) + 1) % 8]}

    agent = LlmAgent(name="bench", model=ScriptedLlm(), tools=[grep_logs, search_code])
    return Runner(agent=agent, app_name="bench", session_service=service)


def _adk_service(name: str, path: Path) -> tuple[Any, Callable[[], Any]]:
    if name == "SqliteSessionService":
        from google.adk.sessions.sqlite_session_service import (  # noqa: PLC0415
            SqliteSessionService,
        )

        service = SqliteSessionService(str(path))
        return service, service.close
    if name == "InMemorySessionService":
        from google.adk.sessions import InMemorySessionService  # noqa: PLC0415

        return InMemorySessionService(), lambda: None
    from turnledger.adapters.adk import TurnledgerSessionService  # noqa: PLC0415

    service = TurnledgerSessionService(str(path))
    return service, service.close


ADK_SERVICES = (
    "InMemorySessionService",
    "SqliteSessionService",
    "TurnledgerSessionService",
)


def adk_turns(folder: Folder, name: str, turns: int) -> float:
    """Run ``turns`` Runner turns of one ADK session; return their seconds."""
    from google.genai import types  # noqa: PLC0415

    rng = random.Random(13)
    service, close = _adk_service(name, folder.fresh())
    runner = _adk_runner(service, rng)
    inputs = [text(rng, 200) for _ in range(turns)]

    async def drive() -> float:
        await service.create_session(app_name="bench", user_id="u", session_id="s")
        start = time.perf_counter()
        for prompt in inputs:
            message = types.Content(role="user", parts=[types.Part(text=prompt)])
            async for _ in runner.run_async(
                user_id="u", session_id="s", new_message=message
            ):
                pass
        seconds = time.perf_counter() - start
        closing = close()
        if asyncio.iscoroutine(closing):
            await closing
        return seconds

    return asyncio.run(drive())


def bench_adk(args: argparse.Namespace) -> list[str]:
    """The Google ADK section; returns its lines (ratios reported, no goal)."""
    try:
        import google.adk  # noqa: F401, PLC0415
    except ImportError:
        print("google-adk: not installed (pip install -e '.[adk]')")
        return []
    import logging  # noqa: PLC0415

    logging.getLogger("google_adk").setLevel(logging.ERROR)
    folder = Folder()
    try:
        turns = args.turns

        def case(name: str) -> Case:
            return Case(
                name,
                turns,
                lambda n: adk_turns(folder, name, n),
                unit="turn",
                warmup_n=min(turns, 2),
            )

        series = run_rounds(
            [case(n) for n in ADK_SERVICES], repeat=args.repeat, warmup=1
        )
        print(
            f"Google ADK Runner: {turns} turns of one session, "
            f"{args.repeat} repetitions"
        )
        print_table(series)
        by = {s.name: s for s in series}
        ratios = [
            Ratio(
                f"ADK Runner turns/s, TurnledgerSessionService / {other}",
                by["TurnledgerSessionService"],
                by[other],
            )
            for other in ("SqliteSessionService", "InMemorySessionService")
        ]
        print_ratios(ratios)
        lines = [
            f"info {r.name}: {by['TurnledgerSessionService'].ops_per_s:,.1f} vs "
            f"{r.denominator.ops_per_s:,.1f} turns/s -> ratio {r.median:.2f} "
            f"(per-repeat {min(r.values):.2f}-{max(r.values):.2f}); reported"
            for r in ratios
        ]
        for line in lines:
            print(line)
        return lines
    finally:
        folder.cleanup()


# -- Pydantic AI -----------------------------------------------------------------------


def pydantic_turns(folder: Folder, name: str, turns: int) -> float:
    """Run ``turns`` load / Agent.run / save turns of one conversation."""
    from pydantic_ai import Agent  # noqa: PLC0415
    from pydantic_ai.conversation import Conversation  # noqa: PLC0415
    from pydantic_ai.conversation_store import InMemoryConversationStore  # noqa: PLC0415
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: PLC0415
    from pydantic_ai.models.function import FunctionModel  # noqa: PLC0415

    from turnledger.adapters.pydantic_ai import (  # noqa: PLC0415
        TurnledgerConversationStore,
    )

    rng = random.Random(17)
    outputs = [text(rng, 300) for _ in range(8)]
    answers = [text(rng, 200) for _ in range(8)]

    def model(messages: list[Any], _info: Any) -> Any:
        if messages[-1].parts[-1].part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(answers[len(messages) % 8])])
        args = {"path": "/srv/export/logs/nightly.log", "pattern": "ERROR"}
        return ModelResponse(
            parts=[
                TextPart(text(rng, 80)),
                ToolCallPart("grep_logs", args),
                ToolCallPart("search_code", args),
            ]
        )

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def grep_logs(path: str, pattern: str) -> str:
        """Search a log file."""
        return outputs[len(path + pattern) % 8]

    @agent.tool_plain
    def search_code(path: str, pattern: str) -> str:
        """Search the code."""
        return outputs[(len(path + pattern) + 1) % 8]

    store: Any
    if name == "InMemoryConversationStore":
        store = InMemoryConversationStore()
    else:
        store = TurnledgerConversationStore(str(folder.fresh()))
    inputs = [text(rng, 200) for _ in range(turns)]

    async def drive() -> float:
        start = time.perf_counter()
        for prompt in inputs:
            loaded = await store.load("c") or Conversation(conversation_id="c")
            await store.save(await agent.run(prompt, conversation=loaded))
        return time.perf_counter() - start

    seconds = asyncio.run(drive())
    if name != "InMemoryConversationStore":
        store.close()
    return seconds


PYDANTIC_STORES = ("InMemoryConversationStore", "TurnledgerConversationStore")


def bench_pydantic_ai(args: argparse.Namespace) -> list[str]:
    """The Pydantic AI section; returns its line (ratio reported, no goal)."""
    try:
        import pydantic_ai.conversation_store  # noqa: F401, PLC0415
    except ImportError:
        print("pydantic-ai: not installed (pip install -e '.[pydantic-ai]')")
        return []
    folder = Folder()
    try:
        turns = args.turns

        def case(name: str) -> Case:
            return Case(
                name,
                turns,
                lambda n: pydantic_turns(folder, name, n),
                unit="turn",
                warmup_n=min(turns, 2),
            )

        series = run_rounds(
            [case(n) for n in PYDANTIC_STORES], repeat=args.repeat, warmup=1
        )
        print(f"Pydantic AI load/run/save: {turns} turns, {args.repeat} repetitions")
        print_table(series)
        by = {s.name: s for s in series}
        ratio = Ratio(
            "Pydantic AI turns/s, "
            "TurnledgerConversationStore / InMemoryConversationStore",
            by["TurnledgerConversationStore"],
            by["InMemoryConversationStore"],
        )
        print_ratios([ratio])
        line = (
            f"info {ratio.name}: {ratio.numerator.ops_per_s:,.1f} vs "
            f"{ratio.denominator.ops_per_s:,.1f} turns/s -> ratio {ratio.median:.2f} "
            f"(per-repeat {min(ratio.values):.2f}-{max(ratio.values):.2f}); reported "
            "(pydantic-ai ships no durable store to compare with)"
        )
        print(line)
        return [line]
    finally:
        folder.cleanup()


FRAMEWORK_SECTIONS: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "openai-agents": bench_openai_agents,
    "adk": bench_adk,
    "pydantic-ai": bench_pydantic_ai,
}
"""The sections this module adds to bench_adapters.py."""
