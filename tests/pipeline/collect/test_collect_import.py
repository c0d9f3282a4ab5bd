"""turnledger import of OTLP JSON span files, through the receiver's mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger
from tests.pipeline.collect.spans import (
    ANSWER,
    CALL,
    RESULT,
    USER,
    chat_attributes,
    json_log,
    json_logs_request,
    json_request,
    json_span,
)
from turnledger.ledger.events import ModelCalled
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import list_sessions, load_history

TRACE = "5b8efff798038103d269b633813fc60c"
OTHER = "6b8efff798038103d269b633813fc60c"


def _spans() -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    first = json_span(
        TRACE,
        "00f067aa0ba902b7",
        chat_attributes(inputs=[USER], outputs=[CALL]),
        start=1,
    )
    second = json_span(
        TRACE,
        "00f067aa0ba902b8",
        chat_attributes(inputs=[USER, CALL, RESULT], outputs=[ANSWER]),
        start=2,
    )
    other = json_span(OTHER, "10f067aa0ba902b7", chat_attributes(usage=(5, 1)), start=3)
    return first, second, other


def test_detected_file_is_recorded_and_a_second_import_writes_nothing(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(json_request(list(_spans()))))
    assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "otlp"
    assert sorted(s["session"] for s in report["sessions"]) == sorted([TRACE, OTHER])
    assert {s["agent"] for s in report["sessions"]} == {"support-bot"}
    assert report["skipped"] == {"span without content (usage only)": 1}
    sessions = {s.key: s for s in list_sessions(ledger.store)}
    history = load_history(ledger.store, sessions[TRACE].stream_id).entries
    assert [e.message.role for e in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    head = ledger.store.max_position()
    assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["sessions"] == []
    assert again["skipped"]["span already in the ledger"] == 3
    assert ledger.store.max_position() == head


def test_json_lines_with_format_otlp_and_agent(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, other = _spans()
    path = tmp_path / "collector.jsonl"
    lines = [json_request([first]), json_request([second]), json_request([other])]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    argv = ["--db", ledger.url, "import", str(path), "--format", "otlp"]
    assert main([*argv, "--agent", "ops"]) == 0
    out = capsys.readouterr().out
    assert f"imported {TRACE} (agent ops)" in out
    calls = [r for r in ledger.store.iter_all() if isinstance(r.event, ModelCalled)]
    assert len(calls) == 3
    assert {s.agent for s in list_sessions(ledger.store)} == {"ops"}


def test_a_bad_line_refuses_the_file_and_writes_nothing(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _second, _other = _spans()
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(json_request([first])) + '\n{"resourceSpans": 5}\n')
    assert main(["--db", ledger.url, "import", str(path), "--format", "otlp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "line 2" in err
    assert "resourceSpans to be an array" in err
    assert ledger.store.max_position() == 0
    whole = tmp_path / "spans.json"
    whole.write_text(json.dumps(json_request([first])))
    argv = ["--db", ledger.url, "import", str(whole), "--session", "x"]
    assert main(argv) == 2
    assert "Expected no --session for an OTLP file" in capsys.readouterr().err
    assert ledger.store.max_position() == 0


LOG_SPAN = "20f067aa0ba902b7"


def _log_files(tmp_path: Path) -> tuple[Path, Path]:
    """A span file (one chat span, content apart) and its log file (the content)."""
    spans = tmp_path / "traces.json"
    span = json_span(TRACE, LOG_SPAN, chat_attributes(usage=(9, 3)), start=1)
    spans.write_text(json.dumps(json_request([span])))
    answer = {"index": 0, "message": {"role": "assistant", "content": "Hello."}}
    records = [
        json_log(TRACE, LOG_SPAN, "gen_ai.user.message", {"content": "Hi?"}),
        json_log(TRACE, LOG_SPAN, "gen_ai.choice", answer, time=2),
        {"timeUnixNano": "3", "body": {"stringValue": "GET /health 200"}},
    ]
    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps(json_logs_request(records)) + "\n")
    return spans, logs


@pytest.mark.parametrize("first", ["traces", "logs"])
def test_a_log_file_joins_its_spans_whichever_comes_first(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str
) -> None:
    spans, logs = _log_files(tmp_path)
    files = [spans, logs] if first == "traces" else [logs, spans]
    for path in files:
        assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["format"] == "otlp"
        if path == logs:
            coverage = report["coverage"]
            assert (coverage["read"], coverage["mapped"]) == (3, 2)
            assert coverage["first"] == (
                "log record 3 (without an event name): not a GenAI content event"
            )
            assert report["skipped"] == {"log record (not a GenAI content event)": 1}
    (session,) = list_sessions(ledger.store)
    history = load_history(ledger.store, session.stream_id).entries
    assert [(e.message.role, e.message.text) for e in history] == [
        ("user", "Hi?"),
        ("assistant", "Hello."),
    ]
    capsys.readouterr()
    assert main(["--db", ledger.url, "audit", session.key, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {}
    head = ledger.store.max_position()
    assert main(["--db", ledger.url, "import", str(logs), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["files"][0]["outcome"] == "already_imported"
    assert again["skipped"]["log event already in the ledger"] == 2
    assert ledger.store.max_position() == head


def test_a_log_file_is_audited_as_its_import_would_record_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _spans_file, logs = _log_files(tmp_path)
    assert main(["audit", str(logs), "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert audit["coverage"]["kinds"] == {
        "log record": {"read": 3, "mapped": 2, "accounted": 1}
    }


def test_a_file_of_neither_or_both_signals_is_refused_whole(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans, logs = _log_files(tmp_path)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(spans.read_text() + "\n" + logs.read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"resourceMetrics": [], "note": 1}))
    expected = {
        mixed: "Expected the requests of one signal in a file, found spans from "
        "line 1, log records from line 2",
        other: "Expected an OTLP/JSON trace or log request (resourceSpans or "
        "resourceLogs), found an object with keys 'note', 'resourceMetrics'",
    }
    for path, message in expected.items():
        argv = ["--db", ledger.url, "import", str(path), "--format", "otlp"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert message in err
    assert ledger.store.max_position() == 0
