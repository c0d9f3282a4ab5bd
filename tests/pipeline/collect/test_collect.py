"""turnledger collect: the real OTLP exporter and OTLP/JSON posts into the receiver.

Spans are built with the OpenTelemetry SDK and sent by its OTLP/HTTP exporter
(protobuf) or posted as OTLP/JSON over real HTTP; the ledger (SQLite and
PostgreSQL) is then read back, and the recorded sessions go through audit,
replay, export and serve's JSON API.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from starlette.testclient import TestClient

from tests.pipeline.collect.conftest import Ledger, audit_json
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import (
    ANSWER,
    CALL,
    RESULT,
    USER,
    chat_attributes,
    exporter_provider,
    json_request,
    json_span,
    text,
)
from turnledger.ledger.events import (
    AssistantMessage,
    ItemRecorded,
    ModelCalled,
    SessionOpened,
    SystemPromptSet,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.collect.coverage import (
    NOT_RECORDED,
    PART_NOT_RECORDED,
    WITHOUT_INPUTS,
    WITHOUT_OUTPUTS,
)
from turnledger.pipeline.collected import MESSAGE_NOT_RECORDED
from turnledger.pipeline.config import Config
from turnledger.pipeline.sessions import list_sessions, load_history
from turnledger.pipeline.web.app import create_app
from turnledger.pipeline.web.state import WebSettings
from turnledger.policies.messages import Message
from turnledger.policies.pricing import ModelPrice

PRICES = {"gpt-4o": ModelPrice(input_per_million=2.5, output_per_million=10.0)}
TRACE = "5b8efff798038103d269b633813fc60c"


def _types(ledger: Ledger) -> list[type]:
    return [type(r.event) for r in ledger.store.iter_all()]


def _said(message: Message) -> str:
    return message.text or "".join(r.content for r in message.tool_results)


def _post_json(url: str, document: object) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/traces",
        content=json.dumps(document),
        headers={"content-type": "application/json"},
    )


def _agent_run(provider: TracerProvider) -> str:
    """An agent run: a tool round trip under one invoke_agent span."""
    tracer = provider.get_tracer("tests")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent) as run:
        first = chat_attributes(
            system="You answer weather questions.",
            inputs=[USER],
            outputs=[CALL],
        )
        with tracer.start_as_current_span("chat gpt-4o", attributes=first):
            pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.result": "18C, sunny",
        }
        with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
            pass
        second = chat_attributes(
            system="You answer weather questions.",
            inputs=[USER, CALL, RESULT],
            outputs=[ANSWER],
            usage=(150, 12),
        )
        with tracer.start_as_current_span("chat gpt-4o", attributes=second):
            pass
        return format(run.get_span_context().trace_id, "032x")


def test_sdk_exporter_records_the_conversation(ledger: Ledger) -> None:
    with running(ledger.store, pricing=PRICES) as (url, app):
        with exporter_provider(url) as provider:
            trace = _agent_run(provider)
            assert provider.force_flush()
        assert app.spans == 4
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    assert (session.agent, session.key, session.channel) == (
        "support-bot",
        trace,
        "otlp",
    )
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    shapes = [type(e) for e in events if not isinstance(e, ItemRecorded)]
    assert shapes == [
        SessionOpened,
        SystemPromptSet,
        TurnStarted,
        ModelCalled,
        AssistantMessage,
        ToolResultRecorded,
        ModelCalled,
        AssistantMessage,
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("gpt-4o", 100, 20),
        ("gpt-4o", 150, 12),
    ]
    assert calls[0].cost_usd == pytest.approx((100 * 2.5 + 20 * 10.0) / 1e6)
    assert calls[0].provider == "openai"
    system = next(e for e in events if isinstance(e, SystemPromptSet))
    assert system.text == "You answer weather questions."
    messages = [
        e.message for e in load_history(ledger.store, session.stream_id).entries
    ]
    assert [(m.role, _said(m)) for m in messages] == [
        ("user", "What is the weather in Paris?"),
        ("assistant", ""),
        ("tool", "18C, sunny"),
        ("assistant", "It is 18C and sunny in Paris."),
    ]
    assert messages[1].tool_calls[0].name == "get_weather"
    assert messages[1].tool_calls[0].arguments == '{"city":"Paris"}'
    (listed,) = [e for e in events if isinstance(e, ItemRecorded)]  # one per batch
    assert (listed.framework, listed.kind) == ("otlp", "spans")
    fields = json.loads(listed.fields)
    assert [op for _trace, _span, op in fields["spans"]] == [
        "chat",
        "execute_tool",
        "chat",
    ]  # invoke_agent: counted, not listed
    assert fields["without_content"] == []


def test_recorded_sessions_audit_replay_export_and_serve(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, _app), exporter_provider(url) as provider:
        trace = _agent_run(provider)
        assert provider.force_flush()
    capsys.readouterr()
    db = ["--db", ledger.url]
    assert main([*db, "audit", trace, "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert (audit["tool_calls"], audit["tool_results"], audit["skipped"]) == (1, 1, {})
    assert main([*db, "replay", trace, "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert (replayed["ok"], replayed["messages"], replayed["system_prompts"]) == (
        True,
        4,
        1,
    )
    assert main([*db, "export", trace, "--format", "openai-chat"]) == 0
    exported = capsys.readouterr().out
    assert "You answer weather questions." in exported
    assert "get_weather" in exported
    (session,) = list_sessions(ledger.store)
    web = WebSettings(store=ledger.store, config=Config(), ledger_url=ledger.url)
    with TestClient(create_app(web), base_url="http://127.0.0.1") as client:
        page = client.get("/")
        assert page.status_code == 200
        assert trace in page.text
        answer = client.get(f"/api/sessions/{session.stream_id}/events")
        assert answer.status_code == 200
        shown = [e["type"] for e in answer.json()["events"]]
        assert shown.count("model.called") == 2
        assert "tool_result.recorded" in shown
        timeline = client.get(f"/sessions/{session.stream_id}")
        assert timeline.status_code == 200
        assert "It is 18C and sunny in Paris." in timeline.text


def test_json_post_in_batches_continues_the_session_and_writes_retries_once(
    ledger: Ledger,
) -> None:
    first = json_span(
        TRACE,
        "00f067aa0ba902b7",
        chat_attributes(inputs=[USER], outputs=[CALL]),
        start=1_700_000_000_000_000_000,
    )
    second = json_span(
        TRACE,
        "00f067aa0ba902b8",
        chat_attributes(inputs=[USER, CALL, RESULT], outputs=[ANSWER]),
        start=1_700_000_001_000_000_000,
    )
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request([first]))
        assert answer.status_code == 200
        assert answer.json() == {}
        head = ledger.store.max_position()
        retried = _post_json(url, json_request([first]))  # an exporter's retry
        assert retried.status_code == 200
        assert json.loads(retried.headers["turnledger-batch"])["duplicates"] == 1
        assert ledger.store.max_position() == head
        assert _post_json(url, json_request([first, second])).status_code == 200
    (session,) = list_sessions(ledger.store)
    messages = [
        e.message for e in load_history(ledger.store, session.stream_id).entries
    ]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    calls = [r for r in ledger.store.iter_all() if isinstance(r.event, ModelCalled)]
    assert len(calls) == 2


def test_conversation_id_is_the_session_across_traces(ledger: Ledger) -> None:
    attrs = chat_attributes(inputs=[USER], outputs=[ANSWER])
    attrs["gen_ai.conversation.id"] = "conv-42"
    again = chat_attributes(
        inputs=[USER, ANSWER, {"role": "user", "parts": [text("And tomorrow?")]}],
        outputs=[{"role": "assistant", "parts": [text("Rain.")]}],
    )
    again["gen_ai.conversation.id"] = "conv-42"
    spans = [
        json_span(TRACE, "00f067aa0ba902b7", attrs, start=1),
        json_span(
            "6b8efff798038103d269b633813fc60c", "10f067aa0ba902b7", again, start=2
        ),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    (session,) = list_sessions(ledger.store)
    assert session.key == "conv-42"
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    turns = [e.user_input for e in events if isinstance(e, TurnStarted)]
    assert turns == ["What is the weather in Paris?", "And tomorrow?"]
    assert sum(isinstance(e, TurnCompleted) for e in events) == 1


def test_previous_event_form_and_openllmetry_attributes(ledger: Ledger) -> None:
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 7,
    }
    events = [
        ("gen_ai.system.message", {"content": "Be brief."}),
        ("gen_ai.user.message", {"content": "Hi"}),
        (
            "gen_ai.choice",
            {"index": 0, "message": {"role": "assistant", "content": "Hello."}},
        ),
    ]
    openllmetry = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.prompt_tokens": 40,
        "gen_ai.usage.completion_tokens": 3,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Hi",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Hello.",
    }
    other = "7b8efff798038103d269b633813fc60c"
    spans = [
        json_span(TRACE, "00f067aa0ba902b7", base, start=1, events=events),
        json_span(other, "20f067aa0ba902b7", openllmetry, start=2),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    for session in list_sessions(ledger.store):
        recorded = [r.event for r in ledger.store.read_stream(session.stream_id)]
        history = load_history(ledger.store, session.stream_id).entries
        assert [(e.message.role, e.message.text) for e in history] == [
            ("user", "Hi"),
            ("assistant", "Hello."),
        ]
        system = [e.text for e in recorded if isinstance(e, SystemPromptSet)]
        assert system == ["Be brief."]
        (call,) = [e for e in recorded if isinstance(e, ModelCalled)]
        assert call.input_tokens in (30, 40)
        assert call.provider == "openai"


PICTURE = [
    {"type": "text", "text": "What is in"},
    {"type": "text", "text": "this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
]
"""A user message's content array as the previous forms carry it: two texts
and an image, which is not text."""


def test_parts_that_hold_no_text_are_counted_not_recorded_as_text(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image or a reasoning part is not the message's text: audit counts it.

    In each form: the previous form's events, OpenLLMetry's attributes (the
    array as JSON text), the current form (a reasoning part in the answer).
    Texts are joined by newlines, as the transcript readers join them.
    """
    events = [
        ("gen_ai.user.message", {"content": PICTURE}),
        ("gen_ai.choice", {"index": 0, "message": {"content": "A cat."}}),
    ]
    openllmetry = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": json.dumps(PICTURE),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "A cat.",
    }
    thought = {"type": "reasoning", "content": "Whiskers: a cat."}
    image = {"type": "blob", "modality": "image", "content": "iVBORw0KGgo="}
    call = {"type": "tool_call", "id": "call_1", "name": "look", "arguments": {}}
    # A tool message's text besides its result is not recorded: counted.
    looked = [
        text("A cat"),
        {"type": "tool_call_response", "id": "call_1", "response": "A cat"},
    ]
    current = chat_attributes(
        inputs=[
            {
                "role": "user",
                "parts": [
                    text("What is in"),
                    {"type": "text", "text": "this picture?"},
                    image,
                ],
            },
            {"role": "assistant", "parts": [call]},
            {"role": "tool", "parts": looked},
        ],
        outputs=[{"role": "assistant", "parts": [thought, text("A cat.")]}],
    )
    traces = [uuid.uuid4().hex for _ in range(3)]
    spans = [
        json_span(
            traces[0],
            "00f067aa0ba902b7",
            {"gen_ai.operation.name": "chat"},
            start=1,
            events=events,
        ),
        json_span(traces[1], "10f067aa0ba902b7", openllmetry, start=2),
        json_span(traces[2], "20f067aa0ba902b7", current, start=3),
    ]
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request(spans))
    assert answer.status_code == 200
    counted = {"blob": 1, "image_url": 2, "reasoning": 1, "text": 1}
    assert json.loads(answer.headers["turnledger-batch"])["parts"] == counted
    document = tmp_path / "spans.json"
    document.write_text(json.dumps(json_request(spans)))
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", str(document), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {
        f"{kind} part (not text)": n for kind, n in counted.items()
    }
    skipped = [["image_url"], ["image_url"], ["blob", "reasoning", "text"]]
    for trace, kinds in zip(traces, skipped, strict=True):
        (session,) = [s for s in list_sessions(ledger.store) if s.key == trace]
        history = load_history(ledger.store, session.stream_id).entries
        said = [(e.message.role, e.message.text) for e in history]
        if "text" in kinds:  # the tool round trip in the input
            assert said[1:3] == [("assistant", ""), ("tool", "")]
            del said[1:3]
        assert said == [
            ("user", "What is in\nthis picture?"),
            ("assistant", "A cat."),
        ]
        audit = audit_json(ledger, trace, capsys)
        assert audit["skipped"] == {PART_NOT_RECORDED.format(k): 1 for k in kinds}


