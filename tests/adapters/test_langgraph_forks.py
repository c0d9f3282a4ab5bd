"""LangGraph forks on TurnledgerSaver: every branch reads back as its own.

A checkpoint written from a parent that is not the thread's latest is a fork.
Each test runs one real ``StateGraph`` (a node answering the last question: no
model, no network) on LangGraph's ``InMemorySaver`` as the reference and on
TurnledgerSaver (SQLite and PostgreSQL), and compares what the graph reads back;
the session's history (``load_history``, ``turnledger history``) must show the
branch the graph holds after each step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from turnledger.adapters.langgraph import TurnledgerSaver
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import load_history


@pytest.fixture(name="ledger", params=["sqlite", "postgres"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh ledger's URL or path (PostgreSQL: a fresh schema)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    yield request.getfixturevalue("postgres_url")


def _reply(state: MessagesState) -> dict[str, list[AIMessage]]:
    return {"messages": [AIMessage(f"answer to {state['messages'][-1].content}")]}


def _graph(checkpointer: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


CONFIG: Any = {"configurable": {"thread_id": "f1"}}


def _texts(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def _snapshots(graph: Any) -> list[tuple[list[str], tuple[str, ...]]]:
    """Every checkpoint of the thread, newest first: its messages and next nodes."""
    return [
        (_texts(s.values.get("messages", [])), s.next)
        for s in graph.get_state_history(CONFIG)
    ]


def _after(graph: Any, question: str) -> Any:
    """The config of the finished checkpoint whose last question is ``question``."""
    for s in graph.get_state_history(CONFIG):
        held = _texts(s.values.get("messages", []))
        if not s.next and held[-2:] == [question, f"answer to {question}"]:
            return s.config
    msg = f"no finished checkpoint after {question}"
    raise AssertionError(msg)


def _ask(graph: Any, question: str, config: Any = CONFIG) -> None:
    graph.invoke({"messages": [HumanMessage(question)]}, config)


def _history(ledger: str) -> list[str]:
    store = open_store(ledger)
    try:
        state = load_history(store, session_stream_id("langgraph", "f1"))
    finally:
        store.close()
    return [e.message.text for e in state.entries]


def _script(graph: Any) -> list[list[str]]:
    """q1..q3; fork after q1 -> q4; q5; back to the old branch after q3 -> q6.

    Returns the messages the graph holds after each of those steps.
    """
    held: list[list[str]] = []

    def now() -> None:
        held.append(_texts(graph.get_state(CONFIG).values["messages"]))

    for question in ("q1", "q2", "q3"):
        _ask(graph, question)
        now()
    _ask(graph, "q4", _after(graph, "q1"))
    now()
    _ask(graph, "q5")
    now()
    _ask(graph, "q6", _after(graph, "q3"))
    now()
    return held


def test_every_branch_reads_back_as_on_the_in_memory_saver(ledger: str) -> None:
    """The bug: a fork reused the branch's versions, old checkpoints read its values."""
    reference = _graph(InMemorySaver())
    expected = _script(reference)
    saver = TurnledgerSaver.from_url(ledger)
    try:
        graph = _graph(saver)
        assert _script(graph) == expected
        assert _snapshots(graph) == _snapshots(reference)
    finally:
        saver.close()
    # A second process folds the thread from the ledger and reads the same.
    again = TurnledgerSaver.from_url(ledger)
    try:
        assert _snapshots(_graph(again)) == _snapshots(reference)
    finally:
        again.close()
    assert expected[-1] == [
        *("q1", "answer to q1", "q2", "answer to q2", "q3", "answer to q3"),
        *("q6", "answer to q6"),
    ]


