"""Workspace search tools: ``glob_search`` and ``content_search``.

Both walk the workspace race-proof through :mod:`pipeline.safe_fs` (beneath
the workspace's directory handle, symlinks skipped), bounded in depth and
entries. ``glob_search`` lists the files whose workspace-relative path matches
a glob; ``content_search`` lists the lines of small text files that hold a
substring or match a regular expression, as ``path:line: text``, skipping
large, binary and hard-linked files. Patterns are checked (no absolute paths,
no ``..``) and results are bounded; the walk runs in a worker thread.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Generator, Iterator, Mapping
from pathlib import PurePath
from typing import Any, Final, NamedTuple

from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.safe_fs import (
    UnsafePathError,
    open_directory,
    open_file_at,
    open_root,
    read_bounded,
    walk_files,
)
from turnledger.pipeline.tools._arguments import (
    ArgumentError,
    check_object,
    failure,
    optional_bool,
    optional_int,
    required_str,
)
from turnledger.pipeline.tools._glob import glob_regex
from turnledger.pipeline.tools._spec import KIB, object_spec
from turnledger.pipeline.tools._workspace import (
    PathError,
    attempt,
    confine,
    shown,
    workspace_root,
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome

MAX_GLOB_RESULTS: Final = 1000
"""The most paths ``glob_search`` lists."""

DEFAULT_SEARCH_RESULTS: Final = 100
"""How many matching lines ``content_search`` lists when ``max_results`` is omitted."""

MAX_SEARCH_RESULTS: Final = 1000
"""The largest ``max_results`` accepted."""

MAX_SEARCH_FILE_BYTES: Final = 1024 * KIB
"""Files larger than this are skipped by ``content_search``."""

MAX_SEARCH_FILES: Final = 10_000
"""The most files ``content_search`` opens in one call."""

MAX_LINE_CHARS: Final = 300
"""A matching line is cut to this many characters."""

MAX_GLOB_CHARS: Final = 1000
"""The longest glob pattern accepted."""

_BINARY_PROBE: Final = 8 * KIB


GLOB_SEARCH_SPEC: Final = object_spec(
    "glob_search",
    "Search for files matching a glob pattern within the workspace. Returns a "
    "sorted list of matching file paths relative to the workspace root. "
    "Examples: '**/*.py' (all Python files), 'src/**/index.md'.",
    {
        "pattern": {
            "type": "string",
            "description": "Glob pattern relative to the workspace, e.g. '**/*.md'",
        }
    },
    "pattern",
)

CONTENT_SEARCH_SPEC: Final = object_spec(
    "content_search",
    "Search the text of the files in your workspace (or in one directory or "
    "file of it) for a substring or a regular expression. Returns matching lines "
    "as 'path:line: text'.",
    {
        "pattern": {
            "type": "string",
            "description": "The text (or regular expression) to find",
        },
        "path": {
            "type": "string",
            "description": "A directory or file in the workspace (default '.')",
        },
        "regex": {
            "type": "boolean",
            "description": "Treat the pattern as a regular expression (default false)",
        },
        "case_sensitive": {
            "type": "boolean",
            "description": "Match case (default true)",
        },
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SEARCH_RESULTS,
            "description": f"Lines listed at most (default {DEFAULT_SEARCH_RESULTS})",
        },
    },
    "pattern",
)


# -- glob_search -----------------------------------------------------------------


def _check_pattern(pattern: str) -> None:
    if PurePath(pattern).is_absolute() or pattern.startswith(("/", "\\")):
        msg = "Absolute paths are not allowed. Use a relative glob pattern."
        raise PathError(msg)
    if ".." in PurePath(pattern.replace("\\", "/")).parts:
        msg = "Path traversal ('..') is not allowed in glob patterns."
        raise PathError(msg)
    if len(pattern) > MAX_GLOB_CHARS:
        msg = (
            f"Invalid glob pattern: expected at most {MAX_GLOB_CHARS} characters,"
            f" found {len(pattern)}"
        )
        raise PathError(msg)


def _glob(root: str, pattern: str) -> str:
    _check_pattern(pattern)
    matcher = glob_regex(pattern)
    found: list[str] = []
    if matcher is not None:
        root_fd = open_root(os.path.realpath(root))
        try:
            for relative, _, _ in walk_files(root_fd, ""):
                if matcher.fullmatch(relative):
                    found.append(relative)
                    if len(found) > MAX_GLOB_RESULTS:
                        break
        finally:
            os.close(root_fd)
    if not found:
        return f"No files matching pattern {shown(pattern)} found in workspace."
    shown_paths = sorted(found[:MAX_GLOB_RESULTS])
    text = "\n".join(shown_paths)
    if len(found) > MAX_GLOB_RESULTS:
        text += (
            f"\n\n[Results truncated: showing first {MAX_GLOB_RESULTS} of more matches]"
        )
    return f"{text}\n\nTotal: {len(shown_paths)} files"


class GlobSearchTool:
    """``glob_search {pattern*}``: files only, never outside the workspace."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return GLOB_SEARCH_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """List the matching files, relative to the workspace, sorted."""
        try:
            pattern = required_str(check_object(arguments), "pattern")
        except ArgumentError as e:
            return failure(str(e))
        root = workspace_root(context)
        return await attempt(_glob, root, pattern, what="search files")


# -- content_search --------------------------------------------------------------


class _SearchQuery(NamedTuple):
    """A checked ``content_search`` request."""

    pattern: str
    matcher: re.Pattern[str]
    path: str
    limit: int


def _search_query(args: Mapping[str, Any]) -> _SearchQuery:
    pattern = required_str(args, "pattern")
    ignore_case = not optional_bool(args, "case_sensitive", default=True)
    is_regex = optional_bool(args, "regex", default=False)
    path = "." if args.get("path") is None else required_str(args, "path")
    limit = optional_int(
        args,
        "max_results",
        default=DEFAULT_SEARCH_RESULTS,
        minimum=1,
        maximum=MAX_SEARCH_RESULTS,
    )
    try:
        matcher = re.compile(
            pattern if is_regex else re.escape(pattern),
            re.IGNORECASE if ignore_case else 0,
        )
    except re.error as e:
        msg = f"Expected 'pattern' to be a valid regular expression, found {pattern!r}"
        raise ArgumentError(f"{msg} ({e})") from e
    return _SearchQuery(pattern, matcher, path, limit)


def _text_at(parent: int, name: str) -> str:
    """Return a small regular file's text; ``""`` when refused, large or binary."""
    try:
        fd, status = open_file_at(parent, name)
    except (UnsafePathError, OSError):
        return ""  # swapped, hard-linked or unreadable: skipped like a binary file
    try:
        if status.st_size > MAX_SEARCH_FILE_BYTES:
            return ""
        data = read_bounded(fd, MAX_SEARCH_FILE_BYTES)
    finally:
        os.close(fd)
    if b"\0" in data[:_BINARY_PROBE]:
        return ""
    return data.decode("utf-8", errors="replace")


