"""An OpenAI client instrumented by opentelemetry-instrumentation-openai-v2.

The real ``openai`` client talks to the local fake OpenAI server; the
contrib instrumentation makes the spans and the SDK's OTLP exporter sends
them to the receiver. With content capture on (the latest GenAI conventions,
content on spans) the session holds the conversation; with it off it holds
the model calls' usage alone, and audit says the conversation is not there.
With capture ``event_only`` (``span_and_event``), the content comes as a log
event in each call's span (``gen_ai.client.inference.operation.details``; on
the span too), exported over ``/v1/logs`` before or after the spans: the
session holds the same conversation, once, either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import (
    Ledger,
    audit_json,
    run_client,
    weather_server,
)
from tests.pipeline.collect.receiver import running
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    openai_text,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect.coverage import NOT_RECORDED
from turnledger.pipeline.collected import MESSAGE_NOT_RECORDED
from turnledger.pipeline.sessions import list_sessions, load_history

CHILD = Path(__file__).with_name("openai_client_child.py")
CONTENT_ON = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
}
CONTENT_OFF = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}
LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
EVENTS_WITHOUT_CONTENT = {
    **CONTENT_OFF,
    **LATEST,
    "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": "true",
}


@pytest.fixture(name="llm")
def _llm() -> Iterator[FakeLLMServer]:
    with weather_server() as server:
        yield server


def _run_client(
    url: str, llm: FakeLLMServer, env: dict[str, str], logs: str = ""
) -> None:
    run_client(CHILD, llm.openai_base_url, url, env, *([logs] * bool(logs)))


def test_content_capture_on_records_the_conversation(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, app):
        _run_client(url, llm, CONTENT_ON)
        assert app.refused == 0
    _assert_the_conversation(ledger, capsys)


@pytest.mark.parametrize("capture", ["span_only", "event_only"])
def test_a_question_holding_an_image_is_said_missing(
    ledger: Ledger, capture: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The instrumentation sends a user message whose content is a list (a text
    and an image) without any part: the turn is recorded, its words are not
    there, and audit says so; nothing is invented for them."""
    env = {**LATEST, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture}
    logs = "spans-first" if capture == "event_only" else "-"
    with (
        weather_server(openai_text("A cat.")) as llm,
        running(ledger.store) as (url, _app),
    ):
        run_client(CHILD, llm.openai_base_url, url, env, logs, "picture")
    (session,) = list_sessions(ledger.store)
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [(m.role, m.text) for m in history][-3:] == [
        ("assistant", "18C in Paris."),
        ("user", ""),
        ("assistant", "A cat."),
    ]
    assert audit_json(ledger, session.key, capsys)["skipped"] == {
        MESSAGE_NOT_RECORDED: 1
    }


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
@pytest.mark.parametrize("capture", ["event_only", "span_and_event"])
def test_content_in_log_events_records_the_conversation(
    ledger: Ledger,
    llm: FakeLLMServer,
    capsys: pytest.CaptureFixture[str],
    order: str,
    capture: str,
) -> None:
    env = {**LATEST, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture}
    with running(ledger.store) as (url, app):
        _run_client(url, llm, env, logs=order)
        assert app.refused == 0
        assert app.log_records > 0  # the messages did come as log records
    # Once, whether the content came in the log events alone or on the spans too.
    _assert_the_conversation(ledger, capsys)


def test_content_capture_off_with_log_events_records_usage_alone(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, app):
        _run_client(url, llm, EVENTS_WITHOUT_CONTENT, logs="logs-first")
        assert app.log_records > 0  # events without their content
    (session,) = list_sessions(ledger.store)
    assert load_history(ledger.store, session.stream_id).entries == ()
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {NOT_RECORDED: 2}


def _assert_the_conversation(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    (session,) = list_sessions(ledger.store)
    assert session.agent == "weather-app"
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("gpt-4o", 50, 10),
        ("gpt-4o", 70, 6),
    ]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[0].text == "Weather in Paris?"
    assert history[1].tool_calls[0].id == "call_w1"
    assert history[2].tool_results[0].content == "18C"
    assert history[3].text == "18C in Paris."
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert (audit["tool_calls"], audit["tool_results"], audit["skipped"]) == (1, 1, {})
    assert (
        main(["--db", ledger.url, "export", session.key, "--format", "anthropic"]) == 0
    )
    assert "18C in Paris." in capsys.readouterr().out


def test_content_capture_off_records_usage_and_audit_says_so(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, _app):
        _run_client(url, llm, CONTENT_OFF)
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(50, 10), (70, 6)]
    assert load_history(ledger.store, session.stream_id).entries == ()
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert audit["skipped"] == {NOT_RECORDED: 2}
