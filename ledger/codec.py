"""Encoding events into stored rows and back: our msgspec Mapper for eventsourcing.

A stored row is ``(originator_id, originator_version, topic, state)`` in the
library's recorders. We store:

- ``topic``: the event's stable tag (``turn.started``), so the database can filter
  by type;
- ``state``: a frame ``header | body``. The 12-byte header is always in clear:
  frame format (1 byte), flags (1 byte, bit 0 = body encrypted), the event's schema
  version (uint16) and the recorded time in microseconds since the epoch (int64),
  all big-endian. The body is the event as msgspec JSON, encrypted with the
  library's cipher plug when one is configured. The envelope therefore stays
  readable when payloads are encrypted.

The codec encodes frame format 1; the backends store it as format 2, with the hash
chain tail between header and body (``ledger.chain``). Both decode.

This module is the mapper: encoding (validated, one plan per type) and the
library's decode entry points. The frame layout and clock are in
``ledger.frame``; the registry of tags, decoders and upcasters (built once per
event type, house style R5) in ``ledger.events.registry``; decoding a frame
(older schema versions decoded untyped, upcast, then converted) in
``ledger.frame_decode``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, cast
from uuid import UUID

import msgspec
from eventsourcing.persistence import (
    Cipher,
    Mapper,
    StoredEvent,
    Transcoder,
)

from turnledger.ledger.backend import EncodedRow
from turnledger.ledger.errors import QUOTED_CHARS, InvalidEventError, quote_value
from turnledger.ledger.events import Event, tag_of
from turnledger.ledger.events.registry import DECODERS, PLANS, TYPES, fast_decoders
from turnledger.ledger.frame import (
    FLAG_ENCRYPTED,
    FLAG_SEALED,
    FRAME_FORMAT,
    HEADER,
    PREFIX,
    TIME,
)
from turnledger.ledger.frame_decode import Opener, decode_frame

__all__ = [
    "DecodedEvent",
    "MsgspecMapper",
    "MsgspecTranscoder",
    "PendingEvent",
    "describe_row",
]

_ENCODER: Final = msgspec.json.Encoder()
_UNTYPED: Final = msgspec.json.Decoder()


class PendingEvent:
    """An event on its way into the store: what the library calls a domain event."""

    __slots__ = ("event", "originator_id", "originator_version", "recorded_at_us")

    def __init__(
        self, originator_id: UUID, originator_version: int, event: Event, at_us: int
    ) -> None:
        self.originator_id = originator_id
        self.originator_version = originator_version
        self.event = event
        self.recorded_at_us = at_us


class DecodedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A stored row decoded: its envelope fields and the event."""

    originator_id: UUID
    originator_version: int
    recorded_at: datetime
    event: Event


class MsgspecTranscoder(Transcoder):
    """The library's transcoder slot, filled with untyped msgspec JSON."""

    def encode(self, obj: Any) -> bytes:
        """Encode a JSON-compatible value."""
        return _ENCODER.encode(obj)

    def decode(self, data: bytes) -> Any:
        """Decode JSON bytes into plain values."""
        return _UNTYPED.decode(data)


