"""gitleaks' own fixtures x every read-out surface: 0 leaks (issue #26, item 4).

Each of the 496 true positives of gitleaks' rule files, 203 rules
(``tests/fixtures/secrets/gitleaks_tps.json``: their literal strings and
samples of their secret patterns), is planted in a session of one
real SQLite ledger: in the user input, a recall query, a model error, the
assistant text, tool-call arguments (as JSON text inside a JSON string, too),
tool output and errors, a trim reason, a memory entry and a failed turn. A
secret that the rules find on its own is also used as the tool's name and the
model's name (span names ``execute_tool <tool>`` and ``chat <model>``, the
timeline, the costs groups). None may be readable on any surface: the observer
view persisted by the real projection runner (and its raw database bytes), its
log lines and spans, the GenAI spans of ``pipeline.telemetry`` with content
capture on (the real OpenTelemetry SDK, in-memory exporter), the CLI's log
processor, the web pages and API of a real ``turnledger serve`` process, and
``turnledger costs`` (text and JSON).

The other side, ordinary text: every string of the shared corpus's transcripts
(``tests.conftest.CORPUS``) is scrubbed, and the share of strings the scrubber
changes is measured and bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import msgspec
import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from structlog.testing import capture_logs

from tests.conftest import CORPUS, IN_CI
from tests.secret_corpus import gitleaks_cases
from tests.web.conftest import Recorded, start_server, stop_server
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    MemoryRecalled,
    MemoryStored,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import scrub_log_values
from turnledger.pipeline.telemetry import emit_spans
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.projections.observer import ObserverState, ObserverView
from turnledger.projections.observer.export import emit_observer_items, export_spans
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

CASES = gitleaks_cases()
SECRETS = [secret for _, _, secret in CASES]
AGENT = "alice"
MAX_CHANGED_SHARE = 0.01
"""At most 1 % of the corpus strings may be changed by the scrubber."""


def _bare(secret: str) -> bool:
    """Whether the scrubber finds the secret with no context around it."""
    return secret not in scrub_text(secret)


def planted_events(i: int, text: str, secret: str) -> list[Event]:
    """One turn of session ``s<i>`` with ``text`` in every text field."""
    turn = f"t{i}"
    name = secret if _bare(secret) else "http"
    inner = json.dumps({"body": text})
    as_json = json.dumps({"request": inner, "note": text})
    return [
        SessionOpened(agent=AGENT, session_key=f"s{i}", channel="cli"),
        TurnStarted(turn_id=turn, origin="interactive", user_input=text),
        MemoryRecalled(turn_id=turn, backend="sqlite", query_summary=text),
        ModelCalled(
            turn_id=turn,
            provider="openai",
            model=name,
            success=False,
            error=text,
            input_tokens=3,
            cost_usd=0.001,
        ),
        AssistantMessage(
            turn_id=turn,
            text=text,
            tool_calls=(
                ToolCallRecord(id=f"c{i}", name=name, arguments=as_json),
                ToolCallRecord(id=f"d{i}", name="shell", arguments=text),
            ),
        ),
        ToolResultRecorded(turn_id=turn, call_id=f"c{i}", tool=name, output=text),
        ToolResultRecorded(
            turn_id=turn, call_id=f"d{i}", tool="shell", success=False, error=text
        ),
        HistoryTrimmed(
            turn_id=turn,
            dropped_messages=1,
            dropped_turns=1,
            kept_turns=1,
            tokens_before=2,
            tokens_after=1,
            reason=text,
        ),
        TurnFailed(turn_id=turn, kind="provider_error", error=text),
        TurnCompleted(turn_id=f"{turn}b"),
    ]


def assert_no_secret(surface: str, shown: str) -> None:
    """Fail naming the surface and the rules whose secrets it shows."""
    leaked = [rule for rule, _, secret in CASES if secret in shown]
    assert not leaked, f"{surface} shows secrets of {sorted(set(leaked))}"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """One ledger: a session per fixture case and the agent's memory."""
    root = tmp_path_factory.mktemp("secret-surfaces")
    db = str(root / "turnledger.db")
    config = root / "turnledger.toml"
    config.write_text(f'data_dir = "{root / "data"}"\n')
    with open_store(db) as store:
        for i, (_, text, secret) in enumerate(CASES):
            stream = session_stream_id(AGENT, f"s{i}")
            store.append(stream, planted_events(i, text, secret), expected_version=0)
        store.append(
            memory_stream_id(AGENT),
            [
                MemoryStored(agent=AGENT, key=f"k{i}", content=text, session=f"s{i}")
                for i, (_, text, _) in enumerate(CASES)
            ],
            expected_version=0,
        )
    return Recorded(root=root, db=db, config=config, sessions={})


