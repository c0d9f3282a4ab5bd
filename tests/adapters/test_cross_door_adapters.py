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
import dataclasses
import json
import threading
import warnings
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
from turnledger.ledger.events import ModelCalled, SessionRewound, SystemPromptSet
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
    """``history``, ``costs``, ``audit`` and every ``export`` show the facts."""
    capsys.readouterr()
    assert main(["--db", ledger, "audit", key, "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert (audit["tool_calls"], audit["tool_results"]) == (len(CALLS), len(CALLS))
    assert main(["--db", ledger, "history", key, "--json"]) == 0
    assert SYSTEM_PROMPT in capsys.readouterr().out
    assert main(["--db", ledger, "costs", "--session", key, "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["calls"] == len(USAGE)
    assert total["input_tokens"] == sum(i for i, _ in USAGE)
    assert total["output_tokens"] == sum(o for _, o in USAGE)
    assert total["cost_usd"] == pytest.approx(sum(c[3] for c in EXPECTED.model_calls))
    assert total["cost_usd"] > 0
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


# ---------------------------------------------------------------- Google ADK


def test_adk_records_the_scripted_facts(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.genai import types

    from turnledger.adapters.adk import TurnledgerSessionService
    from turnledger.adapters.adk.events import session_key

    def usage(n: int) -> types.GenerateContentResponseUsageMetadata:
        i, o = USAGE[n]
        return types.GenerateContentResponseUsageMetadata(
            prompt_token_count=i, candidates_token_count=o, total_token_count=i + o
        )

    class ScriptedLlm(BaseLlm):
        model: str = MODEL

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> Any:
            del stream
            last = llm_request.contents[-1]
            if any(p.function_response for p in last.parts or ()):
                yield LlmResponse(
                    content=types.Content(
                        role="model", parts=[types.Part(text=FINAL_TEXT)]
                    ),
                    model_version=MODEL,
                    usage_metadata=usage(1),
                )
                return
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=c.id, name=c.name, args=dict(c.arguments)
                    )
                )
                for c in CALLS
            ]
            yield LlmResponse(
                content=types.Content(role="model", parts=parts),
                model_version=MODEL,
                usage_metadata=usage(0),
            )

    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        del city
        return TOOLS["get_weather"].result

    def get_time(city: str) -> str:
        """Return the time in a city."""
        del city
        return TOOLS["get_time"].result

    agent = LlmAgent(
        name="terse",
        model=ScriptedLlm(),
        tools=[get_weather, get_time],
        instruction=SYSTEM_PROMPT,
    )
    service = TurnledgerSessionService(ledger, pricing=PRICING)
    app = App(name="cross", root_agent=agent, plugins=[service.plugin()])
    runner = Runner(app=app, session_service=service)

    async def run(session_id: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=USER_TEXT)])
        async for _ in runner.run_async(
            user_id="u1", session_id=session_id, new_message=message
        ):
            pass

    async def scenario() -> None:
        await service.create_session(app_name="cross", user_id="u1", session_id="s1")
        await run("s1")

    try:
        asyncio.run(scenario())
        key = session_key("u1", "s1")
        facts = _facts(ledger, "cross", key)
        # ADK sends the agent's instruction with what it adds (the agent's name).
        assert facts.system_prompt is not None
        assert SYSTEM_PROMPT in facts.system_prompt
        assert dataclasses.replace(facts, system_prompt=SYSTEM_PROMPT) == EXPECTED
        asyncio.run(run("s1"))
    finally:
        service.close()
    events = _events(ledger, session_stream_id("cross", key))
    assert sum(isinstance(e, SystemPromptSet) for e in events) == 1
    assert sum(isinstance(e, ModelCalled) for e in events) == 2 * len(USAGE)


# ---------------------------------------------------------- OpenAI Agents SDK


