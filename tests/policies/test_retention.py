"""Retention planning and the recall-side tuning (decay, importance blend, MMR)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnledger.policies.recall_tuning import (
    RecallTuning,
    blend_importance,
    decay_scores,
    make_recall_tuner,
    mmr_rerank,
    recency,
)
from turnledger.policies.retention import (
    MemoryItem,
    RetentionConfigError,
    RetentionPlan,
    RetentionStep,
    age_days,
    plan_retention,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def item(
    key,
    category="daily",
    *,
    age=0.0,
    updated=None,
    score=None,
    importance=None,
    content="",
):
    return MemoryItem(
        key=key,
        content=content or key,
        category=category,
        created_at=ago(age),
        updated_at=None if updated is None else ago(updated),
        score=score,
        importance=importance,
    )


# -- strategies ---------------------------------------------------------------

moments = st.integers(min_value=-400 * 86_400, max_value=400 * 86_400).map(
    lambda seconds: NOW + timedelta(seconds=seconds)
)
all_categories = st.sampled_from(
    ["core", "daily", "conversation", "archive", "project_notes"]
)
unit = st.floats(min_value=0.0, max_value=1.0)
contents = st.lists(
    st.sampled_from(["rust", "deploy", "tea", "prod", "cluster", "go"]), max_size=5
).map(" ".join)


@st.composite
def items(draw, *, key=None):
    created = draw(moments)
    return MemoryItem(
        key=key if key is not None else draw(st.text(max_size=4)),
        content=draw(contents),
        category=draw(all_categories),
        created_at=created,
        updated_at=draw(st.none() | moments),
        score=draw(st.none() | unit),
        importance=draw(st.none() | unit),
    )


def keyed_items(max_size=12):
    return st.lists(st.integers(0, 30), max_size=max_size, unique=True).flatmap(
        lambda keys: st.tuples(*(items(key=f"k{k}") for k in keys)).map(list)
    )


# -- retention ----------------------------------------------------------------


class TestPlanRetention:
    def test_each_rule_with_its_reason(self):
        """Expire, archive and purge exactly the entries past their windows."""
        entries = [
            item("conv_old", "conversation", age=40, updated=31),
            item("conv_touched", "conversation", age=40, updated=29),
            item("conv_created_old", "conversation", age=31),
            item("day_new", "daily", age=6.9),
            item("day_week", "daily", age=8),
            item("day_month", "daily", age=31),
            item("arch_young", "archive", age=20),
            item("arch_old", "archive", age=30.5),
            item("core_old", "core", age=400),
            item("custom_old", "project_notes", age=400),
        ]
        plan = plan_retention(entries, NOW)
        assert plan == RetentionPlan(
            expire=(
                RetentionStep(
                    key="conv_old",
                    action="expire",
                    category="conversation",
                    age_days=31.0,
                    reason="conversation entry not updated for 31.0 days (kept 30)",
                ),
                RetentionStep(
                    key="conv_created_old",
                    action="expire",
                    category="conversation",
                    age_days=31.0,
                    reason="conversation entry not updated for 31.0 days (kept 30)",
                ),
            ),
            archive=(
                RetentionStep(
                    key="day_week",
                    action="archive",
                    category="daily",
                    age_days=8.0,
                    reason="daily entry is 8.0 days old (archived after 7)",
                ),
            ),
            purge=(
                RetentionStep(
                    key="day_month",
                    action="purge",
                    category="daily",
                    age_days=31.0,
                    reason="daily entry is 31.0 days old (purged after 30)",
                ),
                RetentionStep(
                    key="arch_old",
                    action="purge",
                    category="archive",
                    age_days=30.5,
                    reason="archive entry is 30.5 days old (purged after 30)",
                ),
            ),
        )
        assert [s.key for s in plan.steps] == [
            "conv_old",
            "conv_created_old",
            "day_week",
            "day_month",
            "arch_old",
        ]
        assert not plan.empty

    def test_windows_are_strict(self):
        """An entry exactly at its window is kept."""
        entries = [item("c", "conversation", age=30), item("d", "daily", age=7)]
        assert plan_retention(entries, NOW).empty

    def test_pinned_keys_are_never_touched(self):
        """Pinning wins over every rule."""
        entries = [item("c", "conversation", age=99), item("d", "daily", age=99)]
        assert plan_retention(entries, NOW, pinned_keys=frozenset({"c", "d"})).empty

    def test_zero_disables_a_rule(self):
        """0 days means keep: no expiry, no archive, no purge."""
        entries = [
            item("c", "conversation", age=99),
            item("d", "daily", age=99),
            item("a", "archive", age=99),
        ]
        plan = plan_retention(
            entries, NOW, conversation_days=0, daily_archive_days=0, daily_purge_days=0
        )
        assert plan.empty

    def test_without_purge_old_daily_entries_are_archived(self):
        """Purge off: a month-old daily entry is archived instead."""
        plan = plan_retention([item("d", "daily", age=99)], NOW, daily_purge_days=0)
        assert [s.key for s in plan.archive] == ["d"]

    def test_naive_timestamps_are_utc(self):
        """A naive creation time is read as UTC; the future counts as age 0."""
        naive = MemoryItem(
            key="d", category="daily", created_at=ago(31).replace(tzinfo=None)
        )
        assert [s.key for s in plan_retention([naive], NOW).purge] == ["d"]
        assert age_days(NOW + timedelta(days=3), NOW) == 0.0

    @pytest.mark.parametrize(
        "name", ["conversation_days", "daily_archive_days", "daily_purge_days"]
    )
    def test_negative_windows_are_refused(self, name):
        """The message names the setting and the value."""
        with pytest.raises(
            RetentionConfigError,
            match=rf"^Expected {name} >= 0 \(0 disables the rule\), found -1$",
        ):
            plan_retention([], NOW, **{name: -1})

    @given(keyed_items(), moments, st.data())
    def test_never_touches_pinned_core_or_custom_entries(self, entries, now, data):
        """Pinned keys, core and custom categories never appear in a plan."""
        keys = [e.key for e in entries]
        pinned = frozenset(
            data.draw(st.lists(st.sampled_from(keys)) if keys else st.just([]))
        )
        plan = plan_retention(entries, now, pinned_keys=pinned)
        by_key = {e.key: e for e in entries}
        for step in plan.steps:
            assert step.key not in pinned
            assert by_key[step.key].category in {"conversation", "daily", "archive"}
        assert len({s.key for s in plan.steps}) == len(plan.steps)


# -- decay ---------------------------------------------------------------------


class TestDecay:
    def test_half_life(self):
        """A week-old daily score is halved; core and unscored are untouched."""
        entries = [
            item("d", "daily", age=7, score=0.8),
            item("c", "core", age=70, score=0.8),
            item("u", "daily", age=70),
        ]
        decayed = decay_scores(entries, NOW)
        assert decayed[0].score == pytest.approx(0.4)
        assert decayed[1:] == tuple(entries[1:])

    def test_bad_half_life_is_refused(self):
        """Zero or negative half-lives are rejected."""
        with pytest.raises(
            RetentionConfigError, match=r"^Expected a half-life > 0 days, found 0$"
        ):
            decay_scores([], NOW, half_life_days=0)

    @given(st.lists(items(), max_size=8), moments)
    def test_never_increases_and_spares_core(self, entries, now):
        """Decay never raises a score and leaves core entries as they were."""
        decayed = decay_scores(entries, now)
        assert len(decayed) == len(entries)
        for before, after in zip(entries, decayed, strict=True):
            if before.category == "core" or before.score is None:
                assert after == before
            else:
                assert after.score <= before.score
                assert after.key == before.key


# -- importance blend ----------------------------------------------------------


class TestBlend:
    def test_default_weights(self):
        """0.7·score + 0.2·importance + 0.1·recency, core recency 1."""
        entries = [
            item("c", "core", age=100, score=0.5, importance=1.0),
            item("d", "daily", age=7, score=1.0),
            item("u", "daily"),
        ]
        blended = blend_importance(entries, NOW)
        assert blended[0].score == pytest.approx(0.35 + 0.2 + 0.1)
        assert blended[1].score == pytest.approx(0.7 + 0.0 + 0.05)
        assert blended[2] == entries[2]

    def test_custom_weights_and_clamped_inputs(self):
        """Out-of-range inputs are clamped before blending."""
        entries = [item("c", "core", score=3.0, importance=-1.0)]
        blended = blend_importance(
            entries, NOW, importance_weight=0.5, recency_weight=0.0
        )
        assert blended[0].score == pytest.approx(0.5)

    @pytest.mark.parametrize(("iw", "rw"), [(-0.1, 0.1), (0.2, 1.1), (0.6, 0.5)])
    def test_bad_weights_are_refused(self, iw, rw):
        """Weights must be unit values summing to at most 1."""
        with pytest.raises(
            RetentionConfigError,
            match=r"^Expected importance and recency weights in \[0, 1\] summing to <= 1, found",
        ):
            blend_importance([], NOW, importance_weight=iw, recency_weight=rw)

    @given(st.lists(items(), max_size=8), moments)
    def test_blended_scores_stay_unit_values(self, entries, now):
        """A blend is a convex combination of unit values."""
        for after in blend_importance(entries, now):
            assert after.score is None or 0.0 <= after.score <= 1.0


# -- MMR -------------------------------------------------------------------------


class TestMMR:
    def test_diversifies_after_the_leader(self):
        """A near-duplicate of the leader drops below a different entry."""
        entries = [
            item("b", content="rust memory scoring pipeline duplicate", score=0.98),
            item("a", content="rust memory scoring pipeline", score=1.0),
            item("c", content="garden tomatoes irrigation calendar", score=0.8),
        ]
        ranked = mmr_rerank(entries, lambda_=0.5)
        assert [e.key for e in ranked] == ["a", "c", "b"]

    def test_pure_relevance_keeps_score_order_and_ties_keep_input_order(self):
        """λ = 1 sorts by score; equal scores stay in input order."""
        entries = [
            item("x", content="same", score=0.5),
            item("y", content="same", score=0.9),
            item("z", content="same", score=0.5),
        ]
        assert [e.key for e in mmr_rerank(entries, lambda_=1.0)] == ["y", "x", "z"]

    def test_limit_and_empty_inputs(self):
        """A limit bounds the output; nothing in, nothing out."""
        entries = [item(k, score=0.1 * i) for i, k in enumerate("abc")]
        assert [e.key for e in mmr_rerank(entries, limit=1)] == ["c"]
        assert mmr_rerank(entries, limit=0) == ()
        assert mmr_rerank([]) == ()

    def test_bad_settings_are_refused(self):
        """λ outside [0, 1] and negative limits are rejected."""
        with pytest.raises(
            RetentionConfigError,
            match=r"^Expected an MMR lambda in \[0, 1\], found 1.5$",
        ):
            mmr_rerank([], lambda_=1.5)
        with pytest.raises(
            RetentionConfigError, match=r"^Expected an MMR limit >= 0, found -1$"
        ):
            mmr_rerank([], limit=-1)

    @given(
        st.lists(items(), max_size=10),
        unit,
        st.none() | st.integers(min_value=0, max_value=12),
    )
    def test_output_is_a_permutation_subset_of_the_input(self, entries, lambda_, limit):
        """No entry is invented or repeated; the length is the limit or all."""
        ranked = mmr_rerank(entries, lambda_=lambda_, limit=limit)
        ids = [id(e) for e in ranked]
        assert len(set(ids)) == len(ids)
        assert set(ids) <= {id(e) for e in entries}
        expected = len(entries) if limit is None else min(limit, len(entries))
        assert len(ranked) == expected


# -- tuner -------------------------------------------------------------------------


class TestTuner:
    entries = (
        item("old", "daily", age=14, score=0.9, content="rust deploy notes"),
        item("new", "daily", age=0, score=0.5, content="rust deploy notes copy"),
        item("core", "core", age=99, score=0.4, importance=1.0, content="tea"),
    )

    def test_off_by_default(self):
        """No tuning: the input, unchanged."""
        assert make_recall_tuner()(list(self.entries), NOW) == self.entries

    def test_decay_rescales_and_sorts(self):
        """Decay alone: a two-week-old 0.9 falls below a fresh 0.5."""
        tuned = make_recall_tuner(RecallTuning(decay=True))(self.entries, NOW)
        assert [e.key for e in tuned] == ["new", "core", "old"]
        assert tuned[2].score == pytest.approx(0.9 / 4)

    def test_blend_replaces_decay(self):
        """With the blend on, decay is not applied a second time."""
        tuned = make_recall_tuner(RecallTuning(decay=True, importance_blend=True))(
            self.entries, NOW
        )
        old = next(e for e in tuned if e.key == "old")
        assert old.score == pytest.approx(0.7 * 0.9 + 0.1 * 0.25)
        assert [e.key for e in tuned] == ["old", "core", "new"]

    def test_mmr_alone(self):
        """MMR sorts by relevance, then diversifies."""
        tuned = make_recall_tuner(RecallTuning(mmr=True, mmr_lambda=0.3))(
            self.entries, NOW
        )
        assert [e.key for e in tuned] == ["old", "core", "new"]

    @pytest.mark.parametrize(
        ("tuning", "message"),
        [
            (RecallTuning(half_life_days=-1), "half-life"),
            (RecallTuning(recency_weight=2), "weights"),
            (RecallTuning(mmr_lambda=-0.5), "MMR lambda"),
        ],
    )
    def test_settings_are_validated_once_up_front(self, tuning, message):
        """A bad setting fails when the tuner is made, not when it runs."""
        with pytest.raises(RetentionConfigError, match=message):
            make_recall_tuner(tuning)

    def test_recency_signal(self):
        """Core is always recent; a week-old entry is half as recent."""
        assert recency(self.entries[2], NOW, half_life_days=7) == 1.0
        assert recency(item("d", age=7), NOW, half_life_days=7) == pytest.approx(0.5)
        assert math.isclose(recency(item("d"), NOW, half_life_days=7), 1.0)
