"""End to end: a real ``create_react_agent`` graph on TurnledgerSaver, then the CLI.

The chat model is scripted (a ``BaseChatModel`` that asks for two tools after a
user message and answers after their results): no network. What the graph wrote is
then read by ``turnledger audit``, ``history``, ``replay``, ``export`` and
``verify``.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import InjectedStore, create_react_agent
from langgraph.store.base import BaseStore

from turnledger.adapters.langgraph import TurnledgerSaver, TurnledgerStore
from turnledger.ledger.events import (
    AssistantMessage,
    ItemRecorded,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main


@tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"It is sunny in {city}, 21 degrees."


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@tool
def remember(fact: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Keep a fact in long-term memory."""
    store.put(("memories", "user-1"), f"fact-{len(fact)}", {"content": fact})
    return "remembered"


TOOLS = [get_weather, add, remember]


class ScriptedToolModel(BaseChatModel):
    """Asks for both tools after a user message, answers after the tool results."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[Any, BaseMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        last = messages[-1]
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        if isinstance(last, HumanMessage) and str(last.content).startswith("remember "):
            fact = str(last.content).removeprefix("remember ")
            call = {"name": "remember", "args": {"fact": fact}, "id": f"call_r{turn}"}
            reply = AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        elif isinstance(last, ToolMessage):
            results = [m.content for m in messages if isinstance(m, ToolMessage)][-2:]
            reply = AIMessage(
                content=f"Turn {turn}: " + " / ".join(str(r) for r in results),
                usage_metadata={
                    "input_tokens": 40,
                    "output_tokens": 12,
                    "total_tokens": 52,
                },
            )
        else:
            reply = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "get_weather",
                        "args": {"city": f"Paris-{turn}"},
                        "id": f"call_w{turn}",
                        "type": "tool_call",
                    },
                    {
                        "name": "add",
                        "args": {"a": turn, "b": 2},
                        "id": f"call_a{turn}",
                        "type": "tool_call",
                    },
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def react_agent(checkpointer: Any, store: BaseStore | None = None) -> Any:
    """Return ``create_react_agent`` over the scripted model and the tools."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            ScriptedToolModel(),
            tools=list[BaseTool](TOOLS),
            checkpointer=checkpointer,
            store=store,
        )


def tool_args(message: AIMessage) -> list[str]:
    """The JSON arguments of an assistant message's tool calls."""
    return [json.dumps(c["args"], sort_keys=True) for c in message.tool_calls]


# -- the tests -------------------------------------------------------------------------

TURNS = 3


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_agent(url: str, thread: str, turns: int = TURNS) -> list[BaseMessage]:
    with TurnledgerSaver.from_url(url, agent="lg") as saver:
        graph = react_agent(saver)
        config = {"configurable": {"thread_id": thread}}
        for i in range(turns):
            graph.invoke({"messages": [HumanMessage(f"question {i + 1}")]}, config)
        return list(graph.get_state(config).values["messages"])


