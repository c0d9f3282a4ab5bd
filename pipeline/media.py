"""Media attachments: validated, bounded, content-addressed; never bytes in the ledger.

:class:`MediaStore` loads an attachment from a path the caller does not trust:
the path is confined to a root and its size checked BEFORE any byte is read
(:func:`policies.media.admit_media_file`), then the file is opened race-proof
(:func:`pipeline.safe_fs.open_beneath`: component by component beneath the
root's directory handle, no symlink followed, a FIFO never blocks, only a
regular file with one link) and the bytes are streamed once through SHA-256
into ``media/<sha256>`` under the data directory. The same bytes
always land in the same file. The ledger records only what
:func:`attachment_event` puts in ``media.attached``: name, MIME type, kind,
size, digest, and the reference ``media/<sha256>`` or a summary.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.events import MediaAttached
from turnledger.pipeline.safe_fs import UnsafePathError, open_beneath
from turnledger.policies.media import (
    DEFAULT_MAX_IMAGE_SIZE_MB,
    DEFAULT_MAX_MEDIA_BYTES,
    MediaAccepted,
    MediaChecker,
    MediaRefused,
    admit_media_file,
    make_media_checker,
)

MEDIA_DIR: Final = "media"
"""The directory, under the data directory, of content-addressed files."""

CHUNK_BYTES: Final = 64 * 1024
"""How much is read at a time while hashing and copying."""

_SHA256: Final = re.compile(r"[0-9a-f]{64}")

_DOCUMENT_MIME_PREFIXES: Final = (
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.",
    "text/",
)

AttachmentKind: TypeAlias = Literal["image", "audio", "video", "document", "unknown"]
"""The kinds ``media.attached`` records (the policy's kinds plus ``document``)."""


class MediaRef(msgspec.Struct, frozen=True, kw_only=True):
    """A stored attachment: what the ledger may know about it, and where it is.

    Attributes:
        file_name: The attachment's file name.
        mime: Its MIME type (given, or guessed from the extension).
        kind: ``image``, ``audio``, ``video``, ``document`` or ``unknown``.
        size_bytes: How many bytes it has.
        sha256: The hex SHA-256 of its bytes.
        storage_ref: ``media/<sha256>``, relative to the data directory.
    """

    file_name: str
    mime: str
    kind: AttachmentKind
    size_bytes: int
    sha256: str
    storage_ref: str


def attachment_kind(accepted: MediaAccepted) -> AttachmentKind:
    """Return the recorded kind: the policy's kind, ``document`` for documents."""
    if accepted.kind != "unknown":
        return accepted.kind
    if accepted.mime_type.lower().startswith(_DOCUMENT_MIME_PREFIXES):
        return "document"
    return "unknown"


def storage_ref_for(sha256: str) -> str:
    """Return the reference of the content-addressed file of a digest."""
    return f"{MEDIA_DIR}/{sha256}"


def attachment_event(
    ref: MediaRef,
    *,
    turn_id: str,
    summary: str | None = None,
    keep_reference: bool = True,
) -> MediaAttached:
    """Return the ``media.attached`` event of a stored attachment (no bytes).

    Args:
        ref: The stored attachment.
        turn_id: The turn it is attached to.
        summary: A text summary (e.g. a transcription), when there is one.
        keep_reference: Record ``storage_ref``; with ``False`` only the summary
            (required then) stands for the content.

    Raises:
        ValueError: Neither a reference nor a summary would be recorded.
    """
    if not keep_reference and not summary:
        msg = "Expected a summary when the reference is not kept, found none"
        raise ValueError(msg)
    return MediaAttached(
        turn_id=turn_id,
        file_name=ref.file_name,
        mime=ref.mime,
        kind=ref.kind,
        size_bytes=ref.size_bytes,
        sha256=ref.sha256,
        storage_ref=ref.storage_ref if keep_reference else None,
        summary=summary,
    )


def _size_of(path: str) -> int | None:
    try:
        status = Path(path).stat()
    except OSError:
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _unreadable(path: str, why: str) -> MediaRefused:
    return MediaRefused(reason="missing", detail=f"{path!r} could not be read: {why}")


class MediaStore:
    """Content-addressed attachment files under ``<data_dir>/media``.

    Args:
        data_dir: The data directory (created on the first store).
        max_bytes: The bound of any attachment when a call gives none
            (``[runtime] max_media_bytes``).
        max_image_size_mb: The bound of images when a call gives none, in MiB.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_MEDIA_BYTES,
        max_image_size_mb: int = DEFAULT_MAX_IMAGE_SIZE_MB,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.media_dir = self.data_dir / MEDIA_DIR
        self.max_bytes = max_bytes
        self.max_image_size_mb = max_image_size_mb

    def load(
        self,
        path: str,
        *,
        root: str | os.PathLike[str],
        max_bytes: int | None = None,
        max_image_size_mb: int | None = None,
        mime_type: str | None = None,
    ) -> MediaRef | MediaRefused:
        """Validate, bound, hash and store the file at ``path``.

        Args:
            path: The caller-supplied path (untrusted; relative to ``root``).
            root: The directory the path must stay in (e.g. the workspace).
            max_bytes: The bound of any attachment (the store's when ``None``).
            max_image_size_mb: The bound of images, in MiB (clamped to 1 to 20;
                the store's when ``None``).
            mime_type: The MIME type, when known; guessed from the name otherwise.

        Returns:
            The stored attachment, or why it was refused (``empty``,
            ``too_large``, ``missing`` or a path refusal), checked before any
            byte is read.

        Raises:
            OSError: The data directory cannot be written.
        """
        check = self._checker(max_bytes, max_image_size_mb)
        try:
            decision = admit_media_file(
                path,
                root=os.path.abspath(root),  # noqa: PTH100 - the policy takes str
                resolve=os.path.realpath,
                size_of=_size_of,
                check=check,
                mime_type=mime_type,
            )
        except OSError as e:  # realpath raced with a swap (a link became a file)
            return _unreadable(path, e.strerror or str(e))
        if isinstance(decision, MediaRefused):
            return decision
        real_root = os.path.realpath(root)
        relative = os.path.relpath(str(decision.path), real_root)
        try:
            descriptor, _ = open_beneath(real_root, relative)
        except UnsafePathError as e:
            if e.reason in ("symlink", "not_directory"):
                return MediaRefused(reason="symlink_escape", detail=str(e))
            return _unreadable(path, str(e))
        except OSError as e:
            return _unreadable(path, e.strerror or str(e))
        with os.fdopen(descriptor, "rb") as handle:
            try:
                return self._store(decision, _chunks(handle, decision.size))
            except _ReadError as e:
                return _unreadable(path, str(e))

    def ingest(
        self,
        file_name: str,
        data: bytes,
        *,
        max_bytes: int | None = None,
        max_image_size_mb: int | None = None,
        mime_type: str | None = None,
    ) -> MediaRef | MediaRefused:
        """Store bytes that arrived in memory (a channel attachment), bounded.

        Returns:
            The stored attachment, or why it was refused (``empty`` or
            ``too_large``).

        Raises:
            OSError: The data directory cannot be written.
        """
        check = self._checker(max_bytes, max_image_size_mb)
        decision = check(file_name, len(data), mime_type)
        if isinstance(decision, MediaRefused):
            return decision
        return self._store(decision, [data])

    def _checker(
        self, max_bytes: int | None, max_image_size_mb: int | None
    ) -> MediaChecker:
        return make_media_checker(
            max_bytes=self.max_bytes if max_bytes is None else max_bytes,
            max_image_size_mb=(
                self.max_image_size_mb
                if max_image_size_mb is None
                else max_image_size_mb
            ),
        )

    def path_of(self, storage_ref: str) -> Path | None:
        """Return the file of a ``media/<sha256>`` reference, if it is stored."""
        prefix, _, digest = storage_ref.partition("/")
        if prefix != MEDIA_DIR or not _SHA256.fullmatch(digest):
            return None
        path = self.media_dir / digest
        return path if path.is_file() else None

    def _store(
        self, accepted: MediaAccepted, chunks: Iterable[bytes]
    ) -> MediaRef | MediaRefused:
        self.media_dir.mkdir(parents=True, exist_ok=True)
        incoming, sha256, size = _write_hashed(self.media_dir, chunks)
        if size != accepted.size:
            incoming.unlink()
            return MediaRefused(
                reason="too_large" if size > accepted.size else "missing",
                detail=(
                    f"{accepted.file_name!r} changed while it was read "
                    f"({accepted.size} bytes checked, {size} read)"
                ),
            )
        target = self.media_dir / sha256
        if target.exists():
            incoming.unlink()
        else:
            incoming.replace(target)
        return MediaRef(
            file_name=accepted.file_name,
            mime=accepted.mime_type,
            kind=attachment_kind(accepted),
            size_bytes=size,
            sha256=sha256,
            storage_ref=storage_ref_for(sha256),
        )


class _ReadError(Exception):
    """The attachment could not be read (the data directory is not at fault)."""


def _write_hashed(directory: Path, chunks: Iterable[bytes]) -> tuple[Path, str, int]:
    """Copy ``chunks`` into a new temporary file, hashing them on the way.

    Returns:
        The temporary file, the hex SHA-256 and the byte count. The file is
        removed when copying fails.
    """
    digest = hashlib.sha256()
    size = 0
    with tempfile.NamedTemporaryFile(
        dir=directory, prefix=".incoming-", delete=False
    ) as temporary:
        try:
            for chunk in chunks:
                digest.update(chunk)
                temporary.write(chunk)
                size += len(chunk)
        except BaseException:
            Path(temporary.name).unlink(missing_ok=True)
            raise
    return Path(temporary.name), digest.hexdigest(), size


def _chunks(handle: IO[bytes], size: int) -> Iterable[bytes]:
    """Yield the file's bytes in chunks, at most ``size + 1`` of them.

    Reading one byte past the checked size reveals a file that grew since the
    check, without reading an unbounded amount.
    """
    left = size + 1
    while left > 0:
        try:
            chunk = handle.read(min(CHUNK_BYTES, left))
        except OSError as e:
            raise _ReadError(e.strerror or str(e)) from e
        if not chunk:
            return
        left -= len(chunk)
        yield chunk
