r"""Image-path promotion: wrap real local image paths in ``[IMAGE:...]`` markers.

This follows ZeroClaw's ``canonicalize_tool_result_media_markers_for`` (reference
§6.7). A tool output that names an image file it produced (``image_gen``,
``file_download``, any unknown tool) gets a ``[IMAGE:path]`` marker, which later
routes the image to a vision model. Path-listing tools are skipped, since their
output lists files rather than producing them.

What counts as a path (documented choices where the reference is silent): a
*token* (a run of characters other than whitespace, quotes, brackets,
parentheses, braces, ``<``, ``>``, ``|``, backticks, ``=``, ``,`` and ``;``)
that starts with an absolute root (POSIX ``/``, Windows ``C:\`` or ``C:/``, UNC
``\\server\share``) and, trailing ``.``, ``:``, ``!`` or ``?`` aside, ends with
``.png .jpg .jpeg .webp .gif .bmp`` in any case. So URLs, relative paths, paths
with spaces and ``path:line`` forms are not promoted. Only the first character
of a token can start a match, so each token is scanned once: linear in the
output even for megabytes of base64 or long runs of slashes.

A marker is ``[IMAGE:`` + text without ``[``, ``]`` or a newline + ``]``; the
bounding policy uses the same definition so that it never cuts one in two.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

MARKER_PREFIX: Final = "[IMAGE:"
"""The opening of an image marker."""

LISTING_TOOLS: Final = frozenset({"content_search", "glob_search"})
"""Tools whose output lists paths and is never promoted (compared casefolded)."""

MARKER_PATTERN: Final = re.compile(r"\[IMAGE:([^\[\]\n]*)\]")
"""An image marker; group 1 is its payload (a path, URL or data URI)."""

_DELIMITERS: Final = r"\s\"'<>|\[\](){}`=,;"
# A token that starts right after a delimiter (or at the start) with an absolute
# root and ends, before optional trailing punctuation, with an image extension.
# Only a token's first character can start a match, so the scan is linear.
_PATH_PATTERN: Final = re.compile(
    rf"""
    (?<![^{_DELIMITERS}])
    (?P<path>(?:[A-Za-z]:[\\/]|\\\\|/)[^{_DELIMITERS}]*?
      \.(?:png|jpe?g|webp|gif|bmp))
    [.:!?]*(?![^{_DELIMITERS}])
    """,
    re.IGNORECASE | re.VERBOSE,
)


class PromotionDecision(msgspec.Struct, frozen=True, kw_only=True):
    """A tool output with its image paths promoted to markers.

    Attributes:
        text: The output, each promoted path wrapped as ``[IMAGE:path]``.
        promoted: The promoted paths, in order of appearance.
        skipped_listing_tool: Whether promotion was skipped because the tool
            lists paths.
    """

    text: str
    promoted: tuple[str, ...]
    skipped_listing_tool: bool


def marker_span_at(text: str, position: int) -> tuple[int, int] | None:
    """Return the image marker that a cut at ``position`` would split.

    Args:
        text: The text.
        position: A cut position (an index between characters).

    Returns:
        ``(start, end)`` of the marker (``text[start:end]`` is the marker) when
        ``start < position < end``, else ``None``.
    """
    # A marker holds no "[", so only the last marker opening before the cut can
    # contain it. Searching up to position + len - 1 also finds an opening that
    # the cut itself splits.
    start = text.rfind(MARKER_PREFIX, 0, position + len(MARKER_PREFIX) - 1)
    if start < 0:
        return None
    found = MARKER_PATTERN.match(text, start)
    if found is None or found.end() <= position:
        return None
    return start, found.end()


def promote_image_paths(
    output: str,
    is_file: Callable[[str], bool],
    *,
    tool_name: str | None = None,
    extra_listing_tools: Iterable[str] = (),
) -> PromotionDecision:
    """Wrap each existing local image path in an ``[IMAGE:...]`` marker.

    A path is promoted once: not when it is inside a marker already, not when
    some marker in the output already holds it, and only its first occurrence
    (later ones are left as text, so no marker is duplicated). ``is_file`` is
    asked once per distinct candidate path. Promoting the result again changes
    nothing.

    Args:
        output: The tool's output text.
        is_file: Tells whether a path names an existing regular file.
        tool_name: The tool that produced the output; ``None`` when unknown
            (promoted, as any other non-listing tool).
        extra_listing_tools: More tool names to skip, besides
            :data:`LISTING_TOOLS` (case-insensitive).

    Returns:
        The new text and the promoted paths.
    """
    if tool_name is not None and _is_listing_tool(tool_name, extra_listing_tools):
        return PromotionDecision(text=output, promoted=(), skipped_listing_tool=True)
    markers = list(MARKER_PATTERN.finditer(output))
    marked = {marker.group(1).strip() for marker in markers}
    starts = [marker.start() for marker in markers]
    ends = [marker.end() for marker in markers]
    checked: dict[str, bool] = {}
    pieces: list[str] = []
    promoted: list[str] = []
    done = 0
    for found in _PATH_PATTERN.finditer(output):
        path = found.group("path")
        if path in marked or _inside(found.start(), starts, ends):
            continue
        if path not in checked:
            checked[path] = is_file(path)
        if checked[path]:
            pieces += [output[done : found.start()], f"{MARKER_PREFIX}{path}]"]
            done = found.start() + len(path)
            marked.add(path)
            promoted.append(path)
    pieces.append(output[done:])
    return PromotionDecision(
        text="".join(pieces), promoted=tuple(promoted), skipped_listing_tool=False
    )


def _is_listing_tool(tool_name: str, extra: Iterable[str]) -> bool:
    name = tool_name.casefold()
    return name in LISTING_TOOLS or any(name == other.casefold() for other in extra)


def _inside(position: int, starts: list[int], ends: list[int]) -> bool:
    """Whether ``position`` is inside one of the (ordered, disjoint) markers."""
    index = bisect_right(starts, position) - 1
    return index >= 0 and position < ends[index]