def _matching_lines(
    entries: Iterator[tuple[str, int, str]], matcher: re.Pattern[str]
) -> Generator[str, None, None]:
    for relative, parent, name in itertools.islice(entries, MAX_SEARCH_FILES):
        for number, line in enumerate(_text_at(parent, name).splitlines(), start=1):
            if matcher.search(line):
                yield f"{relative}:{number}: {line[:MAX_LINE_CHARS]}"


def _entries(root_fd: int, relative: str) -> Iterator[tuple[str, int, str]]:
    """Yield the files to search: ``relative`` itself, or the files under it."""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    try:
        start = open_directory(root_fd, parts)
    except UnsafePathError as e:
        if e.reason != "not_directory" or not parts:
            raise
        parent = open_directory(root_fd, parts[:-1])
        try:
            yield relative, parent, parts[-1]
        finally:
            os.close(parent)
        return
    try:
        yield from walk_files(start, "".join(f"{part}/" for part in parts))
    finally:
        os.close(start)


def _search(root: str, query: _SearchQuery) -> str:
    relative = confine(query.path, root).relative
    root_fd = open_root(os.path.realpath(root))
    try:
        found = _matching_lines(_entries(root_fd, relative), query.matcher)
        try:
            lines = list(itertools.islice(found, query.limit + 1))
        except UnsafePathError as e:
            if e.reason == "missing":
                msg = f"No such file or directory in the workspace: {shown(query.path)}"
                raise PathError(msg) from None
            raise PathError(f"Path refused ({e.reason}): {e}") from None
        finally:
            found.close()  # closes the walk's directory handles now
    finally:
        os.close(root_fd)
    if not lines:
        return f"No matches found for {shown(query.pattern)}."
    text = "\n".join(lines[: query.limit])
    if len(lines) > query.limit:
        text += f"\n\n[Results truncated: showing first {query.limit} matches]"
    return text


class ContentSearchTool:
    """``content_search {pattern*, path?, regex?, case_sensitive?, max_results?}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return CONTENT_SEARCH_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """List matching lines as ``path:line: text``, bounded."""
        try:
            query = _search_query(check_object(arguments))
        except ArgumentError as e:
            return failure(str(e))
        root = workspace_root(context)
        return await attempt(_search, root, query, what="search content")
