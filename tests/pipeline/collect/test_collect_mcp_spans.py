"""The MCP SDK's own spans: counted, never a tool run of no call.

The MCP Python SDK's server makes a span of each request it handles, a
``tools/call`` one an ``execute_tool`` span without the model's call id, the
arguments or the result. Recorded as tool runs, each was a run without its
result, and ``audit`` said a result was missing that the model's next call
held. Such spans (any with ``mcp.method.name``) are counted by their method.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from turnledger.pipeline.sessions import list_sessions

CHILD = Path(__file__).with_name("mcp_server_child.py")


def test_an_mcp_server_s_spans_are_counted_and_the_conversation_is_whole(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[3]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with running(ledger.store) as (url, app):
        done = subprocess.run(
            [sys.executable, str(CHILD), url],
            env={**clean, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    assert session.agent == "weather-agent"
    assert said_in(ledger, session.key) == [
        ("user", "What is the weather in Paris?", (), ()),
        ("assistant", "", (("call_1", "get_weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("call_1", "18C, sunny", False),)),
        ("assistant", "It is 18C and sunny in Paris.", (), ()),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"], audit["skipped"]) == (
        0,
        [],
        {},
    )
