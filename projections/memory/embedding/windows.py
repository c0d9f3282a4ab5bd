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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

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
    if size < 1:
        msg = f"Expected a window size >= 1, found {size}"
        raise ValueError(msg)
    count = len(offsets)
    step = max(1, size - size // OVERLAP_SHARE)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < count:
        stop = min(start + size, count)
        spans.append((offsets[start][0], offsets[stop - 1][1]))
        if stop == count:
            break
        start += step
    return spans


def window_texts(spans: Sequence[tuple[int, int]], text: str) -> list[str]:
    """Return the windows' texts (the whole text when there is one span or none)."""
    if len(spans) <= 1:
        return [text]
    return [text[start:end] for start, end in spans]
