"""Whole-turn trimming: properties, a naive oracle, and the reference's examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.strategies_history import (
    breadcrumb,
    clean_histories,
    messy_histories,
)
from turnledger.policies.messages import (
    BREADCRUMB_TEXT,
    Message,
    ToolCall,
    ToolResult,
    make_message,
    starts_turn,
)
from turnledger.policies.pairing import audit_pairing
from turnledger.policies.token_estimates import (
    estimate_history_tokens,
    estimate_tokens,
    system_floor_tokens,
)
from turnledger.policies.trimming import (
    BREADCRUMB,
    REASON_BUDGET_EXCEEDED,
    REASON_CONTEXT_OVERFLOW,
    REASON_DISABLED,
    REASON_NOTHING_TO_TRIM,
    REASON_WITHIN_BUDGET,
    TrimDecision,
    TrimmingError,
    trim_after_overflow,
    trim_to_budget,
    trim_to_reported_budget,
)

budgets = st.integers(0, 1_200)
any_history = st.one_of(clean_histories(), messy_histories())


def head_count(messages: list[Message]) -> int:
    count = 0
    while count < len(messages) and messages[count].role == "system":
        count += 1
    return count


def oracle(messages: list[Message], budget: int) -> TrimDecision:
    """The specification, written the slow and obvious way."""
    estimates = [estimate_tokens(m) for m in messages]
    total = sum(estimates)
    starts = [i for i, m in enumerate(messages) if starts_turn(m)]
    untouched = {
        "messages": tuple(messages),
        "trimmed": False,
        "dropped_messages": 0,
        "dropped_turns": 0,
        "kept_turns": len(starts),
        "tokens_before": total,
        "tokens_after": total,
        "budget": budget,
        "breadcrumb_inserted": False,
    }
    if budget == 0:
        return TrimDecision(reason=REASON_DISABLED, **untouched)
    if total <= budget:
        return TrimDecision(reason=REASON_WITHIN_BUDGET, **untouched)
    if len(starts) <= 1:
        return TrimDecision(reason=REASON_NOTHING_TO_TRIM, **untouched)
    head = head_count(messages)
    reuse = messages[head].kind == "breadcrumb"
    crumb = messages[head] if reuse else BREADCRUMB
    fixed = sum(estimates[:head]) + estimate_tokens(crumb)
    cut = starts[-1]
    for start in starts[1:]:
        if fixed + sum(estimates[start:]) <= budget:
            cut = start
            break
    body = [m for m in messages[cut:] if m.kind != "breadcrumb"]
    kept = (*messages[:head], crumb, *body)
    return TrimDecision(
        messages=kept,
        trimmed=True,
        reason=REASON_BUDGET_EXCEEDED,
        dropped_messages=len(messages) - len(kept) + (0 if reuse else 1),
        dropped_turns=sum(1 for s in starts if s < cut),
        kept_turns=sum(1 for s in starts if s >= cut),
        tokens_before=total,
        tokens_after=fixed + sum(estimate_tokens(m) for m in body),
        budget=budget,
        breadcrumb_inserted=not reuse,
    )


def is_subsequence(part: tuple[Message, ...], whole: list[Message]) -> bool:
    remaining = iter(whole)
    return all(any(m is n for n in remaining) for m in part)


# --- properties -------------------------------------------------------------


@settings(max_examples=120)
@given(any_history, budgets)
def test_matches_the_oracle(history, budget):
    """The fast trim makes exactly the decision of the naive specification."""
    assert trim_to_budget(history, budget) == oracle(history, budget)


@settings(max_examples=50)
@given(any_history, budgets)
def test_passed_in_estimates_give_the_same_decision(history, budget):
    """Estimates kept by the caller are the ones the trim would compute."""
    estimates = [estimate_tokens(m) for m in history]
    assert trim_to_budget(history, budget, estimates=estimates) == trim_to_budget(
        history, budget
    )


@settings(max_examples=50)
@given(any_history, budgets)
def test_keeps_order_and_the_system_block(history, budget):
    """Output = leading system messages verbatim, then an in-order subsequence."""
    decision = trim_to_budget(history, budget)
    head = head_count(history)
    out = decision.messages
    assert all(a is b for a, b in zip(out[:head], history[:head], strict=True))
    rest = out[head + 1 :] if decision.breadcrumb_inserted else out[head:]
    assert is_subsequence(rest, history[head:])


@settings(max_examples=50)
@given(clean_histories(), budgets)
def test_never_separates_a_call_from_its_result(history, budget):
    """A clean history stays clean: no call or result loses its partner."""
    assert audit_pairing(history).clean
    assert audit_pairing(trim_to_budget(history, budget).messages).clean


@settings(max_examples=50)
@given(any_history, budgets)
def test_keeps_the_newest_turn(history, budget):
    """The newest turn (minus stale breadcrumbs once trimmed) ends the output."""
    starts = [i for i, m in enumerate(history) if starts_turn(m)]
    if not starts:
        return
    decision = trim_to_budget(history, budget)
    newest = history[starts[-1] :]
    if decision.trimmed:
        newest = [m for m in newest if m.kind != "breadcrumb"]
    out = decision.messages
    assert all(a is b for a, b in zip(out[-len(newest) :], newest, strict=True))


@settings(max_examples=50)
@given(any_history, budgets)
def test_meets_the_budget_unless_the_newest_turn_alone_exceeds_it(history, budget):
    """Trimmed output fits, or it is the system block, breadcrumb and one turn."""
    decision = trim_to_budget(history, budget)
    assert decision.tokens_after == estimate_history_tokens(decision.messages)
    assert decision.tokens_before == estimate_history_tokens(history)
    if decision.trimmed:
        assert decision.tokens_after <= budget or decision.kept_turns == 1
    elif budget and decision.tokens_before > budget:
        assert decision.kept_turns <= 1


@settings(max_examples=50)
@given(any_history, budgets)
def test_a_trimmed_history_has_one_breadcrumb_after_the_system_block(history, budget):
    """Never two breadcrumbs; the one there sits right after the system block."""
    decision = trim_to_budget(history, budget)
    if not decision.trimmed:
        return
    crumbs = [i for i, m in enumerate(decision.messages) if m.kind == "breadcrumb"]
    assert crumbs == [head_count(history)]


@settings(max_examples=50)
@given(any_history, budgets)
def test_trimming_the_output_again_drops_nothing(history, budget):
    """With the same budget, a second trim leaves the first one's output alone."""
    once = trim_to_budget(history, budget)
    twice = trim_to_budget(list(once.messages), budget)
    assert twice.dropped_messages == 0
    assert twice.messages == once.messages


