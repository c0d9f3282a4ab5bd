"""Fusing keyword and vector scores into one [0, 1] relevance (pure).

Keyword scores are raw BM25 values; they are divided by the best one in the
batch, which is the scoped batch (the rows the caller may see), so rows outside
the scope never depress the scores of rows inside it. Each entry's final score
is ``sum(w_i * s_i) / sum(w_i)`` over the modalities the entry actually has:
both, ``0.7 v + 0.3 k`` with the default weights; keyword only, ``k``; vector
only, ``v``. Ties are broken by entry id, ascending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

EPSILON: Final = 1e-12
"""Below this, a batch maximum counts as zero (the scores are kept as they are)."""


class Scored(NamedTuple):
    """An entry's fused relevance.

    Attributes:
        rowid: The row.
        entry_id: The entry id (the tie-break).
        score: The fused score, in [0, 1].
    """

    rowid: int
    entry_id: str
    score: float


def normalize_keyword(raw: Mapping[int, tuple[str, float]]) -> dict[int, float]:
    """Divide raw keyword scores by the batch maximum, clamped to [0, 1].

    Args:
        raw: ``{rowid: (entry id, raw score)}`` (higher is better).

    Returns:
        ``{rowid: score}``; the best row scores 1.0 (a batch whose maximum is
        below :data:`EPSILON` is divided by 1.0 instead).
    """
    if not raw:
        return {}
    best = max(score for _, score in raw.values())
    divisor = best if best >= EPSILON else 1.0
    return {rowid: _clamp(score / divisor) for rowid, (_, score) in raw.items()}


def fuse(
    vector: Mapping[int, tuple[str, float]],
    keyword: Mapping[int, tuple[str, float]],
    *,
    vector_weight: float,
    keyword_weight: float,
) -> list[Scored]:
    """Fuse vector similarities and raw keyword scores, best first.

    Args:
        vector: ``{rowid: (entry id, cosine)}``.
        keyword: ``{rowid: (entry id, raw BM25)}``.
        vector_weight: The weight of the vector modality.
        keyword_weight: The weight of the keyword modality.

    Returns:
        Every entry of either input with its fused score, sorted by score
        descending, then entry id ascending.
    """
    normalized = normalize_keyword(keyword)
    fused: list[Scored] = []
    for rowid in vector.keys() | keyword.keys():
        total = weights = 0.0
        if rowid in vector:
            total += vector_weight * _clamp(vector[rowid][1])
            weights += vector_weight
        if rowid in normalized:
            total += keyword_weight * normalized[rowid]
            weights += keyword_weight
        entry_id = (vector.get(rowid) or keyword[rowid])[0]
        fused.append(
            Scored(rowid, entry_id, _clamp(total / weights) if weights else 0.0)
        )
    fused.sort(key=lambda s: (-s.score, s.entry_id, s.rowid))
    return fused


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))
