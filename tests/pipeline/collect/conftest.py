"""The collect tests' ledgers: each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    Reply,
    ToolUse,
    openai_text,
    openai_tool_calls,
    responses_text,
    responses_tool_calls,
)
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import list_sessions, load_history


class Ledger(NamedTuple):
    """An open ledger and the URL the command line reaches it by."""

    store: EventStore
    url: str


@pytest.fixture(name="ledger", params=["sqlite", "postgresql"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = str(tmp_path / "ledger.db")
    else:
        url = request.getfixturevalue("postgres_url")
    store = open_store(url)
    try:
        yield Ledger(store, url)
    finally:
        store.close()


def run_client(
    child: Path,
    llm_url: str,
    otlp_url: str,
    env: dict[str, str],
    *args: str,
    call: str = "call_w1",
) -> None:
    """Run an instrumented client child against the fake LLM server.

    The child gets no ``OTEL_``, ``TRACELOOP_`` or ``OPENINFERENCE_`` setting of this process,
    only ``env``; it prints ``{"call": id}`` of the tool call it made (``call``).
    """
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "TRACELOOP_", "OPENINFERENCE_"))
    }
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, str(child), otlp_url, llm_url, *args],
        env={**clean, **env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["call"] == call


def said_in(ledger: Ledger, key: str) -> list[tuple[object, ...]]:
    """A session's history, message by message: what each says.

    Its role, its text, its calls (id, name, arguments as a JSON value), its
    results (call id, content, whether an error).
    """
    (session,) = [s for s in list_sessions(ledger.store) if s.key == key]
    return [
        (
            m.role,
            m.text,
            tuple((c.id, c.name, json.loads(c.arguments)) for c in m.tool_calls),
            tuple((r.call_id, r.content, r.is_error) for r in m.tool_results),
        )
        for m in (
            e.message for e in load_history(ledger.store, session.stream_id).entries
        )
    ]


def audit_json(
    ledger: Ledger, key: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """``turnledger audit KEY --json`` of a ledger session, parsed."""
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", key, "--json"]) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


@contextmanager
def weather_server(*more: Reply) -> Iterator[FakeLLMServer]:
    """The fake OpenAI server, its replies queued for the clients' tool round
    trip (``openai_client_child.round_trip``: a call of ``call_w1``, then the
    answer), then ``more``."""
    with FakeLLMServer() as server:
        server.queue_openai(
            openai_tool_calls(
                ToolUse("call_w1", "get_weather", {"city": "Paris"}), usage=(50, 10)
            ),
            openai_text("18C in Paris.", usage=(70, 6)),
            *more,
        )
        yield server


def queue_round_trip(llm: FakeLLMServer, api: str) -> None:
    """An agent's tool round trip's answers (a call of ``call_w1``, then the
    answer) through the Responses API (``api`` ``responses``), else Chat
    Completions."""
    call = ToolUse("call_w1", "get_weather", {"city": "Paris"})
    if api == "responses":
        llm.queue_responses(
            responses_tool_calls(call, usage=(50, 10)),
            responses_text("18C in Paris.", usage=(70, 6)),
        )
    else:
        llm.queue_openai(
            openai_tool_calls(call, usage=(50, 10)),
            openai_text("18C in Paris.", usage=(70, 6)),
        )
