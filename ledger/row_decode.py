"""Decoding stored rows into :class:`~ledger.envelope.Recorded` envelopes.

The store's read path: :func:`decode_row` decodes one row through the mapper
(every typed, located error comes from there), and :func:`decode_rows` is the
replay hot path, which decodes clear frames of current schema versions with one
typed decode over the body and falls back to :func:`decode_row` for anything
else.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from turnledger.ledger.backend import StoredRow
from turnledger.ledger.chain import BODY_OFFSET
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, LedgerEvent
from turnledger.ledger.frame import FLAG_KEYED, HEADER_SIZE, datetime_from_us


def decode_rows(mapper: MsgspecMapper, rows: Sequence[StoredRow]) -> list[Recorded]:
    """Decode rows in order (the replay hot path).

    Clear frames of current schema versions (with no flag, or only
    :data:`~ledger.frame.FLAG_KEYED`) take a fast path (one typed
    decode over a view of the body, recorded times shared within an
    append); anything else, and every error, goes through :func:`decode_row`.
    """
    if mapper.cipher is not None:
        return [decode_row(mapper, row) for row in rows]
    fast = mapper.fast_decoders()
    out: list[Recorded] = []
    append = out.append
    last_at = b""
    recorded_at = datetime_from_us(0)
    for row in rows:
        state = row.state
        decoder = fast.get(row.topic)
        if (
            decoder is None
            or len(state) < BODY_OFFSET
            or not (
                state.startswith(decoder[0])
                # The last row of a keyed append: the same, with FLAG_KEYED set.
                or (
                    state[1] == FLAG_KEYED
                    and state[0] == decoder[0][0]
                    and state[2:4] == decoder[0][2:4]
                )
            )
        ):
            append(decode_row(mapper, row))
            continue
        at = state[4:HEADER_SIZE]
        if at != last_at:
            try:
                recorded_at = datetime_from_us(int.from_bytes(at, "big", signed=True))
            except OverflowError:
                append(decode_row(mapper, row))  # raises the typed, located error
                continue
            last_at = at
        try:
            event = decoder[1].decode(state[BODY_OFFSET:])
        except (msgspec.DecodeError, msgspec.ValidationError):
            append(decode_row(mapper, row))  # raises the typed, located error
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
