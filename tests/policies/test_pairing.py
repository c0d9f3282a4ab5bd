"""Pairing audit and repair: properties and the reference's §5.5 cases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.strategies_history import clean_histories, messy_histories
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message
from turnledger.policies.pairing import (
    PairingAudit,
    PairingViolation,
    audit_pairing,
)
from turnledger.policies.pairing_repair import (
    INTERRUPTED_TEXT,
    PairingError,
    repair_pairing,
)

strategies = st.sampled_from(["synthesize", "drop_calls"])


def call(call_id: str, name: str = "shell") -> ToolCall:
    return ToolCall(id=call_id, name=name)


def asst(*ids: str, text: str = "") -> Message:
    return make_message("assistant", text, tool_calls=tuple(call(i) for i in ids))


def row(call_id: str, content: str = "ok") -> Message:
    return make_message(
        "tool", tool_results=(ToolResult(call_id=call_id, content=content),)
    )


def carrier(*ids: str) -> Message:
    results = tuple(ToolResult(call_id=i, content=f"out {i}") for i in ids)
    return make_message("user", tool_results=results)


def user(text: str = "hi") -> Message:
    return make_message("user", text)


def results_of(messages: tuple[Message, ...] | list[Message]) -> list[ToolResult]:
    return [r for m in messages for r in m.tool_results]


def violations(*found: tuple[str, str, int]) -> tuple[PairingViolation, ...]:
    return tuple(
        PairingViolation(kind=kind, call_id=call_id, position=position)
        for kind, call_id, position in found
    )


# --- properties -------------------------------------------------------------


@settings(max_examples=150)
@given(messy_histories(), strategies)
def test_repair_output_always_audits_clean(history, strategy):
    """Whatever the input, the repaired history pairs in place."""
    assert audit_pairing(repair_pairing(history, strategy=strategy).messages).clean


@settings(max_examples=60)
@given(messy_histories(), strategies)
def test_repair_is_idempotent(history, strategy):
    """Repairing a repaired history changes nothing."""
    once = repair_pairing(history, strategy=strategy)
    twice = repair_pairing(once.messages, strategy=strategy)
    assert not twice.changed
    assert twice.messages == once.messages


@settings(max_examples=60)
@given(clean_histories(), strategies)
def test_a_clean_history_is_returned_as_is(history, strategy):
    """Clean in, the very same messages out."""
    decision = repair_pairing(history, strategy=strategy)
    assert audit_pairing(history).clean
    assert not decision.changed
    assert all(a is b for a, b in zip(decision.messages, history, strict=True))
    assert decision.synthesized == decision.dropped_results == ()


@settings(max_examples=60)
@given(messy_histories(), strategies)
def test_repair_keeps_every_result_that_pairs(history, strategy):
    """Results are only dropped when the audit says they answer no call."""
    decision = repair_pairing(history, strategy=strategy)
    before = results_of(history)
    after = results_of(decision.messages)
    dropped = len(decision.dropped_results)
    synthesized = len(decision.synthesized)
    assert len(after) == len(before) - dropped + synthesized
    kept = [r for r in after if r.content != INTERRUPTED_TEXT or not r.is_error]
    assert all(any(r is b for b in before) for r in kept)


@settings(max_examples=60)
@given(messy_histories(), strategies)
def test_repair_keeps_the_other_messages_in_order(history, strategy):
    """Messages without calls or results all come out, in the same order."""
    decision = repair_pairing(history, strategy=strategy)
    plain = [m for m in history if not m.tool_calls and not m.tool_results]
    out = [m for m in decision.messages if any(m is p for p in plain)]
    assert len(out) == len(plain)
    assert all(a is b for a, b in zip(out, plain, strict=True))


@settings(max_examples=60)
@given(messy_histories(), strategies)
def test_repair_answers_or_strips_exactly_the_unanswered_calls(history, strategy):
    """Synthesized ids (or stripped ids) are the audit's orphan calls."""
    audit = audit_pairing(history)
    decision = repair_pairing(history, strategy=strategy)
    orphans = [v.call_id for v in audit.violations if v.kind == "orphan_call"]
    duplicates = [v.call_id for v in audit.violations if v.kind == "duplicate_call"]
    if strategy == "synthesize":
        assert list(decision.synthesized) == orphans
        assert list(decision.dropped_calls) == duplicates
    else:
        assert decision.synthesized == ()
        assert sorted(decision.dropped_calls) == sorted(duplicates + orphans)
    assert decision.audit == audit


