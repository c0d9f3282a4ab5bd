"""The MCP server's parts alone: the argument check, URIs, client labels.

The argument check is what stands between a hostile client and the ledger: any
JSON it can send either passes (every value of its declared type, within its
bounds) or is refused with :class:`RefusedCallError`, never anything else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from turnledger.ledger.events import (
    AssistantMessage,
    MemoryStored,
    SessionOpened,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import MemoryConfig, RuntimeConfig
from turnledger.pipeline.mcp import (
    MAX_CONTENT_CHARS,
    TOOLS,
    McpRecorder,
    RefusedCallError,
    ToolServices,
    build_server,
)
from turnledger.pipeline.mcp.recording import MAX_CLIENT_CHARS, client_label
from turnledger.pipeline.mcp.resources import (
    LIFECYCLE_URI,
    PAGE_SESSIONS,
    list_resources,
    parse_uri,
    session_uri,
)
from turnledger.pipeline.mcp.tools import check_arguments
from turnledger.pipeline.memory import MemoryService

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    name=st.sampled_from([*TOOLS, "nope", ""]),
    arguments=st.dictionaries(
        st.sampled_from(["key", "content", "query", "limit", "format", "at", "x"])
        | st.text(max_size=6),
        json_values,
        max_size=5,
    ),
    allow_writes=st.booleans(),
)
def test_any_arguments_pass_typed_or_are_refused(
    name: str, arguments: dict[str, Any], allow_writes: bool
):
    """Passed: known keys, values of their type within bounds; else refused."""
    try:
        checked = check_arguments(name, arguments, allow_writes=allow_writes)
    except RefusedCallError as e:
        assert str(e).startswith("Expected")
        assert len(str(e)) < 600
        return
    tool = TOOLS[name]
    assert allow_writes or not tool.writes
    assert set(checked) <= set(tool.args)
    assert all(k in checked for k, a in tool.args.items() if a.required)
    for key, value in checked.items():
        arg = tool.args[key]
        if arg.kind == "string":
            assert isinstance(value, str)
            assert arg.min_chars <= len(value) <= arg.max_chars
            assert not arg.choices or value in arg.choices
        else:
            assert not isinstance(value, bool)
            assert isinstance(value, int if arg.kind == "integer" else int | float)


def test_bounds_are_inclusive():
    """A content of exactly the cap passes; one character more is refused."""
    at_cap = {"key": "k", "content": "x" * MAX_CONTENT_CHARS}
    assert check_arguments("memory_store", at_cap, allow_writes=True) == at_cap
    with pytest.raises(RefusedCallError, match=f"found {MAX_CONTENT_CHARS + 1}$"):
        check_arguments(
            "memory_store",
            {"key": "k", "content": "x" * (MAX_CONTENT_CHARS + 1)},
            allow_writes=True,
        )
    assert check_arguments(
        "memory_recall", {"query": "q", "limit": 100}, allow_writes=False
    )
    with pytest.raises(RefusedCallError, match="from 1 to 100, found 101"):
        check_arguments(
            "memory_recall", {"query": "q", "limit": 101}, allow_writes=False
        )
    with pytest.raises(RefusedCallError, match="from 1 to 100, found 1000") as huge:
        check_arguments(  # the JSON parser's largest: 4,300 digits
            "memory_recall", {"query": "q", "limit": 10**4000}, allow_writes=False
        )
    assert len(str(huge.value)) < 400  # a bounded quote, not the number


def test_only_a_content_and_a_query_may_be_empty():
    """An empty key, category or session names nothing: refused, not defaulted."""
    assert check_arguments(
        "memory_store", {"key": "k", "content": ""}, allow_writes=True
    ) == {"key": "k", "content": ""}
    assert check_arguments("memory_recall", {"query": ""}, allow_writes=False)
    with pytest.raises(
        RefusedCallError,
        match="'category' of memory_store to be a non-empty string, found an empty one",
    ):
        check_arguments(
            "memory_store",
            {"key": "k", "content": "v", "category": ""},
            allow_writes=True,
        )
    empty = [
        (tool.name, name)
        for tool in TOOLS.values()
        for name, arg in tool.args.items()
        if arg.kind == "string" and arg.min_chars == 0
    ]
    assert empty == [("memory_store", "content"), ("memory_recall", "query")]
    schema = TOOLS["memory_forget"].input_schema()["properties"]
    assert schema["key"]["minLength"] == 1  # type: ignore[index]


def test_a_lone_surrogate_is_refused_before_it_reaches_the_ledger():
    """JSON can carry \\ud800; no ledger can hold it: refused, naming where."""
    with pytest.raises(
        RefusedCallError, match="lone surrogate U\\+D800 at character 2"
    ):
        check_arguments(
            "memory_store", {"key": "k", "content": "ab\ud800"}, allow_writes=True
        )


def test_nulls_count_as_absent():
    """An optional argument sent as null is left out; a required one is missing."""
    assert check_arguments(
        "memory_recall", {"query": "q", "limit": None}, allow_writes=False
    ) == {"query": "q"}
    with pytest.raises(RefusedCallError, match="Expected argument 'query'"):
        check_arguments("memory_recall", {"query": None}, allow_writes=False)


def test_a_huge_tool_name_is_quoted_bounded():
    """The refusal quotes at most a bounded prefix of what it was sent."""
    with pytest.raises(RefusedCallError) as caught:
        check_arguments("t" * 1_000_000, {}, allow_writes=True)
    assert len(str(caught.value)) < 600
    assert "1,000,000 characters" in str(caught.value)


def test_resource_uris_round_trip_and_others_are_refused():
    """A session key with any character round-trips; foreign URIs are refused."""
    assert parse_uri(LIFECYCLE_URI) is None
    key = "a/b c?é"
    assert parse_uri(session_uri(key, "history")) == (key, "history")
    for bad in (
        "turnledger://sessions/s1/secrets",
        "turnledger://sessions//history",
        "file:///etc/passwd",
        "turnledger://sessions/" + "x" * 2_000 + "/history",
    ):
        with pytest.raises(RefusedCallError, match=r"^Expected"):
            parse_uri(bad)


@given(st.text())
def test_client_labels_are_safe_key_parts(name: str):
    """A client's label is non-empty ASCII of letters, digits, - _ . only."""
    label = client_label(name)
    assert 0 < len(label) <= MAX_CLIENT_CHARS
    assert all(c.isascii() and (c.isalnum() or c in "-_.") for c in label)


