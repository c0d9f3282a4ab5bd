"""``turnledger mcp --transport http``: streamable HTTP with the SDK's own client.

The real command serves on a free port; the SDK's streamable HTTP client lists
and calls tools with the bearer token; a request without it is answered 401;
a non-loopback bind without a token is refused before anything starts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.pipeline.mcp.conftest import Ledger, env
from turnledger.ledger.events import AssistantMessage, SessionOpened
from turnledger.ledger.store import open_store

TOKEN = "s3cret-token-for-tests"  # noqa: S105 - a test token


@contextmanager
def serving(ledger: Ledger, *extra: str) -> Iterator[dict[str, Any]]:
    """``turnledger mcp --transport http --port 0 --json``: its printed address."""
    command = ledger.cli(
        "mcp", "--transport", "http", "--port", "0", "--agent", "ops", "--json", *extra
    )
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ledger.folder,
        env=env(),
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            yield json.loads(line)
        finally:
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture(name="served")
def _served(ledger: Ledger) -> Iterator[tuple[Ledger, str]]:
    """``turnledger mcp --transport http`` on a free port, with a token."""
    with serving(ledger, "--allow-writes", "--token", TOKEN) as address:
        assert address["token_required"] is True
        yield ledger, address["url"]


def test_the_sdk_client_calls_tools_over_http_with_the_token(
    served: tuple[Ledger, str],
):
    """List tools, store, recall, read a resource; the calls are recorded."""
    ledger, url = served

    async def scenario() -> dict[str, Any]:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with (
            client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(
                read,
                write,
                client_info=types.Implementation(name="http-test", version="1"),
            ) as session,
        ):
            await session.initialize()
            seen: dict[str, Any] = {}
            seen["tools"] = {t.name for t in (await session.list_tools()).tools}
            stored = await session.call_tool(
                "memory_store", {"key": "lang", "content": "prefers Rust"}
            )
            seen["stored"] = stored.is_error
            recalled = await session.call_tool(
                "memory_recall", {"query": "Rust", "format": "block"}
            )
            (block,) = recalled.content
            assert isinstance(block, types.TextContent)
            seen["block"] = json.loads(block.text)["block"]
            with pytest.raises(MCPError) as err:
                await session.call_tool("memory_store", {"key": "k", "content": 5})
            seen["refused"] = err.value.code
            (content,) = (
                await session.read_resource("turnledger://lifecycle")
            ).contents
            assert isinstance(content, types.TextResourceContents)
            seen["lifecycle"] = content.text
            rest = {
                "memory_list": {},
                "memory_forget": {"key": "lang"},
                "ledger_sessions": {},
                "ledger_audit": {},
                "ledger_costs": {},
                "ledger_history": {"session": "no-such-session"},
            }
            seen["rest"] = {}
            for name, arguments in rest.items():
                result = await session.call_tool(name, arguments)
                (text,) = result.content
                assert isinstance(text, types.TextContent)
                seen["rest"][name] = (result.is_error, text.text)
            return seen

    seen = anyio.run(scenario)
    assert "memory_store" in seen["tools"]
    assert seen["stored"] is False
    assert "- lang: prefers Rust" in seen["block"]
    assert seen["refused"] == types.INVALID_PARAMS
    assert "Surface" in seen["lifecycle"]
    with open_store(ledger.url) as store:
        events = [r.event for r in store.iter_all()]
    (opened,) = [e for e in events if isinstance(e, SessionOpened)]
    assert opened.session_key.startswith("mcp-http-test-")
    assert opened.channel == "mcp"
    names = [
        c.name for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls
    ]
    assert names == [
        "memory_store",
        "memory_recall",
        "read_resource",
        "memory_list",
        "memory_forget",
        "ledger_sessions",
        "ledger_audit",
        "ledger_costs",
        "ledger_history",
    ]
    rest = seen["rest"]
    assert json.loads(rest["memory_list"][1])["total"] == 1
    assert json.loads(rest["memory_forget"][1]) == {"forgotten": True, "key": "lang"}
    (listed,) = json.loads(rest["ledger_sessions"][1])
    assert listed["session"] == opened.session_key
    assert json.loads(rest["ledger_audit"][1])["tool_calls"] == 6  # not itself
    assert json.loads(rest["ledger_costs"][1])["rows"] == []
    assert rest["ledger_history"][0] is True
    assert "found none named 'no-such-session'" in rest["ledger_history"][1]
    assert not any(
        is_error for name, (is_error, _) in rest.items() if name != "ledger_history"
    )


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}],
    ids=["none", "wrong", "not-bearer"],
)
def test_a_request_without_the_token_is_answered_401(
    served: tuple[Ledger, str], headers: dict[str, str]
):
    """No token, a wrong one or one not sent as Bearer: 401, nothing recorded."""
    ledger, url = served
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_store", "arguments": {"key": "k", "content": "v"}},
    }
    answer = httpx.post(
        url,
        json=body,
        headers={**headers, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert "Expected the access token" in answer.json()["error"]
    with open_store(ledger.url) as store:
        assert store.count() == 0


def test_a_non_loopback_bind_needs_a_token(ledger: Ledger):
    """``--host 0.0.0.0`` without a token: exit 2, one line, nothing served."""
    done = subprocess.run(
        ledger.cli("mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "0"),  # noqa: S104
        capture_output=True,
        text=True,
        check=False,
        cwd=ledger.folder,
        env=env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "Expected --token (or $TURNLEDGER_MCP_TOKEN)" in done.stderr
    assert "'0.0.0.0'" in done.stderr


def test_a_bad_token_is_refused(ledger: Ledger):
    """A token with a space cannot travel in a header: exit 2, one line."""
    done = subprocess.run(
        ledger.cli("mcp", "--transport", "http", "--token", "has a space"),
        capture_output=True,
        text=True,
        check=False,
        cwd=ledger.folder,
        env=env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "Expected a token of 8 to 512 printable ASCII characters" in done.stderr


def test_a_client_of_the_current_protocol_is_named_from_its_request(ledger: Ledger):
    """The SDK's default client (2026-07-28, no handshake) on a loopback server
    without a token: its calls are recorded under its name, writes refused."""
    with serving(ledger) as address:
        assert address["token_required"] is False

        async def scenario() -> tuple[str, Any, int]:
            info = types.Implementation(name="modern-client", version="2")
            async with Client(address["url"], client_info=info) as client:
                recalled = await client.call_tool("memory_recall", {"query": "x"})
                (text,) = recalled.content
                assert isinstance(text, types.TextContent)
                with pytest.raises(MCPError) as err:
                    await client.call_tool("memory_store", {"key": "k", "content": "v"})
                return client.protocol_version, json.loads(text.text), err.value.code

        version, answer, refused = anyio.run(scenario)
    assert version == "2026-07-28"
    assert answer == {"rows": []}
    assert refused == types.INVALID_PARAMS
    with open_store(ledger.url) as store:
        events = [r.event for r in store.iter_all()]
    assert isinstance(events[0], SessionOpened)
    assert events[0].session_key.startswith("mcp-modern-client-")
    assert [type(e).__name__ for e in events] == [
        "SessionOpened",
        "AssistantMessage",
        "ToolResultRecorded",
    ]
