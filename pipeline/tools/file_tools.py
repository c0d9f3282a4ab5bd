"""Workspace file tools: read, write, glob and search, confined to the workspace.

Every path the model names goes through :func:`policies.paths.confine_path`
against the agent's workspace with :func:`os.path.realpath`, so ``..``, absolute
paths outside and symlinks pointing out are refused with a reason. The resolved
path is then opened race-proof by :mod:`pipeline.safe_fs`: component by
component beneath the workspace's directory handle, never following a symlink,
never blocking on a FIFO, only regular files, and (by default) no hard-linked
files, so a directory or file swapped after the check cannot redirect the open.
Globs and searches walk the workspace the same way (symlinks skipped), bounded
in depth and entries; reads, writes, listings and search results are bounded.
File I/O runs in a worker thread.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any, Final, NamedTuple

from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.safe_fs import (
    UnsafePathError,
    open_beneath,
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
from turnledger.pipeline.tools._workspace import (
    PathError,
    attempt,
    confine,
    shown,
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

MAX_GLOB_CHARS: Final = 1000
"""The longest glob pattern accepted."""

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


def _refused(path: str, error: UnsafePathError) -> PathError:
    if error.reason in ("missing", "not_regular"):
        return PathError(f"Not a readable file: {shown(path)}")
    return PathError(f"Path refused ({error.reason}): {error}")


def _read(root: str, path: str, max_bytes: int, refuse_hard_links: bool) -> str:
    allowed = confine(path, root)
    if allowed.relative == ".":
        raise PathError(f"Not a readable file: {shown(path)}")
    try:
        fd, status = open_beneath(
            os.path.realpath(root),
            allowed.relative,
            refuse_hard_links=refuse_hard_links,
        )
    except UnsafePathError as e:
        raise _refused(path, e) from None
    try:
        data = read_bounded(fd, max_bytes)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if status.st_size > len(data):
        text += (
            f"\n\n[truncated: showing the first {len(data)} of {status.st_size} bytes]"
        )
    return text


class FileReadTool:
    """``file_read {path*, max_bytes?}``."""

    def __init__(self, *, refuse_hard_links: bool = True) -> None:
        """Refuse hard-linked files unless ``refuse_hard_links`` is off."""
        self.refuse_hard_links = refuse_hard_links

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
        return await attempt(
            _read, root, path, limit, self.refuse_hard_links, what="read file"
        )


# -- file_write ------------------------------------------------------------------


def _write(root: str, path: str, content: str, refuse_hard_links: bool) -> str:
    allowed = confine(path, root)
    if allowed.relative == "." or Path(allowed.path).is_dir():
        msg = f"Cannot write {shown(path)}: it is a directory"
        raise PathError(msg)
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        msg = f"Content has {len(data)} bytes; the limit is {MAX_WRITE_BYTES} bytes"
        raise PathError(msg)
    try:
        fd, _ = open_beneath(
            os.path.realpath(root),
            allowed.relative,
            write=True,
            create_parents=True,
            refuse_hard_links=refuse_hard_links,
        )
    except UnsafePathError as e:
        if e.reason == "not_regular":
            msg = f"Cannot write {shown(path)}: not a regular file"
            raise PathError(msg) from None
        raise PathError(f"Path refused ({e.reason}): {e}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return f"Written {len(data)} bytes to {allowed.relative}"


class FileWriteTool:
    """``file_write {path*, content*}``."""

    def __init__(self, *, refuse_hard_links: bool = True) -> None:
        """Refuse hard-linked files unless ``refuse_hard_links`` is off."""
        self.refuse_hard_links = refuse_hard_links

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
        return await attempt(
            _write, root, path, content, self.refuse_hard_links, what="write file"
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


def file_tools(
    *, refuse_hard_links: bool = True
) -> tuple[FileReadTool, FileWriteTool, GlobSearchTool, ContentSearchTool]:
    """Return the four workspace file tools.

    Args:
        refuse_hard_links: Whether ``file_read`` and ``file_write`` refuse a file
            with more than one hard link (a link can point at a file outside the
            workspace; ``content_search`` always skips such files).
    """
    return (
        FileReadTool(refuse_hard_links=refuse_hard_links),
        FileWriteTool(refuse_hard_links=refuse_hard_links),
        GlobSearchTool(),
        ContentSearchTool(),
    )
