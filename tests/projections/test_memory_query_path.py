"""The recall query's fast path: one text through the model, off the caller's thread.

The local model is real (packaged weights, offline). A single text skips
``encode`` (the same modules, called directly), may run the transformer in
bfloat16, and a recall computes it on the backend's worker thread while the
keyword leg runs; the vectors and the results must be the ones of the slow path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.memory_contract import T0
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.embedding._bert_query import bfloat16_fast_path
from turnledger.projections.memory.embedding.local import (
    LocalEmbedder,
    cpu_has_bfloat16,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

TEXTS = [
    "which text editor do I program in",
    "Helix is the code editor I use every day",
    "when is the budget review due before Friday",
    "x",
]


@pytest.fixture(scope="module", name="exact")
def _exact():
    return LocalEmbedder(query_precision="float32")


def test_one_text_in_float32_is_the_vector_encode_returns(exact):
    batch = np.array(exact.embed(TEXTS))  # more than one text: encode
    for text, expected in zip(TEXTS, batch, strict=True):
        (alone,) = exact.embed([text])
        assert np.abs(np.array(alone) - expected).max() < 1e-5


@pytest.mark.parametrize(  # the path this CPU (and TURNLEDGER_FAST_PATHS) gives
    "path", ["op-by-op" if bfloat16_fast_path() else "model-modules"]
)
def test_bfloat16_queries_stay_within_rounding_of_float32(exact, path):
    fast = LocalEmbedder(query_precision="bfloat16")
    assert (fast.loaded().fast is not None) == (path == "op-by-op")
    batch = np.array(exact.embed(TEXTS))
    for text, expected in zip(TEXTS, batch, strict=True):
        (alone,) = np.array(fast.embed([text]))
        assert np.linalg.norm(alone) == pytest.approx(1.0, abs=1e-5)
        assert float(alone @ expected) > 0.999
    # Batches (what is stored) are float32 whatever the query precision.
    assert np.abs(np.array(fast.embed(TEXTS)) - batch).max() < 1e-6


def test_an_unknown_query_precision_is_refused():
    with pytest.raises(ValueError, match="query_precision"):
        LocalEmbedder(query_precision="float8")  # type: ignore[arg-type]


def test_bfloat16_is_detected_from_the_cpu_flags(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    assert not cpu_has_bfloat16(info)
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_has_bfloat16(info)
    assert not cpu_has_bfloat16(tmp_path / "missing")


class ThreadNoting:
    """Letter-count vectors; notes the thread of each call."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity("test", "letters", 4)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        return [
            [1.0 + t.count("a"), 1.0 + t.count("e"), 1.0 + t.count("o"), 1.0]
            for t in texts
        ]


def _fill(memory: SQLiteMemory) -> None:
    for n, text in enumerate(["banana bread recipe", "the green tree", "a blue boat"]):
        memory.store(
            NewMemory(agent="a", key=f"k{n}", content=text, entry_id=f"e{n}", at=T0)
        )


def test_a_query_is_embedded_on_the_worker_thread():
    embedder = ThreadNoting()
    memory = SQLiteMemory(":memory:", embedder=embedder, cache_size=0)
    _fill(memory)
    deadline = time.monotonic() + 10
    while memory.pending_vectors and time.monotonic() < deadline:
        time.sleep(0.01)
    writes = list(embedder.threads)
    assert writes
    assert set(writes) == {"memory-vectors"}  # writes: the background thread
    found = memory.recall("banana boat", agents=["a"], limit=3)
    assert embedder.threads[len(writes) :] == ["memory-embed_0"]
    assert {"k0", "k2"} <= {e.key for e in found}  # both keyword matches
    # the order is the fused rank's, the score the gate's: no order implied
    assert all(e.score is not None and e.score > 0 for e in found)
    memory.close()
    memory.close()  # closing twice is harmless (the worker is gone)


def test_a_cached_query_vector_needs_no_embedder_call():
    embedder = ThreadNoting()
    memory = SQLiteMemory(
        ":memory:", embedder=embedder, cache_size=100, background_vectors=False
    )
    _fill(memory)
    assert memory.embed_pending() == 3  # no write embeds between the recalls
    first = memory.recall("banana boat", agents=["a"], limit=3)
    calls = len(embedder.threads)
    again = memory.recall("banana boat", agents=["a"], limit=3)
    assert len(embedder.threads) == calls  # served from the cache
    assert [(e.key, e.score) for e in again] == [(e.key, e.score) for e in first]
    memory.close()


class Failing(ThreadNoting):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if threading.current_thread().name.startswith("memory-embed"):
            msg = "query embedding down"
            raise RuntimeError(msg)
        return super().embed(texts)


def test_a_query_embedding_failure_on_the_worker_falls_back_to_keywords():
    memory = SQLiteMemory(":memory:", embedder=Failing(), cache_size=0)
    _fill(memory)
    found = memory.recall("banana", agents=["a"], limit=3)
    assert [e.key for e in found] == ["k0"]
    assert memory.embedding_failures == 1
    assert memory.last_embedding_error == "RuntimeError: query embedding down"
    memory.close()