@settings(max_examples=60)
@given(messy_histories())
def test_audit_counts_are_consistent(history):
    """Counts match the history and the violation list."""
    audit = audit_pairing(history)
    kinds = [v.kind for v in audit.violations]
    assert audit.tool_calls == sum(len(m.tool_calls) for m in history)
    assert audit.tool_results == len(results_of(history))
    assert audit.unpaired_calls == kinds.count("orphan_call")
    assert audit.unpaired_results == kinds.count("orphan_result") + kinds.count(
        "result_before_call"
    )
    assert audit.clean == (not audit.violations)
    positions = [v.position for v in audit.violations]
    assert positions == sorted(positions)


# --- examples: audit ------------------------------------------------------------


def test_audit_lists_every_kind_with_id_and_position():
    """One history with each violation kind."""
    history = [
        row("early"),  # 0: its call comes later
        user(),  # 1
        asst("a", "b", "early"),  # 2: b never answered, early answered only before
        row("a"),  # 3
        row("a"),  # 4: second result for a
        row("ghost"),  # 5: no such call
        user("next"),  # 6
        asst("a"),  # 7: a reused
        carrier("b"),  # 8: b answered, but in the wrong block
    ]
    audit = audit_pairing(history)
    assert audit == PairingAudit(
        violations=violations(
            ("result_before_call", "early", 0),
            ("orphan_call", "early", 2),
            ("duplicate_result", "a", 4),
            ("orphan_result", "ghost", 5),
            ("duplicate_call", "a", 7),
            ("misplaced_result", "b", 8),
        ),
        tool_calls=4,
        tool_results=5,
        unpaired_calls=1,
        unpaired_results=2,
        clean=False,
    )


def test_a_result_after_a_later_user_turn_still_pairs_but_is_misplaced():
    """Pairing is by id; placement is reported separately."""
    audit = audit_pairing([user(), asst("x"), user("more"), row("x")])
    assert audit.violations == violations(("misplaced_result", "x", 3))
    assert (audit.unpaired_calls, audit.unpaired_results) == (0, 0)


def test_parallel_calls_with_a_carrier_audit_clean():
    """Anthropic shape: one carrier with every result, in any order."""
    assert audit_pairing([user(), asst("x", "y"), carrier("y", "x")]).clean
    assert audit_pairing([user(), asst("x", "y"), row("y"), row("x")]).clean
    assert audit_pairing([]).clean


# --- examples: repair (reference §5.5 and beyond) --------------------------------


def test_max_iteration_exit_gets_an_interrupted_result():
    """#7863: a trailing unanswered call is answered, not left to 400."""
    history = [user(), asst("x", text="Let me check")]
    decision = repair_pairing(history)
    assert decision.messages[:2] == tuple(history)
    synthetic = decision.messages[2]
    assert synthetic.role == "tool"
    assert synthetic.kind == "synthetic"
    assert synthetic.tool_results == (
        ToolResult(call_id="x", content=INTERRUPTED_TEXT, is_error=True, name="shell"),
    )
    assert synthetic.chars == len("x") + len(INTERRUPTED_TEXT)
    assert decision.synthesized == ("x",)
    assert decision.changed


def test_drop_calls_keeps_the_text_of_a_stripped_assistant():
    """strip_orphaned_tool_calls_from_assistants: text stays, calls go."""
    history = [user(), asst("x", text="Let me check")]
    decision = repair_pairing(history, strategy="drop_calls")
    assert decision.messages == (history[0], make_message("assistant", "Let me check"))
    assert decision.dropped_calls == ("x",)
    assert decision.removed_messages == 0


def test_drop_calls_deletes_an_assistant_left_empty():
    """An assistant with no text and no calls left is removed."""
    history = [user(), asst("x")]
    decision = repair_pairing(history, strategy="drop_calls")
    assert decision.messages == (history[0],)
    assert decision.removed_messages == 1


def test_drop_calls_keeps_answered_parallel_calls():
    """Only the unanswered call of a parallel batch is stripped."""
    history = [user(), asst("x", "y"), row("x")]
    decision = repair_pairing(history, strategy="drop_calls")
    assert decision.messages == (history[0], asst("x"), history[2])


def test_orphan_tool_rows_are_dropped():
    """PR #5485: a trim that kept a result but not its call."""
    history = [
        make_message("system", "s"),
        row("gone"),
        user(),
        make_message("assistant", "a"),
    ]
    decision = repair_pairing(history)
    assert decision.messages == (history[0], history[2], history[3])
    assert decision.dropped_results == ("gone",)
    assert decision.removed_messages == 1


