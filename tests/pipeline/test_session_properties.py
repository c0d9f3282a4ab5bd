"""Property-based auditing: any session, recorded in the ledger, exports pairing-valid.

Random sessions (parallel calls, failing tools, retried results, applied trims,
crashed turns, imports) go through the real ledger; then export in every format is
pairing-valid, a rebuilt projection equals the live one, and replay at every
position equals the fold of the prefix.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.ledger.events import (
    AssistantMessage,
    HistoryTrimmed,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import count_pairing, parse_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.base import digest, fold
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.read import visible_messages
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

outcome = st.sampled_from(["ok", "error", "missing", "retried"])
turn_shape = st.tuples(
    st.lists(outcome, max_size=3),  # parallel calls and what happened to each
    st.sampled_from(["completed", "failed", "crashed"]),
    st.booleans(),  # a trim before this turn
    st.integers(0, 400),  # size of tool outputs
)


def session_steps(turns):
    """The appends a session makes: one list of events per turn step."""
    steps = [[SessionOpened(agent="a", session_key="k")]]
    version = 1
    for i, (outcomes, end, trim, size) in enumerate(turns):
        turn_id = f"t{i}"
        step = []
        if trim and version > 1:
            step.append(
                HistoryTrimmed(
                    turn_id=turn_id,
                    dropped_messages=1,
                    dropped_turns=1,
                    kept_turns=1,
                    tokens_before=10,
                    tokens_after=5,
                    reason="context token budget exceeded",
                    dropped_through_version=version,
                )
            )
        step.append(
            TurnStarted(turn_id=turn_id, origin="interactive", user_input=f"q{i} " * 5)
        )
        calls = tuple(
            ToolCallRecord(id=f"{turn_id}c{j}", name="tool", arguments='{"n": 1}')
            for j in range(len(outcomes))
        )
        step.append(AssistantMessage(turn_id=turn_id, tool_calls=calls))
        for call, what in zip(calls, outcomes, strict=True):
            if what == "missing":
                continue
            result = ToolResultRecorded(
                turn_id=turn_id,
                call_id=call.id,
                tool=call.name,
                success=what != "error",
                output="x" * size,
                error="boom" if what == "error" else None,
            )
            step.append(result)
            if what == "retried":
                step.append(result)
        if end == "completed":
            step += [
                AssistantMessage(turn_id=turn_id, text=f"a{i}", iteration=1),
                TurnCompleted(turn_id=turn_id),
            ]
        elif end == "failed":
            step.append(
                TurnFailed(turn_id=turn_id, kind="error", error="provider down")
            )
        steps.append(step)
        version += len(step)
    return steps


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(turn_shape, min_size=1, max_size=6),
    budget=st.sampled_from([0, 40, 200, 2000]),
    max_chars=st.sampled_from([0, 50, 1000]),
    page=st.integers(1, 9),
)
def test_ledger_to_export_is_always_pairing_valid(turns, budget, max_chars, page):
    """Export is pairing-valid; rebuild equals live; replay equals each prefix."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "l.db"), synchronous="OFF")
        live = SQLiteViewStore(str(Path(tmp) / "live.db"))
        runner = ProjectionRunner(store, live, [SESSION_HISTORY])
        stream = session_stream_id("a", "k")
        version = 0
        for step in session_steps(turns):
            version = store.append(stream, step, expected_version=version).last_version
            runner.catch_up(page_size=page)
        state = load_history(store, stream)
        prepared = prepare_history(
            visible_messages(state),
            ExportOptions(budget_tokens=budget, max_tool_result_chars=max_chars),
        )
        assert audit_pairing(prepared.messages).clean
        for fmt in EXPORT_FORMATS:
            payload = render(prepared.messages, fmt)
            import msgspec

            counts = count_pairing(
                parse_transcript(msgspec.json.encode(payload), format=fmt)
            )
            assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0), fmt
        rebuilt = SQLiteViewStore(str(Path(tmp) / "rebuilt.db"))
        ProjectionRunner(store, rebuilt, [SESSION_HISTORY]).rebuild(page_size=page + 3)
        name, kind = SESSION_HISTORY.name, SESSION_HISTORY.state_type
        assert digest(rebuilt.all(name, kind)) == digest(live.all(name, kind))
        events = store.read_stream(stream)
        for cut in range(1, len(events) + 1, max(1, len(events) // 7)):
            at = events[cut - 1].position
            expected = digest(fold(SESSION_HISTORY, events[:cut]))
            assert replay_session(store, stream, at=at).projections[name] == expected
        live.close()
        rebuilt.close()
        store.close()


@settings(max_examples=25, deadline=None)
@given(turns=st.lists(turn_shape, min_size=1, max_size=4))
def test_export_then_import_round_trips_the_pairing(turns):
    """An exported session imported again audits exactly like the export."""
    import msgspec

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "l.db"), synchronous="OFF")
        stream = session_stream_id("a", "k")
        version = 0
        for step in session_steps(turns):
            version = store.append(stream, step, expected_version=version).last_version
        prepared = prepare_history(
            visible_messages(load_history(store, stream)), ExportOptions()
        )
        for fmt in EXPORT_FORMATS:
            data = msgspec.json.encode(render(prepared.messages, fmt))
            parsed = parse_transcript(data, format=fmt)
            report = import_transcript(store, parsed, agent=f"re-{fmt}", session="copy")
            copy = load_history(
                store, session_stream_id(f"re-{fmt}", report.sessions[0].session)
            )
            copied = [e.message for e in copy.entries]
            assert audit_pairing(copied).clean
            assert count_pairing(parsed).tool_calls == sum(
                len(m.tool_calls) for m in copied
            )
        store.close()
