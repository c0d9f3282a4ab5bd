"""TurnledgerSaver against LangGraph's InMemorySaver as the oracle, and its storage.

The property: any sequence of checkpoints (messages appended, rewritten or removed,
list channels extended or replaced, other values, channels dropped, forks from older
checkpoints) and task writes reads back, from a fresh saver on the same ledger,
exactly as InMemorySaver gives it back.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from turnledger.adapters.langgraph import TurnledgerSaver
from turnledger.ledger.events import ItemRecorded, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store

text = st.text(alphabet="abc xyz\u00e9\u2603", max_size=12)
ints = st.integers(-(2**63), 2**63 - 1)  # what LangGraph's msgpack serializer takes


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "ai_calls", "tool", "system", "list"]))
    ident = draw(st.one_of(st.none(), st.uuids().map(str)))
    body = draw(text)
    if kind == "human":
        return HumanMessage(body, id=ident)
    if kind == "ai":
        return AIMessage(body, id=ident, response_metadata={"model": "m"})
    if kind == "ai_calls":
        calls = [
            {"name": "t", "args": {"q": draw(text)}, "id": f"c{n}", "type": "tool_call"}
            for n in range(draw(st.integers(1, 2)))
        ]
        return AIMessage("", tool_calls=calls, id=ident)
    if kind == "tool":
        status = draw(st.sampled_from(["success", "error"]))
        return ToolMessage(body, tool_call_id="c0", name="t", status=status, id=ident)
    if kind == "system":
        return SystemMessage(body, id=ident)
    return HumanMessage([{"type": "text", "text": body}], id=ident)


step = st.one_of(
    st.tuples(st.just("append"), st.lists(messages(), min_size=1, max_size=3)),
    st.tuples(st.just("rewrite"), messages()),
    st.tuples(st.just("extend"), st.lists(ints, min_size=0, max_size=3)),
    st.tuples(
        st.just("value"),
        st.one_of(st.none(), text, st.dictionaries(text, ints, max_size=2)),
    ),
    st.tuples(st.just("drop"), st.just(None)),
    st.tuples(st.just("fork"), st.integers(0, 50)),
    st.tuples(st.just("writes"), st.lists(messages(), max_size=2)),
)


class Driver:
    """Applies the same steps to several savers, as LangGraph would call them."""

    def __init__(self, savers: list[BaseCheckpointSaver[Any]], ns: str) -> None:
        self.savers = savers
        self.ns = ns
        self.values: dict[str, Any] = {}
        self.versions: dict[str, int] = {}
        self.configs: list[dict[str, Any]] = []
        self.parent: dict[str, Any] | None = None
        self.history: list[tuple[dict[str, Any], dict[str, int]]] = []
        self.clock = 0

    def bump(self, channel: str) -> dict[str, int]:
        self.clock += 1
        self.versions[channel] = self.clock
        return {channel: self.clock}

    def apply(self, kind: str, arg: Any) -> None:
        new: dict[str, int] = {}
        if kind == "append":
            self.values["messages"] = [*self.values.get("messages", []), *arg]
            new = self.bump("messages")
        elif kind == "rewrite" and self.values.get("messages"):
            self.values["messages"] = [arg, *self.values["messages"][1:]]
            new = self.bump("messages")
        elif kind == "extend":
            self.values["items"] = [*self.values.get("items", []), *arg]
            new = self.bump("items")
        elif kind == "value":
            self.values["other"] = arg
            new = self.bump("other")
        elif kind == "drop" and "other" in self.versions:
            self.values.pop("other", None)
            self.versions.pop("other")
        elif kind == "fork" and self.history:
            values, versions = self.history[arg % len(self.history)]
            self.values, self.versions = dict(values), dict(versions)
            self.parent = self.configs[arg % len(self.history)]
        elif kind == "writes" and self.parent is not None:
            for saver in self.savers:
                saver.put_writes(
                    self.parent, [("messages", arg), ("x", 1)], "task-1", "p"
                )
            return
        self.put(new)

    def put(self, new: dict[str, int]) -> None:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(self.values)
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["versions_seen"] = {"node": dict(self.versions)}
        conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": self.ns}
        if self.parent is not None:
            conf["checkpoint_id"] = self.parent["configurable"]["checkpoint_id"]
        stored = None
        for saver in self.savers:
            stored = saver.put(
                {"configurable": conf}, checkpoint, {"step": len(self.configs)}, new
            )
        assert stored is not None
        self.parent = stored
        self.configs.append(stored)
        self.history.append((dict(self.values), dict(self.versions)))


def same(ours: Any, oracle: Any) -> None:
    assert (ours is None) == (oracle is None)
    if oracle is None:
        return
    assert ours.checkpoint["channel_values"] == oracle.checkpoint["channel_values"]
    assert ours.checkpoint["channel_versions"] == oracle.checkpoint["channel_versions"]
    assert ours.checkpoint["versions_seen"] == oracle.checkpoint["versions_seen"]
    assert ours.checkpoint["id"] == oracle.checkpoint["id"]
    assert ours.metadata == oracle.metadata
    assert ours.parent_config == oracle.parent_config
    assert sorted(map(repr, ours.pending_writes)) == sorted(
        map(repr, oracle.pending_writes)
    )


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=st.lists(step, min_size=1, max_size=12), ns=st.sampled_from(["", "sub:1"]))
def test_reads_back_as_in_memory_saver_does(
    steps: list[tuple[str, Any]], ns: str
) -> None:
    """Every checkpoint, from a fresh saver, equals InMemorySaver's."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "ledger.db")
        oracle = InMemorySaver()
        with TurnledgerSaver.from_url(path) as ours:
            driver = Driver([oracle, ours], ns)
            for kind, arg in steps:
                driver.apply(kind, arg)
            for config in driver.configs:
                same(ours.get_tuple(config), oracle.get_tuple(config))
        with TurnledgerSaver.from_url(path) as fresh:
            for config in driver.configs:
                same(fresh.get_tuple(config), oracle.get_tuple(config))
            latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
            same(fresh.get_tuple(latest), oracle.get_tuple(latest))
            assert len(list(fresh.list(latest))) == len(driver.configs)


