"""The autosave gate: which user messages become conversation memory (§4.6).

ZeroClaw's prompt-bloat incidents (#4916, #5816, PR #5632) came from autosave
storing synthetic text: recalled ``[Memory context]`` blocks, cron prompts,
earlier autosaves. The gate therefore runs in this order and says why it
refused:

1. autosave disabled;
2. origin: only ``interactive``, ``channel`` and ``agent_direct`` turns;
3. role: only user messages (assistant replies are never autosaved);
4. no session scope: a conversation row must belong to a session (an addition:
   ZeroClaw would store a global conversation row);
5. length: at least 20 characters;
6. content filter: synthetic content (:func:`should_skip_autosave_content`);
7. inline image bytes are replaced by a placeholder, and a message that is
   nothing but images is not saved (an addition).

Keys: ZeroClaw's channel path used ``{channel}_{thread}_{sender}_{id}`` keys that
the recall skip set did not recognise, so channel autosaves were re-injected while
CLI autosaves (``user_msg_*``) were not [quirk]. Here every autosave key starts
with ``user_msg_`` (:func:`autosave_key`), so no autosaved message is ever
re-injected as memory: it is already in the session history.
"""

from __future__ import annotations

import re
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.messages import Role
from turnledger.policies.paths import legacy_session_key, sanitize_session_key
from turnledger.policies.types import (
    CONVERSATION_CATEGORY,
    USER_FACING_ORIGINS,
    TurnOrigin,
)

AUTOSAVE_MIN_MESSAGE_CHARS: Final = 20
"""ZeroClaw's ``AUTOSAVE_MIN_MESSAGE_CHARS``: shorter messages are not saved."""

IMAGE_OMITTED_PLACEHOLDER: Final = "[Image attachment omitted from history]"
"""What an inline image becomes in an autosaved message."""

USER_AUTOSAVE_PREFIX: Final = "user_msg"
"""The key prefix of autosaved user messages."""

ASSISTANT_AUTOSAVE_PREFIX: Final = "assistant_resp"
"""The key prefix of legacy autosaved assistant replies (filtered on read)."""

MEMORY_CONTEXT_OPEN: Final = "[Memory context]"
"""The opening line of a rendered recall block."""

_SYNTHETIC_PREFIXES: Final = (
    "[cron:",
    "[heartbeat task",
    "[distilled_",
    MEMORY_CONTEXT_OPEN.lower(),
)

# A data URL inside an image marker, up to its closing bracket or, when the marker
# was cut, to the end of the text (bytes are bytes even when truncated).
_INLINE_IMAGE: Final = re.compile(
    r"\[IMAGE:data:[^\]]*(?:\]|\Z)|data:image/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/=]+",
    re.IGNORECASE,
)


class AutosaveKeyError(PolicyError):
    """An autosave key was requested without a message id."""


AutosaveSkipReason: TypeAlias = Literal[
    "disabled",
    "origin",
    "not_user",
    "no_session",
    "too_short",
    "synthetic",
    "image_only",
]
"""Why a message was not autosaved (see the module docstring for the order)."""


class AutosaveDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Whether to store a message as conversation memory, and what to store.

    Attributes:
        save: Whether to store it.
        reason: Why not, when ``save`` is false.
        key: The memory key to store under.
        content: The content to store (inline images replaced); empty when not
            saving, so that logging a refusal never logs the message.
        category: Always ``conversation``.
        session: The session scope of the row.
    """

    save: bool
    reason: AutosaveSkipReason | None
    key: str
    content: str
    category: str = CONVERSATION_CATEGORY
    session: str | None = None


def _has_autosave_prefix(normalized: str, prefix: str) -> bool:
    return normalized == prefix or normalized.startswith(prefix + "_")


def is_autosave_key(key: str) -> bool:
    """Return whether a memory key names an autosaved message.

    Args:
        key: A memory key.

    Returns:
        ``True`` for ``user_msg``/``user_msg_*`` and ``assistant_resp``/
        ``assistant_resp_*`` (trimmed, case-insensitive).
    """
    normalized = key.strip().lower()
    return _has_autosave_prefix(
        normalized, USER_AUTOSAVE_PREFIX
    ) or _has_autosave_prefix(normalized, ASSISTANT_AUTOSAVE_PREFIX)


def should_skip_autosave_content(content: str) -> bool:
    """Return whether text is synthetic and must never be stored or recalled.

    Args:
        content: Message or memory text.

    Returns:
        ``True`` when it is empty after trimming, starts (case-insensitively,
        after trimming) with ``[cron:``, ``[heartbeat task``, ``[distilled_`` or
        ``[Memory context]``, or contains ``distilled_index_sig:``.
    """
    lowered = content.strip().lower()
    return (
        not lowered
        or lowered.startswith(_SYNTHETIC_PREFIXES)
        or "distilled_index_sig:" in lowered
    )


NoiseReason: TypeAlias = Literal[
    "autosave_key", "history_key", "synthetic", "image", "tool_result"
]
"""Why a memory row is noise that recall must never inject."""


def noise_reason(key: str, content: str) -> NoiseReason | None:
    """Return why a memory row is in the recall skip set, or ``None``.

    The skip set holds autosave keys, ``*_history`` keys, synthetic content
    (cron, heartbeat, distilled, ``[Memory context]``), inline images
    (``[IMAGE:``) and stale tool results (``<tool_result``).

    Args:
        key: The row's key.
        content: The row's content.

    Returns:
        The reason, or ``None`` when the row may be injected.
    """
    checks: tuple[tuple[bool, NoiseReason], ...] = (
        (is_autosave_key(key), "autosave_key"),
        (should_skip_autosave_content(content), "synthetic"),
        (key.strip().lower().endswith("_history"), "history_key"),
        ("[IMAGE:" in content, "image"),
        ("<tool_result" in content, "tool_result"),
    )
    return next((reason for hit, reason in checks if hit), None)


def strip_inline_images(text: str) -> str:
    """Replace inline image bytes by :data:`IMAGE_OMITTED_PLACEHOLDER`.

    Args:
        text: Message text that may hold ``[IMAGE:data:...]`` markers or bare
            ``data:image/...;base64,...`` URLs.

    Returns:
        The text with each one replaced; image markers that name a path are kept.
    """
    return _INLINE_IMAGE.sub(IMAGE_OMITTED_PLACEHOLDER, text)


def autosave_key(
    message_id: str,
    *,
    channel: str | None = None,
    thread: str | None = None,
    sender: str | None = None,
) -> str:
    """Return the memory key of an autosaved user message.

    Args:
        message_id: A unique id of the message (the caller mints it; policies
            have no randomness).
        channel: The channel name, for channel messages.
        thread: The thread id, when the message is in a thread.
        sender: The sender id, for channel messages.

    Returns:
        ``user_msg_`` followed by the sanitized ``channel_thread_sender_id``
        (absent parts omitted).

    Raises:
        AutosaveKeyError: ``message_id`` is empty.
    """
    if not message_id:
        msg = "Expected a non-empty message_id for an autosave key, found ''"
        raise AutosaveKeyError(msg)
    parts = [part for part in (channel, thread, sender) if part]
    return (
        f"{USER_AUTOSAVE_PREFIX}_{legacy_session_key('_'.join([*parts, message_id]))}"
    )


def _skip_reason(
    text: str, *, origin: TurnOrigin, role: Role, session: str | None, enabled: bool
) -> AutosaveSkipReason | None:
    # In gate order: the first failed check is the reason.
    checks: tuple[tuple[bool, AutosaveSkipReason], ...] = (
        (not enabled, "disabled"),
        (origin not in USER_FACING_ORIGINS, "origin"),
        (role != "user", "not_user"),
        (not session, "no_session"),
        (len(text) < AUTOSAVE_MIN_MESSAGE_CHARS, "too_short"),
        (should_skip_autosave_content(text), "synthetic"),
    )
    return next((reason for failed, reason in checks if failed), None)


def decide_autosave(
    text: str,
    *,
    origin: TurnOrigin,
    key: str,
    session: str | None,
    role: Role = "user",
    enabled: bool = True,
) -> AutosaveDecision:
    """Decide whether a message is autosaved as conversation memory.

    Args:
        text: The raw message text, as the user sent it (never the history copy
            that carries a ``[Memory context]`` prefix).
        origin: Who started the turn.
        key: The key to store under, from :func:`autosave_key`.
        session: The turn's memory session scope; sanitized in the decision.
        role: Who wrote the message; only ``user`` messages are saved.
        enabled: The ``memory.auto_save`` setting.

    Returns:
        The decision; when ``save`` is true, store ``content`` under ``key`` in
        category ``conversation`` and session ``session``.
    """
    scope = sanitize_session_key(session) if session else None
    reason = _skip_reason(
        text, origin=origin, role=role, session=scope, enabled=enabled
    )
    content = strip_inline_images(text) if reason is None else ""
    if reason is None and not content.replace(IMAGE_OMITTED_PLACEHOLDER, "").strip():
        reason = "image_only"
        content = ""
    return AutosaveDecision(
        save=reason is None, reason=reason, key=key, content=content, session=scope
    )
