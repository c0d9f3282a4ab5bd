"""The recall query's op-by-op path (``_bert_query``) gives the model's vectors.

The local model is real (packaged weights, offline). The fast path must match
the float32 batch vectors (what ``encode`` stores) to cosine >= 0.9999 on varied
texts (empty, unicode, texts the model truncates at its 256 tokens), in both
precisions, and must not be used when its check fails; the embedder's int8
kernel must be exact (the vector index's screen relies on it).
"""

from __future__ import annotations

import numpy as np
import pytest

from turnledger.projections.memory.embedding import _bert_query
from turnledger.projections.memory.embedding._bert_query import BertQueryEncoder
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


@pytest.mark.parametrize("bfloat16", [False, True])
def test_the_fast_path_matches_the_models_vectors(exact, reference, bfloat16):
    fast = BertQueryEncoder.build(exact._model, bfloat16=bfloat16)
    assert fast is not None
    floor = 0.9999 if bfloat16 else 0.99999
    for text, expected in zip(TEXTS, reference, strict=True):
        (vector,) = fast(text)
        assert vector.dtype == np.float32
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert float(vector @ expected) >= floor, text[:40]
    # Truncated at the model's length: what follows changes nothing.
    assert np.array_equal(fast(TEXTS[-1]), fast(TEXTS[-2]))


def test_the_embedder_uses_it_for_one_text(exact, reference):
    fast = LocalEmbedder(query_precision="bfloat16")
    assert fast._fast is not None
    assert tuple(fast.identity) == tuple(exact.identity)
    for text, expected in zip(TEXTS, reference, strict=True):
        (vector,) = np.array(fast.embed([text]))
        assert float(vector @ expected) >= 0.9999


def test_a_failed_check_keeps_the_models_own_modules(exact, reference, monkeypatch):
    monkeypatch.setattr(_bert_query, "MIN_COSINE", 1.5)  # no vector can pass
    assert BertQueryEncoder.build(exact._model, bfloat16=True) is None
    slow = LocalEmbedder(query_precision="float32")
    assert slow._fast is None
    for text, expected in zip(TEXTS[:3], reference[:3], strict=True):
        (vector,) = slow.embed([text])
        assert np.abs(np.array(vector) - expected).max() < 1e-5


def test_another_model_shape_is_not_taken():
    class Module:
        pass

    assert BertQueryEncoder.build([Module(), Module()], bfloat16=False) is None


def test_the_int8_kernel_is_exact(exact):
    fast = LocalEmbedder(query_precision="bfloat16")
    product = fast.int8_product
    assert product is not None
    assert checked_product(product, 384) is product
    assert checked_product(product, 7) is product
    assert exact.int8_product is None  # float32 queries: no screen
