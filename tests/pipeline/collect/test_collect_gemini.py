"""The Google GenAI (Gemini) client under the contrib's instrumentation.

``opentelemetry-instrumentation-google-genai`` sends a ``generate_content``
span of each call: with the GenAI conventions' current form opted in and
content on the span, the messages (a function call's ``tool_call`` part, its
response a ``tool_call_response`` part holding the response object), and
the usage, the thoughts counted in the output tokens and named apart, the
cached prompt tokens too. With content capture off: usage only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, run_client, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    ToolUse,
    gemini_function_calls,
    gemini_text,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.pipeline.collected import NOT_RECORDED
from turnledger.pipeline.sessions import list_sessions

CHILD = Path(__file__).with_name("gemini_client_child.py")

ROUND_TRIP = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", '{"result":"18C"}', False),)),
    ("assistant", "18C in Paris.", (), ()),
]


@pytest.mark.parametrize("content", ["span_only", "no_content"])
def test_a_gemini_round_trip_records_its_conversation_and_usage(
    ledger: Ledger, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": content,
    }
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        llm.queue_gemini(
            # 50 prompt tokens (20 cached), 10 candidates' and 4 thoughts'.
            gemini_function_calls(
                ToolUse("call_w1", "get_weather", {"city": "Paris"}),
                usage=(50, 10, 20, 4),
            ),
            gemini_text("18C in Paris.", usage=(70, 6)),
        )
        run_client(CHILD, llm.url, url, env)
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [
        (
            c.model,
            c.provider,
            c.input_tokens,
            c.output_tokens,
            c.cached_input_tokens,
            c.reasoning_tokens,
        )
        for c in calls
    ] == [
        ("gemini-test", "gemini", 50, 14, 20, 4),
        ("gemini-test", "gemini", 70, 6, 0, 0),
    ]
    skipped = audit_json(ledger, session.key, capsys)["skipped"]
    if content == "no_content":
        assert said_in(ledger, session.key) == []
        assert skipped == {NOT_RECORDED: 2}
        return
    assert said_in(ledger, session.key) == ROUND_TRIP
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    assert skipped == {}


def test_openinferences_gemini_spans_record_the_models_messages_as_its_own(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenInference's Google GenAI instrumentation names the model's messages
    by Gemini's own role, ``model``: they are the assistant's (its call, then
    its answer), not the user's words. The Gemini API answered the call without
    an id (as it mostly does): the call and its result are recorded without
    one, once each, and paired."""
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        llm.queue_gemini(
            gemini_function_calls(
                ToolUse("", "get_weather", {"city": "Paris"}), usage=(50, 10)
            ),
            gemini_text("18C in Paris.", usage=(70, 6)),
        )
        run_client(CHILD, llm.url, url, {}, "openinference", call="")
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    assert said_in(ledger, session.key) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "", (("unknown", "get_weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("unknown", '{"result": "18C"}', False),)),
        ("assistant", "18C in Paris.", (), ()),
    ]
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    report = audit_json(ledger, session.key, capsys)
    assert (report["violations"], report["skipped"]) == ([], {})