def test_without_the_mcp_extra_the_command_says_so(tmp_path: Path):
    """No ``mcp`` package: exit 2, one line naming the extra, no traceback."""
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "from turnledger.pipeline.cli import main\n"
        f"raise SystemExit(main(['--db', {str(tmp_path / 'l.db')!r}, 'mcp']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "turnledger: Expected the mcp extra (pip install 'turnledger[mcp]'), "
        "found no module 'mcp'\n"
    )


def test_the_resource_list_is_paged(sqlite_store: EventStore, tmp_path: Path):
    """150 sessions: a page of 100 (lifecycle first), then 50; bad cursors refused."""
    for i in range(150):
        store_key = f"s{i:03d}"
        sqlite_store.append(
            session_stream_id("ops", store_key),
            [SessionOpened(agent="ops", session_key=store_key)],
            expected_version=0,
        )
    config = Config(data_dir=str(tmp_path / "data"))
    memory = MemoryService(sqlite_store, config, ledger_url=str(tmp_path / "x.db"))
    try:
        services = ToolServices(
            store=sqlite_store, memory=memory, config=config, agent="ops"
        )
        first, cursor = list_resources(services)
        second, end = list_resources(services, cursor)
        for bad in ("-1", "abc", "9" * 13, "١٢"):
            with pytest.raises(RefusedCallError, match="Expected a cursor"):
                list_resources(services, bad)
    finally:
        memory.close()
    assert first[0].uri == LIFECYCLE_URI
    assert len(first) == 1 + 2 * PAGE_SESSIONS
    assert cursor == str(PAGE_SESSIONS)
    assert len(second) == 2 * 50
    assert end is None
    names = [r.name for r in first[1:] + second if r.name.endswith(" history")]
    assert names == [f"ops/s{i:03d} history" for i in range(150)]


SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123"  # noqa: S105 - a fake key, to be scrubbed


def _recorded_run(
    store: EventStore, config: Config, ledger_url: str, calls: list[tuple[str, Any]]
) -> list[Any]:
    """Run calls through the in-process SDK client; return the ledger's events."""
    memory = MemoryService(store, config, ledger_url=ledger_url)
    try:
        services = ToolServices(store=store, memory=memory, config=config, agent="ops")
        recorder = McpRecorder(
            store,
            agent="ops",
            max_result_chars=config.runtime.max_tool_result_chars,
            shredding=memory.shredding,
        )
        server = build_server(services, recorder, allow_writes=True)

        async def scenario() -> None:
            info = types.Implementation(name="unit", version="1")
            async with Client(server, mode="legacy", client_info=info) as client:
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    assert not result.is_error

        anyio.run(scenario)
    finally:
        memory.close()
    return [r.event for r in store.iter_all()]


