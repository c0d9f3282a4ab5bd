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

Decoders are built once per event type (house style R5). Older schema versions are
decoded untyped, passed through the registered upcasters, then converted.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
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
from turnledger.ledger.chain import BODY_OFFSET, CHAIN_FORMAT
from turnledger.ledger.errors import (
    CorruptRecordError,
    InvalidEventError,
    UnknownEventTypeError,
)
from turnledger.ledger.events import EVENT_TYPES, Event, tag_of

FRAME_FORMAT: Final = 1
FLAG_ENCRYPTED: Final = 0b1
_HEADER: Final = struct.Struct(">BBHq")
HEADER_SIZE: Final = _HEADER.size
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""A pure function from a version-N payload dict to a version-N+1 payload dict."""

_TYPES: dict[str, type[Event]] = {}
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
# Per registered type: its tag, the first 4 header bytes (format, flags, schema
# version) in clear and encrypted, and its validating decode.
_PLANS: dict[type[Event], tuple[str, bytes, bytes, Callable[[bytes], Any]]] = {}
_PREFIX: Final = struct.Struct(">BBH")
_FAST: dict[str, tuple[bytes, msgspec.json.Decoder[Any]]] = {}
_TIME: Final = struct.Struct(">q")
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}
_ENCODER: Final = msgspec.json.Encoder()
_UNTYPED: Final = msgspec.json.Decoder()


def register_event_type(event_type: type[Event]) -> None:
    """Make an event type known to the codec, by its stable tag.

    Raises:
        ValueError: Another type already holds that tag.
    """
    tag = tag_of(event_type)
    known = _TYPES.get(tag)
    if known is not None and known is not event_type:
        msg = f"Tag {tag!r} is already held by {known.__qualname__}"
        raise ValueError(msg)
    _TYPES[tag] = event_type
    decoder = _DECODERS[tag] = msgspec.json.Decoder(event_type)
    version = event_type.SCHEMA_VERSION
    _PLANS[event_type] = (
        tag,
        _PREFIX.pack(FRAME_FORMAT, 0, version),
        _PREFIX.pack(FRAME_FORMAT, FLAG_ENCRYPTED, version),
        decoder.decode,
    )


def register_upcaster(tag: str, from_version: int, upcaster: Upcaster) -> None:
    """Register the pure step lifting ``tag`` payloads from a version to the next."""
    _UPCASTERS[(tag, from_version)] = upcaster


for _event_type in EVENT_TYPES:
    register_event_type(_event_type)


def known_tags() -> tuple[str, ...]:
    """Return every registered tag, sorted."""
    return tuple(sorted(_TYPES))


def type_for_tag(tag: str) -> type[Event]:
    """Return the event type stored under ``tag``.

    Raises:
        UnknownEventTypeError: No type holds that tag.
    """
    try:
        return _TYPES[tag]
    except KeyError:
        msg = f"Expected one of the known event tags, found {tag!r}"
        raise UnknownEventTypeError(msg) from None


def now_us() -> int:
    """Return the current time in whole microseconds since the epoch (UTC)."""
    return time.time_ns() // 1_000


def datetime_from_us(micros: int) -> datetime:
    """Return the UTC datetime of a microsecond timestamp."""
    return _EPOCH + timedelta(microseconds=micros)


class UpcastError(Exception):
    """An upcaster could not lift a stored payload (reported as a corrupt record)."""


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

    def encode_body(self, event: Event) -> bytes:
        """Encode and validate an event's payload.

        Raises:
            InvalidEventError: The event fails its type's schema (wrong type, range,
                unknown tag); the message names the field, expected and found.
        """
        event_type = type(event)
        tag = tag_of(event_type)
        if _TYPES.get(tag) is not event_type:
            msg = f"Expected a registered ledger event, found {event_type.__qualname__}"
            raise InvalidEventError(msg)
        try:
            body = _ENCODER.encode(event)
            _DECODERS[tag].decode(body)
        except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as e:
            msg = f"Invalid {event_type.__name__} ({tag}): {e}"
            raise InvalidEventError(msg) from e
        except (UnicodeEncodeError, RecursionError) as e:
            raise _unencodable(event, tag, e) from None
        return body

    def fast_decoders(self) -> dict[str, tuple[bytes, msgspec.json.Decoder[Any]]]:
        """Per tag: the clear header prefix of its current version, and its decoder.

        A row whose first four header bytes equal the prefix (chained frame
        format, no flags, current schema version) can be decoded directly from
        ``BODY_OFFSET``.
        """
        if len(_FAST) != len(_DECODERS):  # built again after a registration
            _FAST.clear()
            _FAST.update(
                (tag, (_PREFIX.pack(CHAIN_FORMAT, 0, _TYPES[tag].SCHEMA_VERSION), dec))
                for tag, dec in _DECODERS.items()
            )
        return _FAST

    def encode_rows(
        self, events: Sequence[Event], first_version: int, at_us: int
    ) -> list[EncodedRow]:
        """Validate and encode events as consecutive rows (the store's fast path).

        The same frames as :meth:`to_stored_event`, without building the
        library's intermediate objects: each type's tag, header prefix and
        validating decoder come from a table built when it was registered.

        Raises:
            InvalidEventError: An event fails its type's schema.
        """
        rows: list[EncodedRow] = []
        append = rows.append
        cipher = self.cipher
        clear = cipher is None
        encode = _ENCODER.encode
        plans = _PLANS
        at = _TIME.pack(at_us)
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
                msg = f"Invalid {type(event).__name__} ({plan[0]}): {e}"
                raise InvalidEventError(msg) from e
            except (UnicodeEncodeError, RecursionError) as e:
                raise _unencodable(event, plan[0], e) from None
            if clear:
                state = plan[1] + at + body
            else:
                state = plan[2] + at + cipher.encrypt(body)  # type: ignore[union-attr]
            append(make(EncodedRow, (version, plan[0], state)))
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
        header = _HEADER.pack(
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

        Args:
            topic: The stored tag.
            state: The stored frame.
            where: Names the row in error messages (called only on error).

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
        frame, flags, version, at_us = _HEADER.unpack_from(state)
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
            body = self._decrypt(state[start:], where)
        else:
            body = state[start:]
        try:
            recorded_at = datetime_from_us(at_us)
        except OverflowError:
            msg = (
                f"Corrupt record at {where()}: expected a recorded time before "
                f"year 10000, found {at_us} microseconds"
            )
            raise CorruptRecordError(msg) from None
        return recorded_at, self._decode_event(topic, version, body, where)

    def _decrypt(self, body: bytes, where: Callable[[], str]) -> bytes:
        if self.cipher is None:
            msg = (
                f"Encrypted record at {where()}: expected a cipher key "
                "(TURNLEDGER_CIPHER_KEY), found none configured"
            )
            raise CorruptRecordError(msg)
        try:
            return self.cipher.decrypt(body)
        except Exception as e:
            msg = f"Corrupt record at {where()}: the body does not decrypt ({e})"
            raise CorruptRecordError(msg) from e

    def _decode_event(
        self, tag: str, version: int, body: bytes, where: Callable[[], str]
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
                return cast("Event", _DECODERS[tag].decode(body))
            return self._upcast(tag, version, current, body)
        except (msgspec.DecodeError, msgspec.ValidationError, UpcastError) as e:
            msg = f"Corrupt record at {where()}: expected a valid {tag} event, {e}"
            raise CorruptRecordError(msg) from e

    def _upcast(self, tag: str, version: int, current: int, body: bytes) -> Event:
        payload = _UNTYPED.decode(body)
        if not isinstance(payload, dict):
            msg = f"Expected a JSON object, found {type(payload).__name__}"
            raise msgspec.ValidationError(msg)
        while version < current:
            step = _UPCASTERS.get((tag, version))
            if step is None:
                msg = f"no upcaster registered for {tag} v{version} -> v{version + 1}"
                raise msgspec.ValidationError(msg)
            try:
                payload = step(payload)
            except Exception as e:
                msg = f"the upcaster {tag} v{version} -> v{version + 1} failed: {e!r}"
                raise UpcastError(msg) from e
            version += 1
        return msgspec.convert(payload, _TYPES[tag])


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