def test_the_history_follows_the_branch_the_graph_holds(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    saver = TurnledgerSaver.from_url(ledger)
    try:
        graph = _graph(saver)
        for question in ("q1", "q2", "q3"):
            _ask(graph, question)
        _ask(graph, "q4", _after(graph, "q1"))
        assert _history(ledger) == ["q1", "answer to q1", "q4", "answer to q4"]
        _ask(graph, "q6", _after(graph, "q3"))
        held = _texts(graph.get_state(CONFIG).values["messages"])
    finally:
        saver.close()
    assert held == _history(ledger)
    assert held[-4:] == ["q3", "answer to q3", "q6", "answer to q6"]
    capsys.readouterr()
    assert main(["--db", ledger, "history", "f1", "--json"]) == 0
    shown = json.dumps(json.loads(capsys.readouterr().out))
    assert "q2" in shown
    assert "q6" in shown
    assert "q4" not in shown


def test_async_forks_read_back_as_on_the_in_memory_saver(ledger: str) -> None:
    async def script(graph: Any) -> list[tuple[list[str], tuple[str, ...]]]:
        for question in ("q1", "q2", "q3"):
            await graph.ainvoke({"messages": [HumanMessage(question)]}, CONFIG)
        found = [s async for s in graph.aget_state_history(CONFIG)]
        first = next(
            s.config
            for s in found
            if not s.next and _texts(s.values["messages"])[-1] == "answer to q1"
        )
        await graph.ainvoke({"messages": [HumanMessage("q4")]}, first)
        await graph.ainvoke({"messages": [HumanMessage("q5")]}, CONFIG)
        return [
            (_texts(s.values.get("messages", [])), s.next)
            async for s in graph.aget_state_history(CONFIG)
        ]

    expected = asyncio.run(script(_graph(InMemorySaver())))
    saver = TurnledgerSaver.from_url(ledger)
    try:
        assert asyncio.run(script(_graph(saver))) == expected
    finally:
        saver.close()


class IntVersionsSaver(TurnledgerSaver):
    """The saver as it was before string versions: LangGraph's default ints."""

    def get_next_version(  # type: ignore[override]
        self, current: int | None, channel: None
    ) -> int:
        return BaseCheckpointSaver.get_next_version(self, current, channel)


def test_a_thread_stored_with_int_versions_reads_and_continues(ledger: str) -> None:
    old = IntVersionsSaver.from_url(ledger)
    try:
        graph = _graph(old)
        for question in ("q1", "q2"):
            _ask(graph, question)
        before = _snapshots(graph)
    finally:
        old.close()
    saver = TurnledgerSaver.from_url(ledger)
    try:
        graph = _graph(saver)
        assert _snapshots(graph) == before
        _ask(graph, "q3")
        state = graph.get_state(CONFIG)
        versions = saver.get_tuple(CONFIG)
        # A fresh thread on the same saver gets string versions.
        _ask(graph, "n1", {"configurable": {"thread_id": "fresh"}})
        fresh = saver.get_tuple({"configurable": {"thread_id": "fresh"}})
    finally:
        saver.close()
    assert _texts(state.values["messages"]) == [
        *("q1", "answer to q1", "q2", "answer to q2", "q3", "answer to q3")
    ]
    assert _history(ledger) == _texts(state.values["messages"])
    assert versions is not None
    assert fresh is not None
    assert all(type(v) is int for v in versions.checkpoint["channel_versions"].values())
    assert all(type(v) is str for v in fresh.checkpoint["channel_versions"].values())


def test_versions_count_up_and_stay_apart(tmp_path: Path) -> None:
    saver = TurnledgerSaver.from_url(str(tmp_path / "ledger.db"))
    try:
        first = saver.get_next_version(None, None)
        second = saver.get_next_version(first, None)
        twins = {saver.get_next_version(first, None) for _ in range(100)}
        assert saver.get_next_version(7, None) == 8
    finally:
        saver.close()
    assert isinstance(first, str)
    assert isinstance(second, str)
    assert "" < first < second
    assert first.split(".")[0] == "0000000001"
    assert len(twins) == 100
    assert all(v > first for v in twins)
