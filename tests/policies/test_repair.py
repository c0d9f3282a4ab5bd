"""Crash repair: an interrupted turn is closed with one result per unanswered call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnledger.ledger.events import ToolResultRecorded, TurnFailed
from turnledger.policies.messages import ToolCall
from turnledger.policies.repair import (
    INTERRUPTED_CALL_ERROR,
    INTERRUPTED_TURN_ERROR,
    repair_interrupted_turn,
)

IDS = st.sampled_from([f"c{i}" for i in range(6)])
CALLS = st.lists(st.builds(ToolCall, id=IDS, name=st.sampled_from(["a", "b"])))


@given(calls=CALLS, answered=st.sets(IDS))
def test_every_unanswered_call_gets_one_result_then_the_turn_fails(calls, answered):
    """After the repair, every call id of the turn has exactly one result."""
    events = repair_interrupted_turn("t1", calls, answered)
    *results, closing = events
    assert isinstance(closing, TurnFailed)
    assert closing.kind == "interrupted"
    assert all(isinstance(r, ToolResultRecorded) for r in results)
    synthesized = [r.call_id for r in results]
    assert len(synthesized) == len(set(synthesized))
    assert set(synthesized) == {c.id for c in calls} - answered
    assert set(synthesized).isdisjoint(answered)
    # In call order.
    first_seen = list(dict.fromkeys(c.id for c in calls if c.id not in answered))
    assert synthesized == first_seen


def test_a_synthesized_result_is_a_failure_marked_synthesized():
    """The model sees an error, and the record says it was synthesized."""
    calls = [ToolCall(id="c1", name="shell"), ToolCall(id="c2", name="read_file")]
    result, closing = repair_interrupted_turn("t9", calls, {"c1"})
    assert result == ToolResultRecorded(
        turn_id="t9",
        call_id="c2",
        tool="read_file",
        success=False,
        error=INTERRUPTED_CALL_ERROR,
        provenance="synthesized",
    )
    assert closing == TurnFailed(
        turn_id="t9", kind="interrupted", error=INTERRUPTED_TURN_ERROR
    )


def test_a_turn_with_every_call_answered_only_fails():
    """Nothing is synthesized when every call has its result."""
    calls = [ToolCall(id="c1", name="shell")]
    assert repair_interrupted_turn("t2", calls, {"c1"}) == (
        TurnFailed(turn_id="t2", kind="interrupted", error=INTERRUPTED_TURN_ERROR),
    )
