"""Recall selection, the [Memory context] block and its injection (§4)."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.strategies_memory import candidate_lists
from turnledger.policies.autosave import noise_reason
from turnledger.policies.messages import (
    BREADCRUMB_TEXT,
    Message,
    ToolResult,
    make_message,
    measure_chars,
)
from turnledger.policies.recall import (
    InjectionResult,
    RecalledMemory,
    RecallSelection,
    SkippedMemory,
    inject_memory_context,
    make_recall_selector,
    render_memory_block,
)
from turnledger.policies.recall_scope import (
    MAX_RECALL_LIMIT,
    InjectPolicy,
    RecallCandidate,
    RecallConfigError,
    bound_recall_limit,
    merge_scopes,
    resolve_inject_policy,
)

GOLDEN_NO_CONVERSATION = (
    "[Memory context]\n"
    "- alpha: deploy target is prod-cluster-3\n"
    "- alpha_dup: deploy target is prod-cluster-3 for staging\n"
    "- beta: team standup moved to 0930\n"
    "[/Memory context]\n"
    "\n"
)

SELECT = make_recall_selector()
USER_FACING = resolve_inject_policy("interactive", sessions=["s1"])
NO_CONVERSATION = resolve_inject_policy("cron", sessions=["s1"])


def candidate(
    key, content="fact", *, category="core", score=None, session=None, id_=None
):
    return RecallCandidate(
        id=id_ or key,
        key=key,
        content=content,
        category=category,
        score=score,
        session=session,
    )


class TestInjectPolicy:
    @pytest.mark.parametrize(
        ("origin", "sessions", "suppress", "expected"),
        [
            ("interactive", ["s"], True, (False, True, "suppressed")),
            ("sub_turn", ["s"], False, (False, True, "sub_turn")),
            ("cron", ["s"], False, (True, True, "autonomous")),
            ("daemon", [], False, (True, True, "autonomous")),
            ("interactive", [], False, (True, True, "no_session")),
            ("channel", [None, ""], False, (True, True, "no_session")),
            ("agent_direct", [None, "s"], False, (True, False, "user_facing")),
            ("channel", ["a b", "a_b"], False, (True, False, "user_facing")),
        ],
    )
    def test_origin_table(self, origin, sessions, suppress, expected):
        """The reference's origin policy, exactly."""
        policy = resolve_inject_policy(origin, sessions=sessions, suppress=suppress)
        assert (policy.inject, policy.exclude_conversation, policy.reason) == expected

    def test_sessions_exact_and_deduplicated(self):
        """Scopes are exact keys (never merged, issue #17), de-duplicated in order."""
        policy = resolve_inject_policy("channel", sessions=["h.1", "bob", "h_1", "bob"])
        assert policy.sessions == ("h.1", "bob", "h_1")


class TestBoundRecallLimit:
    @pytest.mark.parametrize(
        ("limit", "multiplier", "expected"),
        [
            (5, 1, 5),
            (0, 1, MAX_RECALL_LIMIT),
            (5, 4, 20),
            (600, 2, 1024),
            (5000, 1, 1024),
        ],
    )
    def test_bounded_everywhere(self, limit, multiplier, expected):
        """0 means unlimited, and unlimited is the 1,024 ceiling."""
        assert bound_recall_limit(limit, candidate_multiplier=multiplier) == expected

    @pytest.mark.parametrize(
        ("limit", "multiplier", "message"),
        [
            (-1, 1, "Expected memory_recall_limit >= 0, found -1"),
            (5, 0, "Expected candidate_multiplier in 1..=20, found 0"),
            (5, 21, "Expected candidate_multiplier in 1..=20, found 21"),
        ],
    )
    def test_bad_limits(self, limit, multiplier, message):
        """Bad limits are typed errors."""
        with pytest.raises(RecallConfigError, match=message):
            bound_recall_limit(limit, candidate_multiplier=multiplier)


def test_merge_scopes_first_scope_wins():
    """Duplicate keys keep the first scope's row, in scope order."""
    first = [candidate("a", "one"), candidate("b")]
    second = [candidate("a", "two"), candidate("c")]
    merged = merge_scopes([first, second])
    assert [(c.key, c.content) for c in merged] == [
        ("a", "one"),
        ("b", "fact"),
        ("c", "fact"),
    ]


