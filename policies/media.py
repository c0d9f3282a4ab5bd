"""Media attachments: kind, MIME type, byte bounds and path validation (§7).

The kind rule is ZeroClaw's ``MediaKind::kind()``: the MIME type first (a
case-insensitive ``audio/``, ``image/`` or ``video/`` prefix), otherwise the
extension table. Unlike ZeroClaw's ``from_file``, loading from a path is never
unchecked here: :func:`admit_media_file` confines the path to a workspace root
(:func:`policies.paths.confine_path`) and bounds the byte size, and every refusal
is a value that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.paths import PathRefused, confine_path

MediaKind: TypeAlias = Literal["audio", "image", "video", "unknown"]
"""The kind of a media attachment."""

_KIND_BY_EXTENSION: Final[Mapping[str, MediaKind]] = MappingProxyType(
    {
        **dict.fromkeys(
            ("flac", "mp3", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm"),
            "audio",
        ),
        **dict.fromkeys(
            ("png", "jpg", "jpeg", "gif", "bmp", "webp", "heic", "tiff", "svg"), "image"
        ),
        **dict.fromkeys(("mp4", "mkv", "avi", "mov", "wmv", "flv"), "video"),
    }
)
"""ZeroClaw's extension table, exactly (lowercase extensions)."""

_MIME_BY_EXTENSION: Final[Mapping[str, str]] = MappingProxyType(
    {
        "pdf": "application/pdf",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "docx": (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        ),
        "csv": "text/csv",
        "png": "image/png",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "txt": "text/plain",
    }
)
"""ZeroClaw's ``from_file`` MIME table (matched case-insensitively here)."""

FALLBACK_MIME_TYPE: Final = "application/octet-stream"
"""The MIME type of a file whose extension is not in the table."""

MIB: Final = 1024 * 1024
"""One mebibyte, in bytes."""

DEFAULT_MAX_MEDIA_BYTES: Final = 20 * MIB
"""The default byte bound of any attachment (ZeroClaw has none at this layer)."""

DEFAULT_MAX_IMAGE_SIZE_MB: Final = 5
"""ZeroClaw's ``multimodal.max_image_size_mb`` default (clamped to 1 to 20)."""


class MediaConfigError(PolicyError):
    """A media policy was configured or called with unusable values."""


MediaRefusalReason: TypeAlias = Literal[
    "empty",
    "too_large",
    "missing",
    "invalid",
    "too_long",
    "outside_root",
    "parent_escape",
    "symlink_escape",
]
"""Why an attachment was refused: the size reasons, ``missing`` (the caller's
``size_of`` could not read it), or one of the path refusals of
:data:`policies.paths.PathRefusalReason`."""


class MediaAccepted(msgspec.Struct, frozen=True, kw_only=True):
    """An attachment that may be loaded.

    Attributes:
        file_name: The attachment's file name.
        kind: Its kind.
        mime_type: The MIME type given, or the one guessed from the extension.
        size: Its size in bytes.
        path: The resolved path to read, when it came from a file.
    """

    file_name: str
    kind: MediaKind
    mime_type: str
    size: int
    path: str | None = None


class MediaRefused(msgspec.Struct, frozen=True, kw_only=True):
    """An attachment that must not be loaded.

    Attributes:
        reason: Why (see :data:`MediaRefusalReason`).
        detail: A sentence with the figures (size and limit, path and root).
    """

    reason: MediaRefusalReason
    detail: str


MediaDecision: TypeAlias = MediaAccepted | MediaRefused
"""The outcome of a media check."""

MediaChecker: TypeAlias = Callable[[str, int, str | None], MediaDecision]
"""``check(file_name, size, mime_type)``, as built by :func:`make_media_checker`."""


def _extension(file_name: str) -> str:
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    if "." not in base:
        return ""
    return base.rsplit(".", 1)[1].lower()


def media_kind(file_name: str, mime_type: str | None = None) -> MediaKind:
    """Return the kind of an attachment.

    Args:
        file_name: The file name; its extension after the last ``.`` is used
            (lowercased) when the MIME type says nothing.
        mime_type: The MIME type, if any. ``application/octet-stream`` and other
            non-media types fall through to the extension.

    Returns:
        ``audio``, ``image``, ``video`` or ``unknown``.
    """
    if mime_type is not None:
        lowered = mime_type.strip().lower()
        for kind in ("audio", "image", "video"):
            if lowered.startswith(kind + "/"):
                return kind
    return _KIND_BY_EXTENSION.get(_extension(file_name), "unknown")