@pytest.fixture(scope="module")
def span_exporter() -> InMemorySpanExporter:
    """The real OpenTelemetry SDK, exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_the_corpus_is_the_rule_sets_own(ledger):
    """At least 100 shapes, a fair share of them usable as names too."""
    assert len(CASES) >= 100
    assert sum(_bare(secret) for secret in SECRETS) >= 50


def test_observer_view_logs_and_spans(ledger, span_exporter, tmp_path):
    """The persisted observer view (its database's bytes too), logs and spans.

    The cost records view is an internal fold keyed by model name and session,
    like the ledger itself; what it shows (``costs``, the costs page) is checked
    below.
    """
    views = SQLiteViewStore(str(tmp_path / "views.db"))
    observer = ObserverView()
    with open_store(ledger.db) as store:
        ProjectionRunner(store, views, [observer]).catch_up(page_size=500)
    states = views.all(observer.name, ObserverState)
    views.close()
    assert len(states) >= len(CASES)
    assert_no_secret("observer view", msgspec.json.encode(states).decode())
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("views.db*"))
    assert_no_secret("view database bytes", raw.decode("utf-8", "replace"))
    with capture_logs() as logs:
        for state in states.values():
            emit_observer_items(structlog.get_logger(), state.items)
    assert len(logs) > len(CASES)
    assert_no_secret("observer log lines", repr(logs))
    span_exporter.clear()
    started = sum(export_spans(state.items) for state in states.values())
    spans = span_exporter.get_finished_spans()
    assert len(spans) == started > len(CASES)
    assert_no_secret(
        "observer spans", repr([(s.name, dict(s.attributes or {})) for s in spans])
    )


def test_genai_spans_with_content_capture(ledger, span_exporter):
    """``execute_tool <tool>`` / ``chat <model>`` names and every attribute."""
    span_exporter.clear()
    tracer = trace.get_tracer_provider().get_tracer("turnledger")
    with open_store(ledger.db) as store:
        started = emit_spans(store.iter_all(), tracer, capture_content=True)
    spans = span_exporter.get_finished_spans()
    assert len(spans) == started > 2 * len(CASES)
    names = [s.name for s in spans]
    assert any(name.startswith("execute_tool [REDACTED]") for name in names)
    assert_no_secret(
        "GenAI spans", repr([(s.name, dict(s.attributes or {})) for s in spans])
    )


def test_cli_log_processor():
    """The structlog processor of every CLI command."""
    for _, text, secret in CASES:
        tool = secret if _bare(secret) else "http"
        event = {
            "event": "turn.failed",
            "error": text,
            "tool": tool,
            "n": 1,
            "keys": [text, (tool,)],
            "detail": {"body": text},
        }
        assert_no_secret("a CLI log line", repr(scrub_log_values(None, "x", event)))
    deep = {"event": "e", "v": [[[[["ghp_Zx81kQ0aPz3mN7vW2yT5uR9sLp4Jh6Gf8Dd1"]]]]]}
    assert scrub_log_values(None, "x", deep)["v"] == [[[["[nested too deep]"]]]]


@pytest.mark.parametrize("by", ["model", "session"])
def test_costs_command(ledger, by):
    """``turnledger costs`` groups by model names and session keys, text and JSON."""
    for flags in ([], ["--json"]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "turnledger.pipeline.cli",
                "--db",
                ledger.db,
                "costs",
                "--by",
                by,
                *flags,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert "calls" in done.stdout
        assert_no_secret(f"costs --by {by} {flags}", done.stdout + done.stderr)


@pytest.fixture(scope="module")
def served(ledger):
    """A real ``turnledger serve`` over the planted ledger."""
    process, address = start_server(ledger)
    yield address["url"]
    stop_server(process)


def test_web_pages_and_api(ledger, served):
    """Sessions list, every timeline, the position API, live events, memory, costs."""
    with open_store(ledger.db) as store:
        streams = [session_stream_id(AGENT, f"s{i}") for i in range(len(CASES))]
        versions = [store.stream_version(stream) for stream in streams]
    with httpx.Client(base_url=served, timeout=60) as client:
        pages = {
            "sessions": client.get("/", params={"agent": AGENT}),
            "memory": client.get("/memory", params={"agent": AGENT, "q": "token"}),
            "costs": client.get("/costs"),
        }
        for i, (stream, version) in enumerate(zip(streams, versions, strict=True)):
            pages[f"timeline {i}"] = client.get(f"/sessions/{stream}")
            for index in (3, version - 1):
                pages[f"at {i}/{index}"] = client.get(
                    f"/api/sessions/{stream}/at", params={"index": index}
                )
            pages[f"events {i}"] = client.get(
                f"/api/sessions/{stream}/events", params={"after": 0}
            )
    for surface, response in pages.items():
        assert response.status_code == 200, surface
        assert_no_secret(surface, response.text)
    assert "[REDACTED]" in pages["timeline 0"].text


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def corpus_strings() -> list[str]:
    """Every string value of the shared corpus's JSON and JSON Lines files."""
    found: list[str] = []
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix not in (".json", ".jsonl"):
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for line in lines if path.suffix == ".jsonl" else ["\n".join(lines)]:
            try:
                found += _strings(json.loads(line))
            except ValueError:
                continue
    return [s for s in found if len(s) >= 8]


def test_ordinary_text_is_rarely_changed():
    """The share of corpus strings the scrubber changes stays under 1 %.

    Measured: 1 of 13,757 strings (8+ characters) changed by ``scrub_text``,
    24 by ``summarize``.
    """
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail("the shared corpus must be present under CI=true")
        pytest.skip("no shared corpus on this machine")
    strings = corpus_strings()
    assert len(strings) > 1_000
    changed = [s for s in strings if scrub_text(s) != s]
    print(f"corpus strings changed by scrub_text: {len(changed)}/{len(strings)}")
    assert len(changed) / len(strings) <= MAX_CHANGED_SHARE, changed[:20]
    # Summaries also drop unknown high-entropy tokens (signatures of thinking
    # blocks, encrypted content: opaque tokens indeed).
    summarized = [s for s in strings if summarize(s, len(s)) != s]
    print(f"corpus strings changed by summarize: {len(summarized)}/{len(strings)}")
    assert len(summarized) / len(strings) <= MAX_CHANGED_SHARE, summarized[:20]
