"""Decoding a stored frame: its header checked, its body decrypted, upcast, typed.

:func:`decode_frame` reads a row's ``(topic, state)`` back into its recorded
time and event: it accepts the codec's frame format and the backends' chained
one, decrypts with the configured cipher, refuses tags and schema versions this
code does not know, and lifts older versions through the registered upcasters.
Every failure is a typed error that names the row (``where``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import cast

import msgspec
from eventsourcing.persistence import Cipher

from turnledger.ledger.chain import BODY_OFFSET, CHAIN_FORMAT
from turnledger.ledger.errors import CorruptRecordError, UnknownEventTypeError
from turnledger.ledger.events import Event
from turnledger.ledger.events.erasure import Erased
from turnledger.ledger.events.registry import DECODERS, TYPES, UPCASTERS, type_for_tag
from turnledger.ledger.frame import (
    FLAG_ENCRYPTED,
    FLAG_SEALED,
    FRAME_FORMAT,
    HEADER,
    HEADER_SIZE,
    datetime_from_us,
)

_UNTYPED = msgspec.json.Decoder()

Opener = Callable[[bytes, Callable[[], str]], bytes | None]
"""Opens a body sealed under a subject's data key; ``None`` once it is destroyed."""


class UpcastError(Exception):
    """An upcaster could not lift a stored payload (reported as a corrupt record)."""


def decode_frame(
    cipher: Cipher | None,
    topic: str,
    state: bytes,
    where: Callable[[], str],
    opener: Opener | None = None,
) -> tuple[datetime, Event]:
    """Decode a row's ``(topic, state)`` into its recorded time and event.

    Args:
        cipher: The cipher encrypted bodies are decrypted with (``None``: none).
        topic: The stored tag.
        state: The stored frame.
        where: Names the row in error messages (called only on error).
        opener: Opens bodies sealed under a subject's data key (a row whose
            key was destroyed decodes as an
            :class:`~ledger.events.erasure.Erased` placeholder).

    Raises:
        UnknownEventTypeError: The tag or schema version is not known here.
        CorruptRecordError: The frame or body does not decode.
    """
    if len(state) < HEADER_SIZE:
        msg = (
            f"Corrupt record at {where()}: expected a frame of at least "
            f"{HEADER_SIZE} bytes, found {len(state)}"
        )
        raise CorruptRecordError(msg)
    frame, flags, version, at_us = HEADER.unpack_from(state)
    if frame == CHAIN_FORMAT and len(state) >= BODY_OFFSET:
        start = BODY_OFFSET
    elif frame == FRAME_FORMAT:
        start = HEADER_SIZE
    else:
        msg = (
            f"Corrupt record at {where()}: expected frame format {FRAME_FORMAT} "
            f"or {CHAIN_FORMAT} (chained, at least {BODY_OFFSET} bytes), "
            f"found format {frame} in {len(state)} bytes"
        )
        raise CorruptRecordError(msg)
    if flags & FLAG_ENCRYPTED:
        body = _decrypt(cipher, state[start:], where)
    else:
        body = state[start:]
    if flags & FLAG_SEALED:
        opened = open_sealed(opener, body, where)
        if opened is None:
            return _recorded_at(at_us, where), Erased(original_type=topic)
        body = opened
    return _recorded_at(at_us, where), _decode_event(topic, version, body, where)


def open_sealed(
    opener: Opener | None, body: bytes, where: Callable[[], str]
) -> bytes | None:
    """Open a sealed body (``None``: its key was destroyed).

    Raises:
        CorruptRecordError: No key store is open, or the body does not open.
    """
    if opener is None:
        msg = (
            f"Sealed record at {where()}: expected the ledger's erasure key store"
            " (its events are sealed under erasable subjects' keys), found none open"
        )
        raise CorruptRecordError(msg)
    return opener(body, where)


def _recorded_at(at_us: int, where: Callable[[], str]) -> datetime:
    try:
        return datetime_from_us(at_us)
    except OverflowError:
        msg = (
            f"Corrupt record at {where()}: expected a recorded time before "
            f"year 10000, found {at_us} microseconds"
        )
        raise CorruptRecordError(msg) from None


def _decrypt(cipher: Cipher | None, body: bytes, where: Callable[[], str]) -> bytes:
    if cipher is None:
        msg = (
            f"Encrypted record at {where()}: expected a cipher key "
            "(TURNLEDGER_CIPHER_KEY), found none configured"
        )
        raise CorruptRecordError(msg)
    try:
        return cipher.decrypt(body)
    except Exception as e:
        msg = f"Corrupt record at {where()}: the body does not decrypt ({e})"
        raise CorruptRecordError(msg) from e


def _decode_event(
    tag: str, version: int, body: bytes, where: Callable[[], str]
) -> Event:
    try:
        event_type = type_for_tag(tag)
    except UnknownEventTypeError as e:
        msg = f"Unknown event at {where()}: {e}"
        raise UnknownEventTypeError(msg) from None
    current = event_type.SCHEMA_VERSION
    if version > current:
        msg = (
            f"Unknown event at {where()}: expected {tag} schema version <= "
            f"{current}, found {version} (written by a newer turnledger)"
        )
        raise UnknownEventTypeError(msg)
    try:
        if version == current:
            return cast("Event", DECODERS[tag].decode(body))
        return _upcast(tag, version, current, body)
    except (msgspec.DecodeError, msgspec.ValidationError, UpcastError) as e:
        msg = f"Corrupt record at {where()}: expected a valid {tag} event, {e}"
        raise CorruptRecordError(msg) from e


def _upcast(tag: str, version: int, current: int, body: bytes) -> Event:
    payload = _UNTYPED.decode(body)
    if not isinstance(payload, dict):
        msg = f"Expected a JSON object, found {type(payload).__name__}"
        raise msgspec.ValidationError(msg)
    while version < current:
        step = UPCASTERS.get((tag, version))
        if step is None:
            msg = f"no upcaster registered for {tag} v{version} -> v{version + 1}"
            raise msgspec.ValidationError(msg)
        try:
            payload = step(payload)
        except Exception as e:
            msg = f"the upcaster {tag} v{version} -> v{version + 1} failed: {e!r}"
            raise UpcastError(msg) from e
        version += 1
    return msgspec.convert(payload, TYPES[tag])
