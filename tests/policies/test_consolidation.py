"""Consolidation policies: trigger, importance, Jaccard, dedup, conflict, prompt, parser."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnledger.policies.consolidation import (
    CONSOLIDATION_SYSTEM_PROMPT,
    MEDIA_PLACEHOLDER,
    ConsolidationAnswer,
    ConsolidationPrompt,
    ConsolidationTrigger,
    GateDecision,
    MalformedAnswer,
    build_consolidation_prompt,
    decide_consolidation,
    gate_memory_text,
    parse_consolidation_answer,
    strip_media_markers,
)
from turnledger.policies.fact_dedup import (
    DedupDecision,
    ExistingFact,
    conflict_decision,
    dedup_decision,
    merge_facts,
    token_jaccard,
)
from turnledger.policies.memory_entries import (
    ConsolidationConfigError,
    core_key,
    daily_key,
    importance_for,
)

LONG = "please remember that we deploy to prod-cluster-3"
categories = st.one_of(
    st.sampled_from(["core", "daily", "conversation", "archive", ""]), st.text()
)
words = st.lists(st.sampled_from(["alpha", "beta", "Gamma", "delta", "rule"]))
texts = st.one_of(st.text(), words.map(" ".join))


class TestTrigger:
    def test_a_long_user_message_with_autosave_qualifies(self):
        """Autosave on and 20+ characters: the turn is consolidated."""
        assert decide_consolidation(LONG, autosave=True) == ConsolidationTrigger(
            run=True
        )

    @pytest.mark.parametrize(
        ("message", "autosave", "reason"),
        [
            ("[cron:x]", False, "disabled"),
            ("x" * 19, True, "too_short"),
            ("[Memory context]\n- a: b\n[/Memory context]", True, "synthetic"),
        ],
    )
    def test_refusals_name_the_first_failed_check(self, message, autosave, reason):
        """Disabled, then too short, then synthetic."""
        trigger = decide_consolidation(message, autosave=autosave)
        assert trigger == ConsolidationTrigger(run=False, reason=reason)

    def test_exactly_twenty_characters_qualify(self):
        """The bound is inclusive, as for autosave."""
        assert decide_consolidation("x" * 20, autosave=True).run


class TestImportance:
    @pytest.mark.parametrize(
        ("category", "expected"),
        [("core", 0.7), ("daily", 0.3), ("conversation", 0.2), ("project", 0.4)],
    )
    def test_base_by_category(self, category, expected):
        """Text without keywords gets the category's base."""
        assert importance_for("just a note", category) == expected

    def test_each_keyword_adds_a_tenth_once(self):
        """Keywords are case-insensitive substrings, each counted once."""
        assert importance_for("A CRITICAL thing", "daily") == 0.4
        assert importance_for("critical critical", "daily") == 0.4

    def test_boost_is_capped_at_two_tenths(self):
        """Four keywords still add only 0.2."""
        text = "a critical decision that must always hold"
        assert importance_for(text, "core") == 0.9
        assert importance_for(text, "conversation") == 0.4

    @given(texts, categories)
    def test_importance_is_a_unit_value(self, text, category):
        """Importance is always in [0, 1]."""
        assert 0.0 <= importance_for(text, category) <= 1.0


class TestJaccard:
    def test_partial_overlap(self):
        """Two shared tokens of six distinct ones: one third."""
        assert token_jaccard("the quick brown fox", "the slow brown dog") == 2 / 6

    def test_tokens_are_case_folded_and_deduplicated(self):
        """Case and repeats do not matter."""
        assert token_jaccard("Rust rust RUST", "rust") == 1.0

    def test_empty_texts(self):
        """Two empty texts are identical; one empty text shares nothing."""
        assert token_jaccard("", "  ") == 1.0
        assert token_jaccard("hello", "") == 0.0

    @given(texts, texts)
    def test_symmetric_and_bounded(self, left, right):
        """Jaccard is symmetric and in [0, 1]."""
        forward = token_jaccard(left, right)
        assert forward == token_jaccard(right, left)
        assert 0.0 <= forward <= 1.0

    @given(texts)
    def test_a_text_is_identical_to_itself(self, text):
        """Reflexive: similarity with itself is 1."""
        assert token_jaccard(text, text) == 1.0


def fact(key, content, *, category="core", score=None):
    return ExistingFact(key=key, content=content, category=category, score=score)


