"""Microsoft's Agent Framework over OpenAI's Responses API: calls that continue a response.

The fixtures are a real run's spans and log records (see the fixtures'
PROVENANCE.md): two runs of one agent session, each a trace, each call
sending only what is new and naming, as its ``gen_ai.conversation.id``, the
response it continues. Read as conversations, every call was a session of
its own (results apart from their calls, a failure recorded as a success);
followed as links to the responses they name, the two runs are one session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import (
    chat_attributes,
    json_request,
    json_span,
    post_json,
    text,
)
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import ModelCalled
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.sessions import list_sessions

FIXTURES = Path(__file__).parents[2] / "fixtures" / "otlp"
SPANS = FIXTURES / "agent-framework-1.26-spans.json"
LOGS = FIXTURES / "agent-framework-1.26-logs.json"

CHAT = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
    ("user", "And in Rome?", (), ()),
    ("assistant", "", (("call_w2", "get_weather", {"city": "Rome"}),), ()),
    ("tool", "", (), (("call_w2", "Error: Error: Function failed.", True),)),
    ("assistant", "No data for Rome.", (), ()),
]
"""The framework sends a failed tool's result as "Error: Function failed."."""


def _post(url: str, path: Path) -> None:
    signal = "traces" if path == SPANS else "logs"
    assert post_json(url, path.read_bytes(), signal).status_code == 200


def _the_conversation(ledger: Ledger, capsys: pytest.CaptureFixture[str]) -> None:
    (session,) = [s for s in list_sessions(ledger.store) if said_in(ledger, s.key)]
    assert said_in(ledger, session.key) == CHAT
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    usage = [
        (e.input_tokens, e.output_tokens) for e in events if isinstance(e, ModelCalled)
    ]
    assert usage == [(50, 10), (70, 6), (80, 10), (95, 8)]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"], audit["skipped"]) == (
        0,
        [],
        {},
    )


def test_an_import_of_the_spans_records_one_session(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", ledger.url, "import", str(SPANS), "--json"]) == 0
    capsys.readouterr()
    assert len(list_sessions(ledger.store)) == 1
    _the_conversation(ledger, capsys)


def test_the_log_records_posted_after_follow_their_spans(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log records name no conversation: they go where their trace's
    spans went, and repeat what the spans hold (recorded once)."""
    with running(ledger.store) as (url, app):
        _post(url, SPANS)
        _post(url, LOGS)
        assert app.refused == 0
    assert len(list_sessions(ledger.store)) == 1
    _the_conversation(ledger, capsys)


def _call(span: str, start: int, conversation: str | None, response: str) -> dict:
    attrs = chat_attributes(
        inputs=[{"role": "user", "parts": [text(span)]}], outputs=[]
    )
    attrs["gen_ai.response.id"] = response
    if conversation is not None:
        attrs["gen_ai.conversation.id"] = conversation
    return json_span(f"{start:032x}", f"{start:016x}", attrs, start=start)


def _record(recorder: Recorder, *spans: dict) -> None:
    recorder.record(decode_json(json.dumps(json_request(list(spans))).encode()))


def test_a_call_naming_a_response_continues_its_session(ledger: Ledger) -> None:
    """Across batches and traces, within one recorder; another recorder of the
    ledger (a second receiver), and one made after (a restart), follow the
    links read from the ledger: the responses the others recorded, and the
    session a trace's spans went to."""
    first, other = Recorder(ledger.store), Recorder(ledger.store)
    _record(first, _call("one", 1, None, "resp_1"))
    _record(first, _call("two", 2, "resp_1", "resp_2"))
    _record(first, _call("three", 3, "conv_x", "resp_3"))
    _record(other, _call("four", 4, "resp_2", "resp_4"))
    _record(first, _call("five", 5, "resp_4", "resp_5"))
    restarted = Recorder(ledger.store)
    _record(restarted, _call("six", 6, "resp_5", "resp_6"))
    later = chat_attributes(inputs=[{"role": "user", "parts": [text("seven")]}])
    # A later span of the trace of "six", naming no conversation: where its
    # trace's spans went.
    _record(Recorder(ledger.store), json_span(f"{6:032x}", f"{7:016x}", later, start=7))
    keys = {s.key: said_in(ledger, s.key) for s in list_sessions(ledger.store)}
    assert sorted(keys) == sorted([f"{1:032x}", "conv_x"])
    assert [m[1] for m in keys[f"{1:032x}"]] == [
        "one",
        "two",
        "four",
        "five",
        "six",
        "seven",
    ]


def _one_trace(trace: str) -> bytes:
    """The fixture's spans of one trace (one run), as a file of their own."""
    document = json.loads(SPANS.read_text())
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            scope["spans"] = [s for s in scope["spans"] if s["traceId"] == trace]
    return json.dumps(document).encode()


def test_each_run_imported_from_a_file_of_its_own_is_one_session(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second run continues the first one's last response, imported before."""
    traces = dict.fromkeys(
        span["traceId"]
        for resource in json.loads(SPANS.read_text())["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    )
    assert len(traces) == 2
    for n, trace in enumerate(traces):
        path = tmp_path / f"run-{n}.json"
        path.write_bytes(_one_trace(trace))
        assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
    capsys.readouterr()
    assert len(list_sessions(ledger.store)) == 1
    _the_conversation(ledger, capsys)


def test_log_records_follow_their_trace_after_a_restart(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spans posted to one receiver, the log records to another started after."""
    with running(ledger.store) as (url, app):
        _post(url, SPANS)
        assert app.refused == 0
    with running(ledger.store) as (url, app):
        _post(url, LOGS)
        assert app.refused == 0
    assert len(list_sessions(ledger.store)) == 1
    _the_conversation(ledger, capsys)


def test_a_receiver_reads_the_links_before_it_listens(ledger: Ledger) -> None:
    """``catch_up`` reads them (``collect`` calls it before listening): its
    first batch then reads nothing of them, and continues the response."""
    _record(Recorder(ledger.store), _call("one", 1, None, "resp_1"))
    restarted = Recorder(ledger.store)
    restarted.catch_up()
    reads: list[object] = []
    iter_all = ledger.store.iter_all

    def counted(*args: Any, **kwargs: Any) -> Iterator[Recorded]:
        reads.append(kwargs.get("types"))
        return iter_all(*args, **kwargs)

    ledger.store.iter_all = counted  # type: ignore[method-assign]
    _record(restarted, _call("two", 2, "resp_1", "resp_2"))
    assert reads == []
    (session,) = list_sessions(ledger.store)
    assert [m[1] for m in said_in(ledger, session.key)] == ["one", "two"]
