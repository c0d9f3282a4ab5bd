"""Planted secrets x every surface: 0 leaks (issue #17, item 3).

Every shape of ``tests/secret_corpus.py`` is planted in every text field a ledger
can carry; the observer view (folded, and persisted by the real projection runner
in a real SQLite view database), its log lines, its OpenTelemetry spans (the real
SDK with an in-memory exporter), the CLI's log processor, the cost records and the
error texts of the engine and the providers must not hold it.
"""

from __future__ import annotations

import msgspec
import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from structlog.testing import capture_logs

from tests.secret_corpus import CORPUS
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    MemoryForgotten,
    MemoryRecalled,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import scrub_log_values
from turnledger.pipeline.providers._http import make_redactor
from turnledger.policies.messages import ToolCall, ToolResult, make_message
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.policies.structured_scrubbing import scrub_json_text, scrub_message
from turnledger.projections.costs import COST_RECORDS, CostBucket
from turnledger.projections.observer import ObserverState, ObserverView
from turnledger.projections.observer.export import emit_observer_items, export_spans
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

SHAPES = [pytest.param(text, secret, id=name) for name, text, secret in CORPUS]


def test_the_corpus_has_at_least_30_shapes():
    """The issue asks for >= 30 shapes; each planted text holds its secret once."""
    assert len({name for name, _, _ in CORPUS}) >= 30
    assert all(text.count(secret) == 1 for _, text, secret in CORPUS)


def planted_events(text: str) -> list[Event]:
    """One turn with ``text`` in every field that can carry text."""
    as_json = msgspec.json.encode({"query": text, "note": "x"}).decode()
    return [
        SessionOpened(agent="alice", session_key="k", channel="cli"),
        TurnStarted(turn_id="t", origin="interactive", user_input=text),
        MemoryRecalled(turn_id="t", backend="sqlite", query_summary=text),
        ModelCalled(
            turn_id="t",
            provider="openai",
            model="gpt-x",
            success=False,
            error=text,
            input_tokens=3,
        ),
        AssistantMessage(
            turn_id="t",
            text=text,
            tool_calls=(
                ToolCallRecord(id="c1", name="http", arguments=as_json),
                ToolCallRecord(id="c2", name="shell", arguments=text),
            ),
        ),
        ToolResultRecorded(turn_id="t", call_id="c1", tool="http", output=text),
        ToolResultRecorded(
            turn_id="t", call_id="c2", tool="shell", success=False, error=text
        ),
        HistoryTrimmed(
            turn_id="t",
            dropped_messages=1,
            dropped_turns=1,
            kept_turns=1,
            tokens_before=2,
            tokens_after=1,
            reason=text,
        ),
        MemoryForgotten(agent="alice", key="k", reason=text),
        TurnFailed(turn_id="t", kind="provider_error", error=text),
        TurnCompleted(turn_id="t"),
    ]


@pytest.fixture(scope="module")
def span_exporter() -> InMemorySpanExporter:
    """The real OpenTelemetry SDK, exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_no_surface_of_a_persisted_ledger_leaks(tmp_path, span_exporter, text, secret):
    """Observer view and cost records in a real view DB, logs, spans: 0 leaks."""
    store = open_store(str(tmp_path / "ledger.db"))
    views = SQLiteViewStore(str(tmp_path / "views.db"))
    observer = ObserverView()
    stream = session_stream_id("alice", "k")
    store.append(stream, planted_events(text), expected_version=0)
    ProjectionRunner(store, views, [observer, COST_RECORDS]).catch_up(page_size=4)
    states = views.all(observer.name, ObserverState)
    costs = views.all(COST_RECORDS.name, CostBucket)
    views.close()
    store.close()
    assert states, "the observer view folded nothing"
    assert secret not in msgspec.json.encode(states).decode()
    assert secret not in msgspec.json.encode(costs).decode()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("views.db*"))
    assert secret.encode() not in raw
    with capture_logs() as logs:
        for state in states.values():
            emit_observer_items(structlog.get_logger(), state.items)
    assert logs
    assert secret not in repr(logs)
    span_exporter.clear()
    started = sum(export_spans(state.items) for state in states.values())
    spans = span_exporter.get_finished_spans()
    assert len(spans) == started > 0
    assert secret not in repr([(s.name, dict(s.attributes or {})) for s in spans])


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_no_log_line_or_error_text_leaks(text, secret):
    """The CLI's log processor, engine error summaries, provider errors: 0 leaks."""
    event = {"event": "turn.failed", "error": text, "query": f"q {text}", "n": 1}
    assert secret not in repr(scrub_log_values(None, "warning", event))
    assert secret not in summarize(scrub_text(f"provider_error: {text}"))
    assert secret not in make_redactor([None, "x"])(f"HTTP 401: {text}")
    assert secret not in scrub_json_text(msgspec.json.encode({"a": text}).decode())
    message = make_message(
        "assistant",
        text,
        tool_calls=(ToolCall(id="c", name="n", arguments=text),),
        tool_results=(ToolResult(call_id="c", content=text),),
    )
    assert secret not in repr(scrub_message(message))


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_scrubbing_the_corpus_is_idempotent(text, secret):
    """A second pass changes nothing, and never makes ``[RED*[REDACTED]``."""
    once = scrub_text(text)
    assert secret not in once
    assert scrub_text(once) == once
    assert "[RED*" not in scrub_text(scrub_json_text(once))


def test_redacted_json_rescrubbed_as_text_stays_clean():
    """The ugly ``[RED*[REDACTED]`` of a JSON value scrubbed twice is gone."""
    json_text = scrub_json_text('{"password": "hunter2hunter2", "n": 1}')
    assert json_text == '{"password":"[REDACTED]","n":1}'
    assert scrub_text(json_text) == json_text
    assert scrub_text('{"private_key": "[REDACTED PRIVATE KEY] tail"}') == (
        '{"private_key": "[REDACTED PRIVATE KEY]"}'
    )
