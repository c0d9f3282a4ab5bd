"""Semantic Kernel's own telemetry: its spans, and its messages as log records.

The fixtures are a real Semantic Kernel run's spans and log records (see the
fixtures' PROVENANCE.md). Its model diagnostics make a ``chat`` span of each
call (usage, no content) and an ``execute_tool`` span of each function run,
and log each message sent (``gen_ai.*.message``) and each choice
(``gen_ai.choice``) as Python logging records carrying ``event.name``, in the
call's span. Whichever file comes first (imported, or posted to ``collect``),
the session is the conversation: a function round trip, then a function that
raised, whose error the kernel sent the model; the kernel's own logs and its
function-calling loop spans are counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import post_json
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import list_sessions

FIXTURES = Path(__file__).parents[2] / "fixtures" / "otlp"
SPANS = FIXTURES / "semantic-kernel-1.45-spans.json"
LOGS = FIXTURES / "semantic-kernel-1.45-logs.json"

FAILED = (
    "An error occurred while invoking the function weather-get_weather: "
    "no data for Rome"
)
"""What the kernel sent the model of the function that raised."""

CHAT = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "weather-get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
    ("user", "And in Rome?", (), ()),
    ("assistant", "", (("call_w2", "weather-get_weather", {"city": "Rome"}),), ()),
    ("tool", "", (), (("call_w2", f"Error: {FAILED}", True),)),
    ("assistant", "I have no data for Rome.", (), ()),
]


def _post(url: str, path: Path) -> None:
    signal = "traces" if path == SPANS else "logs"
    assert post_json(url, path.read_bytes(), signal).status_code == 200


@pytest.mark.parametrize("via", ["import", "collect"])
@pytest.mark.parametrize("first", ["spans", "logs"])
def test_a_semantic_kernel_run_records_its_conversation(
    ledger: Ledger, first: str, via: str, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [SPANS, LOGS] if first == "spans" else [LOGS, SPANS]
    if via == "import":
        for path in files:
            assert main(["--db", ledger.url, "import", str(path), "--json"]) == 0
        capsys.readouterr()
    else:
        with running(ledger.store) as (url, app):
            for path in files:
                _post(url, path)
            assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    assert session.agent == "weather-sk"
    assert said_in(ledger, session.key) == CHAT
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("gpt-4o", 50, 10),
        ("gpt-4o", 70, 6),
        ("gpt-4o", 80, 10),
        ("gpt-4o", 95, 8),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"], audit["skipped"]) == (
        0,
        [],
        {},
    )
