"""Workspace file tools: read and write, confined to the workspace.

Every path the model names goes through :func:`policies.paths.confine_path`
against the agent's workspace with :func:`os.path.realpath`, so ``..``, absolute
paths outside and symlinks pointing out are refused with a reason. The resolved
path is then opened race-proof by :mod:`pipeline.safe_fs`: component by
component beneath the workspace's directory handle, never following a symlink,
never blocking on a FIFO, only regular files, and (by default) no hard-linked
files, so a directory or file swapped after the check cannot redirect the open.
Reads and writes are bounded; file I/O runs in a worker thread.
:func:`file_tools` returns these two with the search tools of
:mod:`pipeline.tools.search_tools` (``glob_search``, ``content_search``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.safe_fs import UnsafePathError, open_beneath, read_bounded
from turnledger.pipeline.tools._arguments import (
    ArgumentError,
    check_object,
    failure,
    optional_int,
    required_str,
)
from turnledger.pipeline.tools._spec import KIB, object_spec
from turnledger.pipeline.tools._workspace import (
    PathError,
    attempt,
    confine,
    shown,
    workspace_root,
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.pipeline.tools.search_tools import ContentSearchTool, GlobSearchTool

DEFAULT_READ_BYTES: Final = 64 * KIB
"""How many bytes ``file_read`` returns when ``max_bytes`` is omitted."""

MAX_READ_BYTES: Final = 1024 * KIB
"""The largest ``max_bytes`` accepted."""

MAX_WRITE_BYTES: Final = 1024 * KIB
"""The largest content ``file_write`` writes (UTF-8 bytes)."""


FILE_READ_SPEC: Final = object_spec(
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

FILE_WRITE_SPEC: Final = object_spec(
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
