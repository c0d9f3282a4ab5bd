"""A child process that runs engine turns until it is killed (see test_engine_crash).

::

    python -m tests.pipeline.crash_turn_child DB_PATH AGENT SESSION
        [--turns N] [--nap SECONDS]

It opens the SQLite ledger at ``DB_PATH`` (durable commits), then runs turns in
one session through the real engine (built by ``bootstrap``): a scripted
provider answers each turn with two parallel ``nap`` calls, then one ``nap``
call, then a final answer (fresh call ids every time); the ``nap`` tool sleeps
``--nap`` seconds, so a kill often lands while calls are in flight. It runs
``--turns`` turns, forever by default.

It reports on stdout (its logs go to stderr), one flushed line each, so the
parent can pick a moment:

- ``ready`` once the engine is built;
- ``append <version>`` after each engine append is durable;
- ``nap <call_id>`` when a tool call starts sleeping;
- ``turn <turn_id> <completed|failure>`` after each turn.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.envelope import AppendResult
from turnledger.ledger.events import Event
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config, parse_config
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse, ToolSpec
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall, starts_turn

NAP_SPEC = ToolSpec(
    name="nap",
    description="Sleep a little, then answer.",
    parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
)
SCRIPT_STEPS = 100_000
"""Far more provider answers than a child lives to ask for."""


def say(line: str) -> None:
    """Report one line to the parent."""
    sys.stdout.write(f"{line}\n")
    sys.stdout.flush()


class ReportingLedger(AsyncLedger):
    """The engine's ledger, saying ``append <version>`` once each append is durable."""

    async def append(
        self,
        stream_id: uuid.UUID,
        events: Sequence[Event],
        *,
        expected_version: int,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append, then report the new head version."""
        result = await super().append(
            stream_id,
            events,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )
        say(f"append {result.last_version}")
        return result


class NapTool:
    """Sleeps, then succeeds; says ``nap <call>`` first (the call id is its ``n``)."""

    spec = NAP_SPEC

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Sleep, then answer with the argument."""
        say(f"nap {arguments.get('n')}")
        await asyncio.sleep(self.seconds)
        return ToolOutcome(output=f"rested {arguments.get('n')}")


def answer(request: ChatRequest) -> ChatResponse:
    """Two parallel naps, then one, then a final answer, counted within the turn."""
    messages = request.messages
    start = max(i for i, m in enumerate(messages) if starts_turn(m))
    done = sum(m.role == "assistant" for m in messages[start:])
    if done >= 2:
        return ChatResponse(text="rested enough")
    calls = tuple(
        ToolCall(id=f"call_{tag}", name="nap", arguments=f'{{"n": "{tag}"}}')
        for tag in (uuid.uuid4().hex[:12] for _ in range(2 - done))
    )
    return ChatResponse(tool_calls=calls)


def child_config(db_path: str) -> Config:
    """The child's configuration: data beside the ledger, four iterations."""
    data = Path(db_path).parent / "data"
    return parse_config(
        f'data_dir = "{data}"\n[runtime]\nmax_tool_iterations = 4\n'
        "context_budget_tokens = 2000\n"
    )


async def run(db_path: str, agent: str, session: str, turns: int | None, nap: float):
    """Run turns until ``turns`` are done (or forever)."""
    config = child_config(db_path)
    store = open_store(db_path)
    async with ReportingLedger(store, close_store=False) as ledger:
        runtime = bootstrap(
            config,
            provider=ScriptedProvider([answer] * SCRIPT_STEPS),
            store=store,
            ledger_url=db_path,
            tools={"nap": NapTool(nap)},
            ledger=ledger,
        )
        async with runtime:
            say("ready")
            done = 0
            while turns is None or done < turns:
                outcome = await runtime.engine.run_turn(
                    agent, session, f"please rest a while, round {done} of the naps"
                )
                say(f"turn {outcome.turn_id} {outcome.failure or 'completed'}")
                done += 1
    store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run."""
    parser = argparse.ArgumentParser(description="Run engine turns until killed.")
    parser.add_argument("db_path")
    parser.add_argument("agent")
    parser.add_argument("session")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--nap", type=float, default=0.02)
    args = parser.parse_args(argv)
    # Logs go to stderr: stdout carries only the lines the parent reads.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(run(args.db_path, args.agent, args.session, args.turns, args.nap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
