"""Tamper evidence: the hash chain every stored row carries, and signed seals.

A chained row's ``state`` is the codec's frame with frame format 2 and a 72-byte
chain tail between the 12-byte header and the body::

    header (12) | position (int64) | prev (16) | body digest (16) | link (32) | body

- ``link`` is SHA-256 over a domain tag, ``prev``, the envelope (stream id,
  version, position, type tag) and the header, and the SHA-256 of the body;
- ``prev`` is the first 16 bytes of the link of the stream's previous version
  (zeros for version 1), so every link pins the whole stream before it;
- ``body digest`` is the first 16 bytes of the body's SHA-256, so ``verify`` can
  tell an edited payload from an edited envelope;
- ``position`` is the row's global position as written, so a moved row shows.

Rows written before the chain existed (frame format 1) are *pre-chain*: they carry
no link; ``verify`` and ``seal`` compute the same link over them (the whole stored
frame as body), so a seal covers them too.

SHA-256 is unkeyed: someone who can write the database and knows this layout can
rewrite a stream's chain consistently. What pins history against that is a
**seal**: a record of every stream's head (version and link) and the last
position, authenticated with HMAC-SHA256 when a seal key is set
(``TURNLEDGER_SEAL_KEY``). Without a key a seal is a plain checksum that such a
writer could rewrite as well.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable
from typing import Final, NamedTuple, Protocol, TypeVar
from uuid import UUID

import msgspec

CHAIN_FORMAT: Final = 2
"""The frame format byte of a chained row."""

HEADER_SIZE: Final = 12
_TAIL: Final = struct.Struct(">q16s16s32s")
TAIL_SIZE: Final = _TAIL.size
BODY_OFFSET: Final = HEADER_SIZE + TAIL_SIZE
"""Where a chained row's body starts in its state."""

LINK_OFFSET: Final = HEADER_SIZE + 8 + 16 + 16
"""Where a chained row's link starts in its state."""

GENESIS: Final = bytes(16)
"""The ``prev`` of a stream's first version."""

SEAL_KEY_ENV: Final = "TURNLEDGER_SEAL_KEY"
"""The environment variable holding the HMAC key that signs seals."""

_DOMAIN: Final = b"turnledger-chain-v1\x00"
_CHAINED: Final = bytes((CHAIN_FORMAT,))
_TAGS: dict[str, bytes] = {}
_sha256: Final = hashlib.sha256
_ENVELOPE: Final = struct.Struct(">qqH")
_C = TypeVar("_C")


class Chained(NamedTuple):
    """A chained row's parts."""

    header: bytes
    position: int
    prev: bytes
    body_digest: bytes
    link: bytes
    body: bytes


def link_of(
    prev: bytes,
    stream_id: UUID,
    *,
    version: int,
    position: int,
    topic: str,
    header: bytes,
    body_sha: bytes,
) -> bytes:
    """Return the SHA-256 link of a row (``prev`` is 16 bytes, ``body_sha`` 32)."""
    tag = topic.encode()
    return hashlib.sha256(
        b"".join(
            (
                _DOMAIN,
                prev,
                stream_id.bytes,
                _ENVELOPE.pack(version, position, len(tag)),
                tag,
                header,
                body_sha,
            )
        )
    ).digest()


def chain_state(
    frame: bytes,
    stream_id: UUID,
    *,
    version: int,
    position: int,
    topic: str,
    prev: bytes,
) -> tuple[bytes, bytes]:
    """Turn a codec frame (format 1) into a chained row state.

    Args:
        frame: ``header | body`` as the codec encoded it.
        stream_id: The row's stream.
        version: Its version.
        position: Its global position.
        topic: Its type tag.
        prev: The first 16 bytes of the previous version's link.

    Returns:
        The state to store and the row's link.
    """
    # The hot path of every append: the same bytes as ``link_of``, fewer copies.
    header = _CHAINED + frame[1:HEADER_SIZE]
    body = memoryview(frame)[HEADER_SIZE:]
    body_sha = _sha256(body).digest()
    tag = _TAGS.get(topic)
    if tag is None:
        tag = _TAGS.setdefault(topic, topic.encode())
    link = _sha256(
        b"".join(
            (
                _DOMAIN,
                prev,
                stream_id.bytes,
                _ENVELOPE.pack(version, position, len(tag)),
                tag,
                header,
                body_sha,
            )
        )
    ).digest()
    tail = _TAIL.pack(position, prev, body_sha[:16], link)
    return b"".join((header, tail, body)), link


class _Parts(Protocol):
    """A codec row: its version, type tag and frame (format 1) in two parts."""

    @property
    def originator_version(self) -> int: ...

    @property
    def topic(self) -> str: ...

    @property
    def header(self) -> bytes: ...

    @property
    def body(self) -> bytes: ...


