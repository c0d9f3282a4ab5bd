"""``turnledger mcp`` over stdio, driven by the official SDK's client.

Each test spawns the real command on SQLite and on PostgreSQL, lists and calls
every tool, reads the resources, and then checks the ledger: the calls are a
session of the agent on channel ``mcp`` that ``turnledger audit`` and
``history`` show; a refused call is one typed protocol error and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.pipeline.mcp.conftest import Ledger, env
from turnledger.ledger.events import (
    AssistantMessage,
    MemoryForgotten,
    MemoryStored,
    SessionOpened,
    ToolResultRecorded,
)
from turnledger.ledger.store import open_store
from turnledger.pipeline.mcp import MAX_CONTENT_CHARS, MAX_QUERY_CHARS, TOOLS
from turnledger.policies.relevance import UNRELATED_SCORE

CLIENT = "test-client"
WRITES = {"memory_store", "memory_forget"}


@asynccontextmanager
async def connect(ledger: Ledger, *extra: str) -> AsyncIterator[ClientSession]:
    """A client session with ``turnledger mcp --agent ops`` spawned over stdio."""
    command = ledger.cli("mcp", "--agent", "ops", *extra)
    params = StdioServerParameters(
        command=command[0], args=command[1:], cwd=str(ledger.folder), env=env()
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(
            read, write, client_info=types.Implementation(name=CLIENT, version="1")
        ) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    """The one text block of a tool result."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def call(client: ClientSession, name: str, **arguments: Any) -> Any:
    """Call a tool that must succeed; return its decoded JSON answer."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


def events_of(ledger: Ledger) -> list[Any]:
    """Every event in the ledger, in order."""
    with open_store(ledger.url) as store:
        return [r.event for r in store.iter_all()]


def test_every_tool_and_resource_answers_and_each_call_is_recorded(ledger: Ledger):
    """List tools, call each, read the resources; then the ledger holds the calls."""

    async def scenario() -> dict[str, Any]:
        async with connect(ledger, "--allow-writes") as session:
            listed = await session.list_tools()
            seen: dict[str, Any] = {"tools": {t.name for t in listed.tools}}
            schema = next(t for t in listed.tools if t.name == "memory_store")
            seen["store_schema"] = schema.input_schema
            seen["store"] = await call(
                session, "memory_store", key="editor", content="Ada uses vim"
            )
            await call(
                session,
                "memory_store",
                key="draft",
                content="temp note",
                category="note",
            )
            seen["rows"] = await call(session, "memory_recall", query="vim")
            seen["block"] = await call(
                session, "memory_recall", query="vim", format="block"
            )
            seen["list"] = await call(session, "memory_list")
            seen["forget"] = await call(session, "memory_forget", key="draft")
            seen["forget_again"] = await call(session, "memory_forget", key="draft")
            seen["sessions"] = await call(session, "ledger_sessions")
            key = seen["sessions"][0]["session"]
            seen["history"] = await call(session, "ledger_history", session=key)
            seen["history_at"] = await call(
                session, "ledger_history", session=key, at="mcp-1"
            )
            seen["audit"] = await call(session, "ledger_audit", session=key)
            seen["costs"] = await call(session, "ledger_costs", by="day")
            missing = await session.call_tool("ledger_history", {"session": "nope"})
            seen["missing"] = (missing.is_error, text_of(missing))
            resources = await session.list_resources()
            seen["uris"] = [str(r.uri) for r in resources.resources]
            templates = await session.list_resource_templates()
            seen["templates"] = [t.uri_template for t in templates.resource_templates]
            reads = {}
            for uri in seen["uris"]:
                (content,) = (await session.read_resource(uri)).contents
                assert isinstance(content, types.TextResourceContents)
                reads[uri] = content.text
            seen["reads"] = reads
            with pytest.raises(MCPError) as err:
                await session.read_resource(f"turnledger://sessions/{'x' * 8}/history")
            seen["unknown_resource"] = err.value.code
            return seen

    seen = anyio.run(scenario)
    assert seen["tools"] == set(TOOLS)
    assert seen["store_schema"]["required"] == ["key", "content"]
    assert seen["store_schema"]["additionalProperties"] is False
    assert seen["store"] == {"stored": "editor", "category": "core", "session": None}
    first, *weaker = seen["rows"]["rows"]
    assert (first["key"], first["content"]) == ("editor", "Ada uses vim")
    # "temp note" shares no word with "vim": once its vector is computed (off
    # the write path) it is ranked under the static model's range, not injected.
    assert all(r["score"] < UNRELATED_SCORE for r in weaker)
    assert seen["block"]["block"].startswith("[Memory context]\n")
    assert "- editor: Ada uses vim" in seen["block"]["block"]
    assert "draft" not in seen["block"]["block"]
    assert {r["key"] for r in seen["list"]["rows"]} == {"editor", "draft"}
    assert seen["forget"] == {"forgotten": True, "key": "draft"}
    assert seen["forget_again"] == {"forgotten": False, "key": "draft"}
    (own,) = seen["sessions"]
    assert own["agent"] == "ops"
    assert own["channel"] == "mcp"
    assert own["session"].startswith(f"mcp-{CLIENT}-")
    calls = [c["name"] for m in seen["history"]["messages"] for c in m["tool_calls"]]
    assert calls[:3] == ["memory_store", "memory_store", "memory_recall"]
    # As of the first call's turn: that call and its result only.
    assert len(seen["history_at"]["messages"]) == 2
    assert seen["history_at"]["at"] is not None
    # A read is recorded once it ran: the audit saw every earlier call paired.
    assert seen["audit"]["unpaired_calls"] == 0
    assert seen["audit"]["tool_calls"] == 10  # every call before it
    assert seen["audit"]["unpaired_results"] == 0
    assert seen["costs"]["rows"] == []
    assert seen["missing"][0] is True
    assert "found none named 'nope'" in seen["missing"][1]
    stream = own["stream"]
    assert seen["uris"] == [
        "turnledger://lifecycle",
        f"turnledger://sessions/{stream}/history",
        f"turnledger://sessions/{stream}/transcript",
    ]
    assert "{session}" in seen["templates"][0]
    assert (
        "| Surface" in seen["reads"]["turnledger://lifecycle"]
        or "Surface" in (seen["reads"]["turnledger://lifecycle"])
    )
    transcript = json.loads(seen["reads"][f"turnledger://sessions/{stream}/transcript"])
    assert transcript["session"] == own["session"]
    assert transcript["entries"][0]["turn_id"] == "mcp-1"
    assert seen["unknown_resource"] == -32002

    # The ledger: one session of agent ops on channel mcp, every call paired.
    events = events_of(ledger)
    (opened,) = [e for e in events if isinstance(e, SessionOpened)]
    assert (opened.agent, opened.channel) == ("ops", "mcp")
    made = [
        c.name for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls
    ]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert len(made) == len(results)
    assert made.count("read_resource") == 4  # three reads and the refused session
    assert [r.success for r in results if r.tool == "ledger_history"] == [
        True,
        True,
        False,
    ]
    stored = [e for e in events if isinstance(e, MemoryStored)]
    assert [(e.key, e.source) for e in stored] == [
        ("editor", "tool"),
        ("draft", "tool"),
    ]
    assert stored[1].session == opened.session_key  # a non-durable category
    assert [e.key for e in events if isinstance(e, MemoryForgotten)] == ["draft"]
    audit = ledger.run_json("audit", opened.session_key)
    assert isinstance(audit, dict)
    assert audit["tool_calls"] == audit["tool_results"] == len(made)
    assert audit["unpaired_calls"] == 0
    history = ledger.run_json("history", opened.session_key)
    assert isinstance(history, list)
    assert sum(len(m["tool_calls"]) for m in history) == len(made)


def test_writes_are_refused_without_allow_writes(ledger: Ledger):
    """A read-only server lists no write tool and refuses one with a typed error."""

    async def scenario() -> tuple[set[str], list[tuple[int, str]], Any]:
        async with connect(ledger) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            refused = []
            for name, arguments in (
                ("memory_store", {"key": "k", "content": "v"}),
                ("memory_forget", {"key": "k"}),
            ):
                with pytest.raises(MCPError) as err:
                    await session.call_tool(name, arguments)
                refused.append((err.value.code, err.value.message))
            rows = await call(session, "memory_recall", query="anything")
            return names, refused, rows

    names, refused, rows = anyio.run(scenario)
    assert names == set(TOOLS) - WRITES
    assert [code for code, _ in refused] == [types.INVALID_PARAMS] * 2
    assert "--allow-writes" in refused[0][1]
    assert rows == {"rows": []}
    events = events_of(ledger)
    assert not [e for e in events if isinstance(e, MemoryStored | MemoryForgotten)]
    # Only the recall was recorded: its call and its result.
    assert [type(e).__name__ for e in events] == [
        "SessionOpened",
        "AssistantMessage",
        "ToolResultRecorded",
    ]


HOSTILE: list[tuple[str, Any]] = [
    ("no_such_tool", {}),
    ("memory_store", {"key": "k"}),
    ("memory_store", {"key": 7, "content": "v"}),
    ("memory_store", {"key": "k", "content": "v", "owner": "root"}),
    ("memory_store", {"key": "k", "content": "x" * (MAX_CONTENT_CHARS + 1)}),
    ("memory_store", {"key": "k" * 257, "content": "v"}),
    ("memory_store", {"key": "k", "content": "v", "importance": 2}),
    ("memory_store", {"key": "k", "content": "v", "importance": True}),
    ("memory_recall", {"query": "q" * (MAX_QUERY_CHARS + 1)}),
    ("memory_recall", {"query": "q", "limit": 0}),
    ("memory_recall", {"query": "q", "limit": "5"}),
    ("memory_recall", {"query": "q", "format": "html"}),
    ("memory_recall", {"query": ["a"]}),
    ("ledger_costs", {"by": "planet"}),
    ("memory_store", {"key": "", "content": "v"}),  # the ledger holds no empty key
    ("memory_store", {"key": "k", "content": "v", "category": ""}),
    ("memory_forget", {"key": ""}),
    ("ledger_history", {"session": ""}),
    ("ledger_history", {"session": "s", "at": ""}),
    ("ledger_costs", {"since": ""}),
]


def test_a_hostile_client_gets_one_typed_error_per_call_and_nothing_is_written(
    ledger: Ledger,
):
    """Unknown tools, bad and oversized arguments: INVALID_PARAMS, no event."""

    async def scenario() -> tuple[list[tuple[int, str]], int, Any]:
        async with connect(ledger, "--allow-writes") as session:
            answers = []
            for name, arguments in HOSTILE:
                with pytest.raises(MCPError) as err:
                    await session.call_tool(name, arguments)
                answers.append((err.value.code, err.value.message))
            with pytest.raises(MCPError) as err:
                await session.read_resource("turnledger://elsewhere/" + "x" * 2_000)
            resource_code = err.value.code
            after = len(events_of(ledger))
            still = await call(session, "memory_list")  # the server still answers
            return answers, after, (resource_code, still)

    answers, after, (resource_code, still) = anyio.run(scenario)
    assert [code for code, _ in answers] == [types.INVALID_PARAMS] * len(HOSTILE)
    assert resource_code == types.INVALID_PARAMS
    for code, message in answers:
        assert message.startswith("Expected"), (code, message)
        assert len(message) < 600
    assert "found 'no_such_tool'" in answers[0][1]
    assert "found 'owner'" in answers[3][1]
    assert f"found {MAX_CONTENT_CHARS + 1}" in answers[4][1]
    assert after == 0  # nothing at all was written by the refused calls
    assert still == {"rows": [], "total": 0}
