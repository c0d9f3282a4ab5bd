"""Equal ranks in hybrid recall: the stronger evidence first (SQLite, PostgreSQL).

Reciprocal rank fusion ties often: a row ranked first by keywords and second by
vectors has the same place as one ranked second and first. Such ties are broken
by the fused score (then, on SQLite, the entry id; on PostgreSQL, the newer row
and the key), never by the id alone, which is random.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.projections.test_memory_recall_gate import put
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.postgres import PostgresMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._hybrid import fuse


class CrossedEmbedder:
    """Vectors that rank the two rows the other way round from their keywords."""

    identity = EmbeddingIdentity("test", "crossed", 2)

    def embed(self, texts):
        def vector(text: str) -> list[float]:
            if "gamma" in text:  # the question
                return [1.0, 0.0]
            if "beta" in text:  # both words: keywords' first, vectors' second
                return [0.5, 0.866]
            return [0.9, 0.436]  # one word: keywords' second, vectors' first

        return [vector(t) for t in texts]


def _crossed(memory) -> list[str]:
    # "z" holds both words of the question the store knows (a confident keyword
    # score, 0.98) but the lower cosine; "b" the other way round (0.92): equal
    # places, and the id or key alone ("ops-b" < "ops-z") would put "b" first.
    put(memory, "z", "alpha beta")
    put(memory, "b", "alpha")
    while memory.embed_pending():
        pass
    found = memory.recall("alpha beta gamma", agents=["ops"], limit=5)
    assert found[0].score > found[1].score
    return [e.key for e in found]


def test_sqlite_breaks_equal_ranks_by_the_stronger_evidence():
    memory = SQLiteMemory(":memory:", embedder=CrossedEmbedder())
    try:
        assert _crossed(memory) == ["z", "b"]
    finally:
        memory.close()


def test_postgres_breaks_equal_ranks_by_the_stronger_evidence():
    url = fresh_schema_url(require_postgres())
    memory = PostgresMemory(url, embedder=CrossedEmbedder(), vectors="array")
    try:
        assert _crossed(memory) == ["z", "b"]
    finally:
        memory.close()
        drop_schema(url)


legs = st.dictionaries(
    st.integers(1, 12),
    st.tuples(st.sampled_from("abcdef"), st.floats(0.0, 1.0)),
    max_size=8,
)


@given(vector=legs, keyword=legs, absent=st.floats(0.0, 1.0))
def test_the_order_is_by_place_then_score_and_the_discount_drops_nothing(
    vector, keyword, absent
):
    """Places never increase down the list; at equal places scores never
    increase; the absent share lowers scores, never drops a row."""
    plain = fuse(vector, keyword, vector_weight=0.7, keyword_weight=0.3)
    discounted = fuse(
        vector, keyword, vector_weight=0.7, keyword_weight=0.3, absent=absent
    )
    assert {s.rowid for s in plain} == {s.rowid for s in discounted}
    before = {s.rowid: s.score for s in plain}
    for s in discounted:
        assert 0 < s.score <= before[s.rowid] + 1e-12
    places = _places(vector, keyword)
    for first, second in itertools.pairwise(discounted):
        assert places[first.rowid] >= places[second.rowid]
        if places[first.rowid] == places[second.rowid]:
            assert first.score >= second.score


def _places(vector, keyword) -> dict[int, float]:
    """Each row's reciprocal-rank place, computed apart from the code under test."""
    places = dict.fromkeys(vector.keys() | keyword.keys(), 0.0)
    for rank, rowid in enumerate(keyword, 1):
        places[rowid] += 1 / (60 + rank)
    for rowid, (_, cosine) in vector.items():
        if cosine > 0:
            rank = 1 + sum(1 for _, c in vector.values() if c > cosine)
            places[rowid] += 1 / (60 + rank)
    return places
