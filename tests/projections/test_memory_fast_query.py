"""The recall query's op-by-op path (``_bert_query``) gives the model's vectors.

The local model is real (packaged weights, offline). The fast path must match
the float32 batch vectors (what ``encode`` stores) to cosine >= 0.9999 on varied
texts (empty, unicode, texts the model truncates at its 256 tokens), in both
precisions, and must not be used when its check fails; the embedder's int8
kernel must be exact (the vector index's screen relies on it).

The bfloat16 variant needs oneDNN's bfloat16 kernels for the CPU: where they
are missing (or ``TURNLEDGER_FAST_PATHS=0``) its tests check the fallback
instead, and their ids say which path ran (``bfloat16-op-by-op`` or
``bfloat16-declined``). The fallbacks are tested on every machine through the
switch.
"""

from __future__ import annotations

import numpy as np
import pytest

from turnledger.projections.memory.embedding import _bert_query, local
from turnledger.projections.memory.embedding._bert_query import (
    FAST_PATHS,
    BertQueryEncoder,
    bfloat16_fast_path,
    fast_paths_on,
)
from turnledger.projections.memory.embedding.local import LocalEmbedder
from turnledger.projections.memory.sqlite._scan import checked_product

LONG = "the quarterly budget review moved to Thursday, Sam says " * 40
TEXTS = [
    "which text editor do I program in",
    "Helix is the code editor I use every day",
    "",
    "   ",
    "x",
    "Ünïcödé façade, emoji 🎉🚀, 日本語のテキスト and Ελληνικά",
    "UPPER lower MiXeD 12345 3.14159 $%^&* (parens) [brackets]",
    "line one\nline two\ttabbed",
    LONG,
    LONG + " and a different ending the model never sees",
]


@pytest.fixture(scope="module", name="exact")
def _exact():
    return LocalEmbedder(query_precision="float32")


@pytest.fixture(scope="module", name="reference")
def _reference(exact):
    return np.array(exact.embed(TEXTS))  # several texts: encode, float32


BFLOAT16 = bfloat16_fast_path()
"""Whether this CPU (and the switch) lets the bfloat16 variant be built."""

BFLOAT16_PATH = "bfloat16-op-by-op" if BFLOAT16 else "bfloat16-declined"
"""The bfloat16 path taken here, named in the ids of the tests that take it."""


def _matches(embed, reference, floor):
    for text, expected in zip(TEXTS, reference, strict=True):
        (vector,) = embed(text)
        assert vector.dtype == np.float32
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert float(vector @ expected) >= floor, text[:40]


def test_the_float32_fast_path_matches_the_models_vectors(exact, reference):
    fast = BertQueryEncoder.build(exact.loaded().model, bfloat16=False)
    assert fast is not None
    _matches(fast, reference, 0.99999)
    # Truncated at the model's length: what follows changes nothing.
    assert np.array_equal(fast(TEXTS[-1]), fast(TEXTS[-2]))


@pytest.mark.parametrize("path", [BFLOAT16_PATH])
def test_the_bfloat16_fast_path_matches_where_the_cpu_has_the_kernels(
    exact, reference, path
):
    fast = BertQueryEncoder.build(exact.loaded().model, bfloat16=True)
    if path == "bfloat16-declined":
        assert fast is None  # the embedder runs the model's own modules
        return
    assert fast is not None
    _matches(fast, reference, 0.9999)
    assert np.array_equal(fast(TEXTS[-1]), fast(TEXTS[-2]))


@pytest.mark.parametrize("path", [BFLOAT16_PATH])
def test_the_embedder_takes_the_bfloat16_path_this_cpu_offers(exact, reference, path):
    embedder = LocalEmbedder(query_precision="bfloat16")
    assert (embedder.loaded().fast is not None) == (path == "bfloat16-op-by-op")
    assert tuple(embedder.identity) == tuple(exact.identity)
    _matches(
        lambda text: np.array(embedder.embed([text]), np.float32), reference, 0.999
    )


def test_the_switch_turns_the_cpu_dependent_paths_off(exact, reference, monkeypatch):
    monkeypatch.setenv(FAST_PATHS, "0")
    assert not fast_paths_on()
    assert not bfloat16_fast_path()
    assert not local._use_bfloat16("auto")  # auto: float32, /proc/cpuinfo unread
    assert local._use_bfloat16("bfloat16")  # asked for: still bfloat16
    assert BertQueryEncoder.build(exact.loaded().model, bfloat16=True) is None
    assert BertQueryEncoder.build(exact.loaded().model, bfloat16=False) is not None
    slow = LocalEmbedder(query_precision="bfloat16")
    assert slow.loaded().fast is None  # the model's own modules, in bfloat16
    assert slow.int8_product is None  # the vector index scores in float32
    _matches(lambda text: np.array(slow.embed([text]), np.float32), reference, 0.999)
    monkeypatch.setenv(FAST_PATHS, "1")
    assert fast_paths_on()


def test_a_failed_check_keeps_the_models_own_modules(exact, reference, monkeypatch):
    monkeypatch.setattr(_bert_query, "MIN_COSINE", 1.5)  # no vector can pass
    assert BertQueryEncoder.build(exact.loaded().model, bfloat16=True) is None
    slow = LocalEmbedder(query_precision="float32")
    assert slow.loaded().fast is None
    for text, expected in zip(TEXTS[:3], reference[:3], strict=True):
        (vector,) = slow.embed([text])
        assert np.abs(np.array(vector) - expected).max() < 1e-5


def test_another_model_shape_is_not_taken():
    class Module:
        pass

    assert BertQueryEncoder.build([Module(), Module()], bfloat16=False) is None


@pytest.mark.parametrize(
    "path", ["int8-offered" if fast_paths_on() else f"int8-off-by-{FAST_PATHS}"]
)
def test_the_int8_kernel_is_exact(exact, path):
    fast = LocalEmbedder(query_precision="bfloat16")
    product = fast.int8_product
    assert exact.int8_product is None  # float32 queries: no screen
    if path != "int8-offered":
        assert product is None
        return
    assert product is not None
    assert checked_product(product, 384) is product
    assert checked_product(product, 7) is product
