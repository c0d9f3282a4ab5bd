r"""Deterministic stream ids: one agent and session key always name one stream.

A session's stream id derives from the exact key (issue #17): two distinct keys
are always two streams. Until issue #17 callers canonicalized keys first by
mapping every character but letters, digits, ``_`` and ``-`` to ``_``, so
``bob.smith`` and ``bob smith`` shared a stream. Migration: a key that rule
left unchanged (``telegram_42``, ``demo-1``) names the same stream as before; a
session recorded under a changed key keeps its recorded key (its
``session.opened`` says ``bob_smith``) and is found by it;
:func:`legacy_session_stream_id` names that stream. No event is rewritten.

:func:`encode_session_key` is the lossless, reversible form of a key for
anything that puts keys in file names.

Identifiers (agent names, session keys, turn ids, tool call ids) hold no
control character (:func:`check_identifier`): the stream id of ``a\x1fb``'s
session ``c`` would otherwise be that of ``a``'s session ``b\x1fc``, and a NUL
or an escape sequence would reach file names, terminals and logs.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote, unquote
from uuid import UUID, uuid5

from turnledger.ledger.errors import InvalidArgumentError, InvalidIdError, type_name

CONTROL_CHARACTERS: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
"""The characters no identifier may hold: C0 controls, DEL and C1 controls."""

NAMESPACE = UUID("6f1c1a8e-6b0e-5b6e-9a43-7475726e6c64")
"""The uuid5 namespace of turnledger stream ids. Never change it."""


def check_identifier(field: str, value: object) -> str:
    """Return ``value`` if it is text without control characters.

    Every other character stays valid (Unicode letters, spaces, punctuation,
    emoji...). Empty text passes here; the event schemas refuse an empty id.

    Args:
        field: The identifier's field, named in the error.
        value: The identifier.

    Returns:
        ``value``, unchanged.

    Raises:
        InvalidArgumentError: ``value`` is not a ``str``.
        InvalidIdError: ``value`` holds a character of
            :data:`CONTROL_CHARACTERS`; the error names the field and the
            character's position.
    """
    if not isinstance(value, str):
        msg = f"{field}: expected str, found {type_name(value)}"
        raise InvalidArgumentError(msg)
    bad = CONTROL_CHARACTERS.search(value)
    if bad is not None:
        raise InvalidIdError(field, value, bad.start())
    return value


def session_stream_id(agent: str, session_key: str) -> UUID:
    """Return the id of an agent's session stream.

    Args:
        agent: The agent alias.
        session_key: The exact session key (distinct keys, distinct streams).

    Returns:
        The uuid5, in :data:`NAMESPACE`, of ``session``, agent and key joined by
        the unit separator.

    Raises:
        InvalidArgumentError: The agent or the key is not a ``str``.
        InvalidIdError: The agent or the key holds a control character.
    """
    check_identifier("agent", agent)
    check_identifier("session_key", session_key)
    return uuid5(NAMESPACE, f"session\x1f{agent}\x1f{session_key}")


def _legacy_key(session_key: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in session_key)


def legacy_session_stream_id(agent: str, session_key: str) -> UUID:
    """Return the stream a session with this key got before issue #17.

    Args:
        agent: The agent alias.
        session_key: The key as a caller gave it then (``bob.smith``).

    Returns:
        ``session_stream_id(agent, old_key)`` where ``old_key`` maps every
        character but Unicode letters, digits, ``_`` and ``-`` to ``_``. It equals
        :func:`session_stream_id` for keys made of those characters only.

    Raises:
        InvalidArgumentError: The agent or the key is not a ``str``.
        InvalidIdError: The agent or the key holds a control character.
    """
    check_identifier("session_key", session_key)
    return session_stream_id(agent, _legacy_key(session_key))


def encode_session_key(session_key: str) -> str:
    """Return a file-name-safe, lossless form of a session key.

    ASCII letters, digits, ``_``, ``-``, ``.`` and ``~`` stay; every other character
    becomes ``%XX`` per UTF-8 byte (percent-encoding), and a leading ``.`` becomes
    ``%2E`` (no hidden files, never ``.`` or ``..``). Distinct keys give distinct
    names; :func:`decode_session_key` reverses it.

    Args:
        session_key: Any key encodable as UTF-8 (lone surrogates are not).

    Returns:
        The encoded name.

    Raises:
        UnicodeEncodeError: The key holds a lone surrogate.
    """
    encoded = quote(session_key, safe="", errors="strict")
    return "%2E" + encoded[1:] if encoded.startswith(".") else encoded


def decode_session_key(encoded: str) -> str:
    """Return the session key :func:`encode_session_key` encoded.

    Raises:
        UnicodeDecodeError: ``encoded`` is not one of its outputs.
    """
    return unquote(encoded, errors="strict")


def memory_stream_id(agent: str) -> UUID:
    """Return the id of an agent's long-term memory stream.

    Raises:
        InvalidArgumentError: The agent is not a ``str``.
        InvalidIdError: The agent holds a control character.
    """
    check_identifier("agent", agent)
    return uuid5(NAMESPACE, f"memory\x1f{agent}")