def test_message_structure_without_content_is_usage_only(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parts with their types, ids and names but no text, arguments or result.

    Content capture off, some instrumentations still send the structure (in
    the current form) or the events (in the previous form): the call is
    recorded with its usage only, and nothing is invented (no empty user
    message, no ``{}`` arguments).
    """
    bare = chat_attributes(
        inputs=[{"role": "user", "parts": [{"type": "text"}]}],
        outputs=[
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather"}],
            }
        ],
        usage=(50, 5),
    )
    events = [
        ("gen_ai.user.message", {}),
        ("gen_ai.choice", {"index": 0, "message": {"role": "assistant"}}),
    ]
    previous = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40}
    traces = [uuid.uuid4().hex for _ in range(2)]
    spans = [
        json_span(traces[0], "00f067aa0ba902b7", bare, start=1),
        json_span(traces[1], "10f067aa0ba902b7", previous, start=2, events=events),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    for trace in traces:
        (session,) = [s for s in list_sessions(ledger.store) if s.key == trace]
        recorded = [r.event for r in ledger.store.read_stream(session.stream_id)]
        assert [type(e) for e in recorded] == [SessionOpened, ModelCalled, ItemRecorded]
        assert audit_json(ledger, trace, capsys)["skipped"] == {NOT_RECORDED: 1}


def test_an_answer_sent_without_its_question_is_recorded_and_said_missing(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Output messages without input messages: the answer, and a count."""
    answer_only = chat_attributes(outputs=[ANSWER])
    document = json_request(
        [json_span(TRACE, "00f067aa0ba902b7", answer_only, start=1)]
    )
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, document)
    assert json.loads(answer.headers["turnledger-batch"])["without_inputs"] == 1
    (session,) = list_sessions(ledger.store)
    history = load_history(ledger.store, session.stream_id).entries
    assert [e.message.role for e in history] == ["assistant"]
    assert audit_json(ledger, TRACE, capsys)["skipped"] == {WITHOUT_INPUTS: 1}
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(document))
    assert main(["--db", ledger.url, "audit", str(path), "--json"]) == 0
    skipped = json.loads(capsys.readouterr().out)["skipped"]
    assert skipped == {"span without its input messages": 1}


