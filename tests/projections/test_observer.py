"""Observer view: bounded, scrubbed timelines per stream; logs and spans."""

from __future__ import annotations

import itertools
import sys
import types
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    HistoryTrimmed,
    KnowledgeCaptured,
    MediaAttached,
    MemoryForgotten,
    MemoryRecalled,
    MemoryStored,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    RecallRef,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.policies.lifecycle import validate_declaration
from turnledger.projections.base import digest, fold
from turnledger.projections.observer import (
    OBSERVER_VIEW,
    ObserverState,
    ObserverView,
    timeline,
)
from turnledger.projections.observer.export import (
    OpenTelemetryNotInstalledError,
    emit_observer_items,
    export_spans,
    render_item,
)
from turnledger.projections.observer.items import NOT_JSON, observe
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

S1, S2 = uuid.UUID(int=1), uuid.UUID(int=2)
T0 = datetime(2026, 6, 1, 9, tzinfo=UTC)
DIGEST = "ab" * 32
LEAK = "sk-live0123456789abcdef"


def recorded(*items):
    """Envelope ``(stream, event)`` pairs, one second apart."""
    versions: Counter[uuid.UUID] = Counter()
    out = []
    for position, (stream, event) in enumerate(items, start=1):
        versions[stream] += 1
        out.append(
            Recorded(
                stream_id=stream,
                version=versions[stream],
                position=position,
                recorded_at=T0 + timedelta(seconds=position),
                event=event,
            )
        )
    return out


def fold_in_pages(projection, records, cuts):
    """Fold page by page through msgspec JSON, as the runner's view store does."""
    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(projection.state_type)
    stored: dict[str, bytes] = {}
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in itertools.pairwise(bounds):
        page = [
            r for r in records[start:end] if isinstance(r.event, projection.event_types)
        ]
        keys = {k for r in page for k in projection.keys(r)}
        loaded = {k: decoder.decode(stored[k]) for k in keys if k in stored}
        changed = fold(projection, page, loaded)
        stored.update((k, encoder.encode(changed[k])) for k in keys if k in changed)
    return {k: decoder.decode(v) for k, v in stored.items()}


def a_turn(leak=LEAK):
    """One session with a turn touching every event type, a secret planted around."""
    return [
        SessionOpened(agent="alice", session_key="k1", channel="cli"),
        TurnStarted(turn_id="t1", origin="interactive", user_input=f"diary {leak}"),
        MemoryRecalled(
            turn_id="t1",
            backend="sqlite",
            entries=(RecallRef(key="pref"), RecallRef(key="name")),
            query_summary=f"api_key={leak}",
            injected_chars=42,
        ),
        PromptAssembled(
            turn_id="t1",
            sections=(
                PromptSection(name="system", chars=10, messages=1, digest=DIGEST),
                PromptSection(name="history", chars=90, messages=3, digest=DIGEST),
            ),
            fingerprint=DIGEST,
            estimated_tokens=25,
        ),
        ModelCalled(
            turn_id="t1",
            provider="openai",
            model="gpt-x",
            input_tokens=25,
            output_tokens=5,
            cache_write_tokens=20,
            reasoning_tokens=3,
            cost_usd=0.01,
            duration_ms=120.0,
        ),
        AssistantMessage(
            turn_id="t1",
            text=f"private answer {leak}",
            tool_calls=(
                ToolCallRecord(
                    id="c1",
                    name="http_get",
                    arguments=msgspec.json.encode(
                        {"url": "https://x.test/a?key=1", "password": leak}
                    ).decode(),
                ),
                ToolCallRecord(id="c2", name="shell", arguments=f'{{"cmd": "{leak}'),
            ),
        ),
        ToolResultRecorded(
            turn_id="t1",
            call_id="c1",
            tool="http_get",
            output=f"raw body {leak}",
            original_chars=5000,
            kept_chars=100,
            truncated=True,
        ),
        ToolResultRecorded(
            turn_id="t1",
            call_id="c2",
            tool="shell",
            success=False,
            error=f"denied: token={leak}",
        ),
        HistoryTrimmed(
            turn_id="t1",
            dropped_messages=4,
            dropped_turns=2,
            kept_turns=3,
            tokens_before=900,
            tokens_after=400,
            reason="budget",
        ),
        MediaAttached(
            turn_id="t1",
            file_name=f"{leak}.png",
            mime="image/png",
            kind="image",
            size_bytes=2048,
            sha256=DIGEST,
            summary=leak,
        ),
        MemoryStored(agent="alice", key="pref", content=f"likes {leak}"),
        MemoryForgotten(agent="alice", key="old", reason="user asked"),
        KnowledgeCaptured(agent="alice", subject=leak, relation="owns", object="x"),
        TurnCompleted(turn_id="t1", iterations=2, duration_ms=300.0),
        TurnFailed(turn_id="t2", kind="provider_error", error=f"401 Bearer {leak}"),
    ]


