"""Session keys and workspace path confinement.

Two small policies about names that come from outside:

- :func:`sanitize_session_key` returns the one form every store, scope and
  recall uses: the exact key (one with a control character is refused), so
  distinct keys never collide (ZeroClaw mapped every other character to ``_``;
  :func:`legacy_session_key` keeps that rule for autosave memory keys and old
  ledgers).
- :func:`confine_path` decides whether a caller-supplied path stays inside a
  workspace root. It performs no I/O: the caller passes ``resolve`` (the
  equivalent of :func:`os.path.realpath`), and the decision carries the resolved
  path to open, or a typed refusal that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import PurePath
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.ids import check_identifier
from turnledger.policies.errors import PolicyError


class PathPolicyError(PolicyError):
    """A path policy was called with an unusable root or resolver."""


def _keep_session_char(char: str) -> bool:
    return char.isalnum() or char in "_-"


def legacy_session_key(raw: str) -> str:
    """Return the session key as turnledger derived it before issue #17.

    Every character that is not a Unicode letter or digit, ``_`` or ``-`` became
    ``_`` (ZeroClaw ``sanitize_session_key``), so ``bob.smith`` and ``bob smith``
    were one session. Kept for memory keys built from parts (autosave keys) and
    to name where a session recorded under the old rule lives; never use it to
    tell sessions apart.

    Args:
        raw: Any session identifier.

    Returns:
        The lossy form, the same length as ``raw``. Idempotent.
    """
    return "".join(char if _keep_session_char(char) else "_" for char in raw)


def sanitize_session_key(raw: str) -> str:
    """Return the canonical form of a session identifier: the exact key.

    Two distinct keys are always two sessions (issue #17): the canonical form is
    lossless, so it is the key itself (the only lossless map that is also
    idempotent, which callers that canonicalize twice rely on). Stream ids and
    memory scopes derive from it; anything that puts a key into a file name uses
    :func:`ledger.ids.encode_session_key`, which is reversible.

    Sessions recorded before issue #17 under a key that the old rule changed
    (:func:`legacy_session_key`, e.g. ``bob.smith`` recorded as ``bob_smith``)
    keep their recorded key: they are found by it (``turnledger history
    bob_smith``), and a key the old rule left unchanged (letters, digits, ``_``,
    ``-``: ``telegram_42``, ``demo-1``) names the same stream as before.

    Args:
        raw: Any session identifier (channel key, sender, CLI state path...).

    A key holding a control character (C0, DEL or C1: a NUL, a newline, an
    escape) is refused, as the ledger refuses it in every identifier
    (:func:`ledger.ids.check_identifier`); every other key is valid.

    Returns:
        ``raw``, unchanged.

    Raises:
        InvalidIdError: ``raw`` holds a control character; the error names
            ``session_key`` and the character's position.
        InvalidArgumentError: ``raw`` is not a ``str``.

    Example:
        ``"bob.smith"`` and ``"bob smith"`` stay two keys.
    """
    return check_identifier("session_key", raw)


def session_scopes(sessions: Iterable[str | None]) -> tuple[str, ...]:
    """Return a turn's session scopes sanitized, de-duplicated, in order.

    Args:
        sessions: Session identifiers; ``None`` and empty ones are dropped.

    Returns:
        The distinct keys, first occurrence first.
    """
    scopes = (sanitize_session_key(session) for session in sessions if session)
    return tuple(dict.fromkeys(scopes))


GROUP_REPLY_MARKERS: Final = ("@g.us", "group:")
"""How a channel reply target reveals a group chat (contains / starts with)."""


def channel_session_scopes(
    history_key: str, sender: str, reply_target: str
) -> tuple[str, ...]:
    """Return the session scopes of a channel turn, in recall order.

    Args:
        history_key: The channel conversation's history key.
        sender: The sender id.
        reply_target: Where replies go; a group chat when it contains ``@g.us``
            or starts with ``group:``.

    Returns:
        DM: ``(history_key, sender)``; group: ``(sender, history_key)``; both
        sanitized, de-duplicated.
    """
    is_group = GROUP_REPLY_MARKERS[0] in reply_target or reply_target.startswith(
        GROUP_REPLY_MARKERS[1]
    )
    ordered = (sender, history_key) if is_group else (history_key, sender)
    return session_scopes(ordered)


def cli_session_key(state_file_path: str) -> str:
    """Return the memory session scope of a CLI session.

    Args:
        state_file_path: The path of the CLI session state file.

    Returns:
        ``"cli:" + state_file_path`` (exact: two state files, two scopes).
    """
    return sanitize_session_key("cli:" + state_file_path)


PathRefusalReason: TypeAlias = Literal[
    "empty",
    "invalid",
    "too_long",
    "outside_root",
    "parent_escape",
    "symlink_escape",
]
"""Why a path was refused.

``empty`` (no path), ``invalid`` (a NUL byte, or a lone surrogate that no file
system name can hold), ``too_long`` (more than :data:`MAX_PATH_CHARS` characters
or :data:`MAX_PATH_COMPONENTS` components), ``outside_root`` (an absolute path
outside the root), ``parent_escape`` (``..`` components climb out of the root),
``symlink_escape`` (the path is lexically inside but resolves outside).
"""

MAX_PATH_CHARS: Final = 4096
"""The longest path accepted (Linux ``PATH_MAX``)."""

MAX_PATH_COMPONENTS: Final = 256
"""The most components a path may have."""

SHOWN_PATH_CHARS: Final = 200
"""A refusal quotes at most this many characters of the path."""


def shown_path(path: str) -> str:
    """Return ``repr`` of ``path`` cut to :data:`SHOWN_PATH_CHARS` characters.

    Args:
        path: Any path.

    Returns:
        ``repr(path)``, or the repr of its first characters followed by ``…``
        and the full length.
    """
    if len(path) <= SHOWN_PATH_CHARS:
        return repr(path)
    return f"{path[:SHOWN_PATH_CHARS]!r}\u2026 ({len(path)} characters)"


def _encodable(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class PathAllowed(msgspec.Struct, frozen=True, kw_only=True):
    """A path that stays inside the root.

    Attributes:
        path: The resolved absolute path: the one to open, so that what was
            checked is what is used.
        relative: ``path`` relative to the resolved root (``"."`` for the root).
    """

    path: str
    relative: str


class PathRefused(msgspec.Struct, frozen=True, kw_only=True):
    """A path that must not be used.

    Attributes:
        reason: Why (see :data:`PathRefusalReason`).
        detail: A sentence naming the path and the root.
    """

    reason: PathRefusalReason
    detail: str


PathDecision: TypeAlias = PathAllowed | PathRefused
"""The outcome of :func:`confine_path`."""


def is_within(path: str, root: str) -> bool:
    """Return whether an absolute normalized ``path`` is ``root`` or below it.

    Args:
        path: An absolute, normalized path (no ``..`` components).
        root: An absolute, normalized directory.

    Returns:
        ``True`` when ``path`` equals ``root`` or lies under it. The comparison is
        by components, so ``/rootx`` is not inside ``/root``.
    """
    return PurePath(path).is_relative_to(PurePath(root))


def _normalize(path: str) -> PurePath:
    # Lexical ``..`` folding (what os.path.normpath does; ``os`` is off limits in
    # policies). PurePath already drops ``.`` and repeated separators; ``..`` at
    # the anchor stays at the anchor.
    pure = PurePath(path)
    parts: list[str] = []
    for part in pure.parts[1:]:
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
    return PurePath(pure.anchor, *parts)


def _resolved(resolve: Callable[[str], str], path: str, what: str) -> PurePath:
    resolved = resolve(path)
    if not PurePath(resolved).is_absolute():
        msg = (
            f"Expected resolve() to return an absolute path for {what},"
            f" found {shown_path(resolved)}"
        )
        raise PathPolicyError(msg)
    return _normalize(resolved)


def confine_path(
    path: str, *, root: str, resolve: Callable[[str], str]
) -> PathDecision:
    """Decide whether ``path`` stays inside the workspace ``root``.

    A relative path is taken relative to ``root``. The lexical check (``..`` and
    absolute paths) runs first, then the path is resolved with ``resolve`` and the
    resolved path must still be inside the resolved root, which catches symlinks
    pointing out.

    Args:
        path: The caller-supplied path (tool argument, channel payload...).
        root: The absolute workspace root (e.g. the per-agent workspace).
        resolve: Resolves symlinks and returns an absolute path, like
            ``os.path.realpath``. The only place the file system is touched.

    Returns:
        :class:`PathAllowed` with the resolved path, or :class:`PathRefused`.

    Raises:
        PathPolicyError: ``root`` is not absolute, or ``resolve`` returned a
            relative path.
    """
    if not PurePath(root).is_absolute():
        msg = f"Expected an absolute workspace root, found {shown_path(root)}"
        raise PathPolicyError(msg)
    if not path:
        return PathRefused(reason="empty", detail="Expected a path, found ''")
    if "\0" in path:
        detail = f"Path {shown_path(path)} has a NUL byte"
        return PathRefused(reason="invalid", detail=detail)
    if not _encodable(path):
        detail = f"Path {shown_path(path)} is not valid UTF-8 (a lone surrogate)"
        return PathRefused(reason="invalid", detail=detail)
    components = len(PurePath(path).parts)
    if len(path) > MAX_PATH_CHARS or components > MAX_PATH_COMPONENTS:
        return PathRefused(
            reason="too_long",
            detail=(
                f"Expected a path of at most {MAX_PATH_CHARS} characters and"
                f" {MAX_PATH_COMPONENTS} components, found {len(path)} characters"
                f" and {components} components"
            ),
        )
    lexical_root = _normalize(root)
    # ``/`` keeps ``..`` components and replaces the root when ``path`` is
    # absolute.
    joined = lexical_root / path
    if not _normalize(str(joined)).is_relative_to(lexical_root):
        reason: PathRefusalReason = (
            "outside_root" if PurePath(path).is_absolute() else "parent_escape"
        )
        return PathRefused(
            reason=reason,
            detail=f"Path {shown_path(path)} is outside the root {shown_path(root)}",
        )
    real_root = _resolved(resolve, str(lexical_root), "the root")
    # Resolve the path as written, not its lexical normal form: the OS applies
    # ``..`` after following symlinks, and so must the check.
    real = _resolved(resolve, str(joined), shown_path(path))
    if not real.is_relative_to(real_root):
        where, boundary = str(real), str(real_root)
        return PathRefused(
            reason="symlink_escape",
            detail=(
                f"Path {shown_path(path)} resolves to {shown_path(where)},"
                f" outside {shown_path(boundary)}"
            ),
        )
    return PathAllowed(path=str(real), relative=str(real.relative_to(real_root)))