def chain_rows(
    frames: Iterable[_Parts],
    stream_id: UUID,
    stream_column: _C,
    first_position: int,
    prev: bytes,
) -> tuple[list[tuple[int, _C, int, str, bytes]], bytes]:
    """Chain consecutive rows of one stream (the append hot path).

    The same states and links as :func:`chain_state` called row by row (on
    ``header + body``) at positions ``first_position``, ``first_position + 1``,
    ...; with the per-row lookups hoisted out of the loop, and no frame sliced.

    Args:
        frames: The rows, in version order: each frame's 12-byte ``header`` and
            its ``body`` apart (``ledger.backend.EncodedRow``).
        stream_id: Their stream.
        stream_column: The stream as the caller's database stores it.
        first_position: The global position of the first row.
        prev: The first 16 bytes of the link before the first row.

    Returns:
        ``(position, stream_column, version, topic, state)`` per row, and the
        ``prev`` of the row after the last.
    """
    sid = stream_id.bytes
    sha = _sha256
    pack_envelope = _ENVELOPE.pack
    pack_tail = _TAIL.pack
    tags = _TAGS
    join = b"".join
    out: list[tuple[int, _C, int, str, bytes]] = []
    append = out.append
    position = first_position
    for row in frames:
        body = row.body
        topic = row.topic
        version = row.originator_version
        header = _CHAINED + row.header[1:]
        body_sha = sha(body).digest()
        tag = tags.get(topic)
        if tag is None:
            tag = tags.setdefault(topic, topic.encode())
        link = sha(
            join(
                (
                    _DOMAIN,
                    prev,
                    sid,
                    pack_envelope(version, position, len(tag)),
                    tag,
                    header,
                    body_sha,
                )
            )
        ).digest()
        state = join((header, pack_tail(position, prev, body_sha[:16], link), body))
        append((position, stream_column, version, topic, state))
        prev = link[:16]
        position += 1
    return out, prev


def parse_chained(state: bytes) -> Chained | None:
    """Return a chained row's parts, or ``None`` for a pre-chain (or foreign) row."""
    if len(state) < BODY_OFFSET or state[0] != CHAIN_FORMAT:
        return None
    position, prev, body_digest, link = _TAIL.unpack_from(state, HEADER_SIZE)
    return Chained(
        state[:HEADER_SIZE], position, prev, body_digest, link, state[BODY_OFFSET:]
    )


def prechain_link(
    prev: bytes,
    stream_id: UUID,
    *,
    version: int,
    position: int,
    topic: str,
    state: bytes,
) -> bytes:
    """Return the link computed over a row that carries none (pre-chain)."""
    return link_of(
        prev,
        stream_id,
        version=version,
        position=position,
        topic=topic,
        header=b"",
        body_sha=hashlib.sha256(state).digest(),
    )


def head_link(
    rows: list[tuple[int, int, str, bytes]], stream_id: UUID
) -> tuple[int, bytes]:
    """Return a stream's head version and link from its rows, in version order.

    ``rows`` are ``(position, version, topic, state)``. Chained rows contribute
    their stored link; pre-chain rows the link computed over them.
    """
    prev = GENESIS
    link = bytes(32)
    version = 0
    for position, version, topic, state in rows:
        chained = parse_chained(state)
        if chained is not None:
            link = chained.link
        else:
            link = prechain_link(
                prev,
                stream_id,
                version=version,
                position=position,
                topic=topic,
                state=state,
            )
        prev = link[:16]
    return version, link


class SealBody(msgspec.Struct, frozen=True, kw_only=True):
    """What a seal records: the last position, every stream's head, its place.

    Seals form a chain of their own: each records its index (1, 2, ...) and the
    digest of the seal before it (:func:`seal_digest`), so a seal deleted,
    edited or re-inserted out of order shows. Seals written before the chain
    have index 0 and none of the last four fields.

    Attributes:
        position: The last position when sealed.
        sealed_at_us: When (microseconds since the epoch, UTC).
        heads: Per stream (hex id): ``[version, link hex, position]``.
        index: The seal's place in the chain (0: a seal from before the chain).
        prev: The digest of the seal before it (``""`` for the first).
        appends: How many idempotency records cover rows up to ``position``.
        appends_digest: The SHA-256 (hex) over those records (:func:`records_digest`).
    """

    position: int
    sealed_at_us: int
    heads: dict[str, tuple[int, str, int]]
    index: int = 0
    prev: str = ""
    appends: int = 0
    appends_digest: str = ""


class AppendRecord(NamedTuple):
    """An idempotency record: the key, the stream and what its append wrote."""

    key: str
    stream_id: UUID
    first_version: int
    last_version: int
    positions: tuple[int, ...]


def seal_digest(body: bytes) -> str:
    """Return the hex SHA-256 of a stored seal body (what the next seal chains from)."""
    return hashlib.sha256(body).hexdigest()


def records_digest(records: Iterable[AppendRecord]) -> tuple[int, str]:
    """Return how many idempotency records there are and a SHA-256 over them.

    Order-independent: the records are sorted by key first.
    """
    ordered = sorted(records)
    encoded = _SEAL_ENCODER.encode(
        [
            (r.key, r.stream_id.hex, r.first_version, r.last_version, r.positions)
            for r in ordered
        ]
    )
    return len(ordered), hashlib.sha256(encoded).hexdigest()


class Seal(NamedTuple):
    """A stored seal: its id, its body bytes and their MAC (empty when unsigned)."""

    seal_id: int
    body: bytes
    mac: str


def sign(body: bytes, key: str | None) -> str:
    """Return the hex HMAC-SHA256 of a seal body, or ``""`` without a key."""
    if not key:
        return ""
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def mac_matches(body: bytes, mac: str, key: str) -> bool:
    """Whether ``mac`` authenticates ``body`` under ``key`` (constant time)."""
    return hmac.compare_digest(sign(body, key), mac)


_SEAL_DECODER: Final = msgspec.json.Decoder(SealBody)
_SEAL_ENCODER: Final = msgspec.json.Encoder()


def encode_seal(body: SealBody) -> bytes:
    """Return a seal body's stored bytes."""
    return _SEAL_ENCODER.encode(body)


def decode_seal(data: bytes) -> SealBody | None:
    """Return a stored seal body, or ``None`` when it does not decode."""
    try:
        return _SEAL_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