def test_each_event_becomes_its_observer_items():
    """Every event type maps to the kinds modelled on ZeroClaw's ObserverEvent."""
    states = fold(OBSERVER_VIEW, recorded(*((S1, e) for e in a_turn())))
    state = states[str(S1)]
    assert [i.kind for i in state.items] == [
        "session_start",
        "turn_start",
        "memory_recall",
        "llm_request",
        "llm_response",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "history_trimmed",
        "media_attached",
        "memory_store",
        "memory_forget",
        "knowledge_capture",
        "turn_end",
        "turn_end",
        "error",
    ]
    assert (state.agent, state.session_key, state.channel, state.dropped) == (
        "alice",
        "k1",
        "cli",
        0,
    )
    by_kind = {i.kind: i for i in state.items}
    assert by_kind["memory_recall"].keys == ("pref", "name")
    assert by_kind["memory_recall"].figures == {"entries": 2, "injected_chars": 42}
    assert by_kind["llm_request"].figures["messages"] == 4
    assert by_kind["llm_response"].name == "gpt-x"
    assert by_kind["llm_response"].figures["duration_ms"] == 120.0
    assert by_kind["turn_end"].labels == {"failure": "provider_error"}
    assert by_kind["error"].summary == "401 Bearer sk-l*[REDACTED]"
    assert by_kind["media_attached"].labels == {
        "media": "image",
        "mime": "image/png",
        "sha256": DIGEST[:16],
    }


def test_tool_calls_show_scrubbed_arguments_and_results_only_sizes():
    """Arguments are scrubbed JSON (or withheld); results give sizes, never output."""
    state = fold(OBSERVER_VIEW, recorded(*((S1, e) for e in a_turn())))[str(S1)]
    first_call, second_call, ok, failed = (
        i for i in state.items if i.kind in ("tool_call", "tool_result")
    )
    assert first_call.summary == '{"url":"https://x.test/a","password":"[REDACTED]"}'
    assert (first_call.name, first_call.call_id) == ("http_get", "c1")
    assert second_call.summary == NOT_JSON
    assert ok.figures == {"output_chars": 32, "original_chars": 5000, "kept_chars": 100}
    assert (ok.success, ok.summary, ok.labels["truncated"]) == (True, "", "true")
    assert (failed.success, failed.summary) == (False, "denied: token=sk-l*[REDACTED]")


def test_no_content_or_planted_secret_reaches_a_state():
    """User input, answers, outputs, memory content, names and secrets stay out."""
    states = fold(OBSERVER_VIEW, recorded(*((S1, e) for e in a_turn(LEAK))))
    encoded = msgspec.json.encode(states).decode()
    for content in (LEAK, "diary", "private answer", "raw body", "likes"):
        assert content not in encoded


def test_long_text_is_bounded():
    """Summaries stop at 200 characters plus an ellipsis, ids at 64."""
    args = msgspec.json.encode({"q": "w " * 500}).decode()
    items = observe(
        recorded(
            (
                S1,
                AssistantMessage(
                    turn_id="t" * 300,
                    tool_calls=(
                        ToolCallRecord(id="c", name="n" * 100, arguments=args),
                    ),
                ),
            )
        )[0]
    )
    (item,) = items
    assert len(item.summary) <= 201
    assert item.summary.endswith("\u2026")
    assert len(item.turn_id) == len(item.name) == 65
    assert item.figures["argument_chars"] == len(args)


def test_the_newest_items_are_kept_and_the_rest_counted():
    """Beyond the limit the oldest items go, and the loss is visible."""
    view = ObserverView(limit=3)
    state = fold(view, recorded(*((S1, e) for e in a_turn())))[str(S1)]
    assert [i.kind for i in state.items] == ["turn_end", "turn_end", "error"]
    assert state.dropped == 14
    assert state.agent == "alice"
    assert (view.name, OBSERVER_VIEW.name) == ("observer_view_3", "observer_view")


def test_limit_must_be_positive():
    """A limit below 1 is refused."""
    with pytest.raises(ValueError, match="Expected an observer limit >= 1, found 0"):
        ObserverView(limit=0)


def test_timeline_merges_streams_in_ledger_order():
    """Streams interleave by position and can be filtered by agent."""
    records = recorded(
        (S1, SessionOpened(agent="alice", session_key="a")),
        (S2, SessionOpened(agent="bob", session_key="b")),
        (S1, TurnCompleted(turn_id="t1")),
        (S2, TurnCompleted(turn_id="t2")),
    )
    states = fold(OBSERVER_VIEW, records)
    assert [i.position for i in timeline(states)] == [1, 2, 3, 4]
    assert [i.position for i in timeline(states, agent="bob")] == [2, 4]
    assert [i.position for i in timeline(states, limit=1)] == [4]
    assert timeline(states, limit=0) == ()


