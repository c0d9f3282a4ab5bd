"""One vector per entry, none cut: PostgreSQL and Qdrant embed every window.

Those backends keep one vector per entry; a model that reads a bounded number
of tokens (:class:`Cutting`, like the transformer) would lose the end of a
long entry if it were embedded whole. They store
:func:`~turnledger.projections.memory.embedding.windows.whole_text_vector`:
the unit mean of every window's vector.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from tests.projections.test_memory_vector_lag import VOCABULARY, WordWindows
from turnledger.projections.memory.embedding import EmbedderError
from turnledger.projections.memory.embedding.windows import (
    whole_text_vector,
    whole_text_vectors,
)
from turnledger.projections.memory.postgres import PostgresMemory
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.qdrant import QdrantMemory

FILLER = " ".join(["lorem ipsum"] * 20)  # 40 words: five windows of eight
LONG = f"{FILLER} zephyr"  # the fact is the last word


class Cutting(WordWindows):
    """Reads only a text's first ``window`` words, as a model with a length."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([" ".join(t.split()[: self.window]) for t in texts])


class Short(WordWindows):
    """Gives one vector too few."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed(texts)[:-1]


def test_every_window_counts_in_the_one_vector():
    cutting = Cutting()
    whole = np.array(whole_text_vector(cutting, LONG))
    assert whole[VOCABULARY.index("zephyr")] > 0  # the last window was read
    assert np.linalg.norm(whole) == pytest.approx(1.0)
    assert np.array(cutting.embed([LONG])[0])[VOCABULARY.index("zephyr")] == 0
    short = whole_text_vector(cutting, "zephyr probe")  # one window: as embedded
    assert short == [float(x) for x in cutting.embed(["zephyr probe"])[0]]
    with pytest.raises(EmbedderError, match="Expected 7 vectors, found 6"):
        whole_text_vector(Short(), LONG)


def _long_and_other() -> list[NewMemory]:
    return [
        NewMemory(agent="a", key=key, content=content, entry_id=key, at=T0)
        for key, content in (("long", LONG), ("other", "tomato garden"))
    ]


def test_qdrant_finds_the_end_of_a_long_entry():
    memory = QdrantMemory(":memory:", embedder=Cutting())
    for entry in _long_and_other():
        memory.store(entry)
    found = memory.recall("zephyr", agents=["a"])
    assert [e.key for e in found][:1] == ["long"]
    memory.close()


def test_postgres_stores_the_end_of_a_long_entry_in_its_vector(postgres_url):
    memory = PostgresMemory(postgres_url, embedder=Cutting(), vectors="array")
    try:
        for entry in _long_and_other():
            memory.store(entry)
        memory.embed_pending()  # vectors come after the write
        with memory._transaction() as conn:
            (stored,) = conn.execute(
                memory._sql("SELECT embedding FROM {table} WHERE key = 'long'")
            ).fetchone()
        expected = whole_text_vector(Cutting(), LONG)
        assert stored == pytest.approx(expected, rel=1e-5)  # float4: to 1e-7
        assert stored[VOCABULARY.index("zephyr")] > 0
        found = memory.recall("zephyr", agents=["a"])
        assert [e.key for e in found][:1] == ["long"]
    finally:
        memory.close()


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from((*VOCABULARY, "x")), max_size=30).map(" ".join),
        max_size=6,
    )
)
def test_whole_text_vectors_is_whole_text_vector_of_each_text(texts):
    """One embedder call for every window of every text, the same vectors."""
    embedder = Cutting()
    batched = whole_text_vectors(embedder, texts)
    calls = len(embedder.calls)
    alone = [whole_text_vector(Cutting(), text) for text in texts]
    assert len(batched) == len(alone)
    for got, want in zip(batched, alone, strict=True):
        assert got is not None
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert calls <= 1


def test_whole_text_vectors_leaves_out_a_text_whose_windows_fail():
    class Untokenisable(WordWindows):
        def window_spans(self, text: str) -> list[tuple[int, int]]:
            if "ipsum" in text:
                raise EmbedderError("tokenizer failed")
            return super().window_spans(text)

    found = whole_text_vectors(Untokenisable(), ["zephyr", "lorem ipsum", "probe"])
    assert found[1] is None
    assert found[0] == whole_text_vector(WordWindows(), "zephyr")
    assert found[2] == whole_text_vector(WordWindows(), "probe")
    with pytest.raises(EmbedderError, match="Expected 7 vectors, found 6"):
        whole_text_vectors(Short(), [LONG])
