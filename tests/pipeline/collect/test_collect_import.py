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
