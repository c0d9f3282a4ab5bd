"""Overlapping windows over a long text, so no part of it goes unembedded.

A model reads at most so many tokens (the packaged transformer: 256 word
pieces, two of them its markers); what lies beyond is cut. A static model reads
everything, but the mean of many token vectors dilutes each subject. So a
memory backend embeds a long entry as windows of the embedder's own tokens:
each window holds at most ``size`` tokens, the next starts ``size - size // 4``
tokens later (a quarter overlaps), and the last ends at the last token; the
entry is scored by its best window. A text of ``size`` tokens or fewer is one
window: the whole text.

An embedder says how it splits with an optional ``window_spans(text)`` method
returning ``(start, end)`` character spans; an embedder without one embeds
every text whole (one window).

A backend that keeps one vector per entry (PostgreSQL, Qdrant) stores
:func:`whole_text_vector`: every window embedded, their unit mean, so no part
is cut either (a subject is diluted in a long entry there, not lost; the
SQLite backend keeps each window and scores the best).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from turnledger.projections.memory.embedding import EmbedderError

if TYPE_CHECKING:
    from turnledger.projections.memory.embedding import Embedder

OVERLAP_SHARE: Final = 4
"""A window overlaps the next by ``size // OVERLAP_SHARE`` tokens."""


def token_windows(
    offsets: Sequence[tuple[int, int]], size: int
) -> list[tuple[int, int]]:
    """Return the character spans of overlapping windows of ``size`` tokens.

    Args:
        offsets: Each token's ``(start, end)`` characters, in text order.
        size: The most tokens a window holds (>= 1).

    Returns:
        One span per window, in order; every token lies inside at least one.
        No tokens: no windows.

    Raises:
        ValueError: ``size`` < 1.
    """
    return [
        (offsets[start][0], offsets[stop - 1][1])
        for start, stop in token_ranges(len(offsets), size)
    ]


def token_ranges(count: int, size: int) -> list[tuple[int, int]]:
    """Return the ``(first, past the last)`` tokens of :func:`token_windows`.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        msg = f"Expected a window size >= 1, found {size}"
        raise ValueError(msg)
    step = max(1, size - size // OVERLAP_SHARE)
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < count:
        stop = min(start + size, count)
        ranges.append((start, stop))
        if stop == count:
            break
        start += step
    return ranges


def window_texts(spans: Sequence[tuple[int, int]], text: str) -> list[str]:
    """Return the windows' texts (the whole text when there is one span or none)."""
    if len(spans) <= 1:
        return [text]
    return [text[start:end] for start, end in spans]


def whole_text_vector(embedder: Embedder, text: str) -> list[float]:
    """One vector for a text of any length: its windows' vectors, averaged.

    Every window (see :func:`token_windows`; the whole text without
    ``window_spans``) is embedded in one call (an embedder's ``windowed(text)``
    gives the spans and their vectors in one pass); one window's vector is
    returned as it is, several windows' mean is scaled to unit length.

    Raises:
        EmbedderError: The embedder (or its tokenizer) failed, or gave
            another number of vectors than windows.
    """
    windowed = getattr(embedder, "windowed", None)
    spans = getattr(embedder, "window_spans", None)
    if callable(windowed) and callable(spans):
        return _mean(windowed_vectors(windowed, text))
    windows = window_texts(spans(text), text) if callable(spans) else [text]
    vectors = embedder.embed(windows)
    if len(vectors) != len(windows):
        msg = f"Expected {len(windows)} vectors, found {len(vectors)}"
        raise EmbedderError(msg)
    return _mean(vectors)


def windowed_vectors(
    windowed: Callable[[str], tuple[Sequence[object], Sequence[Sequence[float]]]],
    text: str,
) -> Sequence[Sequence[float]]:
    """Each window's vector from an embedder's ``windowed(text)``, checked.

    ``windowed`` gives the windows' spans and their vectors in one pass; a text
    without tokens is one window.

    Raises:
        EmbedderError: Another number of vectors than windows.
    """
    spans, vectors = windowed(text)
    count = max(1, len(spans))
    if len(vectors) != count:
        msg = f"Expected {count} vectors, found {len(vectors)}"
        raise EmbedderError(msg)
    return vectors


def whole_text_vectors(
    embedder: Embedder, texts: Sequence[str]
) -> list[list[float] | None]:
    """:func:`whole_text_vector` of each text, ``None`` where it failed.

    Without ``windowed``, the windows of every text go to the embedder in one
    ``embed`` call (a model computes them as one batch; an HTTP embedder splits
    them into its requests); a text whose windows cannot be cut is ``None``
    alone.

    Raises:
        EmbedderError: That one call failed, or gave another number of vectors
            than windows (then no text has its vector).
    """
    windowed = getattr(embedder, "windowed", None)
    spans = getattr(embedder, "window_spans", None)
    if callable(windowed) and callable(spans):
        found: list[list[float] | None] = []
        for text in texts:
            try:
                found.append(whole_text_vector(embedder, text))
            except EmbedderError:
                found.append(None)
        return found
    cut: list[list[str] | None] = []
    for text in texts:
        try:
            cut.append(window_texts(spans(text), text) if callable(spans) else [text])
        except EmbedderError:
            cut.append(None)
    flat = [window for windows in cut if windows for window in windows]
    vectors = embedder.embed(flat) if flat else []
    if len(vectors) != len(flat):
        msg = f"Expected {len(flat)} vectors, found {len(vectors)}"
        raise EmbedderError(msg)
    found, at = [], 0
    for windows in cut:
        if not windows:
            found.append(None)
            continue
        found.append(_mean(vectors[at : at + len(windows)]))
        at += len(windows)
    return found


def _mean(vectors: Sequence[Sequence[float]]) -> list[float]:
    """One window's vector as it is; several windows' mean at unit length."""
    if len(vectors) == 1:
        return [float(x) for x in vectors[0]]
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    found: list[float] = (mean / norm if norm > 0 else mean).tolist()
    return found