def test_items_render_as_structlog_events():
    """Failures log at warning, the rest at info, with flat bounded fields."""
    state = fold(OBSERVER_VIEW, recorded(*((S1, e) for e in a_turn())))[str(S1)]
    with capture_logs() as logs:
        logged = emit_observer_items(structlog.get_logger(), state.items)
    assert logged == len(logs) == len(state.items)
    by_event = {entry["event"]: entry for entry in logs}
    assert by_event["observer.llm_response"] == {
        "event": "observer.llm_response",
        "log_level": "info",
        "position": 5,
        "at": "2026-06-01T09:00:05+00:00",
        "turn_id": "t1",
        "name": "gpt-x",
        "success": True,
        "provider": "openai",
        "iteration": 0,
        "input_tokens": 25,
        "output_tokens": 5,
        "cached_input_tokens": 0,
        "cache_write_tokens": 20,
        "reasoning_tokens": 3,
        "cost_usd": 0.01,
        "duration_ms": 120.0,
    }
    assert by_event["observer.error"]["log_level"] == "warning"
    levels = [(e["event"], e["log_level"]) for e in logs if e["log_level"] != "info"]
    assert levels == [
        ("observer.tool_result", "warning"),
        ("observer.turn_end", "warning"),
        ("observer.error", "warning"),
    ]
    assert render_item(state.items[0]) == {
        "event": "observer.session_start",
        "position": 1,
        "at": "2026-06-01T09:00:01+00:00",
        "channel": "cli",
    }


def test_spans_need_opentelemetry(monkeypatch):
    """Without opentelemetry-api installed, export says so with a typed error."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(
        OpenTelemetryNotInstalledError,
        match=r"Expected the opentelemetry-api package for observer spans, found it "
        r"not installed \(pip install opentelemetry-api\)",
    ):
        export_spans([])


class FakeSpan:
    def __init__(self, name, context, start_time, attributes):
        self.name, self.parent = name, context
        self.start, self.attributes, self.end_time = start_time, attributes, None

    def set_attributes(self, attributes):
        self.attributes = {**self.attributes, **attributes}

    def end(self, end_time):
        self.end_time = end_time


def test_spans_nest_under_their_turn_with_a_stand_in_tracer(monkeypatch):
    """With a stand-in API module, a turn span parents its items' spans."""
    spans = []

    class Tracer:
        def start_span(self, name, context=None, start_time=None, attributes=None):
            spans.append(FakeSpan(name, context, start_time, attributes))
            return spans[-1]

    trace = types.ModuleType("opentelemetry.trace")
    trace.get_tracer = lambda name: Tracer()
    trace.set_span_in_context = lambda span: ("ctx", span)
    monkeypatch.setitem(sys.modules, "opentelemetry", types.ModuleType("opentelemetry"))
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", trace)
    events = [*a_turn()[1:5], TurnCompleted(turn_id="t1")]
    items = fold(OBSERVER_VIEW, recorded(*((S1, e) for e in events)))[str(S1)].items
    assert export_spans(items) == 4
    turn, recall, request, response = spans
    assert turn.name == "turn"
    assert turn.end_time == 5 * 10**9 + int(T0.timestamp()) * 10**9
    assert [s.parent for s in (recall, request, response)] == [("ctx", turn)] * 3
    assert response.name == "observer.llm_response"
    assert response.end_time - response.start == 120 * 10**6
    assert LEAK not in repr([s.attributes for s in spans])


def test_lifecycle_declaration_is_valid():
    """The observer view is a log-durability, session-scoped surface."""
    declaration = validate_declaration(OBSERVER_VIEW.lifecycle)
    assert (declaration.surface, declaration.durability, declaration.scope) == (
        "Logs / observer",
        "log",
        "session",
    )


secrets = st.from_regex(r"[A-Za-z0-9]{10,18}", fullmatch=True).map(
    lambda s: f"SECRET{s}"
)
fillers = st.text(alphabet="ab -", max_size=250).map(lambda s: s + " ")
argument_forms = st.sampled_from(
    [
        lambda s, f: msgspec.json.encode({"q": f"{f}sk-{s}"}).decode(),
        lambda s, f: msgspec.json.encode({"note": f, "password": s}).decode(),
        lambda s, f: msgspec.json.encode(
            {"h": {"Authorization": f"Bearer {s}"}}
        ).decode(),
        lambda s, f: msgspec.json.encode(
            {"n": f, "u": f"https://h.test/p?k={s}"}
        ).decode(),
        lambda s, f: msgspec.json.encode([f, {"apiKey": s}]).decode(),
        lambda s, f: f"{f}token={s}",
        lambda s, f: f'{{"note": "{f}", "password": "{s}',
    ]
)
text_forms = st.sampled_from(
    [
        lambda s, f: f"{f}api_key={s}",
        lambda s, f: f"{f}sk-{s}",
        lambda s, f: f"{f}Authorization: Bearer {s}",
        lambda s, f: f"{f}GET https://api.test/v1?token={s} failed",
        lambda s, f: f'{f}{{"password": "{s}"}}',
    ]
)


