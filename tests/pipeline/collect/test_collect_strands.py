"""Strands Agents' own telemetry: its spans, its Converse content blocks.

The fixtures are a real Strands Agents run's spans (see the fixtures'
PROVENANCE.md), in the GenAI conventions' previous form (its default: message
events whose content is Bedrock Converse blocks, tool runs in events, and
``session.id`` from ``trace_attributes``) and in the current form. Imported as
files or posted to ``collect``, both record the same conversation: a tool
round trip, then a tool run that fails; the agent's loop and invocation spans
are counted. Hand-built spans check the blocks a run did not send: an image,
a JSON result, parallel results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import json_request, json_span, post_json
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.collected import part_not_recorded
from turnledger.pipeline.sessions import list_sessions

FIXTURES = Path(__file__).parents[2] / "fixtures" / "otlp"
PREVIOUS = FIXTURES / "strands-agents-1.62.json"
CURRENT = FIXTURES / "strands-agents-1.62-latest.json"

PARIS = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
]
ROME = [
    ("user", "And in Rome?", (), ()),
    ("assistant", "", (("call_w2", "get_weather", {"city": "Rome"}),), ()),
    ("tool", "", (), (("call_w2", "Error: Error: no data for Rome", True),)),
    ("assistant", "I have no data for Rome.", (), ()),
]
"""The second invocation: its tool run raised, and Strands sent the error text
as the result (``status: error``), which the history shows after ``Error: ``."""

COUNTED = {"execute_event_loop_cycle": 4, "invoke_agent": 2}


def _record(ledger: Ledger, path: Path, via: str, capsys: Any) -> None:
    """Import the file, or post it to a receiver (and again: nothing is written)."""
    if via == "import":
        assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["skipped"] == {
            f"span of operation {k}": n for k, n in COUNTED.items()
        }
        assert report["coverage"]["mapped"] == 6
        return
    with running(ledger.store) as (url, _app):
        answer = post_json(url, path.read_bytes())
        assert answer.status_code == 200
        assert "rejected_spans" not in answer.json().get("partialSuccess", {})
        before = ledger.store.max_position()
        assert post_json(url, path.read_bytes()).status_code == 200
        assert ledger.store.max_position() == before


@pytest.mark.parametrize("via", ["import", "collect"])
@pytest.mark.parametrize("path", [PREVIOUS, CURRENT], ids=["previous", "current"])
def test_a_strands_agents_run_records_its_conversation(
    ledger: Ledger, path: Path, via: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The previous form's run carries ``session.id``: its two invocations (two
    traces) are one session. The current form's carries none: each invocation
    is a session of its trace, holding the conversation it was sent."""
    _record(ledger, path, via, capsys)
    sessions = {s.key: s for s in list_sessions(ledger.store)}
    histories = sorted((said_in(ledger, key) for key in sessions), key=len)
    if path == PREVIOUS:
        assert list(sessions) == ["strands-chat-1"]
        assert histories == [[*PARIS, *ROME]]
    else:
        assert histories == [PARIS, [*PARIS, *ROME]]
    usage = []
    for key, session in sessions.items():
        events = [r.event for r in ledger.store.read_stream(session.stream_id)]
        system = [e.text for e in events if isinstance(e, SystemPromptSet)]
        assert system == ["You answer weather questions."]
        calls = [e for e in events if isinstance(e, ModelCalled)]
        assert {(c.model, c.provider, c.success) for c in calls} == {
            ("gpt-4o", "strands-agents", True)
        }
        usage += [(c.input_tokens, c.output_tokens) for c in calls]
        audit = audit_json(ledger, key, capsys)
        assert (audit["violations"], audit["skipped"]) == ([], {})
    assert sorted(usage) == [(50, 10), (70, 6), (80, 10), (95, 8)]


def _blocks(*blocks: dict[str, object]) -> str:
    return json.dumps(list(blocks))


STRANDS = {"gen_ai.system": "strands-agents", "gen_ai.request.model": "gpt-4o"}


def test_converse_blocks_a_run_did_not_send(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image in a question is counted, not text; an answer holding text and
    two calls is both (sent again as a structured value, not JSON text, it is
    the same message); a tool message holding two results (parallel calls),
    one JSON and one failed, is two results."""
    trace = "4bf92f3577b34da6a3ce929d0e0e4737"
    asks = [
        ("gen_ai.system.message", {"content": _blocks({"text": "Be brief."})}),
        (
            "gen_ai.user.message",
            {"content": _blocks({"text": "Compare"}, {"image": {"format": "png"}})},
        ),
        (
            "gen_ai.choice",
            {
                "finish_reason": "tool_use",
                "message": _blocks(
                    {"text": "Looking."},
                    {"toolUse": {"toolUseId": "a", "name": "stock", "input": {"n": 1}}},
                    {"toolUse": {"toolUseId": "b", "name": "stock", "input": {"n": 2}}},
                ),
            },
        ),
    ]
    results = _blocks(
        {
            "toolResult": {
                "toolUseId": "a",
                "status": "success",
                "content": [{"json": {"left": 4}}, {"text": "units"}],
            }
        },
        {
            "toolResult": {
                "toolUseId": "b",
                "status": "error",
                "content": [{"text": "Error: timeout"}],
            }
        },
    )
    answers = [
        *asks[:2],
        ("gen_ai.assistant.message", {"content": json.loads(asks[2][1]["message"])}),
        ("gen_ai.tool.message", {"content": results}),
        ("gen_ai.choice", {"message": _blocks({"text": "4 left; b timed out."})}),
    ]
    chat = {**STRANDS, "gen_ai.operation.name": "chat", "session.id": "s-1"}
    spans = [
        json_span(trace, "00f067aa0ba90301", chat, start=1, events=asks),
        json_span(trace, "00f067aa0ba90302", chat, start=2, events=answers),
    ]
    report = Recorder(ledger.store).record(
        decode_json(json.dumps(json_request(spans)).encode())
    )
    assert (report.mapped, report.unknown) == (2, {})
    assert said_in(ledger, "s-1") == [
        ("user", "Compare", (), ()),
        (
            "assistant",
            "Looking.",
            (("a", "stock", {"n": 1}), ("b", "stock", {"n": 2})),
            (),
        ),
        # One message per result, as the history holds them.
        ("tool", "", (), (("a", '{"left":4}\nunits', False),)),
        ("tool", "", (), (("b", "Error: Error: timeout", True),)),
        ("assistant", "4 left; b timed out.", (), ()),
    ]
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == ["Be brief."]
    assert audit_json(ledger, "s-1", capsys)["skipped"] == {
        part_not_recorded("image"): 1
    }
