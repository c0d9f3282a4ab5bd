"""What an MCP client sees is the configured agent's and its peers', nothing else.

The ledger holds sessions of ``ops`` (with a model call), of its peer
``research`` and of an unrelated ``other``; research and other each stored a
memory. Served as ``ops``, the client recalls ops's peer's memory but not
other's, lists and reads ops's and research's sessions only, and the costs are
ops's model call.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.pipeline.mcp.conftest import Ledger, env
from tests.pipeline.mcp.test_mcp_stdio import call, connect, text_of
from turnledger.ledger.events import ModelCalled, SessionOpened, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store

PEERS = """
[agents.ops]
read_memory_from = ["research"]

[agents.research]
"""


def _seed(ledger: Ledger) -> None:
    with ledger.config.open("a", encoding="utf-8") as f:
        f.write(PEERS)
    with open_store(ledger.url) as store:
        for agent in ("ops", "research", "other"):
            events: list[Any] = [
                SessionOpened(agent=agent, session_key=f"{agent}-chat"),
                TurnStarted(turn_id="t1", origin="interactive", user_input="hi"),
                ModelCalled(
                    turn_id="t1",
                    provider="scripted",
                    model=f"model-of-{agent}",
                    input_tokens=10,
                    output_tokens=5,
                    cost_usd=0.25,
                ),
            ]
            store.append(
                session_stream_id(agent, f"{agent}-chat"), events, expected_version=0
            )
    for agent in ("research", "other"):
        done = subprocess.run(
            ledger.cli(
                "memory", "store", "--agent", agent, f"{agent}-fact", "Ada likes tea"
            ),
            capture_output=True,
            text=True,
            check=False,
            cwd=ledger.folder,
            env=env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr


def test_the_tools_and_resources_see_the_agent_and_its_peers_only(ledger: Ledger):
    """Recall, sessions, history, audit, costs and resources are scoped to ops."""
    _seed(ledger)

    async def scenario() -> dict[str, Any]:
        async with connect(ledger) as session:
            seen: dict[str, Any] = {}
            seen["rows"] = await call(session, "memory_recall", query="tea")
            seen["sessions"] = await call(session, "ledger_sessions")
            other = await session.call_tool("ledger_history", {"session": "other-chat"})
            seen["other"] = (other.is_error, text_of(other))
            seen["peer"] = await call(
                session, "ledger_history", session="research-chat"
            )
            seen["audit"] = await call(session, "ledger_audit")
            seen["costs"] = await call(session, "ledger_costs", by="model")
            resources = await session.list_resources()
            seen["uris"] = [str(r.uri) for r in resources.resources]
            with pytest.raises(MCPError) as err:
                await session.read_resource(
                    "turnledger://sessions/other-chat/transcript"
                )
            seen["other_resource"] = (err.value.code, err.value.message)
            (content,) = (
                await session.read_resource(
                    "turnledger://sessions/research-chat/history"
                )
            ).contents
            assert isinstance(content, types.TextResourceContents)
            seen["peer_resource"] = json.loads(content.text)
            return seen

    seen = anyio.run(scenario)
    assert [(r["agent"], r["key"]) for r in seen["rows"]["rows"]] == [
        ("research", "research-fact")
    ]
    listed = [(s["agent"], s["session"]) for s in seen["sessions"]]
    assert listed[:2] == [("ops", "ops-chat"), ("research", "research-chat")]
    assert [agent for agent, _ in listed[2:]] == ["ops"]  # the MCP session itself
    assert seen["other"][0] is True
    assert "found none named 'other-chat'" in seen["other"][1]
    assert seen["peer"]["agent"] == "research"
    assert seen["peer"]["messages"][0]["text"] == "hi"
    assert seen["audit"]["conversations"] == 3  # ops-chat, research-chat, this one
    assert seen["costs"]["rows"][0]["group"] == "model-of-ops"
    assert len(seen["costs"]["rows"]) == 1
    assert seen["costs"]["total"]["total_tokens"] == 15
    assert seen["costs"]["total"]["cost_usd"] == 0.25
    assert not [u for u in seen["uris"] if "other" in u]
    assert len(seen["uris"]) == 1 + 2 * 3  # lifecycle, then 3 sessions x 2 views
    assert seen["other_resource"][0] == -32002
    assert seen["peer_resource"]["session"] == "research-chat"