@settings(max_examples=50)
@given(any_history, budgets)
def test_counts_add_up(history, budget):
    """Dropped + kept messages and turns account for the whole input."""
    decision = trim_to_budget(history, budget)
    inserted = 1 if decision.breadcrumb_inserted else 0
    assert len(history) - decision.dropped_messages + inserted == len(decision.messages)
    turns = sum(1 for m in history if starts_turn(m))
    assert decision.dropped_turns + decision.kept_turns == turns
    assert decision.kept_turns == sum(1 for m in decision.messages if starts_turn(m))


@settings(max_examples=50)
@given(any_history, st.integers(1, 1_500), st.integers(0, 5_000))
def test_reported_budget_scales_into_estimator_units(history, budget, reported):
    """The reported trim is the plain trim at the scaled budget, rescaled back."""
    decision = trim_to_reported_budget(history, budget, reported)
    estimated = estimate_history_tokens(history)
    if reported <= budget or not estimated:
        assert not decision.trimmed
        assert decision.messages == tuple(history)
        return
    scaled = max(1, budget * estimated // reported)
    plain = trim_to_budget(history, scaled)
    assert decision.messages == plain.messages
    assert decision.budget == scaled
    assert decision.tokens_before == reported
    assert decision.tokens_after == plain.tokens_after * reported // estimated


@settings(max_examples=50)
@given(any_history)
def test_overflow_trim_aims_at_two_thirds(history):
    """The reactive trim is the plain trim at 2/3 of the estimate."""
    outcome = trim_after_overflow(history)
    target = max(1, estimate_history_tokens(history) * 2 // 3)
    plain = trim_to_budget(history, target)
    assert outcome.target_tokens == target
    assert outcome.decision.messages == plain.messages
    assert outcome.system_floor_tokens == sum(
        estimate_tokens(m) for m in history if m.role == "system"
    )
    expected = REASON_CONTEXT_OVERFLOW if plain.trimmed else plain.reason
    assert outcome.decision.reason == expected


# --- examples: the estimate --------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "tokens"), [(0, 4), (1, 5), (4, 5), (5, 6), (49, 17), (400, 104)]
)
def test_estimate_is_ceil_chars_over_four_plus_four(chars, tokens):
    """ceil(chars / 4) + 4, from the stored size."""
    assert estimate_tokens(make_message("user", "x" * chars)) == tokens


def test_estimate_uses_the_stored_size_not_the_text():
    """The text is never re-measured."""
    assert estimate_tokens(Message(role="user", text="", chars=400)) == 104
    assert estimate_history_tokens([]) == 0


def test_estimate_counts_characters_not_bytes():
    """Multi-byte characters count once each."""
    assert estimate_tokens(make_message("user", "é" * 400)) == 104


def test_system_floor_counts_every_system_message():
    """System messages count wherever they sit."""
    history = [
        make_message("system", "s" * 40),
        make_message("user", "hi"),
        make_message("system", "s" * 4),
    ]
    assert system_floor_tokens(history) == 14 + 5


# --- examples: trim_to_budget -------------------------------------------------


def two_turns() -> list[Message]:
    return [
        make_message("system", "s" * 40),  # 14 tokens
        make_message("user", "a" * 100),  # 29
        make_message("assistant", "b" * 100),  # 29
        make_message("user", "c" * 100),  # 29
        make_message("assistant", "d" * 100),  # 29
    ]


def test_breadcrumb_goes_right_after_the_system_block():
    """The oldest turn goes; the breadcrumb replaces it after the system prompt."""
    history = two_turns()
    decision = trim_to_budget(history, 100)
    assert decision.messages == (history[0], BREADCRUMB, history[3], history[4])
    assert decision.messages[1].text == BREADCRUMB_TEXT
    assert decision.messages[1].kind == "breadcrumb"
    assert decision == TrimDecision(
        messages=decision.messages,
        trimmed=True,
        reason="context token budget exceeded",
        dropped_messages=2,
        dropped_turns=1,
        kept_turns=1,
        tokens_before=130,
        tokens_after=14 + 17 + 58,
        budget=100,
        breadcrumb_inserted=True,
    )


def test_an_existing_breadcrumb_is_reused_not_doubled():
    """A breadcrumb already after the system block stays; none is added."""
    history = two_turns()
    crumb = breadcrumb()
    history.insert(1, crumb)
    decision = trim_to_budget(history, 100)
    assert decision.messages == (history[0], crumb, history[4], history[5])
    assert decision.messages[1] is crumb
    assert not decision.breadcrumb_inserted
    assert decision.dropped_messages == 2


def test_the_breadcrumb_is_not_a_turn():
    """[quirk fixed] A breadcrumb plus one turn is one turn: nothing to trim."""
    history = [
        make_message("system", "s" * 40),
        breadcrumb(),
        make_message("user", "x" * 4_000),
    ]
    decision = trim_to_budget(history, 100)
    assert not decision.trimmed
    assert decision.reason == "at most one turn: nothing to trim"
    assert decision.kept_turns == 1
    assert decision.messages == tuple(history)


def test_a_stale_breadcrumb_in_the_kept_turns_is_removed():
    """Only the breadcrumb after the system block survives a trim."""
    history = two_turns()
    stale = breadcrumb()
    history.insert(4, stale)  # inside the newest turn
    decision = trim_to_budget(history, 100)
    assert decision.messages == (history[0], BREADCRUMB, history[3], history[5])
    assert decision.dropped_messages == 3
    assert decision.tokens_after == 14 + 17 + 58


def test_a_tool_exchange_is_never_split():
    """Calls, tool rows and carriers go with their turn."""
    call_x = ToolCall(id="x", name="shell")
    call_y = ToolCall(id="y", name="shell")
    history = [
        make_message("user", "u" * 40),
        make_message("assistant", tool_calls=(call_x,)),
        make_message(
            "tool", tool_results=(ToolResult(call_id="x", content="o" * 400),)
        ),
        make_message("assistant", "done"),
        make_message("user", "v" * 40),
        make_message("assistant", tool_calls=(call_y,)),
        make_message("user", tool_results=(ToolResult(call_id="y", content="p" * 40),)),
        make_message("assistant", "done"),
    ]
    decision = trim_to_budget(history, 120)
    assert decision.messages == (BREADCRUMB, *history[4:])
    assert audit_pairing(decision.messages).clean


def test_the_newest_turn_is_kept_even_alone_over_budget():
    """Every older turn goes, the newest stays, and the decision says so."""
    history = two_turns()
    history[3] = make_message("user", "c" * 4_000)
    decision = trim_to_budget(history, 100)
    assert decision.messages == (history[0], BREADCRUMB, history[3], history[4])
    assert decision.tokens_after > 100
    assert decision.kept_turns == 1


def test_messages_before_the_first_turn_and_later_system_messages_go_with_it():
    """Only the leading system block is kept verbatim."""
    history = [
        make_message("system", "s"),
        make_message("assistant", "orphan prefix"),
        make_message("user", "a" * 100),
        make_message("system", "mid-history note"),
        make_message("user", "b" * 100),
    ]
    decision = trim_to_budget(history, 40)
    assert decision.messages == (history[0], BREADCRUMB, history[4])
    assert decision.dropped_messages == 3


def test_budget_zero_disables_trimming():
    """A budget of 0 means no budget."""
    decision = trim_to_budget(two_turns(), 0)
    assert not decision.trimmed
    assert decision.reason == "token budget disabled"


def test_a_history_within_budget_is_untouched():
    """Nothing changes, and the counts describe the input."""
    history = two_turns()
    decision = trim_to_budget(history, 130)
    assert decision.messages == tuple(history)
    assert decision.reason == "history within token budget"
    assert (decision.kept_turns, decision.tokens_before) == (2, 130)


def test_estimates_must_match_the_messages():
    """One estimate per message, or a clear error."""
    with pytest.raises(
        TrimmingError, match=r"^Expected one estimate per message \(5\), found 4$"
    ):
        trim_to_budget(two_turns(), 100, estimates=[14, 29, 29, 29])


def test_a_negative_budget_is_refused():
    """The message says what was expected and what was found."""
    with pytest.raises(
        TrimmingError, match=r"^Expected budget >= 0 \(0 disables trimming\), found -1$"
    ):
        trim_to_budget(two_turns(), -1)


# --- examples: reported budget and overflow ------------------------------------


def test_reported_budget_scales_the_budget_and_the_figures():
    """budget * estimated / reported, then tokens * reported / estimated."""
    decision = trim_to_reported_budget(two_turns(), 200, 260)
    assert decision.budget == 200 * 130 // 260 == 100
    assert decision.trimmed
    assert decision.tokens_before == 260
    assert decision.tokens_after == (14 + 17 + 58) * 260 // 130 == 178


def test_reported_budget_scales_to_at_least_one():
    """A tiny budget against a huge report still trims, at budget 1."""
    decision = trim_to_reported_budget(two_turns(), 1, 10**9)
    assert decision.budget == 1
    assert decision.kept_turns == 1


def test_reported_budget_within_limits_changes_nothing():
    """The reported figure is both token counts of an untouched decision."""
    decision = trim_to_reported_budget(two_turns(), 500, 400)
    assert (decision.trimmed, decision.tokens_before, decision.tokens_after) == (
        False,
        400,
        400,
    )
    assert decision.reason == REASON_WITHIN_BUDGET
    disabled = trim_to_reported_budget(two_turns(), 0, 400)
    assert disabled.reason == REASON_DISABLED


def test_reported_budget_on_an_empty_history():
    """Nothing to scale, nothing to trim."""
    decision = trim_to_reported_budget([], 10, 50)
    assert decision.reason == REASON_NOTHING_TO_TRIM


def test_reported_budget_refuses_negative_reports():
    """The message names the argument."""
    with pytest.raises(TrimmingError, match="Expected reported_input_tokens >= 0"):
        trim_to_reported_budget(two_turns(), 10, -5)


def test_overflow_trims_to_two_thirds_of_the_estimate():
    """188 tokens -> target 125: two of three turns go."""
    history = [
        *two_turns(),
        make_message("user", "e" * 100),
        make_message("assistant", "f" * 100),
    ]
    outcome = trim_after_overflow(history)
    assert outcome.target_tokens == 188 * 2 // 3 == 125
    assert outcome.decision.messages == (history[0], BREADCRUMB, *history[5:])
    assert outcome.decision.reason == "context window exceeded"
    assert outcome.decision.dropped_turns == 2
    assert outcome.system_floor_tokens == 14


def test_overflow_with_nothing_to_trim_reports_the_system_floor():
    """One turn: no trim, and the system prompt's share is reported."""
    history = [make_message("system", "s" * 400), make_message("user", "x" * 40)]
    outcome = trim_after_overflow(history)
    assert not outcome.decision.trimmed
    assert outcome.decision.reason == REASON_NOTHING_TO_TRIM
    assert outcome.system_floor_tokens == 104
    assert outcome.target_tokens == 118 * 2 // 3


def test_overflow_dedupes_the_breadcrumb():
    """[quirk fixed] The reactive path reuses the breadcrumb already there."""
    history = two_turns()
    crumb = breadcrumb()
    history.insert(1, crumb)
    outcome = trim_after_overflow(history)
    assert [m.kind for m in outcome.decision.messages].count("breadcrumb") == 1
    assert outcome.decision.messages[1] is crumb
