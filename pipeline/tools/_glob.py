"""Workspace globs as regular expressions over ``/``-separated relative paths.

The walk (:func:`pipeline.safe_fs.walk_files`) lists files race-proof and bounded;
a glob only decides which of them match, so no pattern can make the walk deeper,
follow a link, or recurse in Python (``pathlib`` raised ``IndexError`` on ``"."``
and ``RecursionError`` on a 2,000-component pattern).
"""

from __future__ import annotations

import re
from pathlib import PurePath

from turnledger.pipeline.safe_fs import MAX_WALK_DEPTH
from turnledger.pipeline.tools._workspace import PathError


def _component_regex(part: str) -> str:
    pieces: list[str] = []
    at = 0
    while at < len(part):
        char = part[at]
        at += 1
        if char == "*":
            pieces.append("[^/]*")
        elif char == "?":
            pieces.append("[^/]")
        elif char == "[" and "]" in part[at + 1 :] + part[at : at + 1]:
            end = part.index("]", at + 1 if part[at : at + 1] in ("!", "]") else at)
            body = part[at:end]
            at = end + 1
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace("\\-", "-")
            pieces.append(f"[{'^/' if negate else ''}{body}]")
        else:
            pieces.append(re.escape(char))
    return "".join(pieces)


def glob_regex(pattern: str) -> re.Pattern[str] | None:
    """Translate a workspace glob into a regex over ``/``-separated paths.

    ``*`` and ``?`` match within one component, ``[...]`` is a class (``[!...]``
    negated), ``**`` as a whole component matches zero or more directories.

    Returns:
        The compiled regex, or ``None`` when the pattern names no file (``"."``).

    Raises:
        PathError: ``**`` is part of a component, or more components than the
            walk goes deep.
    """
    parts = PurePath(pattern.replace("\\", "/")).parts
    if not parts:
        return None
    if len(parts) > MAX_WALK_DEPTH + 1:
        msg = (
            f"Invalid glob pattern: expected at most {MAX_WALK_DEPTH + 1} components,"
            f" found {len(parts)}"
        )
        raise PathError(msg)
    pieces: list[str] = []
    for index, part in enumerate(parts):
        if part == "**":
            pieces.append("(?:[^/]+/)*")
            continue
        if "**" in part:
            msg = "Invalid glob pattern: '**' can only be an entire path component"
            raise PathError(msg)
        pieces.append(_component_regex(part) + ("/" if index < len(parts) - 1 else ""))
    return re.compile("".join(pieces))
