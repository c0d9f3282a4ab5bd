"""bench_adapters.py sections for Google ADK and Pydantic AI (OpenAI: _bench_openai.py).

Each section runs one workload through the framework's real runner twice in the
same run, once on the framework's own store and once on the turnledger adapter,
and prints the ratio (median of per-repetition ratios).


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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bench_openai import bench_openai_agents
from _harness import (
    Case,
    Ratio,
    Scratch,
    installed,
    print_ratios,
    print_table,
    run_rounds,
    seeded_text,
)

# -- Google ADK ------------------------------------------------------------------------


def _adk_runner(service: Any, rng: random.Random) -> Any:
    from google.adk.agents import LlmAgent  # noqa: PLC0415
    from google.adk.models.base_llm import BaseLlm  # noqa: PLC0415
    from google.adk.models.llm_response import LlmResponse  # noqa: PLC0415
    from google.adk.runners import Runner  # noqa: PLC0415
    from google.genai import types  # noqa: PLC0415

    outputs = [seeded_text(rng, 300) for _ in range(8)]
    answers = [seeded_text(rng, 200) for _ in range(8)]

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
                types.Part(text=seeded_text(rng, 80)),
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


def adk_turns(folder: Scratch, name: str, turns: int) -> float:
    """Run ``turns`` Runner turns of one ADK session; return their seconds."""
    from google.genai import types  # noqa: PLC0415

    rng = random.Random(13)
    service, close = _adk_service(name, folder.fresh())
    runner = _adk_runner(service, rng)
    inputs = [seeded_text(rng, 200) for _ in range(turns)]

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
    if not installed("google-adk", "google.adk", hint="pip install -e '.[adk]'"):
        return []
    import logging  # noqa: PLC0415

    logging.getLogger("google_adk").setLevel(logging.ERROR)
    folder = Scratch("bench_adapters")
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


def pydantic_turns(folder: Scratch, name: str, turns: int) -> float:
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
    outputs = [seeded_text(rng, 300) for _ in range(8)]
    answers = [seeded_text(rng, 200) for _ in range(8)]

    def model(messages: list[Any], _info: Any) -> Any:
        if messages[-1].parts[-1].part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(answers[len(messages) % 8])])
        args = {"path": "/srv/export/logs/nightly.log", "pattern": "ERROR"}
        return ModelResponse(
            parts=[
                TextPart(seeded_text(rng, 80)),
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
    inputs = [seeded_text(rng, 200) for _ in range(turns)]

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
    if not installed(
        "pydantic-ai",
        "pydantic_ai.conversation_store",
        hint="pip install -e '.[pydantic-ai]'",
    ):
        return []
    folder = Scratch("bench_adapters")
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
