"""Workspace file tools: read, write, glob and search, confined to the workspace.

Every path the model names goes through :func:`policies.paths.confine_path`
against the agent's workspace with :func:`os.path.realpath`, so ``..``, absolute
paths outside and symlinks pointing out are refused with a reason; the resolved
path is the one opened, so what was checked is what is used. Listings check
every match the same way and silently drop escapes. Reads, writes, listings and
search results are bounded. File I/O runs in a worker thread.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any, Final, NamedTuple

from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.tools._arguments import (
    ArgumentError,
    check_object,
    failure,
    optional_bool,
    optional_int,
    required_str,
)
from turnledger.pipeline.tools._workspace import (
    NOFOLLOW,
    PathError,
    attempt,
    confine,
    inside,
    workspace_root,
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome

KIB: Final = 1024
DEFAULT_READ_BYTES: Final = 64 * KIB
"""How many bytes ``file_read`` returns when ``max_bytes`` is omitted."""

MAX_READ_BYTES: Final = 1024 * KIB
"""The largest ``max_bytes`` accepted."""

MAX_WRITE_BYTES: Final = 1024 * KIB
"""The largest content ``file_write`` writes (UTF-8 bytes)."""

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

_BINARY_PROBE: Final = 8 * KIB


def _spec(
    name: str, description: str, properties: dict[str, Any], *required: str
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": list(required),
        },
    )


FILE_READ_SPEC: Final = _spec(
    "file_read",
    "Read a text file in your workspace (a path relative to the workspace).",
    {
        "path": {"type": "string", "description": "The file"},
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_READ_BYTES,
            "description": f"At most this many bytes (default {DEFAULT_READ_BYTES})",
        },
    },
    "path",
)

FILE_WRITE_SPEC: Final = _spec(
    "file_write",
    "Write a text file in your workspace, creating missing parent directories; "
    "an existing file is replaced.",
    {
        "path": {"type": "string", "description": "The file"},
        "content": {
            "type": "string",
            "description": f"The text (at most {MAX_WRITE_BYTES} UTF-8 bytes)",
        },
    },
    "path",
    "content",
)

GLOB_SEARCH_SPEC: Final = _spec(
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

CONTENT_SEARCH_SPEC: Final = _spec(
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


# -- file_read -------------------------------------------------------------------


def _read(root: str, path: str, max_bytes: int) -> str:
    target = confine(path, root).path
    if not Path(target).is_file():
        msg = f"Not a readable file: {path!r}"
        raise PathError(msg)
    descriptor = os.open(target, os.O_RDONLY | NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(max_bytes)
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n\n[truncated: showing the first {len(data)} of {size} bytes]"
    return text


class FileReadTool:
    """``file_read {path*, max_bytes?}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return FILE_READ_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Return the file's text, at most ``max_bytes`` of it."""
        try:
            args = check_object(arguments)
            path = required_str(args, "path")
            limit = optional_int(
                args,
                "max_bytes",
                default=DEFAULT_READ_BYTES,
                minimum=1,
                maximum=MAX_READ_BYTES,
            )
        except ArgumentError as e:
            return failure(str(e))
        root = workspace_root(context)
        return await attempt(_read, root, path, limit, what="read file")


# -- file_write ------------------------------------------------------------------


def _write(root: str, path: str, content: str) -> str:
    allowed = confine(path, root)
    target = Path(allowed.path)
    if target.is_dir():
        msg = f"Cannot write {path!r}: it is a directory"
        raise PathError(msg)
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        msg = f"Content has {len(data)} bytes; the limit is {MAX_WRITE_BYTES} bytes"
        raise PathError(msg)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Check again once the parents exist: what is written is what was checked.
    if confine(path, root).path != allowed.path:
        msg = f"Path {path!r} changed while it was being written"
        raise PathError(msg)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW
    with os.fdopen(os.open(target, flags, 0o644), "wb") as handle:
        handle.write(data)
    return f"Written {len(data)} bytes to {allowed.relative}"