def test_openai_agents_records_the_scripted_facts(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents import Agent, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message
    from agents.testing import function_call as call_item
    from agents.usage import Usage

    from turnledger.adapters.openai_agents import TurnledgerSession

    class NamedModel(ScriptedModel):
        """A scripted model named like the SDK's OpenAI models name theirs."""

        model = MODEL

    def script(model: ScriptedModel) -> None:
        (i0, o0), (i1, o1) = USAGE
        model.enqueue(
            ModelStep(
                output=[
                    call_item(c.name, dict(c.arguments), call_id=c.id) for c in CALLS
                ],
                usage=Usage(requests=1, input_tokens=i0, output_tokens=o0),
            )
        )
        model.enqueue(
            ModelStep(
                output=[assistant_message(FINAL_TEXT)],
                usage=Usage(requests=1, input_tokens=i1, output_tokens=o1),
            )
        )

    @function_tool
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        del city
        return TOOLS["get_weather"].result

    @function_tool
    def get_time(city: str) -> str:
        """Return the time in a city."""
        del city
        return TOOLS["get_time"].result

    model = NamedModel()
    agent = Agent(
        name="terse",
        instructions=SYSTEM_PROMPT,
        model=model,
        tools=[get_weather, get_time],
    )
    session = TurnledgerSession("s1", ledger, pricing=PRICING)

    async def run() -> None:
        script(model)
        await Runner.run(agent, USER_TEXT, session=session, hooks=session.run_hooks())

    try:
        asyncio.run(run())
        assert _facts(ledger, "openai-agents", "s1") == EXPECTED
        _cli_shows(ledger, "s1", capsys)
        asyncio.run(run())
    finally:
        session.close()
    events = _events(ledger, session_stream_id("openai-agents", "s1"))
    assert sum(isinstance(e, SystemPromptSet) for e in events) == 1
    assert sum(isinstance(e, ModelCalled) for e in events) == 2 * len(USAGE)


# ------------------------------------------------------------------ LangGraph


def _scripted_chat_model() -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedChatModel(BaseChatModel):
        """Asks for both tools after a user message, answers after their results."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            del tools, kwargs
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any
        ) -> ChatResult:
            del stop, kwargs
            answered = isinstance(messages[-1], ToolMessage)
            i, o = USAGE[1] if answered else USAGE[0]
            calls = [
                {"name": c.name, "args": dict(c.arguments), "id": c.id} for c in CALLS
            ]
            reply = AIMessage(
                content=FINAL_TEXT if answered else "",
                tool_calls=[] if answered else calls,
                usage_metadata={
                    "input_tokens": i,
                    "output_tokens": o,
                    "total_tokens": i + o,
                },
                response_metadata={"model_name": MODEL},
            )
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return ScriptedChatModel()


@pytest.mark.parametrize("tool_node", ["v1", "v2"])
def test_langgraph_records_the_scripted_facts(
    ledger: str, tool_node: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both of create_react_agent's tool nodes record the results in call order.

    v1 runs both calls in one task and writes their results together, in call
    order. v2 (the default) runs each call as its own task and the saver gets
    each task's write as it finishes: here the second call's result is saved
    before the first call's tool returns, and the ledger still holds them in
    call order, the order LangGraph's state holds them in.
    """
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    from turnledger.adapters.langgraph import TurnledgerSaver

    time_saved = threading.Event()

    class Saver(TurnledgerSaver):
        def put_writes(self, config: Any, writes: Any, *args: Any) -> None:
            super().put_writes(config, writes, *args)
            for _, value in writes:
                held = value if isinstance(value, list) else [value]
                if any(getattr(m, "name", None) == "get_time" for m in held):
                    time_saved.set()

    @tool
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        del city
        if tool_node == "v2":
            assert time_saved.wait(30), "get_time's result was never saved"
        return TOOLS["get_weather"].result

    @tool
    def get_time(city: str) -> str:
        """Return the time in a city."""
        del city
        return TOOLS["get_time"].result

    saver = Saver.from_url(ledger, pricing=PRICING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # moved to langchain.agents in 1.0
            graph = create_react_agent(
                _scripted_chat_model(),
                tools=[get_weather, get_time],
                checkpointer=saver,
                version=tool_node,  # type: ignore[arg-type]
            )
        config = {"configurable": {"thread_id": "t1"}}
        first = [SystemMessage(SYSTEM_PROMPT), HumanMessage(USER_TEXT)]
        graph.invoke({"messages": first}, config)
        held = graph.get_state(config).values["messages"]
        assert [getattr(m, "name", None) for m in held[3:5]] == [
            "get_weather",
            "get_time",
        ]
        assert _facts(ledger, "langgraph", "t1") == EXPECTED
        _cli_shows(ledger, "t1", capsys)
        # The next turn carries the whole history: only its own facts are added.
        graph.invoke({"messages": [HumanMessage(USER_TEXT)]}, config)
    finally:
        saver.close()
    events = _events(ledger, session_stream_id("langgraph", "t1"))
    assert sum(isinstance(e, SystemPromptSet) for e in events) == 1
    assert sum(isinstance(e, ModelCalled) for e in events) == 2 * len(USAGE)


def test_a_langgraph_thread_resumed_from_an_older_checkpoint_shows_its_branch(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #25's case: the graph holds 4 messages, history showed 8 linearly."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from turnledger.adapters.langgraph import TurnledgerSaver

    def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
        question = state["messages"][-1].content
        return {"messages": [AIMessage(f"answer to {question}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    saver = TurnledgerSaver.from_url(ledger)
    try:
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "b1"}}
        for question in ("q1", "q2", "q3"):
            graph.invoke({"messages": [HumanMessage(question)]}, config)
        after_first = next(
            s
            for s in graph.get_state_history(config)
            if len(s.values.get("messages", [])) == 2 and not s.next
        )
        graph.invoke({"messages": [HumanMessage("q4")]}, after_first.config)
        held = graph.get_state(config).values["messages"]
        assert [m.content for m in held] == ["q1", "answer to q1", "q4", "answer to q4"]
        assert _history(ledger) == _pairs(held)
        capsys.readouterr()
        assert main(["--db", ledger, "history", "b1", "--json"]) == 0
        out = capsys.readouterr().out
        assert "q4" in out
        assert "q2" not in out
        # A second process reads the thread afresh and continues the branch.
        other = TurnledgerSaver.from_url(ledger)
        try:
            again = builder.compile(checkpointer=other)
            again.invoke({"messages": [HumanMessage("q5")]}, config)
            assert _history(ledger) == _pairs(
                again.get_state(config).values["messages"]
            )
            assert len(_history(ledger)) == 6
            held = again.get_state(config).values["messages"]
        finally:
            other.close()
    finally:
        saver.close()
    assert [m.content for m in held][-2:] == ["q5", "answer to q5"]
    store = open_store(ledger)
    try:
        rewound = [
            r.event
            for r in store.read_stream(session_stream_id("langgraph", "b1"))
            if isinstance(r.event, SessionRewound)
        ]
    finally:
        store.close()
    assert len(rewound) == 1  # the fork; its continuation is no fork


def _history(ledger: str) -> tuple[tuple[str, str], ...]:
    return _facts(ledger, "langgraph", "b1").history  # type: ignore[no-any-return]


def _pairs(messages: list[Any]) -> tuple[tuple[str, str], ...]:
    from langchain_core.messages import HumanMessage

    return tuple(
        ("user" if isinstance(m, HumanMessage) else "assistant", m.content)
        for m in messages
    )