def test_a_message_without_parts_is_counted_in_a_file_too(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user message sent without any part: a turn without words, counted."""
    attrs = chat_attributes(inputs=[{"role": "user", "parts": []}], outputs=[ANSWER])
    path = tmp_path / "spans.json"
    path.write_text(
        json.dumps(json_request([json_span(TRACE, "00f067aa0ba902b7", attrs, start=1)]))
    )
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {
        "message without parts": 1
    }
    assert main(["--db", ledger.url, "import", str(path)]) == 0
    audit = audit_json(ledger, TRACE, capsys)
    assert audit["skipped"] == {MESSAGE_NOT_RECORDED: 1}


def test_spans_without_content_are_usage_only_and_audit_says_so(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = chat_attributes(usage=(70, 9))
    with running(ledger.store) as (url, _app):
        assert (
            _post_json(
                url, json_request([json_span(TRACE, "00f067aa0ba902b7", bare, start=1)])
            ).status_code
            == 200
        )
    types = _types(ledger)
    assert types == [SessionOpened, ModelCalled, ItemRecorded]
    audit = audit_json(ledger, TRACE, capsys)
    assert audit["skipped"] == {NOT_RECORDED: 1}
    assert main(["--db", ledger.url, "audit", TRACE]) == 0
    assert f"skipped 1 x {NOT_RECORDED}" in capsys.readouterr().out


def _tool_attributes(*, arguments: bool) -> dict[str, str]:
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.result": "18C, sunny",
    }
    if arguments:
        tool["gen_ai.tool.call.arguments"] = '{"city":"Paris"}'
    return tool


@pytest.mark.parametrize("chat_content", [False, True])
def test_a_tool_span_records_its_call_when_no_model_call_did(
    ledger: Ledger, capsys: pytest.CaptureFixture[str], *, chat_content: bool
) -> None:
    """Model content off, tool content on: the call comes from the tool span.

    With model content on, the chat span recorded the call already: the tool
    span's arguments add nothing (no second call).
    """
    with running(ledger.store) as (url, _app), exporter_provider(url) as provider:
        tracer = provider.get_tracer("tests")
        with tracer.start_as_current_span("invoke_agent") as run:
            asking = chat_attributes(
                inputs=[USER] if chat_content else None,
                outputs=[CALL] if chat_content else None,
            )
            with tracer.start_as_current_span("chat gpt-4o", attributes=asking):
                pass
            tool = _tool_attributes(arguments=True)
            with tracer.start_as_current_span("execute_tool", attributes=tool):
                pass
            trace = format(run.get_span_context().trace_id, "032x")
        assert provider.force_flush()
    (session,) = list_sessions(ledger.store)
    messages = [
        e.message for e in load_history(ledger.store, session.stream_id).entries
    ]
    roles = [m.role for m in messages]
    assert roles == (["user"] if chat_content else []) + ["assistant", "tool"]
    (asked,) = messages[-2].tool_calls
    assert (asked.id, asked.name) == ("call_1", "get_weather")
    assert json.loads(asked.arguments) == {"city": "Paris"}
    assert messages[-1].tool_results[0].content == "18C, sunny"
    audit = audit_json(ledger, trace, capsys)
    assert (audit["tool_calls"], audit["tool_results"]) == (1, 1)
    assert (audit["unpaired_calls"], audit["unpaired_results"]) == (0, 0)
    assert audit["skipped"] == ({} if chat_content else {NOT_RECORDED: 1})


def test_a_tool_span_without_arguments_or_a_call_id_records_no_call(
    ledger: Ledger,
) -> None:
    """Nothing to tell the call by: its result alone, as before."""
    bare = _tool_attributes(arguments=False)
    without_id = {**_tool_attributes(arguments=True), "gen_ai.tool.call.id": ""}
    spans = [
        json_span(TRACE, "00f067aa0ba902b7", bare, start=1),
        json_span(TRACE, "00f067aa0ba902b8", without_id, start=2),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    assert AssistantMessage not in _types(ledger)
    assert _types(ledger).count(ToolResultRecorded) == 2


def test_spans_of_no_known_shape_are_counted_not_recorded(ledger: Ledger) -> None:
    spans = [
        json_span(TRACE, "00f067aa0ba902b7", {"http.method": "GET"}, start=1),
        json_span(
            TRACE, "00f067aa0ba902b8", {"gen_ai.operation.name": "rerank"}, start=2
        ),
        json_span(
            TRACE,
            "00f067aa0ba902b9",
            {"gen_ai.operation.name": "invoke_agent"},
            start=3,
        ),
    ]
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request(spans))
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert "no known GenAI shape" in partial["errorMessage"]
    counts = json.loads(answer.headers["turnledger-batch"])
    assert counts["spans"] == 3
    assert counts["mapped"] == 0
    assert counts["known"] == {"invoke_agent": 1}
    assert counts["unknown"] == {
        "no gen_ai.operation.name": 1,
        "operation rerank": 1,
    }
    assert ledger.store.max_position() == 0


def test_a_batch_is_all_or_nothing(ledger: Ledger) -> None:
    good = json_span(TRACE, "00f067aa0ba902b7", chat_attributes(inputs=[USER]), start=1)
    bad_call = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "call\x01", "name": "f", "arguments": {}}
        ],
    }
    bad = json_span(
        "8b8efff798038103d269b633813fc60c",
        "30f067aa0ba902b7",
        chat_attributes(inputs=[USER], outputs=[bad_call]),
        start=2,
    )
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request([good, bad]))
    assert answer.status_code == 400
    assert answer.json()["code"] == 3
    assert "\n" not in answer.json()["message"]
    assert ledger.store.max_position() == 0


def test_the_token_guards_the_receiver(ledger: Ledger) -> None:
    body = json_request(
        [json_span(TRACE, "00f067aa0ba902b7", chat_attributes(), start=1)]
    )
    with running(ledger.store, token="s3cret-token") as (url, _app):  # noqa: S106 - a test token
        assert _post_json(url, body).status_code == 401
        wrong = httpx.post(
            f"{url}/v1/traces",
            content=json.dumps(body),
            headers={"content-type": "application/json", "authorization": "Bearer x"},
        )
        assert wrong.status_code == 401
        assert ledger.store.max_position() == 0
        with exporter_provider(
            url, headers={"authorization": "Bearer s3cret-token"}
        ) as provider:
            with provider.get_tracer("t").start_as_current_span(
                "chat", attributes=chat_attributes()
            ):
                pass
            assert provider.force_flush()
    assert _types(ledger) == [SessionOpened, ModelCalled, ItemRecorded]


def test_session_keys_are_stream_ids_of_agent_and_trace(ledger: Ledger) -> None:
    body = json_request(
        [json_span(TRACE, "00f067aa0ba902b7", chat_attributes(), start=1)],
        service="ops\x07bot",
    )
    with running(ledger.store) as (url, _app):
        assert _post_json(url, body).status_code == 200
    (session,) = list_sessions(ledger.store)
    assert session.agent == "ops_bot"
    assert isinstance(session.stream_id, uuid.UUID)


def test_only_the_first_choice_is_recorded_and_the_others_counted(
    ledger: Ledger,
) -> None:
    second = {"role": "assistant", "parts": [text("Another answer.")]}
    attrs = chat_attributes(inputs=[USER], outputs=[ANSWER, second])
    span = json_span(TRACE, "00f067aa0ba902b7", attrs, start=1)
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request([span]))
    assert json.loads(answer.headers["turnledger-batch"])["extra_choices"] == 1
    (session,) = list_sessions(ledger.store)
    history = load_history(ledger.store, session.stream_id).entries
    assert [e.message.text for e in history] == [
        "What is the weather in Paris?",
        "It is 18C and sunny in Paris.",
    ]


def test_a_tool_span_without_a_call_id_answers_the_one_call_it_matches(
    ledger: Ledger,
) -> None:
    """A tool span without ``gen_ai.tool.call.id`` is the result of the one
    unanswered call of its name and arguments (the same JSON value), never of
    two alike, nor of none: those keep the span's own ``otlp-<span id>``."""

    def call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, str]:
        return {
            "type": "tool_call",
            "id": call_id,
            "name": name,
            "arguments": arguments,
        }

    asks = chat_attributes(
        inputs=[{"role": "user", "parts": [text("Weather in Paris and Oslo, time?")]}],
        outputs=[
            {
                "role": "assistant",
                "parts": [
                    call("c1", "get_weather", {"city": "Paris"}),
                    call("c2", "get_weather", {"city": "Oslo"}),
                    call("c3", "get_time", {}),
                    call("c4", "get_time", {}),
                ],
            }
        ],
    )

    def tool(name: str, arguments: str, result: str) -> dict[str, str]:
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": arguments,
            "gen_ai.tool.call.result": result,
        }

    spans = [
        json_span(TRACE, "00f067aa0ba90201", asks, start=1),
        json_span(
            TRACE,
            "00f067aa0ba90202",
            tool("get_weather", '{"city": "Oslo"}', "5C"),
            start=2,
        ),
        json_span(
            TRACE,
            "00f067aa0ba90203",
            tool("get_weather", '{"city":"Paris"}', "18C"),
            start=3,
        ),
        json_span(TRACE, "00f067aa0ba90204", tool("get_time", "{}", "noon"), start=4),
        json_span(
            TRACE,
            "00f067aa0ba90205",
            tool("get_weather", '{"city":"Rome"}', "9C"),
            start=5,
        ),
        # Answered already: a second run of the same call is not its result.
        json_span(
            TRACE,
            "00f067aa0ba90206",
            tool("get_weather", '{"city":"Paris"}', "19C"),
            start=6,
        ),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    results = [
        (e.call_id, e.output) for e in events if isinstance(e, ToolResultRecorded)
    ]
    assert results == [
        ("c2", "5C"),
        ("c1", "18C"),
        ("otlp-00f067aa0ba90204", "noon"),
        ("otlp-00f067aa0ba90205", "9C"),
        ("otlp-00f067aa0ba90206", "19C"),
    ]


@pytest.mark.parametrize(
    ("result", "recorded"),
    [
        (
            {"type": "tool", "data": {"content": "18C", "tool_call_id": "c1"}},
            ("c1", True, "18C"),
        ),
        (
            {
                "output": {
                    "lc": 1,
                    "type": "constructor",
                    "id": ["langchain", "schema", "messages", "ToolMessage"],
                    "kwargs": {
                        "content": [{"type": "text", "text": "no such city"}],
                        "tool_call_id": "c1",
                        "status": "error",
                    },
                },
                "kwargs": {"name": None},
            },
            ("c1", False, "no such city"),
        ),
        # Not a ToolMessage (no call id in it, another wrapper): as sent.
        (
            {"type": "tool", "data": {"content": "18C"}},
            ("otlp-00f067aa0ba90202", True, None),
        ),
        (
            {
                "output": {
                    "type": "tool",
                    "data": {"content": "x", "tool_call_id": "c1"},
                }
            },
            ("otlp-00f067aa0ba90202", True, None),
        ),
    ],
    ids=["openinference", "openllmetry-error", "no-call-id", "other-wrapper"],
)
def test_a_langchain_tool_message_result_names_its_call(
    ledger: Ledger, result: dict[str, object], recorded: tuple[str, bool, str | None]
) -> None:
    """A tool span without a call id whose result is LangChain's ``ToolMessage``
    (as LangChain serializes it) is that message: its call's id, its content,
    its status; any other result is recorded as sent (``None`` below)."""
    asks = chat_attributes(
        inputs=[{"role": "user", "parts": [text("Weather?")]}],
        outputs=[
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather"}],
            }
        ],
    )
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.result": json.dumps(result),
    }
    spans = [
        json_span(TRACE, "00f067aa0ba90201", asks, start=1),
        json_span(TRACE, "00f067aa0ba90202", tool, start=2),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    (found,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    text_of = found.output if found.success else found.error
    call_id, success, expected = recorded
    sent = json.dumps(result)
    assert (found.call_id, found.success, text_of) == (
        call_id,
        success,
        sent if expected is None else expected,
    )


@pytest.mark.parametrize(
    ("code", "success"),
    [(2, False), ("STATUS_CODE_ERROR", False), ("STATUS_CODE_OK", True), ("1", True)],
)
def test_a_status_code_is_read_as_a_number_or_by_its_name(
    ledger: Ledger, code: object, success: bool
) -> None:
    """OTLP/JSON sends enums as integers; the protobuf JSON mapping (and files
    written by it) by name, which the OpenTelemetry Collector reads too."""
    span = json_span(TRACE, "00f067aa0ba90201", chat_attributes(), start=1)
    span["status"] = {"code": code, "message": "rate limited"}
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request([span])).status_code == 200
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    (called,) = [e for e in events if isinstance(e, ModelCalled)]
    assert called.success is success


def _ai_sdk_call(**attrs: object) -> dict[str, object]:
    return {
        "ai.operationId": "ai.streamText.doStream",
        "ai.model.id": "gpt-4o-mini",
        "ai.model.provider": "openai.responses",
        **attrs,
    }


def test_the_vercel_ai_sdk_forms_before_5_and_its_errors(ledger: Ledger) -> None:
    """AI SDK 4's parts (``args``, ``result``, ``promptTokens``), a tool result
    of type ``error-text`` (an error), a tool span's string result as its
    text, and a call recorded without inputs or outputs (usage only)."""
    messages = [
        {"role": "user", "content": "Stock of SKU 12?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool-call",
                    "toolCallId": "c1",
                    "toolName": "stock",
                    "args": {"sku": 12},
                },
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "toolName": "stock",
                    "result": 4,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool-call",
                    "toolCallId": "c2",
                    "toolName": "order",
                    "input": {"sku": 12},
                }
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c2",
                    "toolName": "order",
                    "output": {"type": "error-text", "value": "out of credit"},
                },
            ],
        },
    ]
    call = _ai_sdk_call(
        **{
            "ai.prompt.messages": json.dumps(messages),
            "ai.response.text": "I could not order it.",
            "ai.usage.promptTokens": 40,
            "ai.usage.completionTokens": 7,
        }
    )
    tool = {
        "ai.operationId": "ai.toolCall",
        "ai.toolCall.id": "c3",
        "ai.toolCall.name": "notify",
        "ai.toolCall.args": '{"to": "ops"}',
        "ai.toolCall.result": '"sent"',
    }
    quiet = _ai_sdk_call(**{"ai.usage.inputTokens": 12, "ai.usage.outputTokens": 2})
    spans = [
        json_span(TRACE, "00f067aa0ba90201", call, start=1),
        json_span(TRACE, "00f067aa0ba90202", tool, start=2),
        json_span(TRACE, "00f067aa0ba90203", quiet, start=3),
        json_span(
            TRACE, "00f067aa0ba90204", {"ai.operationId": "ai.streamText"}, start=4
        ),
    ]
    with running(ledger.store) as (url, _app):
        assert _post_json(url, json_request(spans)).status_code == 200
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    results = [
        (e.call_id, e.success, e.output or e.error)
        for e in events
        if isinstance(e, ToolResultRecorded)
    ]
    assert results == [
        ("c1", True, "4"),
        ("c2", False, "out of credit"),
        ("c3", True, "sent"),
    ]
    messages_said = [
        (e.text, [(c.id, c.arguments) for c in e.tool_calls])
        for e in events
        if isinstance(e, AssistantMessage)
    ]
    assert messages_said == [
        ("Checking.", [("c1", '{"sku":12}')]),
        ("", [("c2", '{"sku":12}')]),
        ("I could not order it.", []),
        ("", [("c3", '{"to": "ops"}')]),  # only the tool span says this call
    ]
    calls = [
        (e.model, e.input_tokens, e.output_tokens)
        for e in events
        if isinstance(e, ModelCalled)
    ]
    assert calls == [("gpt-4o-mini", 40, 7), ("gpt-4o-mini", 12, 2)]
    listed = [e for e in events if isinstance(e, ItemRecorded)]
    assert "00f067aa0ba90203" in json.loads(listed[-1].fields)["without_content"]


