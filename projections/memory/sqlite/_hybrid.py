"""Fusing keyword and vector results: ranked by rank, scored by the gate (pure).

The order is reciprocal rank fusion (:data:`~policies.relevance.RRF_K`, the
legs weighted equally, :data:`RANK_WEIGHT`): each leg's rank counts, not its
scale, so neither leg's score range decides the order. The score (what
the ``[recall] min_relevance`` floor is compared to) is a separate decision:
keyword scores are query coverage (:mod:`policies.relevance`), already on
[0, 1] and comparable across queries; every candidate of either leg is measured
on both legs (a vector candidate that no keyword matched has keyword score 0
when the keyword leg is on, a keyword candidate's cosine is computed exactly),
and a row's score is the weighted probabilistic OR of the legs that measured it
(:func:`policies.relevance.fuse`; a row without a vector is scored on keywords
alone), the vector leg's score first discounted by the share of the query's
weight no scoped row holds (:func:`policies.relevance.discount_absent`; its
rank is not). A row that scores 0 (no positive cosine and no keyword) is left out;
one whose cosine is under the embedder's floor scores under 0.001
(:func:`policies.relevance.calibrate`): ranked, not injected. Equal ranks
(common: keyword rank 1 and vector rank 3 tie with 3 and 1) are broken by the
score, the stronger evidence first, then by entry id, ascending.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from typing import Final, NamedTuple

from turnledger.policies.relevance import discount_absent, reciprocal_rank
from turnledger.policies.relevance import fuse as fuse_legs


class Scored(NamedTuple):
    """An entry's fused relevance.

    Attributes:
        rowid: The row.
        entry_id: The entry id (the last tie-break).
        score: The fused score, in [0, 1].
    """

    rowid: int
    entry_id: str
    score: float


RANK_WEIGHT: Final = 1.0
"""Each leg's weight in the rank fusion: equal (the configured weights shape the
score, not the order)."""


def fuse(
    vector: Mapping[int, tuple[str, float]],
    keyword: Mapping[int, tuple[str, float]],
    *,
    vector_weight: float,
    keyword_weight: float,
    keyword_live: bool = True,
    absent: float = 0.0,
) -> list[Scored]:
    """Rank by reciprocal rank fusion; score by the gate, best first.

    A row's place comes from its ranks: ``sum(1 / (RRF_K + rank))`` over the
    legs that returned it (the keyword leg's rank is its order, best first;
    the vector leg's the cosine's), so a row either leg ranks high stays high
    whatever the other leg's scale. Its score (what the ``[recall]
    min_relevance`` floor is compared to) is the legs' scores fused as a
    weighted probabilistic OR (:func:`policies.relevance.fuse`); a row scoring
    0 there is left out.

    Args:
        vector: ``{rowid: (entry id, cosine)}`` for every candidate that has a
            vector (keyword candidates included).
        keyword: ``{rowid: (entry id, keyword score)}``, best first.
        vector_weight: The weight of the vector modality.
        keyword_weight: The weight of the keyword modality.
        keyword_live: Whether the keyword leg ran (a row it did not return then
            scores 0 on it).
        absent: The share of the query's weight no scoped row holds
            (:func:`policies.relevance.absent_share`): it discounts each
            cosine's score, not its rank.

    Returns:
        Every entry of either input whose fused score is above 0, by fused
        rank descending, then score descending, then entry id ascending.
    """
    places: dict[int, float] = {}
    if keyword_weight > 0:
        for rank, rowid in enumerate(keyword, 1):
            places[rowid] = RANK_WEIGHT * reciprocal_rank(rank)
    if vector_weight > 0:
        lower = sorted(-c for _, c in vector.values())  # best first, negated
        for rowid, (_, similarity) in vector.items():
            if similarity > 0:  # equal cosines share a rank: 1 + how many are higher
                rank = 1 + bisect_left(lower, -similarity)
                share = RANK_WEIGHT * reciprocal_rank(rank)
                places[rowid] = places.get(rowid, 0.0) + share
    fused: list[tuple[float, Scored]] = []
    for rowid in vector.keys() | keyword.keys():
        cosine = discount_absent(vector[rowid][1], absent) if rowid in vector else None
        words: float | None = keyword[rowid][1] if rowid in keyword else None
        if words is None and keyword_live:
            words = 0.0
        entry_id = (vector.get(rowid) or keyword[rowid])[0]
        score = fuse_legs(
            cosine,
            words,
            vector_weight=vector_weight,
            keyword_weight=keyword_weight,
        )
        if score > 0:  # a row no leg found anything for is not a match
            fused.append((places.get(rowid, 0.0), Scored(rowid, entry_id, score)))
    fused.sort(key=lambda s: (-s[0], -s[1].score, s[1].entry_id, s[1].rowid))
    return [scored for _, scored in fused]
