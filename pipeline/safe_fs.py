"""Opening files beneath a directory so that no swap can redirect the open.

:func:`policies.paths.confine_path` decides on a path; between that decision and
the ``open`` a directory or file can be swapped for a symlink, a FIFO or a hard
link. Here every component is opened relative to its parent's directory handle
(``os.open(name, ..., dir_fd=parent)``) with ``O_NOFOLLOW``, directories with
``O_DIRECTORY``, and the final file with ``O_NONBLOCK`` (so a FIFO never blocks
the open) and then checked with ``fstat``: it must be a regular file, and, when
``refuse_hard_links`` is on (the default), have one link only, still be the
file the name refers to, and still have one link after that check. A symlink
anywhere on the way is refused, never followed, so what is opened is always
beneath the root handle, whatever happens to the tree meanwhile.

What is guarded against hard links, exactly: a file whose link count is above 1
at the ``fstat`` after the open, or whose name no longer refers to it, or whose
link count is above 1 again after that. An attacker who can create hard links
to an outside file could still win by unlinking and re-linking the name twice
within those three system calls; Linux's ``fs.protected_hardlinks`` (on by
default) stops such links to files the attacker does not own.

:func:`walk_files` lists the regular files under a directory the same way (an
explicit stack of directory handles, never following links), bounded in depth
and in entries visited.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from typing import Final, Literal, TypeAlias

UnsafeReason: TypeAlias = Literal[
    "symlink", "not_directory", "not_regular", "hard_link", "missing"
]
"""Why an open beneath a root was refused."""

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS: Final = os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC

MAX_WALK_DEPTH: Final = 64
"""Directories deeper than this below the start are not entered."""

MAX_WALK_ENTRIES: Final = 100_000
"""Directory entries a walk looks at, at most."""


class UnsafePathError(Exception):
    """An open beneath a root was refused.

    Attributes:
        reason: Why (see :data:`UnsafeReason`).
    """

    def __init__(self, detail: str, *, reason: UnsafeReason) -> None:
        """Keep the reason; the detail is the message."""
        super().__init__(detail)
        self.reason: UnsafeReason = reason


def _shown(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:80] + "\u2026")


def open_root(root: str) -> int:
    """Open the trusted root directory (its own symlinks are followed).

    Raises:
        OSError: It cannot be opened as a directory.
    """
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)


def _open_directory(parent: int, name: str, *, create: bool) -> int:
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            msg = f"No such directory: {_shown(name)}"
            raise UnsafePathError(msg, reason="missing") from None
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked below
            os.mkdir(name, 0o755, dir_fd=parent)
        return _open_directory(parent, name, create=False)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            msg = f"{_shown(name)} is a symlink or not a directory (not followed)"
            reason: UnsafeReason = (
                "not_directory" if e.errno == errno.ENOTDIR else "symlink"
            )
            raise UnsafePathError(msg, reason=reason) from None
        raise


def open_directory(root_fd: int, parts: list[str], *, create: bool = False) -> int:
    """Open the directory ``parts`` beneath ``root_fd``, one component at a time.

    Args:
        root_fd: An open directory (not closed here).
        parts: The path components, none of them ``..`` or empty.
        create: Make missing directories (mode 0o755).

    Returns:
        A new directory descriptor (the caller closes it); a duplicate of
        ``root_fd`` when ``parts`` is empty.

    Raises:
        UnsafePathError: A component is a symlink, not a directory, or missing.
        OSError: Another OS error.
    """
    current = os.dup(root_fd)
    try:
        for name in parts:
            child = _open_directory(current, name, create=create)
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


def _check_regular(fd: int, name: str, *, refuse_hard_links: bool) -> os.stat_result:
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        msg = f"{_shown(name)} is not a regular file (a FIFO, device or directory)"
        raise UnsafePathError(msg, reason="not_regular")
    if refuse_hard_links and status.st_nlink > 1:
        msg = f"{_shown(name)} has {status.st_nlink} hard links (refused)"
        raise UnsafePathError(msg, reason="hard_link")
    return status


def _check_still_linked(
    parent: int, name: str, fd: int, status: os.stat_result
) -> None:
    # One link seen by fstat proves little when the name was swapped meanwhile
    # (a hard link to an outside file replaced by another file after the open
    # leaves the outside file with one link). So the name must still be this
    # file, and the file must still have one link after that.
    try:
        named = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        named = None
    same = named is not None and (named.st_dev, named.st_ino) == (
        status.st_dev,
        status.st_ino,
    )
    if not same or os.fstat(fd).st_nlink > 1:
        msg = f"{_shown(name)} changed while it was opened (refused)"
        raise UnsafePathError(msg, reason="hard_link")


def open_file_at(
    parent: int, name: str, *, write: bool = False, refuse_hard_links: bool = True
) -> tuple[int, os.stat_result]:
    """Open the regular file ``name`` in the directory ``parent``, checked.

    Reading opens ``O_RDONLY``; writing opens ``O_WRONLY | O_CREAT`` and
    truncates only after the checks (so a hard-linked file is never emptied).

    Returns:
        The descriptor (blocking again, the caller closes it) and its status.

    Raises:
        UnsafePathError: ``name`` is a symlink, a FIFO, a device, a directory,
            missing (reading), or hard-linked while ``refuse_hard_links``.
        OSError: Another OS error.
    """
    flags = _FILE_FLAGS | (os.O_WRONLY | os.O_CREAT if write else os.O_RDONLY)
    try:
        fd = os.open(name, flags, 0o644, dir_fd=parent)
    except FileNotFoundError:
        msg = f"No such file: {_shown(name)}"
        raise UnsafePathError(msg, reason="missing") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            msg = f"{_shown(name)} is a symlink (not followed)"
            raise UnsafePathError(msg, reason="symlink") from None
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV):
            msg = f"{_shown(name)} is not a regular file (a FIFO, device or directory)"
            raise UnsafePathError(msg, reason="not_regular") from None
        raise
    try:
        status = _check_regular(fd, name, refuse_hard_links=refuse_hard_links)
        if refuse_hard_links:
            _check_still_linked(parent, name, fd, status)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if write:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def open_beneath(
    root: str,
    relative: str,
    *,
    write: bool = False,
    create_parents: bool = False,
    refuse_hard_links: bool = True,
) -> tuple[int, os.stat_result]:
    """Open the regular file ``relative`` beneath the directory ``root``.

    Args:
        root: The trusted root directory.
        relative: A path relative to ``root`` already confined by the policy
            (``/``-separated, no ``..``), not ``"."``.
        write: Open for writing (created when missing, truncated after checks).
        create_parents: Make missing parent directories.
        refuse_hard_links: Refuse a file with more than one link.

    Returns:
        The descriptor and its status (see :func:`open_file_at`).

    Raises:
        UnsafePathError: A component is a symlink or not a directory, or the file
            is refused by :func:`open_file_at`.
        OSError: Another OS error.
    """
    *parents, name = [part for part in relative.split("/") if part not in ("", ".")]
    root_fd = open_root(root)
    try:
        parent = open_directory(root_fd, parents, create=create_parents)
    finally:
        os.close(root_fd)
    try:
        return open_file_at(
            parent, name, write=write, refuse_hard_links=refuse_hard_links
        )
    finally:
        os.close(parent)


def read_bounded(fd: int, limit: int) -> bytes:
    """Read at most ``limit`` bytes from ``fd`` (fewer at end of file)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