class TestDedup:
    def test_a_new_fact_is_inserted(self):
        """No similar core fact: insert."""
        decision = dedup_decision("user likes tea", [fact("a", "deploys use helm")])
        assert decision == DedupDecision(action="insert")

    def test_no_existing_facts_inserts(self):
        """An empty memory never rejects."""
        assert dedup_decision("anything", []).action == "insert"

    def test_exact_match_after_whitespace_normalising_rejects(self):
        """An exact duplicate is rejected with similarity 1."""
        decision = dedup_decision("user  likes tea", [fact("a", " user likes tea ")])
        assert decision == DedupDecision(
            action="reject", duplicate_of="a", similarity=1.0
        )

    def test_jaccard_at_the_threshold_rejects(self):
        """Four of five tokens shared is 0.80: a duplicate (inclusive bound)."""
        decision = dedup_decision(
            "a b c d e", [fact("x", "q r s"), fact("y", "a b c d")]
        )
        assert decision.action == "reject"
        assert decision.duplicate_of == "y"
        assert decision.similarity == pytest.approx(0.8)

    def test_jaccard_below_the_threshold_inserts(self):
        """Three of five tokens shared is 0.6: not a duplicate."""
        assert dedup_decision("a b c d e", [fact("y", "a b c")]).action == "insert"

    def test_best_match_wins_and_ties_go_to_the_first(self):
        """The most similar fact is named; equal ones: the earlier."""
        facts = [fact("far", "a b"), fact("near1", "a b c d"), fact("near2", "a b c d")]
        decision = dedup_decision("a b c d e", facts, threshold=0.3)
        assert decision.duplicate_of == "near1"

    def test_other_categories_are_ignored(self):
        """Only core facts are de-duplicated against."""
        facts = [fact("d", "user likes tea", category="daily")]
        assert dedup_decision("user likes tea", facts).action == "insert"

    def test_merge_mode_merges_into_the_survivor(self):
        """Merge names the survivor and gives its new content."""
        decision = dedup_decision(
            "user likes green tea daily",
            [fact("s", "user likes green tea")],
            threshold=0.5,
            mode="merge",
        )
        assert decision == DedupDecision(
            action="merge",
            duplicate_of="s",
            similarity=0.8,
            merged_content="user likes green tea daily",
        )

    @pytest.mark.parametrize("threshold", [-0.1, 1.5])
    def test_threshold_outside_the_unit_interval_is_refused(self, threshold):
        """The message names the expected range and the value."""
        with pytest.raises(
            ConsolidationConfigError,
            match=rf"^Expected a dedup threshold between 0 and 1, found {threshold}$",
        ):
            dedup_decision("x", [], threshold=threshold)

    def test_unknown_mode_is_refused(self):
        """Only reject and merge exist."""
        with pytest.raises(
            ConsolidationConfigError,
            match=r"^Expected dedup mode 'reject' or 'merge', found 'drop'$",
        ):
            dedup_decision("x", [], mode="drop")


class TestMergeFacts:
    def test_contained_incoming_keeps_the_survivor(self):
        """Nothing new: the survivor stays as it is."""
        assert (
            merge_facts(" user likes tea a lot ", "likes tea") == "user likes tea a lot"
        )

    def test_empty_incoming_keeps_the_survivor(self):
        """An empty fact adds nothing."""
        assert merge_facts("user likes tea", "  ") == "user likes tea"

    def test_containing_incoming_replaces_the_survivor(self):
        """A richer fact wins."""
        assert (
            merge_facts("likes tea", "user likes tea a lot") == "user likes tea a lot"
        )

    def test_different_facts_are_joined_sorted(self):
        """Deterministic: sorted, one per line."""
        assert merge_facts("B fact", "A fact") == "A fact\nB fact"


class TestConflict:
    def test_a_different_high_scoring_core_fact_is_superseded(self):
        """Score above 0.85, another key, another content: superseded."""
        facts = [
            fact("old", "user prefers rust", score=0.9),
            fact("low", "user prefers go", score=0.85),
            fact("same_key", "x", score=0.99),
            fact("same_text", "user now prefers  go", score=0.99),
            fact("daily", "y", category="daily", score=0.99),
            fact("unscored", "z"),
            fact("old", "dup", score=0.95),
        ]
        keys = conflict_decision("same_key", "user now prefers go", facts)
        assert keys == ("old",)

    def test_the_threshold_is_configurable(self):
        """A lower threshold catches more."""
        facts = [fact("a", "x", score=0.5)]
        assert conflict_decision("k", "y", facts, threshold=0.4) == ("a",)

    def test_bad_threshold_is_refused(self):
        """The message names the value."""
        with pytest.raises(
            ConsolidationConfigError,
            match=r"^Expected a conflict threshold between 0 and 1, found 2$",
        ):
            conflict_decision("k", "y", [], threshold=2)


class TestGate:
    def test_allowed_text_is_stripped_and_scrubbed(self):
        """Credentials never reach memory."""
        decision = gate_memory_text("  deploy with api_key=abcdefghijkl  ")
        assert decision == GateDecision(
            allowed=True, content="deploy with api_key=abcd*[REDACTED]"
        )

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("   ", "empty"),
            ("[cron:daily] run backups", "synthetic"),
            ("look at [IMAGE:/tmp/a.png]", "image"),
            ('<tool_result name="x">out</tool_result>', "tool_result"),
        ],
    )
    def test_refusals(self, text, reason):
        """Empty, synthetic and noise text is refused, with nothing to write."""
        assert gate_memory_text(text) == GateDecision(allowed=False, reason=reason)