class TestSelector:
    def test_golden_block(self):
        """The reference's golden block, with the skipped rows dropped."""
        candidates = [
            candidate("alpha", "deploy target is prod-cluster-3", score=0.9),
            candidate("chat", "we talked", category="conversation", session="s1"),
            candidate("alpha_dup", "deploy target is prod-cluster-3 for staging"),
            candidate("user_msg_7", "deploy it"),
            candidate("weak", "irrelevant", score=0.39),
            candidate(
                "beta", "team standup moved to 0930", category="daily", score=0.4
            ),
        ]
        selection = SELECT(candidates, NO_CONVERSATION)
        assert selection.block == GOLDEN_NO_CONVERSATION
        assert selection.skipped == (
            SkippedMemory(id="chat", key="chat", reason="conversation_excluded"),
            SkippedMemory(id="user_msg_7", key="user_msg_7", reason="autosave_key"),
            SkippedMemory(id="weak", key="weak", reason="low_relevance"),
        )
        assert selection.stopped is None
        assert selection.used_chars == len(GOLDEN_NO_CONVERSATION) - len(
            "[Memory context]\n[/Memory context]\n\n"
        )

    def test_no_injection_selects_nothing(self):
        """A policy that does not inject gives the empty selection."""
        policy = resolve_inject_policy("sub_turn")
        assert SELECT([candidate("a")], policy) == RecallSelection()

    def test_nan_score_is_below_the_floor(self):
        """A NaN score never passes the floor."""
        selection = SELECT([candidate("a", score=math.nan)], USER_FACING)
        assert selection.skipped[0].reason == "low_relevance"

    def test_conversation_rows_need_a_matching_session(self):
        """User-facing turns see conversation rows of their own sessions only."""
        own = candidate("own", category="conversation", session="s1")
        foreign = candidate("foreign", category="conversation", session="s2")
        global_ = candidate("global", category="conversation", session=None)
        selection = SELECT([own, foreign, global_], USER_FACING)
        assert [e.key for e in selection.entries] == ["own"]
        assert [s.reason for s in selection.skipped] == [
            "foreign_session",
            "foreign_session",
        ]

    def test_stops_after_max_entries(self):
        """At most four entries; the fifth relevant one stops the selection."""
        candidates = [candidate(f"k{i}") for i in range(6)]
        selection = SELECT(candidates, USER_FACING)
        assert [e.key for e in selection.entries] == ["k0", "k1", "k2", "k3"]
        assert selection.stopped == "max_entries"

    def test_low_relevance_after_max_entries_is_still_reported(self):
        """The floor is applied before the entry count is checked."""
        candidates = [candidate(f"k{i}") for i in range(4)] + [
            candidate("weak", score=0.1)
        ]
        selection = SELECT(candidates, USER_FACING)
        assert selection.stopped is None
        assert selection.skipped[-1].reason == "low_relevance"

    def test_long_entry_cut_to_800_chars(self):
        """Content over 800 chars keeps 800, right-trimmed, plus '...'."""
        content = "a" * 799 + " " + "b" * 50
        selection = SELECT([candidate("k", content)], USER_FACING)
        assert selection.entries == (
            RecalledMemory(id="k", key="k", content="a" * 799 + "...", truncated=True),
        )

    def test_exactly_800_chars_is_not_cut(self):
        """The bound is inclusive."""
        selection = SELECT([candidate("k", "x" * 800)], USER_FACING)
        assert selection.entries[0].truncated is False

    def test_total_budget_stops_at_first_overflow(self):
        """The first line over 4,000 chars stops everything; later rows untried."""
        big = "y" * 800
        candidates = [candidate(f"k{i}", big) for i in range(3)] + [
            candidate("k3", "z" * 800),
            candidate("tiny", "t"),
        ]
        select = make_recall_selector(max_entries=10, max_total_chars=3000)
        selection = select(candidates, USER_FACING)
        assert [e.key for e in selection.entries] == ["k0", "k1", "k2"]
        assert selection.stopped == "max_total_chars"
        assert selection.used_chars == 3 * len("- k0: " + big + "\n")

    def test_render_empty(self):
        """No entries render as the empty string."""
        assert render_memory_block([]) == ""

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"min_relevance_score": 1.5},
                r"min_relevance_score in \[0, 1\], found 1.5",
            ),
            ({"min_relevance_score": math.nan}, "found nan"),
            ({"max_entries": 0}, "Expected max_entries >= 1, found 0"),
            ({"entry_max_chars": 0}, "Expected entry_max_chars >= 1, found 0"),
            ({"max_total_chars": -5}, "Expected max_total_chars >= 1, found -5"),
        ],
    )
    def test_bad_config(self, kwargs, message):
        """Bad settings are typed errors naming expected and found."""
        with pytest.raises(RecallConfigError, match=message):
            make_recall_selector(**kwargs)

    @settings(max_examples=100)
    @given(
        candidate_lists,
        st.sampled_from(
            [
                USER_FACING,
                NO_CONVERSATION,
                resolve_inject_policy("channel", sessions=["s2", "s1"]),
            ]
        ),
        st.integers(min_value=1, max_value=6),
        st.integers(min_value=1, max_value=900),
        st.integers(min_value=1, max_value=5000),
    )
    def test_bounds_and_skip_set_hold(
        self, candidates, policy, max_entries, entry_chars, total_chars
    ):
        """Output respects every bound and never holds a skipped row."""
        candidates = [
            msgspec.structs.replace(c, id=str(i)) for i, c in enumerate(candidates)
        ]
        select = make_recall_selector(
            max_entries=max_entries,
            entry_max_chars=entry_chars,
            max_total_chars=total_chars,
        )
        selection = select(candidates, policy)
        assert len(selection.entries) <= max_entries
        assert selection.used_chars <= total_chars
        wrapper = len("[Memory context]\n[/Memory context]\n\n")
        assert len(selection.block) == (selection.used_chars + wrapper) * bool(
            selection.entries
        )
        by_id = {c.id: c for c in candidates}
        for entry in selection.entries:
            source = by_id[entry.id]
            assert len(entry.content) <= entry_chars + 3
            assert noise_reason(source.key, source.content) is None
            assert source.score is None or source.score >= 0.4
            if source.category == "conversation":
                assert not policy.exclude_conversation
                assert source.session in policy.sessions
        shown = [int(e.id) for e in selection.entries]
        assert shown == sorted(shown)


