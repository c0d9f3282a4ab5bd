"""Bounding of tool results: keep the head and tail of an oversized output.

This follows ZeroClaw's ``truncate_tool_result`` (reference §6.6) with its
numbers (default 50,000; head 2/3, tail 1/3; the same truncation notice) but
counts characters, not bytes, so the limit means what its name says and no
character is ever split. Each cut is moved out of any ``[IMAGE:...]`` marker it
would split (the head end back to the marker's ``[``, the tail start forward
past its ``]``), so an image marker is kept whole or elided whole.

ZeroClaw also falls back to "the first ``max`` bytes, no notice" when the nudged
cuts cross. With characters that cannot happen: the output is longer than
``max``, so before nudging the head end (``max * 2 // 3``) lies strictly before
the tail start (``len - (max - max * 2 // 3)``), and nudging only moves the head
end left and the tail start right. The fallback is therefore left out; had it
been kept, its cut would need the same backward nudge to keep markers whole.

Bound once: a result is bounded when it is recorded, and the text the ledger keeps
(head, notice, tail) is what every later reader gets. A bounder made with
``recorded=True`` (the export and prompt paths) recognises that text by its one
notice and never bounds it again: within the limit it is returned as it is, with
the original elided count; over a smaller limit its head and tail are cut further
and the one notice states the total elided count. The result is always at most
the limit plus the notice's length.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.images import marker_span_at

if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT_MAX_CHARS: Final = 50_000
"""The default limit (ZeroClaw's ``default_max_tool_result_chars``)."""


_NOTICE: Final = re.compile(r"\n\n\[\.\.\. (\d+) characters truncated \.\.\.\]\n\n")


class BoundingError(PolicyError):
    """A bounding policy was given a limit it cannot work with."""


class BoundedResult(msgspec.Struct, frozen=True, kw_only=True):
    """A tool output, bounded.

    Attributes:
        text: The text to give the model: the output, or its head, the
            truncation notice and its tail.
        original_chars: Characters in the output.
        kept_chars: Characters of the output kept in ``text`` (the notice is
            not counted).
        elided_chars: Characters of the output left out.
        truncated: Whether anything was left out.
    """

    text: str
    original_chars: int
    kept_chars: int
    elided_chars: int
    truncated: bool


def truncation_notice(elided_chars: int) -> str:
    r"""Return the notice put between the head and the tail.

    Args:
        elided_chars: How many characters were left out.

    Returns:
        ``"\n\n[... N characters truncated ...]\n\n"``.
    """
    return f"\n\n[... {elided_chars} characters truncated ...]\n\n"


def bound_tool_result(output: str, max_chars: int = DEFAULT_MAX_CHARS) -> BoundedResult:
    """Bound a tool output to about ``max_chars`` characters.

    An output of at most ``max_chars`` characters, or any output when
    ``max_chars`` is 0, is returned unchanged. A longer one keeps its first
    ``max_chars * 2 // 3`` and last ``max_chars - max_chars * 2 // 3``
    characters, minus whatever a cut would take from the middle of an
    ``[IMAGE:...]`` marker, joined by :func:`truncation_notice`. The result is
    at most ``max_chars`` plus the notice's length.

    Args:
        output: The raw tool output (bound it before wrapping it in a
            provider envelope).
        max_chars: The limit in characters; 0 disables bounding.

    Returns:
        The bounded text and its accounting.

    Raises:
        BoundingError: If ``max_chars`` is negative.
    """
    _check_max_chars(max_chars)
    return _bound(output, max_chars)


def make_result_bounder(
    max_chars: int = DEFAULT_MAX_CHARS, *, recorded: bool = False
) -> Callable[[str], BoundedResult]:
    """Return :func:`bound_tool_result` with its limit checked once and fixed.

    Args:
        max_chars: The limit in characters; 0 disables bounding.
        recorded: The texts are results as recorded (possibly bounded already):
            use :func:`rebound_recorded`, which never bounds a result twice.

    Returns:
        A function from an output to its :class:`BoundedResult`.

    Raises:
        BoundingError: If ``max_chars`` is negative.
    """
    _check_max_chars(max_chars)

    def bound(output: str) -> BoundedResult:
        return _bound(output, max_chars)

    def rebound(text: str) -> BoundedResult:
        return _rebound(text, max_chars)

    return rebound if recorded else bound


def rebound_recorded(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> BoundedResult:
    """Bound a recorded result, which may carry one truncation notice already.

    A text with exactly one :func:`truncation_notice` is taken to be a bounded
    result (head, notice, tail): when head and tail fit ``max_chars`` it is
    returned unchanged, else they are cut further (2/3 of the limit from the
    head, the rest from the tail, image markers kept whole) and the one notice
    states the total. ``original_chars`` and ``elided_chars`` count the output
    the notice stood for. A text without one notice (or with several, which is
    ambiguous) is bounded as a raw output by :func:`bound_tool_result`.

    Args:
        text: The result as recorded.
        max_chars: The limit in characters; 0 disables bounding.

    Returns:
        The bounded text and its accounting; ``truncated`` says whether this
        call cut anything.

    Raises:
        BoundingError: If ``max_chars`` is negative.
    """
    _check_max_chars(max_chars)
    return _rebound(text, max_chars)


def _rebound(text: str, max_chars: int) -> BoundedResult:
    notices = list(_NOTICE.finditer(text)) if "characters truncated" in text else []
    if len(notices) != 1:
        return _bound(text, max_chars)
    notice = notices[0]
    head, tail = text[: notice.start()], text[notice.end() :]
    elided = int(notice.group(1))
    kept = len(head) + len(tail)
    if max_chars == 0 or kept <= max_chars:
        return BoundedResult(
            text=text,
            original_chars=kept + elided,
            kept_chars=kept,
            elided_chars=elided,
            truncated=False,
        )
    head_len = min(len(head), max_chars * 2 // 3)
    tail_len = min(len(tail), max_chars - head_len)
    head_end = _nudge(head, head_len, forward=False)
    tail_start = _nudge(tail, len(tail) - tail_len, forward=True)
    total = elided + (len(head) - head_end) + tail_start
    return BoundedResult(
        text=head[:head_end] + truncation_notice(total) + tail[tail_start:],
        original_chars=kept + elided,
        kept_chars=head_end + len(tail) - tail_start,
        elided_chars=total,
        truncated=True,
    )


def _check_max_chars(max_chars: int) -> None:
    if max_chars < 0:
        msg = f"Expected max_chars >= 0 (0 disables bounding), found {max_chars}"
        raise BoundingError(msg)


def _bound(output: str, max_chars: int) -> BoundedResult:
    size = len(output)
    if max_chars == 0 or size <= max_chars:
        return BoundedResult(
            text=output,
            original_chars=size,
            kept_chars=size,
            elided_chars=0,
            truncated=False,
        )
    head_len = max_chars * 2 // 3
    head_end = _nudge(output, head_len, forward=False)
    tail_start = _nudge(output, size - (max_chars - head_len), forward=True)
    elided = tail_start - head_end
    return BoundedResult(
        text=output[:head_end] + truncation_notice(elided) + output[tail_start:],
        original_chars=size,
        kept_chars=size - elided,
        elided_chars=elided,
        truncated=True,
    )


def _nudge(text: str, position: int, *, forward: bool) -> int:
    """Move a cut out of the image marker it would split, if any."""
    span = marker_span_at(text, position)
    if span is None:
        return position
    return span[1] if forward else span[0]
