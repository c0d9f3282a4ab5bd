"""The history processor (trim, bound, repair, trim recorded) and sessions read across adapters."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent as SdkAgent
from agents import Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from turnledger.adapters.openai_agents import TurnledgerSession
from turnledger.adapters.pydantic_ai import TurnledgerConversationStore
from turnledger.adapters.pydantic_ai.history import (
    TurnledgerHistoryProcessor,
    conversation_from_session,
)
from turnledger.ledger.events import HistoryTrimmed
from turnledger.ledger.store import open_store
from turnledger.policies.messages import BREADCRUMB_TEXT
from turnledger.policies.pairing_repair import INTERRUPTED_TEXT

BIG = "x" * 5000


def test_processor_trims_bounds_and_records_the_trim(sqlite_path):
    """A long history is trimmed to whole turns with a breadcrumb; the trim is an event."""
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if last.part_kind == "tool-return":
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart("dump", {}, tool_call_id=f"c{len(seen)}")]
        )

    processor = TurnledgerHistoryProcessor(
        sqlite_path, budget_tokens=1500, max_tool_result_chars=600
    )
    agent = Agent(FunctionModel(model), capabilities=[processor.capability()])

    @agent.tool_plain
    def dump() -> str:
        """Return a large output."""
        return BIG

    async def scenario() -> None:
        store = TurnledgerConversationStore(sqlite_path)
        conversation: Conversation | None = None
        for i in range(4):
            conversation = await store.load("long") or Conversation(
                conversation_id="long"
            )
            result = await agent.run(
                f"question {i} " + "words " * 300, conversation=conversation
            )
            await store.save(result)
        stored = await store.load("long")
        assert stored is not None
        assert len(stored.messages) == 16  # the stored conversation keeps everything
        store.close()

    asyncio.run(scenario())
    processor.close()
    last = seen[-1]
    texts = [p.content for m in last for p in m.parts if isinstance(p, UserPromptPart)]
    assert texts[0] == BREADCRUMB_TEXT
    assert not any("question 0" in str(t) for t in texts)
    returns = [p for m in last for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns
    assert all(len(str(p.content)) < 1000 for p in returns)
    with open_store(sqlite_path) as store:
        trims = [
            r.event for r in store.iter_all() if isinstance(r.event, HistoryTrimmed)
        ]
    assert trims
    assert all(t.dropped_turns >= 1 for t in trims)
    shapes = {(t.dropped_messages, t.kept_turns, t.tokens_before) for t in trims}
    assert len(shapes) == len(trims)  # a repeated trim is recorded once


def test_processor_repairs_pairing(sqlite_path):
    """A return without its call is dropped; a call without its return is answered."""
    processor = TurnledgerHistoryProcessor(sqlite_path, budget_tokens=0)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelRequest(parts=[ToolReturnPart("t", "orphan", tool_call_id="ghost")]),
        ModelResponse(parts=[ToolCallPart("t", {}, tool_call_id="lost")]),
        ModelRequest(parts=[UserPromptPart("next")]),
        ModelResponse(parts=[TextPart("ok")]),
        ModelRequest(parts=[UserPromptPart("last")]),
    ]

    class Ctx:
        conversation_id = "repair"

    repaired = asyncio.run(processor(Ctx(), history))  # type: ignore[arg-type]
    processor.close()
    returns = [p for m in repaired for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.content) for p in returns] == [
        ("lost", INTERRUPTED_TEXT)
    ]
    assert len(repaired) == len(history) + 1


@function_tool
def weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def test_an_openai_agents_session_reads_as_a_pydantic_ai_conversation(sqlite_path):
    """Written through TurnledgerSession by Runner.run, continued by a Pydantic AI agent."""
    model = ScriptedModel()
    model.enqueue(
        [
            assistant_message("Checking."),
            function_call("weather", {"city": "Paris"}, call_id="call_1"),
        ]
    )
    model.enqueue([assistant_message("Sunny in Paris.")])
    sdk_agent = SdkAgent(name="ops", model=model, tools=[weather])

    async def write() -> None:
        session = TurnledgerSession("shared-1", sqlite_path)
        await Runner.run(sdk_agent, "Weather in Paris?", session=session)
        session.close()

    asyncio.run(write())
    conversation = asyncio.run(
        conversation_from_session(sqlite_path, "openai-agents", "shared-1")
    )
    kinds = [
        (type(m).__name__, [p.part_kind for p in m.parts])
        for m in conversation.messages
    ]
    assert kinds == [
        ("ModelRequest", ["user-prompt"]),
        ("ModelResponse", ["text", "tool-call"]),
        ("ModelRequest", ["tool-return"]),
        ("ModelResponse", ["text"]),
    ]
    call = conversation.messages[1].parts[1]
    assert isinstance(call, ToolCallPart)
    assert (call.tool_call_id, call.args_as_dict()) == ("call_1", {"city": "Paris"})
    got: list[Any] = []

    def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        got.append(messages)
        return ModelResponse(parts=[TextPart("You asked about Paris.")])

    result = asyncio.run(
        Agent(FunctionModel(model_fn)).run(
            "What did I ask?", message_history=conversation.messages
        )
    )
    assert result.output == "You asked about Paris."
    sent = got[-1]
    assert any(
        isinstance(p, ToolReturnPart) and p.content == "sunny in Paris"
        for m in sent
        for p in m.parts
    )
