"""turnledger collect over ``/v1/logs``: a model call's content sent as log events.

Instrumentations emit a call's messages as log records in its span's context:
the previous conventions' message events (``gen_ai.user.message``,
``gen_ai.choice``...) and the current ``operation.details`` event. The spans
and the log records travel by separate exporters, in either order; the session
holds the conversation either way, a record sent again is recorded once, and a
span's records parked before it survive a new receiver. Sent by the SDK's own
OTLP exporters and as OTLP/JSON posts; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json

import httpx
import pytest
from opentelemetry._logs import LogRecord as SdkLogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.pipeline.collect.conftest import Ledger
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import (
    chat_attributes,
    json_log,
    json_logs_request,
    json_request,
    json_span,
    text,
)
from turnledger.ledger.events import (
    AssistantMessage,
    ItemRecorded,
    ModelCalled,
    SessionOpened,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import (
    LogRecord,
    Recorder,
    Span,
    decode_json,
    decode_logs_json,
)
from turnledger.pipeline.collect.coverage import NOT_RECORDED, WITHOUT_INPUTS
from turnledger.pipeline.collect.links import SessionLinks
from turnledger.pipeline.sessions import list_sessions, load_history

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
NEVER = 600_000  # ms: the processors export only when flushed
CALL_1 = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def _post(url: str, path: str, document: object) -> httpx.Response:
    return httpx.post(
        f"{url}{path}",
        content=json.dumps(document),
        headers={"content-type": "application/json"},
    )


def _usage_only(usage: tuple[int, int] = (100, 20)) -> dict[str, object]:
    """A chat span's attributes without its content (capture sends it apart)."""
    return chat_attributes(usage=usage)


def _conversation(ledger: Ledger) -> list[tuple[str, str]]:
    (session,) = list_sessions(ledger.store)
    history = load_history(ledger.store, session.stream_id).entries
    return [
        (
            e.message.role,
            e.message.text
            or "".join(r.content for r in e.message.tool_results)
            or ",".join(c.id for c in e.message.tool_calls),
        )
        for e in history
    ]


def _audit_skipped(ledger: Ledger, capsys: pytest.CaptureFixture[str]) -> object:
    (session,) = list_sessions(ledger.store)
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["skipped"]


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
def test_message_events_sent_by_the_sdk_record_the_conversation(
    ledger: Ledger, capsys: pytest.CaptureFixture[str], order: str
) -> None:
    with running(ledger.store) as (url, app):
        resource = Resource({"service.name": "support-bot"})
        tracers = TracerProvider(resource=resource)
        tracers.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=f"{url}/v1/traces"),
                schedule_delay_millis=NEVER,
            )
        )
        loggers = LoggerProvider(resource=resource)
        loggers.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{url}/v1/logs"), schedule_delay_millis=NEVER
            )
        )
        tracer, logger = tracers.get_tracer("app"), loggers.get_logger("app")

        def said(name: str, body: dict[str, object]) -> None:
            logger.emit(SdkLogRecord(event_name=name, body=body))

        # As the previous conventions' instrumentations emit them, in the span.
        agent = {"gen_ai.operation.name": "invoke_agent"}
        with tracer.start_as_current_span("invoke_agent", attributes=agent):
            with tracer.start_as_current_span("chat", attributes=_usage_only()):
                said("gen_ai.system.message", {"content": "Be brief."})
                said("gen_ai.user.message", {"content": "Weather in Paris?"})
                choice = {"role": "assistant", "tool_calls": [CALL_1]}
                said("gen_ai.choice", {"index": 0, "message": choice})
            with tracer.start_as_current_span("chat", attributes=_usage_only((140, 8))):
                said("gen_ai.system.message", {"content": "Be brief."})
                said("gen_ai.user.message", {"content": "Weather in Paris?"})
                said("gen_ai.assistant.message", {"tool_calls": [CALL_1]})
                said("gen_ai.tool.message", {"content": "18C", "id": "call_1"})
                answer = {"role": "assistant", "content": "18C and sunny."}
                said("gen_ai.choice", {"index": 0, "message": answer})
        flushes = [loggers, tracers] if order == "logs-first" else [tracers, loggers]
        for flushed in flushes:
            assert flushed.force_flush()
        for flushed in flushes:
            flushed.shutdown()
        assert (app.refused, app.log_records, app.spans) == (0, 8, 3)
    assert _conversation(ledger) == [
        ("user", "Weather in Paris?"),
        ("assistant", "call_1"),
        ("tool", "18C"),
        ("assistant", "18C and sunny."),
    ]
    calls = [r.event for r in ledger.store.iter_all()]
    usage = [(c.input_tokens, c.output_tokens) for c in calls if type(c) is ModelCalled]
    assert usage == [(100, 20), (140, 8)]
    assert _audit_skipped(ledger, capsys) == {}