def test_recorded_arguments_and_results_are_scrubbed_and_bounded(
    sqlite_store: EventStore, tmp_path: Path
):
    """A key in the arguments is redacted in the record (the memory keeps what was
    stored); an answer over the bound is recorded cut, with its sizes."""
    config = Config(
        data_dir=str(tmp_path / "data"),
        runtime=RuntimeConfig(max_tool_result_chars=300),
    )
    events = _recorded_run(
        sqlite_store,
        config,
        str(tmp_path / "x.db"),
        [
            ("memory_store", {"key": "cred", "content": f"token={SECRET}"}),
            *[
                ("memory_store", {"key": f"k{i}", "content": "x" * 100})
                for i in range(5)
            ],
            ("memory_list", {}),
        ],
    )
    (first, *_) = [e for e in events if isinstance(e, AssistantMessage)]
    assert SECRET not in first.tool_calls[0].arguments
    assert "REDACTED" in first.tool_calls[0].arguments
    stored = next(e for e in events if isinstance(e, MemoryStored))
    assert stored.content == f"token={SECRET}"
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    listed = results[-1]
    assert listed.truncated
    assert listed.original_chars > 300
    assert listed.kept_chars <= 300
    assert "characters truncated" in listed.output
    assert SECRET not in listed.output


def test_with_shredding_a_stored_content_is_recorded_as_its_size(
    sqlite_store: EventStore, tmp_path: Path
):
    """Forgetting a sealed entry leaves no copy of it in the MCP session."""
    config = Config(
        data_dir=str(tmp_path / "data"), memory=MemoryConfig(shredding=True)
    )
    events = _recorded_run(
        sqlite_store,
        config,
        str(tmp_path / "x.db"),
        [("memory_store", {"key": "diag", "content": "Ada has asthma"})],
    )
    (call,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert "asthma" not in call.tool_calls[0].arguments
    assert "[sealed in memory: 14 characters]" in call.tool_calls[0].arguments


def test_histories_reach_the_client_scrubbed(sqlite_store: EventStore, tmp_path: Path):
    """A credential a user typed is redacted in ledger_history and both resources."""
    stream = session_stream_id("ops", "chat")
    sqlite_store.append(
        stream,
        [
            SessionOpened(agent="ops", session_key="chat"),
            TurnStarted(turn_id="t1", origin="interactive", user_input=f"key {SECRET}"),
        ],
        expected_version=0,
    )
    config = Config(data_dir=str(tmp_path / "data"))
    memory = MemoryService(sqlite_store, config, ledger_url=str(tmp_path / "x.db"))
    try:
        services = ToolServices(
            store=sqlite_store, memory=memory, config=config, agent="ops"
        )
        recorder = McpRecorder(
            sqlite_store, agent="ops", max_result_chars=0, shredding=False
        )
        server = build_server(services, recorder, allow_writes=False)

        async def scenario() -> list[str]:
            async with Client(server, mode="legacy") as client:
                answer = await client.call_tool("ledger_history", {"session": "chat"})
                (text,) = answer.content
                assert isinstance(text, types.TextContent)
                texts = [text.text]
                for view in ("history", "transcript"):
                    read = await client.read_resource(session_uri("chat", view))
                    (content,) = read.contents
                    assert isinstance(content, types.TextResourceContents)
                    texts.append(content.text)
                return texts

        texts = anyio.run(scenario)
    finally:
        memory.close()
    for text in texts:
        assert SECRET not in text
        assert "REDACTED" in text
    assert json.loads(texts[1])["messages"][0]["role"] == "user"


def test_a_write_is_recorded_around_its_memory_event_and_a_read_after_it_ran(
    sqlite_store: EventStore, tmp_path: Path
):
    """Store: call, memory.stored, result. Recall: call and result together."""
    config = Config(data_dir=str(tmp_path / "data"))
    events = _recorded_run(
        sqlite_store,
        config,
        str(tmp_path / "x.db"),
        [
            ("memory_store", {"key": "k", "content": "v"}),
            ("memory_recall", {"query": "v"}),
        ],
    )
    assert [type(e).__name__ for e in events] == [
        "SessionOpened",
        "AssistantMessage",
        "MemoryStored",
        "ToolResultRecorded",
        "AssistantMessage",
        "ToolResultRecorded",
    ]
    with_positions = list(sqlite_store.iter_all())
    recall_call, recall_result = with_positions[-2:]
    assert recall_result.position == recall_call.position + 1
    assert recall_result.recorded_at == recall_call.recorded_at  # one append