class TestPrompt:
    def test_turn_text_and_system_prompt(self):
        """The turn is a User line then an Assistant line."""
        prompt = build_consolidation_prompt("hello there", "hi!")
        assert prompt == ConsolidationPrompt(
            system=CONSOLIDATION_SYSTEM_PROMPT, turn="User: hello there\nAssistant: hi!"
        )
        assert '{"history_entry": "...", "memory_update": "..." or null}' in (
            prompt.system
        )

    def test_media_markers_become_placeholders(self):
        """Every marker kind, any case, closed or cut, becomes [media attachment]."""
        text = (
            "a [IMAGE:data:image/png;base64,AAAA] b [voice:/x.ogg] c [DOCUMENT:/d.pdf"
        )
        assert strip_media_markers(text) == (
            f"a {MEDIA_PLACEHOLDER} b {MEDIA_PLACEHOLDER} c {MEDIA_PLACEHOLDER}"
        )

    def test_an_unclosed_marker_in_the_user_part_keeps_the_assistant_part(self):
        """Markers are replaced per part, before the parts are joined."""
        prompt = build_consolidation_prompt("see [FILE:/a", "done")
        assert prompt.turn == f"User: see {MEDIA_PLACEHOLDER}\nAssistant: done"

    def test_long_turns_are_cut_with_an_ellipsis(self):
        """4,000 characters then the ellipsis; shorter turns are not marked."""
        prompt = build_consolidation_prompt("x" * 5_000, "y")
        assert prompt.truncated
        assert prompt.turn == ("User: " + "x" * 3_994) + "\u2026"
        exact = build_consolidation_prompt("x" * 3_981, "y")
        assert len(exact.turn) == 4_000
        assert not exact.truncated

    def test_bad_bound_is_refused(self):
        """The message names the value."""
        with pytest.raises(
            ConsolidationConfigError, match=r"^Expected a turn bound >= 1, found 0$"
        ):
            build_consolidation_prompt("a", "b", max_chars=0)


class TestParser:
    def test_plain_json(self):
        """Both fields, stripped."""
        answer = parse_consolidation_answer(
            '{"history_entry": " Asked about Rust. ", "memory_update": " Prefers Rust. "}'
        )
        assert answer == ConsolidationAnswer(
            history_entry="Asked about Rust.", memory_update="Prefers Rust."
        )

    @pytest.mark.parametrize(
        "update", ["null", '"   "', None], ids=["null", "blank", "missing"]
    )
    def test_no_update(self, update):
        """Null, blank and missing updates all mean none."""
        field = "" if update is None else f', "memory_update": {update}'
        answer = parse_consolidation_answer(f'{{"history_entry": "Greeting."{field}}}')
        assert answer == ConsolidationAnswer(history_entry="Greeting.")

    def test_fenced_json(self):
        """A markdown code fence is removed."""
        text = '```json\n{"history_entry": "Deploy talk.", "memory_update": null}\n```'
        assert parse_consolidation_answer(text) == ConsolidationAnswer(
            history_entry="Deploy talk."
        )

    def test_json_inside_prose_and_extra_fields(self):
        """The outermost object is found; unknown fields are ignored."""
        text = 'Sure! {"history_entry": "A.", "kind": "fact", "facts": []} Done.'
        assert parse_consolidation_answer(text) == ConsolidationAnswer(
            history_entry="A."
        )

    def test_not_json_is_malformed(self):
        """Prose without an object is reported, with an excerpt."""
        answer = parse_consolidation_answer("I'm sorry, I can't do that.")
        assert answer == MalformedAnswer(
            reason="expected a JSON object with a string history_entry",
            excerpt="I'm sorry, I can't do that.",
        )

    def test_wrong_shape_is_malformed_with_the_validation_error(self):
        """A wrong type names the field; the excerpt is scrubbed and bounded."""
        text = '{"history_entry": 42, "token": "sk-abcdefghijklmnop"}' + " " * 100
        answer = parse_consolidation_answer(text)
        assert isinstance(answer, MalformedAnswer)
        assert answer.reason == (
            "expected {'history_entry': str, 'memory_update': str | null}: "
            "Expected `str`, got `int` - at `$.history_entry`"
        )
        assert "sk-abcdef" not in answer.excerpt
        assert len(answer.excerpt) <= 81

    @given(st.text())
    def test_never_raises(self, text):
        """Any text gives an answer or a malformed report."""
        answer = parse_consolidation_answer(text)
        assert isinstance(answer, ConsolidationAnswer | MalformedAnswer)


class TestKeys:
    def test_daily_key_from_a_date_or_a_datetime(self):
        """The date part only."""
        assert daily_key(date(2026, 3, 9), "abc") == "daily_2026-03-09_abc"
        moment = datetime(2026, 3, 9, 23, 59, tzinfo=UTC)
        assert daily_key(moment, "abc") == "daily_2026-03-09_abc"

    def test_core_key(self):
        """core_ then the id."""
        assert core_key("abc") == "core_abc"

    @pytest.mark.parametrize("entry_id", ["", "  "])
    def test_empty_ids_are_refused(self, entry_id):
        """A key needs an id."""
        with pytest.raises(
            ConsolidationConfigError,
            match=r"^Expected a non-empty entry id for a memory key, found",
        ):
            core_key(entry_id)
