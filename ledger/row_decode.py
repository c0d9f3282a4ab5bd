"""Decoding stored rows into :class:`~ledger.envelope.Recorded` envelopes.

The store's read path: :func:`decode_row` decodes one row through the mapper
(every typed, located error comes from there), and :func:`decode_rows` is the
replay hot path, which decodes frames of current schema versions with one typed
decode over the body (decrypted and opened first when encrypted or sealed) and
falls back to :func:`~ledger.frame_decode.decode_frame` for anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

import msgspec

from turnledger.ledger.backend import StoredRow
from turnledger.ledger.chain import BODY_OFFSET
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, LedgerEvent
from turnledger.ledger.events.erasure import Erased
from turnledger.ledger.frame import (
    FLAG_ENCRYPTED,
    FLAG_KEYED,
    FLAG_SEALED,
    HEADER_SIZE,
    datetime_from_us,
)
from turnledger.ledger.frame_decode import Opener, decode_frame, open_sealed

_BODY_FLAGS: Final = 0xFF & ~FLAG_KEYED
"""Header flags that say how the body is stored (all but FLAG_KEYED)."""

_SLOW: Final = 0xFF & ~(FLAG_KEYED | FLAG_ENCRYPTED | FLAG_SEALED)
"""Header flags this fast path does not know: such rows are decoded the long way."""


def decode_rows(  # noqa: C901 - the hot path, one loop
    mapper: MsgspecMapper, rows: Sequence[StoredRow]
) -> list[Recorded]:
    """Decode rows in order (the replay hot path).

    Frames of current schema versions take a fast path: one typed decode over
    the body, recorded times shared within an append. An encrypted body is
    decrypted first, and a sealed one opened (``ledger.erasable``) through the
    mapper's opener for one read call (:attr:`~ledger.codec.MsgspecMapper.openers`),
    so the erasure key store is asked once per call, and once per data key, not
    per row; a row whose key was destroyed reads as
    :class:`~ledger.events.erasure.Erased`. Anything else, and every error,
    goes through :func:`decode_frame`, which raises the typed, located error.
    """
    fast = mapper.fast_decoders()
    cipher = mapper.cipher
    opener: Opener | None = None
    out: list[Recorded] = []
    append = out.append
    last_at = b""
    recorded_at = datetime_from_us(0)
    for row in rows:
        state = row.state
        decoder = fast.get(row.topic)
        flags = state[1] & _BODY_FLAGS if len(state) >= BODY_OFFSET else _SLOW
        if (
            decoder is None
            or flags & _SLOW
            or state[0] != decoder[0][0]
            or state[2:4] != decoder[0][2:4]
            or (flags & FLAG_ENCRYPTED and cipher is None)
        ):
            if flags & FLAG_SEALED and opener is None:
                opener = _opener(mapper)
            append(_slow(mapper, row, opener))
            continue
        at = state[4:HEADER_SIZE]
        if at != last_at:
            try:
                recorded_at = datetime_from_us(int.from_bytes(at, "big", signed=True))
            except OverflowError:
                append(_slow(mapper, row, opener))  # raises the typed, located error
                continue
            last_at = at
        body = state[BODY_OFFSET:]
        if flags:
            if flags & FLAG_ENCRYPTED:
                try:
                    body = cipher.decrypt(body)  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - decode_frame names it
                    append(_slow(mapper, row, opener))  # raises the typed error
                    continue
            if flags & FLAG_SEALED:
                if opener is None:
                    opener = _opener(mapper)
                opened = open_sealed(opener, body, partial(_where, row))
                if opened is None:
                    append(
                        Recorded(
                            stream_id=row.stream_id,
                            version=row.version,
                            position=row.position,
                            recorded_at=recorded_at,
                            event=_as_ledger_event(Erased(original_type=row.topic)),
                        )
                    )
                    continue
                body = opened
        try:
            event = decoder[1].decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            append(_slow(mapper, row, opener))  # raises the typed, located error
            continue
        append(
            Recorded(
                stream_id=row.stream_id,
                version=row.version,
                position=row.position,
                recorded_at=recorded_at,
                event=event,
            )
        )
    return out


def _opener(mapper: MsgspecMapper) -> Opener | None:
    """The opener of one read call (``None``: the ledger has no key store open)."""
    return None if mapper.openers is None else mapper.openers()


def _slow(mapper: MsgspecMapper, row: StoredRow, opener: Opener | None) -> Recorded:
    """Decode one row through :func:`decode_frame` (the read call's opener)."""
    recorded_at, event = decode_frame(
        mapper.cipher, row.topic, row.state, lambda: _where(row), opener
    )
    return Recorded(
        stream_id=row.stream_id,
        version=row.version,
        position=row.position,
        recorded_at=recorded_at,
        event=_as_ledger_event(event),
    )


def decode_row(mapper: MsgspecMapper, row: StoredRow) -> Recorded:
    """Decode one raw row into its envelope and event.

    Raises:
        CorruptRecordError: The row does not decode; the message names its
            position and what was expected.
        UnknownEventTypeError: The row's type is not known to this code.
    """
    recorded_at, event = mapper.decode_frame(row.topic, row.state, lambda: _where(row))
    return Recorded(
        stream_id=row.stream_id,
        version=row.version,
        position=row.position,
        recorded_at=recorded_at,
        event=_as_ledger_event(event),
    )


def _where(row: StoredRow) -> str:
    return f"position {row.position} (stream {row.stream_id} version {row.version})"


def _as_ledger_event(event: Event) -> LedgerEvent:
    return event  # type: ignore[return-value]