def _history():
    return (
        make_message("system", "be nice"),
        make_message("user", "first question"),
        make_message("assistant", "answer"),
        make_message("user", "deploy where?"),
        make_message("assistant", "", kind="normal"),
        make_message("user", tool_results=(ToolResult(call_id="c", content="r"),)),
        make_message("user", BREADCRUMB_TEXT),
    )


class TestInjectMemoryContext:
    def test_prepends_to_last_real_user_message(self):
        """Carriers and breadcrumbs are passed over; chars are re-measured."""
        history = _history()
        result = inject_memory_context(history, GOLDEN_NO_CONVERSATION)
        assert result.outcome == "injected"
        assert result.index == 3
        updated = result.messages[3]
        assert updated.text == GOLDEN_NO_CONVERSATION + "deploy where?"
        assert updated.chars == measure_chars(updated.text)
        assert result.messages[:3] == history[:3]
        assert result.messages[4:] == history[4:]

    def test_never_injects_twice(self):
        """A message that starts with the block is left alone."""
        once = inject_memory_context(_history(), GOLDEN_NO_CONVERSATION)
        twice = inject_memory_context(once.messages, GOLDEN_NO_CONVERSATION)
        assert twice == InjectionResult(
            messages=once.messages, outcome="already_injected", index=3
        )

    def test_empty_block_changes_nothing(self):
        """No block, no change."""
        history = _history()
        assert inject_memory_context(history, "") == InjectionResult(
            messages=history, outcome="empty_block"
        )

    def test_no_user_message(self):
        """Without a real user message nothing is injected."""
        history = (Message(role="system", text="s"),)
        assert inject_memory_context(history, "x").outcome == "no_user_message"

    def test_accepts_a_list(self):
        """Any sequence of messages is accepted; a tuple comes back."""
        result = inject_memory_context([make_message("user", "hi")], "B")
        assert result.messages == (make_message("user", "Bhi"),)

    def test_policy_struct_is_frozen(self):
        """Decisions are immutable values."""
        policy = InjectPolicy(
            inject=True, exclude_conversation=False, sessions=(), reason="user_facing"
        )
        with pytest.raises(AttributeError):
            policy.inject = False  # type: ignore[misc]


# -- relevance: scores comparable across queries (policies.relevance) ----------

from turnledger.policies.relevance import (  # noqa: E402 - grouped with its tests
    KEYWORD_CONFIDENT,
    STOP_WORDS,
    content_terms,
    coverage_score,
    fuse,
    is_meaningful_query,
    keyword_score,
    scope_scores,
    term_weight,
)