DirectoryEntry: TypeAlias = tuple[str, int, str]
"""``(relative path, parent directory descriptor, name)`` of a listed file."""


def _listing(fd: int, budget: int) -> tuple[list[str], list[str], int]:
    files: list[str] = []
    dirs: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if budget <= 0:
                break
            budget -= 1
            if entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            elif entry.is_file(follow_symlinks=False):
                files.append(entry.name)
    return sorted(files), sorted(dirs), budget


_Frame: TypeAlias = tuple[int, str, Iterator[str]]


def _descend(stack: list[_Frame]) -> tuple[int, str] | None:
    """Open the next pending subdirectory; close the frames that are done."""
    while stack:
        parent, parent_prefix, pending = stack[-1]
        name = next(pending, None)
        if name is None:
            os.close(parent)
            stack.pop()
            continue
        try:
            child = _open_directory(parent, name, create=False)
        except (UnsafePathError, OSError):
            continue  # swapped for a link, removed or unreadable: skipped
        return child, f"{parent_prefix}{name}/"
    return None


def walk_files(
    start_fd: int,
    prefix: str,
    *,
    max_depth: int = MAX_WALK_DEPTH,
    max_entries: int = MAX_WALK_ENTRIES,
) -> Iterator[DirectoryEntry]:
    """Yield the regular files under a directory, in ``os.walk`` order.

    Each directory's files come first (sorted by name), then its
    subdirectories (sorted), recursively; symlinks are skipped, never followed.
    The parent descriptor is open while its entry is being consumed; at most
    ``max_depth + 1`` descriptors are open at a time.

    Args:
        start_fd: An open directory (not closed here).
        prefix: The start's path relative to the root (``""`` for the root).
        max_depth: Directories deeper than this are not entered.
        max_entries: At most this many entries are looked at in all.
    """
    budget = max_entries
    stack: list[_Frame] = []
    current: tuple[int, str] | None = (os.dup(start_fd), prefix)
    try:
        while current is not None:
            fd, current_prefix = current
            files, dirs, budget = _listing(fd, budget)
            for name in files:
                yield f"{current_prefix}{name}", fd, name
            current = None
            if len(stack) < max_depth:
                stack.append((fd, current_prefix, iter(dirs)))
            else:
                os.close(fd)
            current = _descend(stack)
    finally:
        if current is not None:
            os.close(current[0])
        for fd, _, _ in stack:
            os.close(fd)
