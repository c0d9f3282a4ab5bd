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

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import (
    Ledger,
    audit_json,
    queue_round_trip,
    run_client,
    said_in,
    weather_server,
)
from tests.pipeline.collect.openai_client_child import API_ENV
from tests.pipeline.collect.receiver import running
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    openai_text,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet, ToolResultRecorded
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect.coverage import NOT_RECORDED, WITHOUT_INPUTS
from turnledger.pipeline.collected import WITHOUT_OUTPUTS
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


AGENTS_CHILD = Path(__file__).with_name("openinference_agents_child.py")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_openai_agents_sdk_run_pairs_its_tool_run_with_the_call_found_later(
    ledger: Ledger, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenLLMetry's OpenAI Agents SDK instrumentation (0.62.4).

    Through the SDK's Chat Completions model, its chat spans hold the messages
    sent and neither the answer nor the usage, and the tool's span (without
    the call's id) comes before the call is known: its result is recorded
    under the span's id, then, when the next call's input brings the model's
    message, placed after it as that call's (one run of that tool and those
    arguments). The last answer is in no span: audit counts the calls without
    their answer. Through the Responses model, the answers and usage are
    sent, and the next input names the call by its item's id (``fc_...``),
    where the answer and the result name it by its ``call_id``: the session
    holds the call twice, one of them without a result."""
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        queue_round_trip(llm, api)
        run_client(
            AGENTS_CHILD, llm.openai_base_url, url, {API_ENV: api}, "openllmetry"
        )
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    asked = ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ())
    answered = ("tool", "", (), (("call_w1", "18C", False),))
    if api == "chat":
        assert said_in(ledger, session.key) == [
            ("user", "Weather in Paris?", (), ()),
            asked,
            answered,
        ]
        assert [(r.call_id, r.provenance) for r in results] == [
            (results[0].call_id, "executed"),  # under the span's id, then moved
            ("call_w1", "executed"),
        ]
        assert results[0].call_id.startswith("otlp-")
        audit = audit_json(ledger, session.key, capsys)
        assert (audit["violations"], audit["skipped"]) == ([], {WITHOUT_OUTPUTS: 2})
        return
    said = said_in(ledger, session.key)
    (item,) = said[3][2]  # the call named by its item's id
    assert item[0].startswith("fc_fake")
    assert said == [
        ("user", "Weather in Paris?", (), ()),
        asked,
        answered,
        ("assistant", "", ((item[0], "get_weather", {"city": "Paris"}),), ()),
        ("assistant", "18C in Paris.", (), ()),
    ]
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 1
    audit = json.loads(capsys.readouterr().out)
    assert [(v["kind"], v["id"]) for v in audit["violations"]] == [
        ("orphan_call", item[0])
    ]