_WORDS = st.text(alphabet="abcdefghij", min_size=2, max_size=6)


class TestRelevance:
    """Keyword scores are query coverage, never divided by the batch's best."""

    def test_stop_words_and_short_tokens_are_not_terms(self):
        assert content_terms("What is the weather like on Mars?") == ("weather", "mars")
        assert content_terms("a b c is it") == ()
        assert not is_meaningful_query("what is it")
        assert not is_meaningful_query("🙂 %")
        assert is_meaningful_query("Helix editor")
        assert "the" in STOP_WORDS

    def test_unmatched_words_lower_the_score(self):
        weights = {"weather": 1.0, "mars": 1.0}
        assert coverage_score(weights, ["mars"]) == 0.5
        assert coverage_score(weights, []) == 0.0
        assert coverage_score({}, ["mars"]) == 0.0

    def test_scope_scores_are_the_keyword_gates_on_the_texts_given(self):
        """A scope read whole scores as SQLite's gate: the guide's editor
        example and both subjects of a question inject in a small scope; a word
        most texts share is no evidence; stop words score nothing."""
        assert scope_scores("which editor do I use", ["Helix is my editor"])[0] > 0.4
        shell, editor, lunch = scope_scores(
            "which editor and which shell",
            ["fish is my login shell", "Helix is my editor", "lunch at noon"],
        )
        assert shell > 0.4
        assert editor > 0.4
        assert lunch == 0.0
        team = [f"{w} for the team" for w in ("report", "lunch", "build", "standup")]
        assert max(scope_scores("team offsite location", team)) < 0.4
        assert scope_scores("what is it", ["it is what it is"]) == [0.0]
        assert scope_scores("editor", []) == []

    @given(
        st.dictionaries(_WORDS, st.floats(0.01, 20), min_size=1, max_size=6),
        st.data(),
    )
    def test_keyword_score_is_a_unit_value_monotone_in_matches(self, weights, data):
        """Adding a matched term never lowers the score; every score is in [0, 1]."""
        terms = sorted(weights)
        found = data.draw(st.lists(st.sampled_from(terms), unique=True))
        freqs = {t: data.draw(st.integers(1, 5)) for t in found}
        length = data.draw(st.integers(1, 100))
        score = keyword_score(weights, freqs, length)
        assert 0.0 <= score <= 1.0
        missing = [t for t in terms if t not in freqs]
        if missing:
            more = keyword_score(weights, {**freqs, missing[0]: 1}, length)
            assert more >= score - 1e-12
        if not found:
            assert score == 0.0

    @given(st.integers(1, 10_000), st.integers(0, 10_000))
    def test_weights_are_positive_and_rarer_is_heavier(self, total, docs):
        assert term_weight(total, docs) > 0
        assert term_weight(total, docs) >= term_weight(total, docs + 1)

    @given(
        st.none() | st.floats(0, 1),
        st.none() | st.floats(0, 1),
        st.floats(0.01, 1),
        st.floats(0.01, 1),
    )
    def test_fusion_is_never_below_its_stronger_leg(self, vector, keyword, wv, wk):
        """One leg scores itself; two score at least the stronger weighted leg."""
        score = fuse(vector, keyword, vector_weight=wv, keyword_weight=wk)
        assert 0.0 <= score <= 1.0
        legs = [(w, s) for w, s in ((wv, vector), (wk, keyword)) if s is not None]
        if not legs:
            assert score == 0.0
        elif len(legs) == 1:
            assert score == pytest.approx(legs[0][1])
        else:
            top = max(wv, wk)
            assert score >= max(w / top * s for w, s in legs) - 1e-12
            assert score <= min(1.0, sum(legs_s for _, legs_s in legs)) + 1e-12
        if keyword is not None and keyword >= KEYWORD_CONFIDENT:
            assert score >= keyword  # a confident keyword leg counts in full

    def test_a_confident_keyword_leg_passes_the_floor_alone(self):
        """0.78 on keywords, the cosine at the embedder's floor: 0.335 before."""
        assert fuse(0.0, 0.78) == pytest.approx(0.78)
        assert fuse(0.0, 0.69) == pytest.approx(0.69 * 0.3 / 0.7)
        assert fuse(0.0, 0.9, keyword_weight=0.0) == 0.0
