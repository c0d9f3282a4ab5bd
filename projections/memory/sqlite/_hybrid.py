"""Fusing keyword and vector scores into one [0, 1] relevance (pure).

Keyword scores are query coverage (:mod:`policies.relevance`), already on
[0, 1] and comparable across queries: nothing is divided by the batch's best.
Every candidate of either leg is measured on both legs: a vector candidate that
no keyword matched has keyword score 0 (when the keyword leg is on), and a
keyword candidate's cosine is computed exactly. A row's score is then the
weighted probabilistic OR of the legs that measured it
(:func:`policies.relevance.fuse`; a row without a vector is scored on keywords
alone). A row that scores 0 (a cosine at or under the embedder's floor and no
keyword) is left out. Ties are broken by entry id, ascending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from turnledger.policies.relevance import fuse as fuse_legs


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


def fuse(
    vector: Mapping[int, tuple[str, float]],
    keyword: Mapping[int, tuple[str, float]],
    *,
    vector_weight: float,
    keyword_weight: float,
    keyword_live: bool = True,
) -> list[Scored]:
    """Fuse vector similarities and keyword scores, best first.

    Args:
        vector: ``{rowid: (entry id, cosine)}`` for every candidate that has a
            vector (keyword candidates included).
        keyword: ``{rowid: (entry id, keyword score)}``.
        vector_weight: The weight of the vector modality.
        keyword_weight: The weight of the keyword modality.
        keyword_live: Whether the keyword leg ran (a row it did not return then
            scores 0 on it).

    Returns:
        Every entry of either input whose fused score is above 0, sorted by
        score descending, then entry id ascending.
    """
    fused: list[Scored] = []
    for rowid in vector.keys() | keyword.keys():
        cosine = vector[rowid][1] if rowid in vector else None
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
            fused.append(Scored(rowid, entry_id, score))
    fused.sort(key=lambda s: (-s.score, s.entry_id, s.rowid))
    return fused