class FileWriteTool:
    """``file_write {path*, content*}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return FILE_WRITE_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Write the file; ``Written N bytes to {path}``."""
        try:
            args = check_object(arguments)
            path = required_str(args, "path")
            content = required_str(args, "content", allow_empty=True)
        except ArgumentError as e:
            return failure(str(e))
        root = workspace_root(context)
        return await attempt(_write, root, path, content, what="write file")


# -- glob_search -----------------------------------------------------------------


def _check_pattern(pattern: str) -> None:
    if PurePath(pattern).is_absolute() or pattern.startswith(("/", "\\")):
        msg = "Absolute paths are not allowed. Use a relative glob pattern."
        raise PathError(msg)
    if ".." in PurePath(pattern.replace("\\", "/")).parts:
        msg = "Path traversal ('..') is not allowed in glob patterns."
        raise PathError(msg)


def _glob(root: str, pattern: str) -> str:
    _check_pattern(pattern)
    real_root = os.path.realpath(root)
    found: list[str] = []
    try:
        for candidate in Path(real_root).glob(pattern):
            relative = inside(candidate, real_root)
            if relative is not None:
                found.append(relative)
            if len(found) > MAX_GLOB_RESULTS:
                break
    except ValueError as e:
        msg = f"Invalid glob pattern: {e}"
        raise PathError(msg) from e
    if not found:
        return f"No files matching pattern '{pattern}' found in workspace."
    shown = sorted(found[:MAX_GLOB_RESULTS])
    text = "\n".join(shown)
    if len(found) > MAX_GLOB_RESULTS:
        text += (
            f"\n\n[Results truncated: showing first {MAX_GLOB_RESULTS} of more matches]"
        )
    return f"{text}\n\nTotal: {len(shown)} files"


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


def _files_under(start: Path, real_root: str) -> Iterator[tuple[str, str]]:
    """Yield ``(relative, resolved)`` for the files under ``start``, in order."""
    if start.is_file():
        relative = inside(start, real_root)
        if relative is not None:
            yield relative, str(start)
        return
    for directory, dirs, files in os.walk(start):  # never follows directory links
        dirs.sort()
        for name in sorted(files):
            candidate = Path(directory, name)
            relative = inside(candidate, real_root)
            if relative is not None:
                yield relative, os.path.realpath(candidate)


def _text_of(path: str) -> str:
    """Return a small text file's content; ``""`` when too large or binary."""
    with os.fdopen(os.open(path, os.O_RDONLY | NOFOLLOW), "rb") as handle:
        if os.fstat(handle.fileno()).st_size > MAX_SEARCH_FILE_BYTES:
            return ""
        data = handle.read(MAX_SEARCH_FILE_BYTES)
    if b"\0" in data[:_BINARY_PROBE]:
        return ""
    return data.decode("utf-8", errors="replace")


def _matching_lines(
    files: Iterator[tuple[str, str]], matcher: re.Pattern[str]
) -> Iterator[str]:
    for relative, path in itertools.islice(files, MAX_SEARCH_FILES):
        for number, line in enumerate(_text_of(path).splitlines(), start=1):
            if matcher.search(line):
                yield f"{relative}:{number}: {line[:MAX_LINE_CHARS]}"


def _search(root: str, query: _SearchQuery) -> str:
    start = Path(confine(query.path, root).path)
    if not start.exists():
        msg = f"No such file or directory in the workspace: {query.path!r}"
        raise PathError(msg)
    files = _files_under(start, os.path.realpath(root))
    found = _matching_lines(files, query.matcher)
    lines = list(itertools.islice(found, query.limit + 1))
    if not lines:
        return f"No matches found for '{query.pattern}'."
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


def file_tools() -> tuple[
    FileReadTool, FileWriteTool, GlobSearchTool, ContentSearchTool
]:
    """Return the four workspace file tools."""
    return (FileReadTool(), FileWriteTool(), GlobSearchTool(), ContentSearchTool())