def test_a_call_sent_without_its_answer_is_said_missing(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model call span holding the messages sent but no output message: the
    question is recorded, and audit, the batch header and a file's import say
    the answer is not there. A failed call has none to say missing."""
    asked = [{"role": "user", "parts": [text("Weather in Paris?")]}]
    answered = chat_attributes(inputs=asked, outputs=[ANSWER])
    unanswered = chat_attributes(inputs=asked)
    spans = [
        json_span(TRACE, "00f067aa0ba90201", answered, start=1),
        json_span(TRACE, "00f067aa0ba90202", unanswered, start=2),
        json_span(TRACE, "00f067aa0ba90203", unanswered, start=3, status=2),
    ]
    with running(ledger.store) as (url, _app):
        answer = _post_json(url, json_request(spans))
    assert answer.status_code == 200
    assert json.loads(answer.headers["turnledger-batch"])["without_outputs"] == 1
    (session,) = list_sessions(ledger.store)
    audit = audit_json(ledger, session.key, capsys)
    assert audit["skipped"] == {WITHOUT_OUTPUTS: 1}
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(json_request(spans)))
    capsys.readouterr()
    argv = ["--db", str(tmp_path / "other.db"), "import", str(path), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"]["span without its output messages"] == 1


@pytest.mark.parametrize("restart", [False, True], ids=["one-recorder", "restarted"])
def test_a_tool_run_failed_without_its_result_makes_the_next_result_a_failure(
    ledger: Ledger, restart: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The conventions send a tool's result on success only: a tool span that
    failed (its status an error) carries none. The result the next model call's
    input holds for that call, the text the model was sent, is recorded as the
    failure, in a later batch too, and by a receiver started again in between
    (the failure is listed in the batch's item, and folded from the stream).
    A failed run of a call answered already, or a successful run without a
    result, changes nothing."""
    first = chat_attributes(
        inputs=[{"role": "user", "parts": [text("Weather in Rome and Oslo?")]}],
        outputs=[
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool_call",
                        "id": "c1",
                        "name": "w",
                        "arguments": {"city": "Rome"},
                    },
                    {
                        "type": "tool_call",
                        "id": "c2",
                        "name": "w",
                        "arguments": {"city": "Oslo"},
                    },
                ],
            }
        ],
    )
    failed = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "w",
        "gen_ai.tool.call.id": "c1",
        "error.type": "ValueError",
    }
    ran = {**failed, "gen_ai.tool.call.id": "c2"}
    del ran["error.type"]
    second = chat_attributes(
        inputs=[
            {"role": "user", "parts": [text("Weather in Rome and Oslo?")]},
            json.loads(first["gen_ai.output.messages"])[0],
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "c1",
                        "response": "no data for Rome",
                    },
                    {"type": "tool_call_response", "id": "c2", "response": "5C"},
                ],
            },
        ],
        outputs=[{"role": "assistant", "parts": [text("Oslo: 5C; Rome: unknown.")]}],
    )
    batches = [
        [
            json_span(TRACE, "00f067aa0ba90301", first, start=1),
            json_span(TRACE, "00f067aa0ba90302", failed, start=2, status=2),
            json_span(TRACE, "00f067aa0ba90303", ran, start=3),
        ],
        [json_span(TRACE, "00f067aa0ba90304", second, start=4)],
    ]
    recorder = Recorder(ledger.store)
    for spans in batches:
        recorder.record(decode_json(json.dumps(json_request(spans)).encode()))
        if restart:
            recorder = Recorder(ledger.store)
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    results = [
        (e.call_id, e.success, e.output, e.error)
        for e in events
        if isinstance(e, ToolResultRecorded)
    ]
    assert results == [
        ("c1", False, "", "no data for Rome"),
        ("c2", True, "5C", None),
    ]
    audit = audit_json(ledger, TRACE, capsys)
    # Both tool spans lacked their result, which the next input brought.
    assert (audit["unpaired_calls"], audit["skipped"]) == (0, {})
