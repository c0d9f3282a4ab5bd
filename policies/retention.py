"""Governance and recall tuning over a neutral memory entry (reference §2.8).

Retention (:func:`plan_retention`) decides, for a given ``now``, which entries
expire, are archived or are purged; the shell records each decision as a
memory event, so a rebuild of any backend reproduces it:

- ``conversation`` entries not updated for more than 30 days expire;
- ``daily`` entries older than 7 days (since creation) are archived, and
  ``daily`` or ``archive`` entries older than 30 days are purged;
- ``core`` and custom categories are never touched, nor is a pinned key.

A window of 0 days disables its rule (ZeroClaw's "0 = keep"). Ages are
strict: an entry exactly 30 days old is kept.

Recall tuning is off by default and pure: :func:`decay_scores` (7-day
half-life, core exempt), :func:`blend_importance` (``0.7·score +
0.2·importance + 0.1·recency``), :func:`mmr_rerank` (λ = 0.7, token Jaccard),
composed by :func:`make_recall_tuner` from a :class:`RecallTuning`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.fact_dedup import (
    jaccard,
    tokens,
)
from turnledger.policies.memory_entries import (
    CORE_CATEGORY,
    DAILY_CATEGORY,
)
from turnledger.policies.types import CONVERSATION_CATEGORY

ARCHIVE_CATEGORY: Final = "archive"
"""The category a daily entry is moved to when it is archived."""

DEFAULT_CONVERSATION_DAYS: Final = 30
"""Conversation entries not updated for longer than this expire."""
DEFAULT_DAILY_ARCHIVE_DAYS: Final = 7
"""Daily entries older than this are archived."""
DEFAULT_DAILY_PURGE_DAYS: Final = 30
"""Daily and archived entries older than this are purged."""
DEFAULT_HALF_LIFE_DAYS: Final = 7.0
"""The half-life of time decay and of the recency signal."""
DEFAULT_IMPORTANCE_WEIGHT: Final = 0.2
"""The importance weight of the blend (the score gets the rest)."""
DEFAULT_RECENCY_WEIGHT: Final = 0.1
"""The recency weight of the blend."""
DEFAULT_MMR_LAMBDA: Final = 0.7
"""MMR's balance between relevance (1.0) and diversity (0.0)."""

_SECONDS_PER_DAY: Final = 86_400.0

RetentionAction: TypeAlias = Literal["expire", "archive", "purge"]
"""What governance does to an entry."""

RecallTuner: TypeAlias = Callable[
    [Sequence["MemoryItem"], datetime], tuple["MemoryItem", ...]
]
"""Re-scores and re-orders recalled entries for a given ``now``."""


class RetentionConfigError(PolicyError):
    """A retention window or recall tuning value is unusable."""


class MemoryItem(msgspec.Struct, frozen=True, kw_only=True):
    """A memory entry as governance and recall tuning see it.

    Attributes:
        key: The entry's key (unique per agent).
        content: Its text.
        category: ``core``, ``daily``, ``conversation``, ``archive`` or custom.
        created_at: When it was first stored (naive values are taken as UTC).
        updated_at: When it was last stored; ``None`` means ``created_at``.
        score: Relevance on [0, 1]; ``None`` when unscored.
        importance: Importance on [0, 1], when known.
    """

    key: str
    content: str = ""
    category: str
    created_at: datetime
    updated_at: datetime | None = None
    score: float | None = None
    importance: float | None = None


class RetentionStep(msgspec.Struct, frozen=True, kw_only=True):
    """One governance decision.

    Attributes:
        key: The entry's key.
        action: ``expire``, ``archive`` or ``purge``.
        category: The entry's category when planned.
        age_days: The age the rule measured, in days.
        reason: Why, in a sentence naming the rule.
    """

    key: str
    action: RetentionAction
    category: str
    age_days: float
    reason: str


class RetentionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What governance does, grouped by action, each in input order.

    Attributes:
        expire: Conversation entries to forget.
        archive: Daily entries to move to ``archive``.
        purge: Daily and archived entries to forget.
    """

    expire: tuple[RetentionStep, ...] = ()
    archive: tuple[RetentionStep, ...] = ()
    purge: tuple[RetentionStep, ...] = ()

    @property
    def steps(self) -> tuple[RetentionStep, ...]:
        """Every step: expiries, then archives, then purges."""
        return (*self.expire, *self.archive, *self.purge)

    @property
    def empty(self) -> bool:
        """Whether the plan does nothing."""
        return not self.steps


class RecallTuning(msgspec.Struct, frozen=True, kw_only=True):
    """Which recall-side stages run (all off by default) and their settings.

    Attributes:
        decay: Apply time decay (ignored when ``importance_blend`` is on: the
            blend has its own recency signal).
        importance_blend: Blend score, importance and recency.
        mmr: Re-rank for diversity with MMR.
        half_life_days: The half-life of decay and recency.
        importance_weight: The blend's importance weight.
        recency_weight: The blend's recency weight.
        mmr_lambda: MMR's relevance/diversity balance.
    """

    decay: bool = False
    importance_blend: bool = False
    mmr: bool = False
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    importance_weight: float = DEFAULT_IMPORTANCE_WEIGHT
    recency_weight: float = DEFAULT_RECENCY_WEIGHT
    mmr_lambda: float = DEFAULT_MMR_LAMBDA


# -- time --------------------------------------------------------------------


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def age_days(moment: datetime, now: datetime) -> float:
    """Return how many days before ``now`` a moment is (0 for the future).

    Naive datetimes are taken as UTC.
    """
    seconds = (_aware(now) - _aware(moment)).total_seconds()
    return max(seconds, 0.0) / _SECONDS_PER_DAY


# -- retention ---------------------------------------------------------------


def _check_days(name: str, days: int) -> None:
    if days < 0:
        msg = f"Expected {name} >= 0 (0 disables the rule), found {days}"
        raise RetentionConfigError(msg)


def _older(age: float, days: int) -> bool:
    return days > 0 and age > days


def _conversation_step(
    item: MemoryItem, now: datetime, days: int
) -> RetentionStep | None:
    age = age_days(item.updated_at or item.created_at, now)
    if not _older(age, days):
        return None
    reason = f"conversation entry not updated for {age:.1f} days (kept {days})"
    return RetentionStep(
        key=item.key,
        action="expire",
        category=item.category,
        age_days=age,
        reason=reason,
    )


def _daily_step(
    item: MemoryItem, now: datetime, archive_days: int, purge_days: int
) -> RetentionStep | None:
    age = age_days(item.created_at, now)
    if _older(age, purge_days):
        reason = (
            f"{item.category} entry is {age:.1f} days old (purged after {purge_days})"
        )
        action: RetentionAction = "purge"
    elif item.category == DAILY_CATEGORY and _older(age, archive_days):
        reason = f"daily entry is {age:.1f} days old (archived after {archive_days})"
        action = "archive"
    else:
        return None
    return RetentionStep(
        key=item.key, action=action, category=item.category, age_days=age, reason=reason
    )


def plan_retention(
    entries: Iterable[MemoryItem],
    now: datetime,
    *,
    conversation_days: int = DEFAULT_CONVERSATION_DAYS,
    daily_archive_days: int = DEFAULT_DAILY_ARCHIVE_DAYS,
    daily_purge_days: int = DEFAULT_DAILY_PURGE_DAYS,
    pinned_keys: frozenset[str] = frozenset(),
) -> RetentionPlan:
    """Plan which entries expire, are archived or are purged at ``now``.

    Args:
        entries: The agent's live entries.
        now: The moment governance runs (the caller's clock).
        conversation_days: Conversation entries whose last update is older
            expire (0: never).
        daily_archive_days: Daily entries created longer ago are archived
            (0: never).
        daily_purge_days: Daily and archived entries created longer ago are
            purged (0: never); purging wins over archiving.
        pinned_keys: Keys never touched.

    Returns:
        The plan; core and custom-category entries never appear in it.

    Raises:
        RetentionConfigError: A window is negative.
    """
    _check_days("conversation_days", conversation_days)
    _check_days("daily_archive_days", daily_archive_days)
    _check_days("daily_purge_days", daily_purge_days)
    planned: dict[RetentionAction, list[RetentionStep]] = {
        "expire": [],
        "archive": [],
        "purge": [],
    }
    for item in entries:
        step = None
        if item.key in pinned_keys:
            continue
        if item.category == CONVERSATION_CATEGORY:
            step = _conversation_step(item, now, conversation_days)
        elif item.category in (DAILY_CATEGORY, ARCHIVE_CATEGORY):
            step = _daily_step(item, now, daily_archive_days, daily_purge_days)
        if step is not None:
            planned[step.action].append(step)
    return RetentionPlan(
        expire=tuple(planned["expire"]),
        archive=tuple(planned["archive"]),
        purge=tuple(planned["purge"]),
    )


# -- recall tuning -----------------------------------------------------------


def _check_half_life(half_life_days: float) -> None:
    if not half_life_days > 0:
        msg = f"Expected a half-life > 0 days, found {half_life_days!r}"
        raise RetentionConfigError(msg)


def _check_weights(importance_weight: float, recency_weight: float) -> None:
    weights = (importance_weight, recency_weight)
    if not all(0.0 <= w <= 1.0 for w in weights) or sum(weights) > 1.0:
        msg = (
            "Expected importance and recency weights in [0, 1] summing to <= 1, "
            f"found {importance_weight!r} and {recency_weight!r}"
        )
        raise RetentionConfigError(msg)


def _check_lambda(lambda_: float) -> None:
    if not 0.0 <= lambda_ <= 1.0:
        msg = f"Expected an MMR lambda in [0, 1], found {lambda_!r}"
        raise RetentionConfigError(msg)


def recency(item: MemoryItem, now: datetime, *, half_life_days: float) -> float:
    """Return the recency signal of an entry: 1.0 for core, else ``2^(-age/h)``."""
    if item.category == CORE_CATEGORY:
        return 1.0
    return math.exp(-age_days(item.created_at, now) / half_life_days * math.log(2))


def decay_scores(
    items: Sequence[MemoryItem],
    now: datetime,
    *,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> tuple[MemoryItem, ...]:
    """Decay the scores of older entries.

    Args:
        items: Recalled entries.
        now: The moment of recall.
        half_life_days: The age at which a score is halved.

    Returns:
        The entries in the same order; each scored non-core entry's score is
        multiplied by ``exp(-age_days / half_life · ln 2)`` (age from creation,
        never negative). Core and unscored entries are unchanged.

    Raises:
        RetentionConfigError: ``half_life_days`` is not positive.
    """
    _check_half_life(half_life_days)
    return tuple(
        item
        if item.score is None or item.category == CORE_CATEGORY
        else msgspec.structs.replace(
            item, score=item.score * recency(item, now, half_life_days=half_life_days)
        )
        for item in items
    )


def _clamp(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def blend_importance(
    items: Sequence[MemoryItem],
    now: datetime,
    *,
    importance_weight: float = DEFAULT_IMPORTANCE_WEIGHT,
    recency_weight: float = DEFAULT_RECENCY_WEIGHT,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> tuple[MemoryItem, ...]:
    """Blend each scored entry's score with its importance and recency.

    Args:
        items: Recalled entries.
        now: The moment of recall.
        importance_weight: The importance weight ``iw``.
        recency_weight: The recency weight ``rw``.
        half_life_days: The half-life of the recency signal (:func:`recency`).

    Returns:
        The entries in the same order; each scored entry's score becomes
        ``(1 - iw - rw)·score + iw·importance + rw·recency`` (with defaults
        ``0.7·score + 0.2·importance + 0.1·recency``), inputs clamped to
        [0, 1] and a missing importance counted as 0. Unscored entries are
        unchanged.

    Raises:
        RetentionConfigError: A weight is outside [0, 1], the weights sum
            above 1, or ``half_life_days`` is not positive.
    """
    _check_weights(importance_weight, recency_weight)
    _check_half_life(half_life_days)
    score_weight = 1.0 - importance_weight - recency_weight

    def blended(item: MemoryItem, score: float) -> float:
        signal = recency(item, now, half_life_days=half_life_days)
        mixed = (
            score_weight * _clamp(score)
            + importance_weight * _clamp(item.importance or 0.0)
            + recency_weight * signal
        )
        return _clamp(mixed)

    return tuple(
        item
        if item.score is None
        else msgspec.structs.replace(item, score=blended(item, item.score))
        for item in items
    )


def _mmr_pick(
    relevance: Sequence[float],
    token_sets: Sequence[frozenset[str]],
    chosen: Sequence[int],
    remaining: Sequence[int],
    lambda_: float,
) -> int:
    def value(index: int) -> float:
        redundancy = max(jaccard(token_sets[index], token_sets[c]) for c in chosen)
        return lambda_ * relevance[index] - (1.0 - lambda_) * redundancy

    # max() keeps the first of equal values: ties go to the earlier entry.
    return max(remaining, key=value)


def mmr_rerank(
    items: Sequence[MemoryItem],
    *,
    lambda_: float = DEFAULT_MMR_LAMBDA,
    limit: int | None = None,
) -> tuple[MemoryItem, ...]:
    """Re-order entries by maximal marginal relevance.

    The most relevant entry comes first; each next one maximises
    ``λ·relevance - (1 - λ)·max token Jaccard to those already chosen``, where
    relevance is the score (0 when unscored). Ties keep input order.

    Args:
        items: Recalled entries.
        lambda_: Relevance (1.0) versus diversity (0.0).
        limit: How many to return; ``None`` for all.

    Returns:
        Distinct input entries (no entry twice), at most ``limit`` of them.

    Raises:
        RetentionConfigError: ``lambda_`` is outside [0, 1] or ``limit`` is
            negative.
    """
    _check_lambda(lambda_)
    if limit is not None and limit < 0:
        msg = f"Expected an MMR limit >= 0, found {limit}"
        raise RetentionConfigError(msg)
    wanted = len(items) if limit is None else min(limit, len(items))
    if wanted == 0:
        return ()
    relevance = [item.score or 0.0 for item in items]
    token_sets = [tokens(item.content) for item in items]
    remaining = list(range(len(items)))
    chosen = [max(remaining, key=lambda index: relevance[index])]
    remaining.remove(chosen[0])
    while len(chosen) < wanted:
        pick = _mmr_pick(relevance, token_sets, chosen, remaining, lambda_)
        chosen.append(pick)
        remaining.remove(pick)
    return tuple(items[index] for index in chosen)


def _by_score(items: Sequence[MemoryItem]) -> tuple[MemoryItem, ...]:
    # Stable: an unscored (recent-entries) list keeps its newest-first order.
    return tuple(sorted(items, key=lambda item: -(item.score or 0.0)))


def make_recall_tuner(tuning: RecallTuning | None = None) -> RecallTuner:
    """Validate a tuning once and return the function that applies it.

    Stages, each only when enabled: decay (skipped when the blend is on),
    importance blend, then a stable sort by score and MMR. With every stage
    off (the default) the tuner returns its input unchanged.

    Args:
        tuning: The stages and settings; ``None`` means all off.

    Returns:
        ``tune(items, now) -> items``.

    Raises:
        RetentionConfigError: A setting is out of range.
    """
    chosen = tuning or RecallTuning()
    _check_half_life(chosen.half_life_days)
    _check_weights(chosen.importance_weight, chosen.recency_weight)
    _check_lambda(chosen.mmr_lambda)

    def tune(items: Sequence[MemoryItem], now: datetime) -> tuple[MemoryItem, ...]:
        result = tuple(items)
        if chosen.decay and not chosen.importance_blend:
            result = decay_scores(result, now, half_life_days=chosen.half_life_days)
        if chosen.importance_blend:
            result = blend_importance(
                result,
                now,
                importance_weight=chosen.importance_weight,
                recency_weight=chosen.recency_weight,
                half_life_days=chosen.half_life_days,
            )
        if chosen.decay or chosen.importance_blend or chosen.mmr:
            result = _by_score(result)
        if chosen.mmr:
            result = mmr_rerank(result, lambda_=chosen.mmr_lambda)
        return result

    return tune
