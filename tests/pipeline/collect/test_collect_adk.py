"""Google's Agent Development Kit under its own telemetry, into ``collect``.

A real ADK agent (:mod:`.adk_agent_child`) asks the fake Gemini server twice
for the same tool, in two turns of one ADK session. ADK (2.13) sends its
spans, and its log records, in one of two forms:

- its current form (the default): the GenAI conventions' current form, the
  messages on the span (``SPAN_ONLY``), in the details log record
  (``EVENT_ONLY``) or both. When the model gives a call no id (as the Gemini
  API mostly does), ADK's telemetry names it by its tool and place,
  ``get_weather_0``: the same id at each turn. Its tool spans carry ADK's own
  call id (``adk-<uuid>``), which no message holds.
- its previous form (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``): each call's
  ``call_llm`` span holds the request and the response as JSON (unless
  ``ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false``), its ``generate_content``
  child the usage, and the previous form's message events go as log records,
  each message's content the ``google-genai`` ``Content`` object (with content
  capture off, each says ``<elided>``); no call ids (ADK takes its own out
  before calling the model).

Each turn's call and result are recorded once, paired; with no content
captured, the four calls' usage only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, run_client, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import (
    chat_attributes,
    json_log,
    json_logs_request,
    json_request,
    json_span,
    text,
)
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    ToolUse,
    gemini_function_calls,
    gemini_text,
)
from turnledger.ledger.events import ItemRecorded, ModelCalled, SystemPromptSet
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json, decode_logs_json
from turnledger.pipeline.collect.coverage import NO_MESSAGES
from turnledger.pipeline.collect.genai.adk import CARRIED
from turnledger.pipeline.collected import (
    LISTED,
    MESSAGE_NOT_RECORDED,
    NOT_RECORDED,
    SPANS_KIND,
    WITHOUT_RESULT,
)
from turnledger.pipeline.sessions import list_sessions

CHILD = Path(__file__).with_name("adk_agent_child.py")
TRACE = "5bf92f3577b34da6a3ce929d0e0e4736"

CURRENT = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
PREVIOUS = {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"}
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
IN_SPANS = "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS"

FORMS = {
    "current_span": {**CURRENT, CAPTURE: "SPAN_ONLY"},
    "current_event": {**CURRENT, CAPTURE: "EVENT_ONLY"},
    "current_both": {**CURRENT, CAPTURE: "SPAN_AND_EVENT"},
    "previous": {**PREVIOUS, CAPTURE: "true"},
    "previous_spans": PREVIOUS,  # the call_llm spans' content alone
    "previous_logs": {**PREVIOUS, CAPTURE: "true", IN_SPANS: "false"},
    "current_off": {},
    "previous_off": {**PREVIOUS, IN_SPANS: "false"},
}

SYSTEM = 'You answer weather questions.\n\nYou are an agent. Your internal name is "weather".'


def _queue(llm: FakeLLMServer) -> None:
    """Both turns' answers: a call of the tool (no id), then the words."""
    paris = ToolUse("", "get_weather", {"city": "Paris"})
    llm.queue_gemini(
        gemini_function_calls(paris, usage=(50, 10)),
        gemini_text("18C in Paris.", usage=(70, 6)),
        gemini_function_calls(paris, usage=(90, 10)),
        gemini_text("Still 18C in Paris.", usage=(110, 6)),
    )


def _said(ledger: Ledger, key: str) -> list[tuple[object, ...]]:
    """The history, each result's content as its JSON value (ADK spaces it or not)."""
    return [
        (role, text, calls, tuple((i, json.loads(c), e) for i, c, e in results))
        for role, text, calls, results in said_in(ledger, key)
    ]


def _turns(call_id: str) -> list[tuple[object, ...]]:
    asked = ("assistant", "", ((call_id, "get_weather", {"city": "Paris"}),), ())
    answered = ("tool", "", (), ((call_id, {"result": "18C"}, False),))
    return [
        ("user", "Weather in Paris?", (), ()),
        asked,
        answered,
        ("assistant", "18C in Paris.", (), ()),
        ("user", "And now?", (), ()),
        asked,
        answered,
        ("assistant", "Still 18C in Paris.", (), ()),
    ]


