"""Session history as a fold: what the provider sees, trims, media, failures."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    HistoryTrimmed,
    MediaAttached,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.policies.messages import BREADCRUMB_TEXT
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.base import digest, fold
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.read import visible_messages

STREAM = UUID("00000000-0000-4000-8000-0000000000bb")
T = datetime(2026, 11, 30, tzinfo=UTC)


def recorded(events):
    return [
        Recorded(stream_id=STREAM, version=i, position=100 + i, recorded_at=T, event=e)
        for i, e in enumerate(events, start=1)
    ]


def turn(turn_id, *, calls=1, fail=False):
    tool_calls = tuple(
        ToolCallRecord(id=f"{turn_id}-{i}", name="file_read", arguments="{}")
        for i in range(calls)
    )
    events = [
        TurnStarted(
            turn_id=turn_id, origin="interactive", user_input=f"question {turn_id}"
        ),
        AssistantMessage(turn_id=turn_id, tool_calls=tool_calls),
    ]
    for i, call in enumerate(tool_calls):
        events.append(
            ToolResultRecorded(
                turn_id=turn_id,
                call_id=call.id,
                tool=call.name,
                success=i % 2 == 0,
                output="contents" if i % 2 == 0 else "",
                error=None if i % 2 == 0 else "EACCES",
            )
        )
    if fail:
        events.append(TurnFailed(turn_id=turn_id, kind="interrupted"))
    else:
        events.append(
            AssistantMessage(turn_id=turn_id, text=f"answer {turn_id}", iteration=1)
        )
        events.append(TurnCompleted(turn_id=turn_id))
    return events


def state_of(events):
    return fold(SESSION_HISTORY, recorded(events))[str(STREAM)]


def test_history_is_the_provider_visible_conversation():
    """User input, assistant calls, tool results and answers, in order."""
    state = state_of(
        [SessionOpened(agent="ops", session_key="s"), *turn("t1", calls=2)]
    )
    roles = [m.role for m in visible_messages(state)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    messages = visible_messages(state)
    assert messages[2].tool_results[0].content == "contents"
    assert messages[3].tool_results[0].content == "Error: EACCES"
    assert messages[3].tool_results[0].is_error
    assert all(m.chars > 0 for m in messages)
    assert state.agent == "ops"
    assert state.turns_completed == 1
    assert audit_pairing(messages).violations == ()


def test_applied_trim_hides_old_turns_behind_one_breadcrumb():
    """A recorded trim drops entries through its version and shows a breadcrumb."""
    events = [SessionOpened(agent="ops", session_key="s"), *turn("t1"), *turn("t2")]
    through = 1 + len(turn("t1"))  # session.opened + turn one
    events.append(
        HistoryTrimmed(
            turn_id="t3",
            dropped_messages=4,
            dropped_turns=1,
            kept_turns=1,
            tokens_before=100,
            tokens_after=50,
            reason="context token budget exceeded",
            dropped_through_version=through,
        )
    )
    events += turn("t3")
    messages = visible_messages(state_of(events))
    assert messages[0].text == BREADCRUMB_TEXT
    assert messages[0].kind == "breadcrumb"
    assert [m.text for m in messages if m.role == "user"][1] == "question t2"
    assert sum(m.kind == "breadcrumb" for m in messages) == 1


def test_media_appears_as_a_reference():
    """Attachments reach the user's message as references, never bytes."""
    sha = "b" * 64
    state = state_of(
        [
            TurnStarted(
                turn_id="t1", origin="channel", user_input="look", attachments=(sha,)
            ),
            MediaAttached(
                turn_id="t1",
                file_name="cat.png",
                mime="image/png",
                kind="image",
                size_bytes=10,
                sha256=sha,
                storage_ref=f"media/{sha}",
            ),
            MediaAttached(
                turn_id="t1",
                file_name="a.pdf",
                mime="application/pdf",
                kind="document",
                size_bytes=99,
                sha256=sha,
            ),
        ]
    )
    text = visible_messages(state)[0].text
    assert text.splitlines() == [
        "look",
        f"[IMAGE:media/{sha}]",
        f"[DOCUMENT:a.pdf (application/pdf, 99 bytes) sha256:{sha}]",
    ]


def test_failed_turn_leaves_its_dangling_call_for_repair():
    """An interrupted turn is recorded as failed; its unpaired call stays visible."""
    events = [*turn("t1", calls=1)]
    events = [*events[:2], TurnFailed(turn_id="t1", kind="interrupted")]
    state = state_of(events)
    assert state.turns_failed == ("t1",)
    assert state.open_turn is None
    audit = audit_pairing(visible_messages(state))
    assert [v.kind for v in audit.violations] == ["orphan_call"]


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 40), max_size=5),
)
def test_folding_in_pages_equals_folding_at_once(shape, cuts):
    """The runner folds page by page; the result never depends on the page split."""
    events = [SessionOpened(agent="a", session_key="k")]
    for i, (calls, fail) in enumerate(shape):
        events += turn(f"t{i}", calls=calls, fail=fail)
    records = recorded(events)
    whole = fold(SESSION_HISTORY, records)
    states = {}
    start = 0
    for cut in [*sorted(set(cuts)), len(records)]:
        states = fold(SESSION_HISTORY, records[start:cut], states)
        start = max(start, cut)
    assert digest(states) == digest(whole)