class MsgspecMapper(Mapper[UUID]):
    """Maps ledger events to the library's stored events and back.

    The stock mapper calls ``vars(event)`` and rebuilds events through
    ``__dict__``; both fail on msgspec Structs, hence this class. The cipher slot is
    the library's (e.g. ``eventsourcing.cryptography:AESCipher``).
    """

    FRAME_FORMAT: ClassVar[int] = FRAME_FORMAT

    def __init__(self, cipher: Cipher | None = None) -> None:
        super().__init__(transcoder=MsgspecTranscoder(), cipher=cipher)
        self.opener: Opener | None = None
        """Opens bodies sealed under a subject's data key (``ledger.erasable``)."""
        self.openers: Callable[[], Opener] | None = None
        """Returns an opener for one read call: the erasure key store is
        checked for destroyed keys once, when it is made, and each data key it
        opens with is looked up once (``ledger.row_decode.decode_rows``)."""

    def encode_body(self, event: Event) -> bytes:
        """Encode and validate an event's payload.

        Raises:
            InvalidEventError: The event fails its type's schema (wrong type, range,
                unknown tag); the message names the field, expected and found.
        """
        event_type = type(event)
        tag = tag_of(event_type)
        if TYPES.get(tag) is not event_type:
            msg = f"Expected a registered ledger event, found {event_type.__qualname__}"
            raise InvalidEventError(msg)
        try:
            body = _ENCODER.encode(event)
            DECODERS[tag].decode(body)
        except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as e:
            raise _invalid(event, tag, e) from e
        except (UnicodeEncodeError, RecursionError) as e:
            raise _unencodable(event, tag, e) from None
        return body

    def fast_decoders(self) -> dict[str, tuple[bytes, msgspec.json.Decoder[Any]]]:
        """Per tag: the clear prefix of its current version, and its decoder.

        See :func:`ledger.events.registry.fast_decoders`.
        """
        return fast_decoders()

    def encode_rows(
        self,
        events: Sequence[Event],
        first_version: int,
        at_us: int,
        seal: Callable[[Event, bytes], bytes | None] | None = None,
    ) -> list[EncodedRow]:
        """Validate and encode events as consecutive rows (the store's fast path).

        The same frames as :meth:`to_stored_event` (each row's ``header`` and
        ``body`` apart; ``state`` joins them), without building the library's
        intermediate objects: each type's tag, header prefix and validating
        decoder come from a table built when it was registered. ``seal`` (the
        store's :class:`~ledger.erasable.Sealer` plan) seals the bodies of an
        erasable subject under its data key, before the cipher encrypts them.

        Raises:
            InvalidEventError: An event fails its type's schema.
        """
        rows: list[EncodedRow] = []
        append = rows.append
        cipher = self.cipher
        clear = cipher is None
        encode = _ENCODER.encode
        plans = PLANS
        at = TIME.pack(at_us)
        make = tuple.__new__
        version = first_version
        for event in events:
            plan = plans.get(type(event))
            if plan is None:
                msg = (
                    "Expected a registered ledger event, found "
                    f"{type(event).__qualname__}"
                )
                raise InvalidEventError(msg)
            try:
                body = encode(event)
                plan[3](body)
            except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as e:
                raise _invalid(event, plan[0], e) from e
            except (UnicodeEncodeError, RecursionError) as e:
                raise _unencodable(event, plan[0], e) from None
            if seal is not None and (sealed := seal(event, body)) is not None:
                flags = FLAG_SEALED
                if not clear:
                    sealed = cipher.encrypt(sealed)  # type: ignore[union-attr]
                    flags |= FLAG_ENCRYPTED
                head = PREFIX.pack(FRAME_FORMAT, flags, type(event).SCHEMA_VERSION)
                append(make(EncodedRow, (version, plan[0], head + at, sealed)))
            elif clear:
                append(make(EncodedRow, (version, plan[0], plan[1] + at, body)))
            else:
                stored = cipher.encrypt(body)  # type: ignore[union-attr]
                append(make(EncodedRow, (version, plan[0], plan[2] + at, stored)))
            version += 1
        return rows

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """Convert a :class:`PendingEvent` into a stored event (validated)."""
        pending = cast("PendingEvent", domain_event)
        event = pending.event
        body = self.encode_body(event)
        flags = 0
        if self.cipher is not None:
            body = self.cipher.encrypt(body)
            flags |= FLAG_ENCRYPTED
        header = HEADER.pack(
            FRAME_FORMAT, flags, type(event).SCHEMA_VERSION, pending.recorded_at_us
        )
        return StoredEvent(
            originator_id=pending.originator_id,
            originator_version=pending.originator_version,
            topic=tag_of(type(event)),
            state=header + body,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """Convert a stored event into a :class:`DecodedEvent`.

        Raises:
            UnknownEventTypeError: The tag or schema version is not known here.
            CorruptRecordError: The frame or body does not decode.
        """
        return self.decode(stored_event, where=_where(stored_event))

    def decode(self, stored_event: StoredEvent, *, where: str) -> DecodedEvent:
        """Decode a stored event; ``where`` names the row in error messages."""
        recorded_at, event = self.decode_frame(
            stored_event.topic, stored_event.state, lambda: where
        )
        return DecodedEvent(
            originator_id=_as_uuid(stored_event.originator_id),
            originator_version=stored_event.originator_version,
            recorded_at=recorded_at,
            event=event,
        )

    def decode_frame(
        self, topic: str, state: bytes, where: Callable[[], str]
    ) -> tuple[datetime, Event]:
        """Decode a row's ``(topic, state)`` into its recorded time and event.

        See :func:`ledger.frame_decode.decode_frame` (with this mapper's cipher).

        Raises:
            UnknownEventTypeError: The tag or schema version is not known here.
            CorruptRecordError: The frame or body does not decode.
        """
        return decode_frame(self.cipher, topic, state, where, self.opener)


_SEARCHED: Final = 10_000
"""The most values of an invalid event searched for the one its error quotes."""


def _invalid(event: Event, tag: str, error: Exception) -> InvalidEventError:
    """The typed error for an event that fails its schema, quoting values bounded.

    msgspec quotes an offending text whole (``Invalid enum value 'aaaa...'``);
    each text of the event longer than :data:`~ledger.errors.QUOTED_CHARS`
    whose ``repr`` the message holds is replaced by its bounded quote.
    """
    text = str(error)
    if len(text) > QUOTED_CHARS:
        stack: list[object] = [event]
        seen = 0
        while stack and seen < _SEARCHED:
            value = stack.pop()
            seen += 1
            if isinstance(value, str):
                if len(value) > QUOTED_CHARS and (found := repr(value)) in text:
                    text = text.replace(found, quote_value(value))
            elif isinstance(value, msgspec.Struct):
                stack.extend(getattr(value, f) for f in value.__struct_fields__)
            elif isinstance(value, (list, tuple)):
                stack.extend(value)
            elif isinstance(value, dict):
                stack.extend(value)
                stack.extend(value.values())
    return InvalidEventError(f"Invalid {type(event).__name__} ({tag}): {text}")


def _unencodable(
    event: Event, tag: str, error: UnicodeEncodeError | RecursionError
) -> InvalidEventError:
    """The typed error for text UTF-8 cannot hold or nesting too deep (#17)."""
    from turnledger.ledger import unencodable  # noqa: PLC0415 - only on this error path

    if isinstance(error, UnicodeEncodeError):
        problem = unencodable.unencodable_text(event, error)
    else:
        problem = unencodable.too_deep(event)
    return InvalidEventError(f"Invalid {type(event).__name__} ({tag}): {problem}")


def _as_uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def _where(stored_event: StoredEvent) -> str:
    position = getattr(stored_event, "id", None)
    base = (
        f"stream {stored_event.originator_id} version {stored_event.originator_version}"
    )
    return base if position is None else f"position {position} ({base})"


def describe_row(stored_event: StoredEvent) -> str:
    """Return the words that name a stored row in error messages."""
    return _where(stored_event)
