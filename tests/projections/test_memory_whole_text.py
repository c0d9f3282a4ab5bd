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

from tests.contracts.memory_contract import T0
from tests.projections.test_memory_vector_lag import VOCABULARY, WordWindows
from turnledger.projections.memory.embedding import EmbedderError
from turnledger.projections.memory.embedding.windows import whole_text_vector
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
    memory = PostgresMemory(postgres_url, embedder=Cutting())
    for entry in _long_and_other():
        memory.store(entry)
    stored = memory._vector(LONG)  # what store() wrote for the long entry
    assert stored is not None
    assert stored[VOCABULARY.index("zephyr")] > 0
    found = memory.recall("zephyr", agents=["a"])
    assert [e.key for e in found][:1] == ["long"]
    memory.close()