def test_a_carrier_left_empty_is_removed_and_one_with_text_is_kept():
    """Empty carriers go; carriers with text keep their text."""
    with_text = make_message(
        "user",
        "[Tool results]",
        tool_results=(ToolResult(call_id="ghost", content="x"),),
    )
    decision = repair_pairing([user(), carrier("ghost"), with_text])
    assert decision.messages == (
        user(),
        make_message("user", "[Tool results]", kind="tool_results"),
    )


def test_a_missing_parallel_result_joins_the_carrier():
    """The synthesized result takes the block's shape: appended to the carrier."""
    history = [user(), asst("x", "y"), carrier("x")]
    decision = repair_pairing(history)
    joined = decision.messages[2]
    assert joined.kind == "tool_results"
    assert [r.call_id for r in joined.tool_results] == ["x", "y"]
    assert joined.tool_results[1].is_error
    assert joined.chars == len("x") + len("out x") + len("y") + len(INTERRUPTED_TEXT)
    assert len(decision.messages) == 3


def test_a_missing_parallel_result_follows_the_tool_rows():
    """With tool rows, the synthesized result is one more row at the end."""
    history = [user(), asst("x", "y"), row("x"), user("next")]
    decision = repair_pairing(history)
    assert [m.kind for m in decision.messages] == [
        "normal",
        "normal",
        "normal",
        "synthetic",
        "normal",
    ]
    assert decision.messages[3].tool_results[0].call_id == "y"


def test_duplicate_results_keep_the_first():
    """The second answer to a call is dropped."""
    history = [user(), asst("x"), row("x", "first"), row("x", "second")]
    decision = repair_pairing(history)
    assert decision.messages == tuple(history[:3])
    assert decision.dropped_results == ("x",)


def test_a_result_before_its_call_is_treated_as_an_orphan():
    """The early result goes; the call is then answered by a synthesized one."""
    history = [user(), row("x"), asst("x")]
    decision = repair_pairing(history)
    assert decision.dropped_results == ("x",)
    assert decision.synthesized == ("x",)
    assert decision.messages[1] == history[2]


def test_a_late_result_is_moved_next_to_its_call():
    """Ordering rule: every result right after its call's message."""
    history = [user(), asst("x"), user("more"), row("x", "late")]
    decision = repair_pairing(history)
    assert decision.messages == (history[0], history[1], history[3], history[2])
    assert decision.moved_results == ("x",)
    assert decision.removed_messages == 1  # the old row; a new one holds the result


def test_a_result_for_an_earlier_assistant_moves_out_of_a_later_block():
    """Two dispatches in a row: each gets its own result block."""
    history = [user(), asst("x"), asst("y"), row("x"), row("y")]
    decision = repair_pairing(history)
    assert decision.messages == (
        history[0],
        history[1],
        history[3],
        history[2],
        history[4],
    )


def test_a_moved_result_is_reshaped_as_a_row():
    """A result moved out of a carrier becomes a tool row in a row block."""
    history = [user(), asst("x"), user("more"), carrier("x")]
    decision = repair_pairing(history)
    assert decision.messages[2] == make_message(
        "tool", tool_results=(ToolResult(call_id="x", content="out x"),)
    )
    assert decision.messages[3] == history[2]
    assert decision.removed_messages == 1


def test_a_reused_call_id_is_dropped_from_the_later_message():
    """The first call with an id is the call; a later one is removed."""
    history = [user(), asst("x"), row("x"), user("again"), asst("x", "y"), row("y")]
    decision = repair_pairing(history)
    assert decision.messages[4] == asst("y")
    assert decision.dropped_calls == ("x",)
    assert audit_pairing(decision.messages).clean


def test_calls_on_a_result_holder_make_it_an_owner():
    """A tool row that also carries calls starts its own block (malformed input)."""
    odd = make_message("tool", tool_calls=(call("z"),))
    decision = repair_pairing([user(), odd])
    assert decision.messages[1] is odd
    assert decision.messages[2].tool_results[0].call_id == "z"


def test_an_unknown_strategy_is_refused():
    """The message lists the strategies and shows what was given."""
    with pytest.raises(
        PairingError,
        match=r"^Expected strategy to be one of \('synthesize', 'drop_calls'\), "
        r"found 'keep'$",
    ):
        repair_pairing([], strategy="keep")  # type: ignore[arg-type]