def test_checkpoint_records_do_not_grow_with_the_thread(sqlite_path: str) -> None:
    """The 200th checkpoint of a thread is recorded in about the bytes of the 10th."""
    with TurnledgerSaver.from_url(sqlite_path) as saver:
        driver = Driver([saver], "")
        for i in range(200):
            driver.apply("append", [HumanMessage(f"message {i:04d}", id=f"m{i:04d}")])
    with open_store(sqlite_path) as store:
        records = [
            len(r.event.fields)
            for r in store.read_stream(session_stream_id("langgraph", "t"))
            if isinstance(r.event, ItemRecorded) and r.event.kind == "cp"
        ]
    assert len(records) == 200
    assert records[199] <= records[9] + 16  # a few more digits in the versions


def test_two_savers_on_one_thread_retry_and_agree(sqlite_path: str) -> None:
    """Savers in two threads of control writing one thread both land, in order."""
    first, second = (
        TurnledgerSaver.from_url(sqlite_path),
        TurnledgerSaver.from_url(sqlite_path),
    )
    errors: list[BaseException] = []

    def write(saver: TurnledgerSaver, tag: str) -> None:
        try:
            for i in range(15):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"messages": [HumanMessage(f"{tag}{i}")]}
                checkpoint["channel_versions"] = {"messages": 1}
                saver.put(
                    {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}},
                    checkpoint,
                    {"step": i},
                    {"messages": 1},
                )
        except BaseException as e:
            errors.append(e)

    workers = [
        threading.Thread(target=write, args=(first, "a")),
        threading.Thread(target=write, args=(second, "b")),
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    first.close()
    second.close()
    assert errors == []
    with TurnledgerSaver.from_url(sqlite_path) as fresh:
        listed = list(fresh.list({"configurable": {"thread_id": "shared"}}))
    assert len(listed) == 30
    with open_store(sqlite_path) as store:
        started = [
            r.event.turn_id
            for r in store.read_stream(session_stream_id("langgraph", "shared"))
            if isinstance(r.event, TurnStarted)
        ]
    assert started == [f"lg{n}" for n in range(1, 31)]  # unique turn ids, in order