@pytest.mark.parametrize("form", list(FORMS))
def test_an_adk_agent_records_each_turn_s_call_and_result_once(
    ledger: Ledger, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each turn's call and its result, once, paired, in every form.

    Fails without reading a call's id named again as a call of its own (the
    second turn's result was dropped as the first's), without pairing a tool
    span by its tool and arguments when its id is ADK's own (each call was
    recorded twice), without reading the ``Content`` objects and ``<elided>``
    of the previous form (their JSON, or the words, were recorded as
    messages), and without the ``call_llm`` spans' request and response (the
    previous form's default sent the calls' usage alone).
    """
    env = {"GOOGLE_API_KEY": "test-key", **FORMS[form]}
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        _queue(llm)
        run_client(CHILD, llm.url, url, env, call="")
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    usage = [
        (e.input_tokens, e.output_tokens) for e in events if type(e) is ModelCalled
    ]
    assert usage == [(50, 10), (70, 6), (90, 10), (110, 6)]
    audit = audit_json(ledger, session.key, capsys)
    assert audit["violations"] == []
    if form.endswith("_off"):
        assert said_in(ledger, session.key) == []
        assert audit["skipped"][NOT_RECORDED] == 4
        return
    assert [e.text for e in events if type(e) is SystemPromptSet] == [SYSTEM]
    # The current form names a call without an id by its tool and place.
    previous = form.startswith("previous")
    assert _said(ledger, session.key) == _turns(
        "unknown" if previous else "get_weather_0"
    )
    # The spans of the runs hold their results unless only the logs hold
    # content (EVENT_ONLY) or ADK's own attributes hold it (the previous form).
    held = form in ("current_span", "current_both")
    assert (WITHOUT_RESULT in audit["skipped"]) is not held


@pytest.mark.parametrize("form", ["previous_spans", "previous_off"])
def test_an_adk_file_of_the_previous_form_imports(
    ledger: Ledger, form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's spans as an OTLP/JSON file, imported: each ``call_llm`` span is
    counted, its call span under it recorded, with what the ``call_llm`` span
    holds (the conversation, or nothing when ADK kept it out: usage only).
    Fails without reading them so: the file was refused (its ``call_llm``
    spans hold model traffic no reader understood)."""
    spans = tmp_path / "adk-spans.json"
    env = {"GOOGLE_API_KEY": "test-key", "ADK_SPANS_FILE": str(spans), **FORMS[form]}
    with (
        FakeLLMServer() as llm,
        open_store(str(tmp_path / "received.db")) as received,
        running(received) as (url, _app),
    ):
        _queue(llm)
        run_client(CHILD, llm.url, url, env, call="")
    capsys.readouterr()
    assert main(["--db", ledger.url, "import", str(spans), "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert imported["coverage"]["reasons"][f"span {CARRIED}: {NO_MESSAGES}"] == 4
    (session,) = list_sessions(ledger.store)
    turns = [] if form == "previous_off" else _turns("unknown")
    assert _said(ledger, session.key) == turns
    assert audit_json(ledger, session.key, capsys)["violations"] == []


@pytest.mark.parametrize(
    "form",
    ["previous_spans", "previous", "previous_logs", "previous_off", "current_span"],
)
def test_an_adk_agent_s_spans_sent_one_by_one(
    ledger: Ledger, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each span in a request of its own, as it ends (a simple span processor):
    a ``call_llm`` span comes in the request after its call span's, which
    was recorded with the usage alone. Its request and response are recorded
    then (the conversation, once), it is counted as its call's record, and
    ``audit`` no longer counts the call as without content. Fails without
    that: the conversation was never recorded (usage only), and each
    ``call_llm`` span was counted as of no known shape. With the log
    records too (sent at the end), the conversation is recorded once: from
    the ``call_llm`` spans when they hold it (the records are kept), else
    from the records.
    """
    env = {"GOOGLE_API_KEY": "test-key", **FORMS[form]}
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        _queue(llm)
        run_client(CHILD, llm.url, url, env, "span-by-span", call="")
        assert app.refused == 0
        assert app.batches > 10  # one a span
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    usage = [
        (e.input_tokens, e.output_tokens) for e in events if type(e) is ModelCalled
    ]
    assert usage == [(50, 10), (70, 6), (90, 10), (110, 6)]
    listed = [
        label
        for e in events
        if type(e) is ItemRecorded and e.kind == SPANS_KIND
        for _, _, label in LISTED.decode(e.fields).spans
    ]
    assert listed.count(CARRIED) == (0 if form.startswith("current") else 4)
    audit = audit_json(ledger, session.key, capsys)
    assert audit["violations"] == []
    if form == "previous_off":
        assert said_in(ledger, session.key) == []
        assert audit["skipped"][NOT_RECORDED] == 4
        return
    assert NOT_RECORDED not in audit["skipped"]
    assert [e.text for e in events if type(e) is SystemPromptSet] == [SYSTEM]
    previous = form.startswith("previous")
    assert _said(ledger, session.key) == _turns(
        "unknown" if previous else "get_weather_0"
    )


@pytest.mark.parametrize("restarted", [False, True])
def test_a_call_llm_span_sent_again_or_after_a_restart_is_carried_once(
    ledger: Ledger, restarted: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's spans (the previous form, the conversation in the ``call_llm``
    spans alone), each recorded as a batch of its own in the order they
    ended, each ``call_llm`` span twice (an exporter's retry), by one
    recorder or (restarted) a new one for every batch: each ``call_llm``
    span is carried once, then known as a duplicate, and the conversation is
    recorded once. Fails without the parents the spans item lists (restarted,
    the recorder did not know the call spans' parents) or without the
    ``call_llm`` spans listed (each sent again was of no known shape).
    """
    file = tmp_path / "adk-spans.json"
    env = {"GOOGLE_API_KEY": "test-key", "ADK_SPANS_FILE": str(file)}
    with (
        FakeLLMServer() as llm,
        open_store(str(tmp_path / "received.db")) as received,
        running(received) as (url, _app),
    ):
        _queue(llm)
        run_client(CHILD, llm.url, url, {**env, **FORMS["previous_spans"]}, call="")
    spans = sorted(decode_json(file.read_bytes()), key=lambda s: s.end_ns)
    recorder = Recorder(ledger.store)
    carried, duplicates = [], 0
    for span in spans:
        for _ in range(2 if span.name == "call_llm" else 1):
            if restarted:
                recorder = Recorder(ledger.store)
            report = recorder.record([span])
            if span.name == "call_llm":
                assert report.unknown == {}
                carried.append(report.known.get(CARRIED, 0))
            duplicates += report.duplicates
    assert (carried, duplicates) == ([1, 0] * 4, 4)
    (session,) = list_sessions(ledger.store)
    assert _said(ledger, session.key) == _turns("unknown")
    audit = audit_json(ledger, session.key, capsys)
    assert audit["violations"] == []
    assert NOT_RECORDED not in audit["skipped"]


@pytest.mark.parametrize("restarted", [False, True])
def test_log_events_after_a_carried_call_are_kept_not_recorded_again(
    ledger: Ledger, restarted: bool
) -> None:
    """The call span alone (its usage), then its ``call_llm`` span (the
    conversation recorded), then log events of the call saying the answer
    again: kept, not recorded again, by the same recorder or a restarted one.
    Fails without the stream's fold knowing the call carried (restarted: the
    answer was recorded twice)."""
    request = {"contents": [{"role": "user", "parts": [{"text": "Hi?"}]}]}
    response = {"content": {"role": "model", "parts": [{"text": "Hello."}]}}
    pair = _call_llm_pair(request, response)
    recorder = Recorder(ledger.store)
    for part in (pair[1:], pair[:1]):
        recorder.record(decode_json(json.dumps(json_request(part)).encode()))
    said = said_in(ledger, TRACE)
    assert [(role, text) for role, text, _, _ in said] == [
        ("user", "Hi?"),
        ("assistant", "Hello."),
    ]
    if restarted:
        recorder = Recorder(ledger.store)
    answer = {"index": 0, "message": {"role": "assistant", "content": "Hello."}}
    logs = [json_log(TRACE, "00000000000000bb", "gen_ai.choice", answer)]
    body = json.dumps(json_logs_request(logs)).encode()
    report = recorder.record_logs(decode_logs_json(body))
    assert (report.applied, report.span_had_content) == (0, 1)
    assert said_in(ledger, TRACE) == said


def test_an_adk_agent_s_logs_before_its_spans(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """The previous form's log records sent before the spans they belong to
    (the conversation in the records alone: the call_llm spans keep it out).

    The records name no conversation (the spans name ADK's session): they wait
    in each turn's trace's session, and the conversation's session takes them
    when the spans come. Fails without that join (the conversation held the
    usage alone).
    """
    env = {"GOOGLE_API_KEY": "test-key", **FORMS["previous_logs"]}
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        _queue(llm)
        run_client(CHILD, llm.url, url, env, "logs-first", call="")
        assert app.refused == 0
    sessions = list_sessions(ledger.store)
    (session,) = [s for s in sessions if "-" in s.key]  # ADK's session id
    assert _said(ledger, session.key) == _turns("unknown")
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["violations"], audit["skipped"]) == ([], {WITHOUT_RESULT: 2})
    traces = [s for s in sessions if s is not session]
    assert len(traces) == 2  # a turn's trace each: they held the records
    assert all(said_in(ledger, s.key) == [] for s in traces)


def _call(city: str) -> dict[str, object]:
    part = {"type": "tool_call", "id": "get_weather_0", "name": "get_weather"}
    return {"role": "assistant", "parts": [{**part, "arguments": {"city": city}}]}


def _result(weather: str) -> dict[str, object]:
    part = {"type": "tool_call_response", "id": "get_weather_0", "response": weather}
    return {"role": "tool", "parts": [part]}


@pytest.mark.parametrize("restarted", [False, True])
def test_a_call_id_named_again_gets_its_own_result(
    ledger: Ledger, restarted: bool
) -> None:
    """Hand-made spans in ADK's current form: the second turn calls the tool
    by the first turn's id, for another city, and gets another result. The last
    call's input holds both results under that id: the first answered the
    first call, the second answers the second, whether the receiver walks only
    what the input adds or (restarted) the whole input."""
    asked = text("Weather in Paris?")
    first = [{"role": "user", "parts": [asked]}, _call("Paris"), _result("18C")]
    second = [
        *first,
        {"role": "assistant", "parts": [text("18C.")]},
        {"role": "user", "parts": [text("And Oslo?")]},
    ]
    calls = [
        (first[:1], _call("Paris")),
        (first, {"role": "assistant", "parts": [text("18C.")]}),
        (second, _call("Oslo")),
        ([*second, _call("Oslo"), _result("12C")], second[2]),
    ]
    spans = [
        json_span(
            TRACE,
            f"{i + 1:016x}",
            chat_attributes(inputs=inputs, outputs=[output]),
            start=i * 10,
        )
        for i, (inputs, output) in enumerate(calls)
    ]
    recorder = Recorder(ledger.store)
    for span in spans:
        if restarted:
            recorder = Recorder(ledger.store)
        recorder.record(decode_json(json.dumps(json_request([span])).encode()))
    said = said_in(ledger, TRACE)
    assert [(role, results) for role, _, _, results in said if results] == [
        ("tool", (("get_weather_0", "18C", False),)),
        ("tool", (("get_weather_0", "12C", False),)),
    ]


def _call_llm_pair(request: object, response: object) -> list[dict[str, object]]:
    """ADK's previous form, by hand: a call_llm span and its call span under it."""
    wrapper = json_span(
        TRACE,
        "00000000000000aa",
        {
            "gen_ai.system": "gcp.vertex.agent",
            "gen_ai.request.model": "gemini-test",
            "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 10,
            "gcp.vertex.agent.llm_request": json.dumps(request),
            "gcp.vertex.agent.llm_response": json.dumps(response),
        },
        start=0,
        name="call_llm",
    )
    call = json_span(
        TRACE,
        "00000000000000bb",
        {
            "gen_ai.system": "gemini",
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": "gemini-test",
            "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 10,
        },
        start=1,
        name="generate_content gemini-test",
    )
    return [wrapper, {**call, "parentSpanId": "00000000000000aa"}]


def test_what_adk_leaves_out_of_its_call_record_is_counted(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """ADK's record of a call leaves a part's inline data out of the request
    (a message of an image alone keeps no part) and writes it in the response
    as words: the first is a message without parts, the second an
    ``inline_data`` part, both counted, neither text. The call is recorded
    once, with its call span's usage. Sent again, with its call span or
    alone, the call_llm span is known (listed with its call span's: a
    duplicate); one whose call span no session recorded (ADK 1.x's only model
    span) is of no known shape."""
    request = {
        "model": "gemini-test",
        "config": {"system_instruction": "Describe pictures."},
        "contents": [
            {"role": "user", "parts": [{"text": "What is this?"}]},
            {"role": "user", "parts": []},
        ],
    }
    response = {
        "content": {
            "role": "model",
            "parts": [
                {"text": "A cat.", "thought": True},
                {"text": "A cat, drawn."},
                {"text": "<inline_data: image/png, 2048 bytes>"},
            ],
        }
    }
    pair = _call_llm_pair(request, response)
    recorder = Recorder(ledger.store)
    report = recorder.record(decode_json(json.dumps(json_request(pair)).encode()))
    assert (report.mapped, report.known) == (1, {CARRIED: 1})
    assert report.parts == {"inline_data": 1, "no parts": 1, "reasoning": 1}
    said = said_in(ledger, TRACE)
    assert [(role, text) for role, text, _, _ in said] == [
        ("user", "What is this?"),
        ("user", ""),
        ("assistant", "A cat, drawn."),
    ]
    audit = audit_json(ledger, TRACE, capsys)
    assert audit["skipped"][MESSAGE_NOT_RECORDED] == 1
    whole = recorder.record(decode_json(json.dumps(json_request(pair)).encode()))
    assert (whole.known, whole.duplicates, whole.events) == ({}, 2, 0)
    alone = decode_json(json.dumps(json_request(pair[:1])).encode())
    again = recorder.record(alone)
    assert (again.unknown, again.duplicates, again.events) == ({}, 1, 0)
    other = {**pair[0], "spanId": "00000000000000cc"}
    unawaited = decode_json(json.dumps(json_request([other])).encode())
    assert recorder.record(unawaited).unknown == {"no gen_ai.operation.name": 1}


@pytest.mark.parametrize(
    ("instruction", "recorded"),
    [
        ('{"tone": "brief"}', '{"tone": "brief"}'),  # a text that reads as JSON
        (["Be brief.", "Answer in French."], "Be brief.\nAnswer in French."),
        ({"role": "user", "parts": [{"text": "Be brief."}]}, "Be brief."),
    ],
)
def test_adk_s_system_instruction_is_recorded_as_sent(
    ledger: Ledger, instruction: object, recorded: str
) -> None:
    """A text is recorded as sent, whatever it reads as (it was lost when it
    read as JSON); a list of texts, and a ``Content`` object, by their text."""
    request = {
        "config": {"system_instruction": instruction},
        "contents": [{"role": "user", "parts": [{"text": "Hi?"}]}],
    }
    response = {"content": {"role": "model", "parts": [{"text": "Hello."}]}}
    pair = _call_llm_pair(request, response)
    Recorder(ledger.store).record(decode_json(json.dumps(json_request(pair)).encode()))
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if type(e) is SystemPromptSet] == [recorded]
