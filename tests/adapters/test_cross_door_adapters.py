"""The cross-door contract, adapter side: each framework records the scripted facts.

Each test drives the conversation of :mod:`tests.contracts.cross_door` through a
real framework (its own fake model, no network) into the ledger by that
framework's adapter, then asserts the session's projected facts are
:data:`~tests.contracts.cross_door.EXPECTED` (the facts the turn engine and
every import record), on SQLite and on PostgreSQL, and that the CLI's
``history``, ``costs`` and ``export`` show the system prompt and the calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.contracts.cross_door import (
    CALLS,
    EXPECTED,
    FINAL_TEXT,
    MODEL,
    PRICING,
    SYSTEM_PROMPT,
    USAGE,
    USER_TEXT,
    projected_facts,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.export import EXPORT_FORMATS

TOOLS = {c.name: c for c in CALLS}


@pytest.fixture(name="ledger", params=["sqlite", "postgres"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh ledger's URL or path (PostgreSQL: a fresh schema)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    yield request.getfixturevalue("postgres_url")


def _facts(ledger: str, agent: str, key: str) -> Any:
    store = open_store(ledger)
    try:
        return projected_facts(store, session_stream_id(agent, key))
    finally:
        store.close()


def _events(ledger: str, stream: UUID) -> list[Any]:
    store: EventStore = open_store(ledger)
    try:
        return [r.event for r in store.read_stream(stream)]
    finally:
        store.close()


def _cli_shows(ledger: str, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``history``, ``costs`` and every ``export`` show the prompt and the calls."""
    capsys.readouterr()
    assert main(["--db", ledger, "history", key, "--json"]) == 0
    assert SYSTEM_PROMPT in capsys.readouterr().out
    assert main(["--db", ledger, "costs", "--session", key, "--json"]) == 0
    costs = json.loads(capsys.readouterr().out)
    text = json.dumps(costs)
    assert f'"calls": {len(USAGE)}' in text
    assert f'"input_tokens": {sum(i for i, _ in USAGE)}' in text
    assert f'"output_tokens": {sum(o for _, o in USAGE)}' in text
    # ADK events have no place for a system prompt; every other format has one.
    for fmt in (f for f in EXPORT_FORMATS if f != "adk"):
        assert main(["--db", ledger, "export", key, "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert SYSTEM_PROMPT in out, fmt
        assert FINAL_TEXT in out, fmt


# ---------------------------------------------------------------- Pydantic AI


def test_pydantic_ai_records_the_scripted_facts(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from turnledger.adapters.pydantic_ai import TurnledgerConversationStore

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        if messages[-1].parts[-1].part_kind == "tool-return":
            i, o = USAGE[1]
            return ModelResponse(
                parts=[TextPart(FINAL_TEXT)],
                usage=RequestUsage(input_tokens=i, output_tokens=o),
            )
        i, o = USAGE[0]
        return ModelResponse(
            parts=[
                ToolCallPart(c.name, dict(c.arguments), tool_call_id=c.id)
                for c in CALLS
            ],
            usage=RequestUsage(input_tokens=i, output_tokens=o),
        )

    agent = Agent(
        FunctionModel(scripted, model_name=MODEL), system_prompt=SYSTEM_PROMPT
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        del city
        return TOOLS["get_weather"].result

    @agent.tool_plain
    def get_time(city: str) -> str:
        """Return the time in a city."""
        del city
        return TOOLS["get_time"].result

    store = TurnledgerConversationStore(ledger, pricing=PRICING)

    async def run(key: str) -> None:
        conversation = await store.load(key) or Conversation(conversation_id=key)
        await store.save(await agent.run(USER_TEXT, conversation=conversation))

    try:
        asyncio.run(run("c1"))
        assert _facts(ledger, "pydantic-ai", "c1") == EXPECTED
        _cli_shows(ledger, "c1", capsys)
        # A second run re-sends the history: only its own facts are added.
        asyncio.run(run("c1"))
    finally:
        store.close()
    events = _events(ledger, session_stream_id("pydantic-ai", "c1"))
    assert sum(isinstance(e, SystemPromptSet) for e in events) == 1
    assert sum(isinstance(e, ModelCalled) for e in events) == 2 * len(USAGE)