def _records(first: int, last: int) -> list[dict[str, object]]:
    """The log events of one call: a system and a user message, the answer."""
    every = [
        json_log(TRACE, SPAN, "gen_ai.system.message", {"content": "Be brief."}),
        json_log(TRACE, SPAN, "gen_ai.user.message", {"content": "Hi?"}, time=2),
        json_log(
            TRACE,
            SPAN,
            "gen_ai.choice",
            {"index": 0, "message": {"role": "assistant", "content": "Hello."}},
            time=3,
        ),
    ]
    return every[first:last]


def _span() -> dict[str, object]:
    return json_request([json_span(TRACE, SPAN, _usage_only(), start=10)])


def test_a_record_sent_again_is_recorded_once(ledger: Ledger) -> None:
    with running(ledger.store) as (url, _app):
        first = _post(url, "/v1/logs", json_logs_request(_records(0, 3)))
        assert first.status_code == 200
        assert json.loads(first.headers["turnledger-batch"])["parked"] == 3
        written = ledger.store.max_position()
        again = _post(url, "/v1/logs", json_logs_request(_records(0, 3) * 2))
        report = json.loads(again.headers["turnledger-batch"])
        assert (report["duplicates"], report["events"]) == (6, 0)
        assert ledger.store.max_position() == written
        assert _post(url, "/v1/traces", _span()).status_code == 200
    assert _conversation(ledger) == [("user", "Hi?"), ("assistant", "Hello.")]


