"""Issue #11 item 4 (one format of it): OpenHands event streams.

Public files: OpenHands' own recorded trajectories (``tests/fixtures/openhands``,
MIT, with ``PROVENANCE.md``), counted by id (a result after its call).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import count_pairing, read_transcript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openhands"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("basic.json", (1, 2, 1, 1, 0)),
        ("basic_interactions.json", (1, 1, 0, 1, 0)),
    ],
)
def test_openhands_trajectories_are_counted_as_provenance_states(name, expected):
    """Detected from the events; calls from tool_call_metadata, results from observations."""
    parsed = read_transcript(FIXTURES / name)
    assert parsed.format == "openhands"
    c = count_pairing(parsed)
    got = (
        c.conversations,
        c.tool_calls,
        c.tool_results,
        c.unpaired_calls,
        c.unpaired_results,
    )
    assert got == expected


def test_the_edit_call_keeps_the_models_arguments_and_its_result(capsys, tmp_path):
    """The call's arguments are the model's own; the observation is its result."""
    parsed = read_transcript(FIXTURES / "basic.json")
    messages = parsed.conversations[0].messages
    assert messages[0].role == "user"
    assert messages[0].text.startswith("Please create a simple 2048 game")
    edit = messages[1].tool_calls[0]
    assert (edit.id, edit.name) == (
        "toolu_017nBp7UfiGqyrA7j77HgtFP",
        "str_replace_editor",
    )
    assert json.loads(edit.arguments)["command"] == "create"
    assert messages[2].tool_results[0].call_id == edit.id
    db = str(tmp_path / "l.db")
    assert main(["--db", db, "import", str(FIXTURES / "basic.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "openhands"
    session = report["sessions"][0]["session"]
    assert main(["--db", db, "export", session, "--format", "openai-chat"]) == 0
    exported = json.loads(capsys.readouterr().out)["messages"]
    calls = [c["id"] for m in exported for c in m.get("tool_calls", [])]
    assert calls == ["toolu_017nBp7UfiGqyrA7j77HgtFP", "toolu_01BUKu3B7nY574atNECkBiFk"]