def guess_mime_type(file_name: str) -> str:
    """Return the MIME type ZeroClaw's ``from_file`` assigns to a file name.

    ZeroClaw matches the extension case-sensitively, so ``PHOTO.PNG`` became
    ``application/octet-stream`` [quirk]; the match here ignores case.

    Args:
        file_name: The file name.

    Returns:
        The MIME type from the table, or ``application/octet-stream``.
    """
    return _MIME_BY_EXTENSION.get(_extension(file_name), FALLBACK_MIME_TYPE)


def _int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"Expected {name} to be an int, found {value!r}"
        raise MediaConfigError(msg)
    return value


def _positive_int(name: str, value: int) -> int:
    if _int(name, value) < 1:
        msg = f"Expected {name} to be an int >= 1, found {value!r}"
        raise MediaConfigError(msg)
    return value


def make_media_checker(
    *,
    max_bytes: int = DEFAULT_MAX_MEDIA_BYTES,
    max_image_size_mb: int = DEFAULT_MAX_IMAGE_SIZE_MB,
) -> MediaChecker:
    """Build the byte-bound check for attachments.

    Args:
        max_bytes: The bound of any attachment, in bytes.
        max_image_size_mb: The bound of images, in MiB, clamped to 1 to 20 as
            ZeroClaw clamps ``multimodal.max_image_size_mb`` (so 0 means 1 MiB).
            The smaller of the two bounds applies to images.

    Returns:
        ``check(file_name, size, mime_type)``, returning :class:`MediaAccepted` or
        :class:`MediaRefused` (``empty`` or ``too_large``).

    Raises:
        MediaConfigError: ``max_bytes`` is not a positive int, or
            ``max_image_size_mb`` not an int. The checker raises it too for a
            ``size`` that is not an int >= 0.
    """
    limit = _positive_int("max_bytes", max_bytes)
    image_mb = _int("max_image_size_mb", max_image_size_mb)
    image_limit = min(limit, min(max(image_mb, 1), 20) * MIB)

    def check(file_name: str, size: int, mime_type: str | None) -> MediaDecision:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            msg = f"Expected size to be an int >= 0, found {size!r}"
            raise MediaConfigError(msg)
        kind = media_kind(file_name, mime_type)
        if size == 0:
            return MediaRefused(reason="empty", detail=f"{file_name!r} has no bytes")
        bound = image_limit if kind == "image" else limit
        if size > bound:
            return MediaRefused(
                reason="too_large",
                detail=(
                    f"{file_name!r} has {size} bytes; the {kind} limit is {bound} bytes"
                ),
            )
        return MediaAccepted(
            file_name=file_name,
            kind=kind,
            mime_type=mime_type or guess_mime_type(file_name),
            size=size,
        )

    return check


def admit_media_file(
    path: str,
    *,
    root: str,
    resolve: Callable[[str], str],
    size_of: Callable[[str], int | None],
    check: MediaChecker,
    mime_type: str | None = None,
) -> MediaDecision:
    """Decide whether a file may be loaded as an attachment.

    The path is confined to ``root`` first; only then is ``size_of`` asked about
    the resolved path, and the size checked.

    Args:
        path: The caller-supplied path (untrusted).
        root: The absolute workspace root the path must stay in.
        resolve: Resolves symlinks to an absolute path (like ``os.path.realpath``).
        size_of: Returns the byte size of a resolved path, or ``None`` when it is
            missing, not a regular file, or unreadable.
        check: The byte-bound check from :func:`make_media_checker`.
        mime_type: The MIME type, when known; guessed from the name otherwise.

    Returns:
        :class:`MediaAccepted` with ``path`` set to the resolved path, or
        :class:`MediaRefused`.
    """
    confined = confine_path(path, root=root, resolve=resolve)
    if isinstance(confined, PathRefused):
        return MediaRefused(reason=confined.reason, detail=confined.detail)
    size = size_of(confined.path)
    if size is None:
        return MediaRefused(
            reason="missing", detail=f"{path!r} is missing or not a readable file"
        )
    file_name = confined.path.replace("\\", "/").rsplit("/", 1)[-1] or "attachment"
    decision = check(file_name, size, mime_type)
    if isinstance(decision, MediaRefused):
        return decision
    return msgspec.structs.replace(decision, path=confined.path)