def test_react_agent_state_survives_a_new_process_and_is_typed_events(sqlite_path):
    """The graph's state reads back whole from a fresh saver; messages are events."""
    messages = run_agent(sqlite_path, "t-1")
    assert len(messages) == TURNS * 5
    with TurnledgerSaver.from_url(sqlite_path, agent="lg") as fresh:
        graph = react_agent(fresh)
        again = graph.get_state({"configurable": {"thread_id": "t-1"}}).values
        assert again["messages"] == messages
        history = list(graph.get_state_history({"configurable": {"thread_id": "t-1"}}))
        assert len(history) == TURNS * 5
    with open_store(sqlite_path) as store:
        events = [r.event for r in store.read_stream(session_stream_id("lg", "t-1"))]
    started = [e for e in events if isinstance(e, TurnStarted)]
    assert [e.user_input for e in started] == [
        f"question {i + 1}" for i in range(TURNS)
    ]
    calls = [c for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    # results are recorded as the tools finish (create_react_agent runs them in
    # parallel), each after its call
    assert sorted(c.id for c in calls) == sorted(r.call_id for r in results)
    assert sum(isinstance(e, TurnCompleted) for e in events) == TURNS
    by_call = {r.call_id: r.output for r in results}
    assert by_call["call_w1"] == "It is sunny in Paris-1, 21 degrees."
    assert by_call["call_a1"] == "3"
    # each message is recorded once, however many checkpoints hold it
    assert (
        len(started)
        + len(results)
        + sum(isinstance(e, AssistantMessage) for e in events)
        == TURNS * 5
    )
    assert all(
        e.framework == "langgraph" for e in events if isinstance(e, ItemRecorded)
    )


def test_cli_reads_what_the_saver_wrote(capsys, sqlite_path):
    """audit is clean; history, replay and export to every format work on the thread."""
    run_agent(sqlite_path, "t-cli")
    code, out, err = cli(capsys, "--db", sqlite_path, "audit", "t-cli", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["tool_calls"] == report["tool_results"] == TURNS * 2
    assert report["violations"] == []
    code, out, err = cli(capsys, "--db", sqlite_path, "history", "t-cli", "--json")
    assert code == 0, err
    assert "question 3" in out
    assert "It is sunny in Paris-3, 21 degrees." in out
    code, out, err = cli(capsys, "--db", sqlite_path, "replay", "t-cli", "--json")
    assert code == 0, err
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        code, out, err = cli(
            capsys, "--db", sqlite_path, "export", "t-cli", "--format", fmt
        )
        assert code == 0, (fmt, err)
        payload = json.loads(out)
        text = json.dumps(payload)
        assert "call_a3" in text, fmt
        assert "Turn 3: It is sunny in Paris-3, 21 degrees. / 5" in text, fmt
    code, out, err = cli(capsys, "--db", sqlite_path, "verify")
    assert code == 0, err


def test_delete_thread_is_an_event_and_the_thread_starts_over(capsys, sqlite_path):
    """After delete_thread the saver and the history have nothing; the ledger has all."""
    run_agent(sqlite_path, "t-del", turns=1)
    assert (
        len(
            json.loads(
                cli(capsys, "--db", sqlite_path, "history", "t-del", "--json")[1]
            )
        )
        == 5
    )
    with open_store(sqlite_path) as store:
        before = store.stream_version(session_stream_id("lg", "t-del"))
    with TurnledgerSaver.from_url(sqlite_path, agent="lg") as saver:
        saver.delete_thread("t-del")
        assert saver.get_tuple({"configurable": {"thread_id": "t-del"}}) is None
    with open_store(sqlite_path) as store:
        assert store.stream_version(session_stream_id("lg", "t-del")) == before + 1
    assert (
        json.loads(cli(capsys, "--db", sqlite_path, "history", "t-del", "--json")[1])
        == []
    )
    messages = run_agent(sqlite_path, "t-del", turns=1)
    assert [m.content for m in messages if isinstance(m, HumanMessage)] == [
        "question 1"
    ]


def test_react_agent_async_on_postgres(postgres_url):
    """The async twins drive the same graph on PostgreSQL."""

    async def go() -> list[BaseMessage]:
        with TurnledgerSaver.from_url(postgres_url, agent="lg") as saver:
            graph = react_agent(saver)
            config = {"configurable": {"thread_id": "pg-1"}}
            for i in range(2):
                await graph.ainvoke({"messages": [HumanMessage(f"q{i}")]}, config)
            state = await graph.aget_state(config)
            return list(state.values["messages"])

    messages = asyncio.run(go())
    assert len(messages) == 10
    with TurnledgerSaver.from_url(postgres_url, agent="lg") as fresh:
        tup = fresh.get_tuple({"configurable": {"thread_id": "pg-1"}})
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == messages


def test_a_tool_writes_memory_through_the_store_and_memory_rebuilds(
    capsys, sqlite_path, tmp_path
):
    """A tool's store.put is a memory event: recall and rebuild find it."""
    with (
        TurnledgerSaver.from_url(sqlite_path, agent="lg") as saver,
        TurnledgerStore.from_url(
            sqlite_path, memory_path=tmp_path / "view.sqlite", agent="lg"
        ) as store,
    ):
        graph = react_agent(saver, store)
        config = {"configurable": {"thread_id": "t-mem"}}
        graph.invoke(
            {"messages": [HumanMessage("remember Helix is my editor")]}, config
        )
        graph.invoke({"messages": [HumanMessage("question 2")]}, config)
        hits = store.search(("memories",), query="editor")
        assert [h.value for h in hits] == [{"content": "Helix is my editor"}]
    code, out, err = cli(capsys, "--db", sqlite_path, "audit", "t-mem")
    assert code == 0, out + err
    code, out, err = cli(
        capsys, "--db", sqlite_path, "memory", "recall", "--agent", "lg", "editor"
    )
    assert code == 0, err
    assert "Helix is my editor" in out
    for backend in ("sqlite", "markdown"):
        code, out, err = cli(
            capsys,
            "--db",
            sqlite_path,
            "memory",
            "rebuild",
            "--agent",
            "lg",
            "--backend",
            backend,
            "--out",
            str(tmp_path / backend),
            "--json",
        )
        assert code == 0, err
        assert json.loads(out)["entries"] == 1
