"""The codec's registry: which event type each stored tag names, and its upcasters.

Decoders and encode plans are built once per event type, when it is registered
(house style R5); every type of the catalogue (``EVENT_TYPES``) is registered on
import. Older schema versions are lifted by the pure upcasters registered here.
The tables below are filled only by :func:`register_event_type` and
:func:`register_upcaster`; the codec and the frame decoder read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnledger.ledger.chain import CHAIN_FORMAT
from turnledger.ledger.errors import UnknownEventTypeError
from turnledger.ledger.events import EVENT_TYPES, Event, tag_of
from turnledger.ledger.frame import FLAG_ENCRYPTED, FRAME_FORMAT, PREFIX

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""A pure function from a version-N payload dict to a version-N+1 payload dict."""

TYPES: dict[str, type[Event]] = {}
"""Per tag: its registered event type."""

DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
"""Per tag: the validating decoder of its current schema version."""

PLANS: dict[type[Event], tuple[str, bytes, bytes, Callable[[bytes], Any]]] = {}
"""Per registered type: its tag, the first 4 header bytes (format, flags, schema
version) in clear and encrypted, and its validating decode."""

UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""Per (tag, version): the step lifting a payload to the next version."""

_FAST: dict[str, tuple[bytes, msgspec.json.Decoder[Any]]] = {}


def register_event_type(event_type: type[Event]) -> None:
    """Make an event type known to the codec, by its stable tag.

    Raises:
        ValueError: Another type already holds that tag.
    """
    tag = tag_of(event_type)
    known = TYPES.get(tag)
    if known is not None and known is not event_type:
        msg = f"Tag {tag!r} is already held by {known.__qualname__}"
        raise ValueError(msg)
    TYPES[tag] = event_type
    decoder = DECODERS[tag] = msgspec.json.Decoder(event_type)
    version = event_type.SCHEMA_VERSION
    PLANS[event_type] = (
        tag,
        PREFIX.pack(FRAME_FORMAT, 0, version),
        PREFIX.pack(FRAME_FORMAT, FLAG_ENCRYPTED, version),
        decoder.decode,
    )


def register_upcaster(tag: str, from_version: int, upcaster: Upcaster) -> None:
    """Register the pure step lifting ``tag`` payloads from a version to the next."""
    UPCASTERS[(tag, from_version)] = upcaster


for _event_type in EVENT_TYPES:
    register_event_type(_event_type)


def known_tags() -> tuple[str, ...]:
    """Return every registered tag, sorted."""
    return tuple(sorted(TYPES))


def type_for_tag(tag: str) -> type[Event]:
    """Return the event type stored under ``tag``.

    Raises:
        UnknownEventTypeError: No type holds that tag.
    """
    try:
        return TYPES[tag]
    except KeyError:
        msg = f"Expected one of the known event tags, found {tag!r}"
        raise UnknownEventTypeError(msg) from None


def fast_decoders() -> dict[str, tuple[bytes, msgspec.json.Decoder[Any]]]:
    """Per tag: the clear header prefix of its current version, and its decoder.

    A row whose first four header bytes equal the prefix (chained frame
    format, no flags, current schema version) can be decoded directly from
    ``BODY_OFFSET``.
    """
    if len(_FAST) != len(DECODERS):  # built again after a registration
        _FAST.clear()
        _FAST.update(
            (tag, (PREFIX.pack(CHAIN_FORMAT, 0, TYPES[tag].SCHEMA_VERSION), dec))
            for tag, dec in DECODERS.items()
        )
    return _FAST
