"""Recall tuning: re-scoring and re-ordering recalled memory entries (reference §2.8).

Off by default and pure: :func:`decay_scores` (7-day half-life, core exempt),
:func:`blend_importance` (``0.7·score + 0.2·importance + 0.1·recency``) and
:func:`mmr_rerank` (λ = 0.7, token Jaccard), composed by
:func:`make_recall_tuner` from a :class:`RecallTuning` into a
:data:`RecallTuner`. The entries are :class:`~policies.retention.MemoryItem`
values and ages are measured by :func:`~policies.retention.age_days`; an
unusable setting is a :class:`~policies.retention.RetentionConfigError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final, TypeAlias

import msgspec

from turnledger.policies.fact_dedup import jaccard, tokens
from turnledger.policies.memory_entries import CORE_CATEGORY
from turnledger.policies.retention import MemoryItem, RetentionConfigError, age_days

DEFAULT_HALF_LIFE_DAYS: Final = 7.0
"""The half-life of time decay and of the recency signal."""
DEFAULT_IMPORTANCE_WEIGHT: Final = 0.2
"""The importance weight of the blend (the score gets the rest)."""
DEFAULT_RECENCY_WEIGHT: Final = 0.1
"""The recency weight of the blend."""
DEFAULT_MMR_LAMBDA: Final = 0.7
"""MMR's balance between relevance (1.0) and diversity (0.0)."""

RecallTuner: TypeAlias = Callable[
    [Sequence[MemoryItem], datetime], tuple[MemoryItem, ...]
]
"""Re-scores and re-orders recalled entries for a given ``now``."""


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
