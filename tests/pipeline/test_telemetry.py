"""GenAI spans from the ledger, checked attribute by attribute (in-memory exporter)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.pipeline.test_engine import EchoTool, FakeProvider, answer, call
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.config.sections import TelemetryConfig
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.telemetry import export_run

SECRET_INPUT = "my password is hunter2, please echo it"  # noqa: S105 - a planted secret


@pytest.fixture(name="exported")
def _exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def run_turn_with_a_tool(tmp_path):
    cfg = parse_config(
        f'data_dir = "{tmp_path / "d"}"\n'
        "[pricing.fake-1]\ninput_per_million = 1000\noutput_per_million = 2000\n"
    )
    path = str(tmp_path / "l.db")
    store = open_store(path)
    with_call = ChatResponse(
        text="", tool_calls=(call(1, text="hi"),), usage=answer().usage
    )
    provider = FakeProvider([with_call, answer("the answer text")])
    runtime = bootstrap(
        cfg, provider=provider, store=store, ledger_url=path, tools={"echo": EchoTool()}
    )
    async with runtime:
        outcome = await runtime.engine.run_turn("ops", "s1", SECRET_INPUT)
    assert outcome.completed
    return store


async def test_spans_follow_the_genai_conventions(tmp_path, exported):
    provider, exporter = exported
    store = await run_turn_with_a_tool(tmp_path)
    count = export_run(store, TelemetryConfig(console=True), after=0, provider=provider)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert count == len(exporter.get_finished_spans()) == 4
    assert set(spans) == {"invoke_agent ops", "chat fake-1", "execute_tool echo"}
    agent = spans["invoke_agent ops"]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "ops"
    assert agent.attributes["gen_ai.conversation.id"] == "s1"
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat fake-1"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.kind == SpanKind.CLIENT
        assert chat.parent.span_id == agent.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "fake"
        assert chat.attributes["gen_ai.request.model"] == "fake-1"
        assert chat.attributes["gen_ai.response.model"] == "fake-1"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 100
        assert chat.attributes["gen_ai.usage.output_tokens"] == 10
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 40
        assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
        assert chat.attributes["gen_ai.usage.reasoning.output_tokens"] == 0
        assert chat.attributes["turnledger.ledger.position"] > 0
    tool = spans["execute_tool echo"]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.parent.span_id == agent.context.span_id
    # positions point at the ledger events the spans came from
    positions = {r.position: type(r.event).__name__ for r in store.read_all(limit=100)}
    assert positions[chats[0].attributes["turnledger.ledger.position"]] == "ModelCalled"
    assert positions[tool.attributes["turnledger.ledger.position"]] == (
        "ToolResultRecorded"
    )
    # content is off by default: no user input, answer or tool output anywhere
    dumped = json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()])
    assert "hunter2" not in dumped
    assert "password" not in dumped
    assert "the answer text" not in dumped
    store.close()


async def test_content_is_opt_in_and_scrubbed(tmp_path, exported):
    provider, exporter = exported
    store = await run_turn_with_a_tool(tmp_path)
    export_run(
        store,
        TelemetryConfig(console=True, capture_content=True),
        after=0,
        provider=provider,
    )
    spans = exporter.get_finished_spans()
    agent = next(s for s in spans if s.name == "invoke_agent ops")
    (message,) = json.loads(agent.attributes["gen_ai.input.messages"])
    assert message["role"] == "user"
    assert "please echo it" in message["parts"][0]["content"]
    outputs = [s.attributes.get("gen_ai.output.messages") for s in spans]
    assert any(o and "the answer text" in o for o in outputs)
    store.close()


def test_telemetry_off_exports_nothing(tmp_path):
    store = open_store(str(tmp_path / "l.db"))
    assert export_run(store, TelemetryConfig(), after=0) == 0
    store.close()


async def test_the_runtime_exports_on_close_when_configured(tmp_path, capfd):
    """[telemetry] console = true: closing a runtime prints its spans."""
    cfg = parse_config(
        f'ledger = "{tmp_path / "l.db"}"\ndata_dir = "{tmp_path / "d"}"\n'
        "[telemetry]\nconsole = true\n"
    )
    async with bootstrap(cfg, provider=FakeProvider([answer("ok")])) as runtime:
        assert (await runtime.engine.run_turn("ops", "s9", "hello")).completed
    out = capfd.readouterr().out  # the console exporter writes to fd 1
    assert '"name": "chat fake-1"' in out
    assert '"gen_ai.operation.name": "invoke_agent"' in out
    assert "hello" not in out.replace('"hello', "")  # no content by default


def test_failed_calls_and_turns_carry_error_type(tmp_path, exported):
    from datetime import UTC, datetime

    from turnledger.ledger import (
        ModelCalled,
        SessionOpened,
        TurnFailed,
        TurnStarted,
        session_stream_id,
    )

    provider, exporter = exported
    store = open_store(str(tmp_path / "f.db"))
    store.append(
        session_stream_id("ops", "s1"),
        [
            SessionOpened(agent="ops", session_key="s1"),
            TurnStarted(turn_id="t1", origin="interactive", user_input="x"),
            ModelCalled(
                turn_id="t1",
                provider="p",
                model="m",
                success=False,
                error="rate_limited: slow down",
            ),
            TurnFailed(turn_id="t1", kind="provider_error"),
        ],
        expected_version=0,
    )
    export_run(store, TelemetryConfig(console=True), after=0, provider=provider)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["chat m"].attributes["error.type"] == "rate_limited"
    assert spans["chat m"].status.status_code == StatusCode.ERROR
    assert spans["invoke_agent ops"].attributes["error.type"] == "provider_error"
    del datetime, UTC
    store.close()
