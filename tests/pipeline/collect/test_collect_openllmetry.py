"""An OpenAI client instrumented by OpenLLMetry (Traceloop's instrumentation).

The real ``openai`` client talks to the local fake OpenAI server; OpenLLMetry's
``opentelemetry-instrumentation-openai`` makes the spans (the GenAI
conventions' current form) and the SDK's OTLP exporter sends them to the
receiver. A tool round trip is recorded as the conversation; the question that
follows holds an image, and OpenLLMetry (0.62) then sends the call's answer
without its input messages: the answer is recorded, and audit says the
question is not in the ledger. With ``TRACELOOP_TRACE_CONTENT=false`` the
calls are recorded with their usage alone, and audit says so.
"""

from __future__ import annotations

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
from turnledger.pipeline.collect.coverage import NOT_RECORDED, WITHOUT_INPUTS
from turnledger.pipeline.sessions import list_sessions, load_history

CHILD = Path(__file__).with_name("openllmetry_client_child.py")


@pytest.fixture(name="llm")
def _llm() -> Iterator[FakeLLMServer]:
    with weather_server(openai_text("A cat.", usage=(90, 3))) as server:
        yield server


def test_the_conversation_and_a_call_sent_without_its_question(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, _app):
        run_client(CHILD, llm.openai_base_url, url, {})
    (session,) = list_sessions(ledger.store)
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [(m.role, m.text) for m in history] == [
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "18C in Paris."),
        ("assistant", "A cat."),  # its question was not sent: audit says so
    ]
    assert history[1].tool_calls[0].arguments == '{"city":"Paris"}'
    assert history[2].tool_results[0].content == "18C"
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [
        (50, 10),
        (70, 6),
        (90, 3),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert audit["skipped"] == {WITHOUT_INPUTS: 1}
    assert (audit["tool_calls"], audit["tool_results"]) == (1, 1)


def test_content_off_records_usage_and_audit_says_so(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, _app):
        run_client(
            CHILD, llm.openai_base_url, url, {"TRACELOOP_TRACE_CONTENT": "false"}
        )
    (session,) = list_sessions(ledger.store)
    assert load_history(ledger.store, session.stream_id).entries == ()
    assert audit_json(ledger, session.key, capsys)["skipped"] == {NOT_RECORDED: 3}
