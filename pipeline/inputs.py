"""Reading an input file the user names, bounded and checked first (issue #17).

``import FILE``, ``audit FILE`` and ``run SCRIPT`` read files a user names, and a
user can name ``/dev/zero``, a FIFO nobody writes to, a directory or a file of
many gigabytes. :func:`read_input_file` opens without blocking
(``O_NONBLOCK``), checks with ``fstat`` that it is a regular file no larger than
the limit, and then reads at most the limit plus one byte (a file that grew
meanwhile is refused too, never read to its end). Every refusal is an
:class:`InputFileError` whose one-line message names the file (a bounded prefix
of its name), what was expected and what was found.

The CLI passes ``[runtime] max_input_bytes`` as the limit; the configuration
file itself is read with :data:`DEFAULT_MAX_INPUT_BYTES`, since it is read
before that key exists.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from pathlib import Path
from typing import Final

from turnledger.pipeline.errors import PipelineError

DEFAULT_MAX_INPUT_BYTES: Final = 256 * 1024 * 1024
"""The default bound of an input file: 256 MiB."""

_SHOWN: Final = 120


class InputFileError(PipelineError, OSError):
    """An input file is not a regular file, too large, or cannot be read.

    An :class:`OSError` too, so callers that handled unreadable files still do.
    """


class MissingInputFileError(InputFileError, FileNotFoundError):
    """The input file does not exist (a :class:`FileNotFoundError` too)."""


def shown_name(path: str | os.PathLike[str]) -> str:
    """Return ``repr`` of a path, cut to a bounded prefix."""
    name = os.fspath(path)
    if len(name) <= _SHOWN:
        return repr(name)
    return f"{name[:_SHOWN]!r}\u2026 ({len(name)} characters)"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_input_file(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    what: str = "input file",
) -> bytes:
    """Return the bytes of a regular file of at most ``max_bytes`` bytes.

    Args:
        path: The file the user named (symlinks are followed: the user chose it).
        max_bytes: The bound (``[runtime] max_input_bytes``).
        what: What the file is, for the message (``transcript``, ``script``).

    Returns:
        The whole content.

    Raises:
        InputFileError: Missing, unreadable, not a regular file (FIFO, device,
            directory, socket), larger than ``max_bytes``, or grown past it
            while being read.
    """
    shown = shown_name(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        msg = f"Expected a readable {what} at {shown}, found: {why}"
        if isinstance(e, FileNotFoundError):
            raise MissingInputFileError(msg) from None
        raise InputFileError(msg) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            msg = f"Expected a regular {what} at {shown}, found {_kind(status.st_mode)}"
            raise InputFileError(msg)
        if status.st_size > max_bytes:
            msg = (
                f"Expected a {what} of at most {max_bytes} bytes at {shown},"
                f" found {status.st_size} bytes"
            )
            raise InputFileError(msg)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        data = _read_at_most(fd, max_bytes + 1, what, shown)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        msg = (
            f"Expected a {what} of at most {max_bytes} bytes at {shown},"
            " found it growing past that while it was read"
        )
        raise InputFileError(msg)
    return data


def _read_at_most(fd: int, limit: int, what: str, shown: str) -> bytes:
    chunks: list[bytes] = []
    left = limit
    try:
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        msg = f"Expected a readable {what} at {shown}, found: {e.strerror or e}"
        raise InputFileError(msg) from None
    return b"".join(chunks)


def read_input_text(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    what: str = "input file",
) -> str:
    """Return a bounded input file as UTF-8 text (see :func:`read_input_file`).

    Raises:
        InputFileError: As :func:`read_input_file`, or the bytes are not UTF-8
            (the message gives the offset of the first bad byte).
    """
    data = read_input_file(path, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        msg = (
            f"Expected a UTF-8 {what} at {shown_name(Path(path))},"
            f" found byte 0x{data[e.start]:02x} at offset {e.start}"
        )
        raise InputFileError(msg) from None


_OTLP_SIGNATURE: Final = re.compile(rb'\A\s*\{\s*"resource(?:Spans|Logs)"\s*:')
_OTLP_PEEK: Final = 4096


def looks_like_otlp(path: str | Path) -> bool:
    """Whether a file begins as an OTLP/JSON trace or log request (its first 4 KiB).

    Only a regular file is looked into, opened without blocking as
    :func:`read_input_file` opens it (a FIFO nobody writes to would block a
    plain open forever); anything else is not OTLP here, and its reader
    refuses it. Here, not beside the OTLP reader (:mod:`.collect.files`), so
    telling a file's kind costs no import of the receiver.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, _OTLP_PEEK)
    except OSError:
        return False
    finally:
        os.close(fd)
    return _OTLP_SIGNATURE.match(head) is not None