@st.composite
def planted_ledgers(draw):
    """A ledger with one secret planted in every field that could carry it."""
    secret, filler = draw(secrets), draw(fillers)

    def arguments():
        return draw(argument_forms)(secret, filler)

    def text():
        return draw(text_forms)(secret, filler)

    events = [
        SessionOpened(agent="alice", session_key="k"),
        TurnStarted(turn_id="t", origin="interactive", user_input=secret),
        MemoryRecalled(turn_id="t", backend="b", query_summary=text()),
        AssistantMessage(
            turn_id="t",
            text=secret,
            tool_calls=tuple(
                ToolCallRecord(id=f"c{n}", name="tool", arguments=arguments())
                for n in range(3)
            ),
        ),
        ToolResultRecorded(
            turn_id="t", call_id="c0", tool="tool", output=secret, error=text()
        ),
        ModelCalled(turn_id="t", provider="p", model="m", success=False, error=text()),
        HistoryTrimmed(
            turn_id="t",
            dropped_messages=1,
            dropped_turns=1,
            kept_turns=1,
            tokens_before=2,
            tokens_after=1,
            reason=text(),
        ),
        MemoryStored(agent="alice", key="k", content=secret),
        MemoryForgotten(agent="alice", key="k", reason=text()),
        MediaAttached(
            turn_id="t",
            file_name=secret,
            mime="image/png",
            kind="image",
            size_bytes=1,
            sha256=DIGEST,
            summary=secret,
        ),
        TurnFailed(turn_id="t", error=text()),
    ]
    order = draw(st.permutations(events[1:]))
    streams = draw(st.lists(st.sampled_from([S1, S2]), min_size=10, max_size=10))
    return secret, recorded((S1, events[0]), *zip(streams, order, strict=True))


@settings(max_examples=60, deadline=None)
@given(planted=planted_ledgers(), limit=st.sampled_from([3, 200]))
def test_a_planted_secret_never_reaches_a_state_or_a_log_line(planted, limit):
    """Arguments, outputs, errors, queries and reasons are scrubbed or left out."""
    secret, records = planted
    states = fold(ObserverView(limit=limit), records)
    assert secret not in msgspec.json.encode(states).decode()
    with capture_logs() as logs:
        for state in states.values():
            emit_observer_items(structlog.get_logger(), state.items)
    assert secret not in repr(logs)


@settings(max_examples=50, deadline=None)
@given(planted=planted_ledgers(), limit=st.sampled_from([2, 5, 200]), data=st.data())
def test_folding_in_pages_equals_folding_at_once(planted, limit, data):
    """Any page split (through the JSON view encoding) gives the same states."""
    _, records = planted
    view = ObserverView(limit=limit)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(records))))
    whole = fold(view, records)
    paged = fold_in_pages(view, records, cuts)
    assert paged == whole
    assert digest(paged) == digest(whole)


def test_runner_live_catch_up_equals_rebuild(tmp_path):
    """Live catch-up in small pages on SQLite equals a rebuild and a plain fold."""
    store = open_store(str(tmp_path / "l.db"))
    views = SQLiteViewStore(str(tmp_path / "v.db"))
    view = ObserverView(limit=10)
    runner = ProjectionRunner(store, views, [view])
    streams = [session_stream_id("alice", key) for key in ("k1", "k2")]
    for stream in streams:
        for event in a_turn():
            store.append(stream, [event], expected_version=store.stream_version(stream))
        runner.catch_up(page_size=4)
    live = views.all(view.name, ObserverState)
    runner.rebuild(page_size=3)
    assert digest(views.all(view.name, ObserverState)) == digest(live)
    assert digest(live) == digest(fold(view, store.iter_all()))
    assert {len(s.items) for s in live.values()} == {10}
    assert LEAK not in msgspec.json.encode(live).decode()
    views.close()
    store.close()


def test_recall_items_never_carry_the_query():
    """The recorded query summary (user text in older events) is never shown."""
    event = MemoryRecalled(
        turn_id="t1",
        backend="sqlite",
        query_summary="what is my diary password",
        injected_chars=10,
    )
    recorded = Recorded(
        stream_id=uuid.uuid4(),
        version=1,
        position=1,
        recorded_at=datetime(2026, 11, 1, tzinfo=UTC),
        event=event,
    )
    (item,) = observe(recorded)
    rendered = str(render_item(item))
    assert "diary" not in rendered
    assert "password" not in rendered
    assert item.figures["injected_chars"] == 10