def test_records_split_around_their_span_complete_it(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(ledger.store) as (url, _app):
        assert _post(url, "/v1/logs", json_logs_request(_records(0, 2))).is_success
        assert _post(url, "/v1/traces", _span()).is_success
        assert _conversation(ledger) == [("user", "Hi?")]
        late = _post(url, "/v1/logs", json_logs_request(_records(2, 3)))
        report = json.loads(late.headers["turnledger-batch"])
        assert (report["applied"], report["parked"]) == (1, 0)
    assert _conversation(ledger) == [("user", "Hi?"), ("assistant", "Hello.")]
    assert _audit_skipped(ledger, capsys) == {}


def _logs(first: int, last: int) -> list[LogRecord]:
    return decode_logs_json(
        json.dumps(json_logs_request(_records(first, last))).encode()
    )


def test_records_parked_by_one_receiver_are_read_by_the_next(ledger: Ledger) -> None:
    Recorder(ledger.store).record_logs(_logs(0, 2))
    fresh = Recorder(ledger.store)  # a restarted receiver: nothing in memory
    report = fresh.record(decode_json(json.dumps(_span()).encode()))
    assert report.without_content == 0
    assert _conversation(ledger) == [("user", "Hi?")]
    again = Recorder(ledger.store).record_logs(_logs(0, 3))  # restarted again
    assert (again.duplicates, again.applied, again.parked) == (2, 1, 0)
    assert _conversation(ledger) == [("user", "Hi?"), ("assistant", "Hello.")]


def test_events_without_content_are_counted_not_recorded(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = [
        json_log(TRACE, SPAN, "gen_ai.user.message"),
        json_log(
            TRACE,
            SPAN,
            "gen_ai.choice",
            {"index": 0, "message": {"role": "assistant", "tool_calls": [{"id": "c"}]}},
        ),
    ]
    with running(ledger.store) as (url, _app):
        answer = _post(url, "/v1/logs", json_logs_request(empty))
        report = json.loads(answer.headers["turnledger-batch"])
        assert (report["without_content"], report["events"]) == (2, 0)
        assert ledger.store.max_position() == 0
        assert _post(url, "/v1/traces", _span()).is_success
    assert _conversation(ledger) == []
    assert _audit_skipped(ledger, capsys) == {NOT_RECORDED: 1}


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
def test_an_answer_sent_without_its_question_by_log_events_is_said_missing(
    ledger: Ledger, order: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A details event holding the output messages but no input messages:
    the answer is recorded, and audit says the question is missing, as when
    the span itself carries them so."""
    answer = {"role": "assistant", "parts": [text("Hello.")]}
    details = json_log(
        TRACE,
        SPAN,
        "gen_ai.client.inference.operation.details",
        attrs={"gen_ai.output.messages": json.dumps([answer])},
    )
    sends = [("/v1/logs", json_logs_request([details])), ("/v1/traces", _span())]
    with running(ledger.store) as (url, _app):
        for path, document in sends if order == "logs-first" else sends[::-1]:
            assert _post(url, path, document).is_success
    assert _conversation(ledger) == [("assistant", "Hello.")]
    assert _audit_skipped(ledger, capsys) == {WITHOUT_INPUTS: 1}


def test_a_span_recorded_with_its_content_is_not_recorded_twice(
    ledger: Ledger,
) -> None:
    user = {"role": "user", "parts": [text("Hi?")]}
    answer = {"role": "assistant", "parts": [text("Hello.")]}
    attrs = chat_attributes(inputs=[user], outputs=[answer])
    with running(ledger.store) as (url, _app):
        spans = json_request([json_span(TRACE, SPAN, attrs, start=10)])
        assert _post(url, "/v1/traces", spans).is_success
        late = _post(url, "/v1/logs", json_logs_request(_records(0, 3)))
        report = json.loads(late.headers["turnledger-batch"])
        assert (report["span_had_content"], report["applied"]) == (3, 0)
    assert _conversation(ledger) == [("user", "Hi?"), ("assistant", "Hello.")]
    events = [type(r.event) for r in ledger.store.iter_all()]
    assert (events.count(TurnStarted), events.count(AssistantMessage)) == (1, 1)


def test_other_records_are_counted_in_the_partial_success(ledger: Ledger) -> None:
    plain = {"timeUnixNano": "1", "body": {"stringValue": "GET /health 200"}}
    outside = json_log("", "", "gen_ai.user.message", {"content": "Hi?"})
    with running(ledger.store) as (url, _app):
        answer = _post(url, "/v1/logs", json_logs_request([plain, outside]))
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "2"
    assert "not a GenAI content event x1" in partial["errorMessage"]
    assert "a GenAI content event outside any span x1" in partial["errorMessage"]
    assert ledger.store.max_position() == 0


def test_a_body_that_does_not_decode_is_refused_whole(ledger: Ledger) -> None:
    with running(ledger.store) as (url, _app):
        broken = httpx.post(
            f"{url}/v1/logs",
            content=b"\xff\xff\xff",
            headers={"content-type": "application/x-protobuf"},
        )
        bad_id = json_logs_request([*_records(0, 2), json_log("abc", SPAN, "x")])
        wrong = _post(url, "/v1/logs", bad_id)
        elsewhere = _post(url, "/v1/metrics", {})
    assert broken.status_code == 400
    assert b"Expected an OTLP/protobuf ExportLogsServiceRequest" in broken.content
    assert wrong.status_code == 400
    assert "traceId of 32 hex digits" in wrong.json()["message"]
    assert elsewhere.status_code == 404
    assert ledger.store.max_position() == 0


CONVERSATION = "support-42"


def _conversation_span() -> list[Span]:
    """The call's span naming its conversation, which its log records do not."""
    attrs = {**_usage_only(), "gen_ai.conversation.id": CONVERSATION}
    request = json_request([json_span(TRACE, SPAN, attrs, start=10)])
    return decode_json(json.dumps(request).encode())


def _said_in(ledger: Ledger, key: str) -> list[tuple[str, str]]:
    (session,) = [s for s in list_sessions(ledger.store) if s.key == key]
    return [
        (e.message.role, e.message.text)
        for e in load_history(ledger.store, session.stream_id).entries
    ]


@pytest.mark.parametrize("restarted", [False, True])
def test_records_before_a_span_of_another_session_join_it(
    ledger: Ledger, restarted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Log records that came before their span, which went to its conversation.

    The records name no conversation: they wait in their trace's session. The
    span's session takes them when the span comes (by the same receiver, or
    a restarted one: the ledger says where they wait), the span reads them,
    and the trace's session lists them as joined. Sent again, they are known.
    Fails without the join: the conversation held the usage alone.
    """
    first = Recorder(ledger.store)
    assert first.record_logs(_logs(0, 3)).parked == 3
    recorder = Recorder(ledger.store) if restarted else first
    assert recorder.record(_conversation_span()).without_content == 0
    assert _said_in(ledger, CONVERSATION) == [("user", "Hi?"), ("assistant", "Hello.")]
    assert _said_in(ledger, TRACE) == []  # it holds the records, joined
    written = ledger.store.max_position()
    again = Recorder(ledger.store).record_logs(_logs(0, 3))
    assert (again.duplicates, again.applied, again.events) == (3, 0, 0)
    assert ledger.store.max_position() == written
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", CONVERSATION, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {}


def test_records_split_around_a_span_of_another_session_complete_it(
    ledger: Ledger,
) -> None:
    """The records before the span join it; those after it follow its trace there."""
    recorder = Recorder(ledger.store)
    recorder.record_logs(_logs(0, 2))
    recorder.record(_conversation_span())
    assert _said_in(ledger, CONVERSATION) == [("user", "Hi?")]
    late = Recorder(ledger.store).record_logs(_logs(2, 3))
    assert (late.applied, late.parked) == (1, 0)
    assert _said_in(ledger, CONVERSATION) == [("user", "Hi?"), ("assistant", "Hello.")]


def test_a_span_joining_records_again_writes_its_second_join(ledger: Ledger) -> None:
    """Records of a span parked in one session, taken by the span sent again,
    twice: the second join is written, as the first was, and what the records
    say is recorded, as when records come after their span.

    Each join is one append to the session that held the records, listing
    the span as ``joined``. The second's idempotency key was the first's (the
    same span joined), so the ledger answered it with the first append and
    wrote nothing, while the batch reported it written: the records parked
    the second time stayed parked for a restarted receiver. And a span sent
    again parked the records it took, never to read them: the user's message
    was not in the conversation. Found by ``benchmarks/fuzz_collect.py``
    (records whose trace id is not their span's, so that they wait in another
    trace's session).
    """
    other = "0" * 31 + "1"  # the records' trace: not the span's

    def parked(first: int, last: int) -> list[LogRecord]:
        records = _records(first, last)
        for record in records:
            record["traceId"] = other
        return decode_logs_json(json.dumps(json_logs_request(records)).encode())

    recorder = Recorder(ledger.store)
    assert recorder.record_logs(parked(0, 1)).parked == 1
    recorder.record(_conversation_span())
    assert recorder.record_logs(parked(1, 2)).parked == 1
    before = ledger.store.max_position()
    report = recorder.record(_conversation_span())  # sent again: takes the record
    assert ledger.store.max_position() - before == report.events
    (session,) = [s for s in list_sessions(ledger.store) if s.key == other]
    joins = [
        json.loads(r.event.fields)["joined"]
        for r in ledger.store.read_stream(session.stream_id)
        if getattr(r.event, "kind", "") == "log_events"
    ]
    assert [j for j in joins if j] == [[SPAN], [SPAN]]
    restarted = Recorder(ledger.store).record(_conversation_span())
    assert restarted.events == 0  # nothing waits for it any more
    assert _said_in(ledger, CONVERSATION) == [("user", "Hi?")]


@pytest.mark.parametrize("restarted", [False, True])
def test_records_parked_elsewhere_are_taken_after_later_ones_of_their_span(
    ledger: Ledger, restarted: bool
) -> None:
    """A span's record waits in another trace's session; a later record of the
    span goes to the span's own session. Sent again, the span takes the one
    that waits, whether its receiver remembers or was restarted.

    A restarted receiver read where records wait from every ``log_events``
    item, taking each listed event's span as parked there unless applied: the
    span's own session's item (the span had its content: the record only
    kept), read last, hid the session that held the record, and the span sent
    again took nothing. Items now list the spans whose events they parked.
    Found by ``benchmarks/fuzz_collect.py``.
    """
    other = "0" * 31 + "1"  # the first record's trace: not the span's
    attrs = {
        **chat_attributes(inputs=[{"role": "user", "parts": [text("Hi?")]}]),
        "gen_ai.conversation.id": CONVERSATION,
    }
    span = decode_json(
        json.dumps(json_request([json_span(TRACE, SPAN, attrs, start=10)])).encode()
    )
    waiting = _records(0, 1)
    waiting[0]["traceId"] = other
    first = Recorder(ledger.store)
    first.record(span)
    first.record_logs(decode_logs_json(json.dumps(json_logs_request(waiting)).encode()))
    assert first.record_logs(_logs(2, 3)).span_had_content == 1  # kept with the span
    recorder = Recorder(ledger.store) if restarted else first
    assert recorder.record(span).duplicates == 1  # sent again: takes the record
    (holder,) = [s for s in list_sessions(ledger.store) if s.key == other]
    joined = [
        json.loads(r.event.fields)["joined"]
        for r in ledger.store.read_stream(holder.stream_id)
        if getattr(r.event, "kind", "") == "log_events"
    ]
    assert joined == [[], [SPAN]]


def test_an_item_written_before_parked_spans_were_listed_still_says_where(
    ledger: Ledger,
) -> None:
    """A ``log_events`` item without ``parked`` (written by an older receiver)
    is read as before: the spans of its events not applied wait there."""
    event = {
        "span_id": SPAN,
        "name": "gen_ai.user.message",
        "time_ns": 1,
        "attributes": {},
        "body": {"content": "Hi?"},
        "print": "p1",
    }
    fields = {"events": [event], "applied": [], "joined": []}  # no "parked"
    stream = session_stream_id("support-bot", TRACE)
    ledger.store.append(
        stream,
        [
            SessionOpened(agent="support-bot", session_key=TRACE, channel="otlp"),
            ItemRecorded(
                turn_id=f"otlp-{SPAN}",
                framework="otlp",
                kind="log_events",
                fields=json.dumps(fields),
                typed=True,
            ),
        ],
        expected_version=0,
    )
    links = SessionLinks()
    links.follow(ledger.store, ledger.store.max_position())
    assert links.parked_in(SPAN) == ("support-bot", TRACE)
