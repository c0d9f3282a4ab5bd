"""Events and their codec: stable tags, goldens, upcasting, validation, round trips."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import ClassVar
from uuid import UUID

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ledger.examples import EXAMPLES
from turnledger.ledger.codec import MsgspecMapper, PendingEvent
from turnledger.ledger.errors import (
    CorruptRecordError,
    InvalidEventError,
    UnknownEventTypeError,
)
from turnledger.ledger.events import EVENT_TYPES, Event, TurnStarted, tag_of
from turnledger.ledger.events.registry import register_event_type, register_upcaster
from turnledger.ledger.frame import HEADER_SIZE, datetime_from_us
from turnledger.ledger.store import _cipher

GOLDEN = Path(__file__).parent / "golden" / "events.jsonl"
STREAM = UUID("00000000-0000-4000-8000-000000000001")
KEY = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY="


def goldens() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line]


@pytest.mark.parametrize(
    "golden", goldens(), ids=lambda g: f"{g['tag']}@v{g['schema_version']}"
)
def test_golden_frames_still_decode(golden):
    """Every event ever written in a golden decodes to the same value today."""
    mapper = MsgspecMapper()
    at, event = mapper.decode_frame(
        golden["tag"], base64.b64decode(golden["frame"]), lambda: "golden"
    )
    assert tag_of(type(event)) == golden["tag"]
    current = json.loads(msgspec.json.encode(event))
    if golden["schema_version"] == type(event).SCHEMA_VERSION:
        # A field added since (additive, same version) decodes to its default.
        added = {
            f.encode_name: json.loads(msgspec.json.encode(_default(f)))
            for f in msgspec.structs.fields(type(event))
            if f.encode_name not in golden["event"]
        }
        assert current == {**golden["event"], **added}
    assert at == datetime_from_us(1_780_000_000_123_456)


def _default(field: msgspec.structs.FieldInfo) -> object:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    assert field.default_factory is not msgspec.NODEFAULT, field.name
    return field.default_factory()


def test_every_type_and_version_has_a_golden():
    """Adding a type or a schema version without a golden fails here."""
    have = {(g["tag"], g["schema_version"]) for g in goldens()}
    for event_type in EVENT_TYPES:
        assert (tag_of(event_type), event_type.SCHEMA_VERSION) in have, event_type


def test_tags_are_explicit_and_unique():
    """Tags are stable strings, never the class name."""
    tags = [tag_of(t) for t in EVENT_TYPES]
    assert len(set(tags)) == len(tags)
    for event_type, tag in zip(EVENT_TYPES, tags, strict=True):
        assert tag != event_type.__name__
        assert "." in tag


def test_events_are_frozen_and_keyword_only():
    """Events cannot be changed after creation nor built positionally."""
    event = TurnStarted(turn_id="t", origin="cron", user_input="x")
    with pytest.raises(AttributeError):
        event.turn_id = "u"  # type: ignore[misc]
    with pytest.raises(TypeError):
        TurnStarted("t", "cron", "x")  # type: ignore[misc]


@pytest.mark.parametrize("cipher_key", [None, KEY])
@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: tag_of(type(e)))
def test_round_trip(event, cipher_key):
    """encode then decode gives back an equal event, with or without encryption."""
    mapper = MsgspecMapper(cipher=_cipher(cipher_key))
    stored = mapper.to_stored_event(PendingEvent(STREAM, 3, event, 1_000_000))
    decoded = mapper.to_domain_event(stored)
    assert decoded.event == event
    assert decoded.originator_version == 3
    assert decoded.recorded_at == datetime_from_us(1_000_000)
    assert stored.topic == tag_of(type(event))
    assert (stored.state[HEADER_SIZE:] != msgspec.json.encode(event)) == bool(
        cipher_key
    )


text = st.text(max_size=50)


@settings(max_examples=200)
@given(
    turn_id=text.filter(bool),
    user_input=text,
    origin=st.sampled_from(
        ["interactive", "channel", "agent_direct", "cron", "daemon", "sub_turn"]
    ),
    at=st.integers(min_value=0, max_value=253_402_300_799_999_999),
)
def test_round_trip_property(turn_id, user_input, origin, at):
    """Any valid TurnStarted survives the codec unchanged, time included."""
    event = TurnStarted(turn_id=turn_id, origin=origin, user_input=user_input)
    mapper = MsgspecMapper()
    decoded = mapper.to_domain_event(
        mapper.to_stored_event(PendingEvent(STREAM, 1, event, at))
    )
    assert decoded.event == event
    assert decoded.recorded_at == datetime_from_us(at)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            TurnStarted(turn_id="t", origin="nightly", user_input="x"),  # type: ignore[arg-type]
            "Invalid TurnStarted (turn.started): Invalid enum value 'nightly' - at `$.origin`",
        ),
        (
            TurnStarted(turn_id="", origin="cron", user_input="x"),
            "Invalid TurnStarted (turn.started): Expected `str` of length >= 1 - at `$.turn_id`",
        ),
        (
            TurnStarted(turn_id="t", origin="cron", user_input=5),  # type: ignore[arg-type]
            "Invalid TurnStarted (turn.started): Expected `str`, got `int` - at `$.user_input`",
        ),
    ],
)
def test_invalid_events_are_refused_with_expected_and_found(event, message):
    """Validation names the type, the field and what was expected."""
    with pytest.raises(InvalidEventError) as caught:
        MsgspecMapper().encode_body(event)
    assert str(caught.value) == message


def test_unregistered_event_class_is_refused():
    """A Struct that is not a registered ledger event cannot be written."""

    class Stray(Event, tag="stray.event", frozen=True, kw_only=True):
        note: str = ""

    with pytest.raises(InvalidEventError, match="registered ledger event, found"):
        MsgspecMapper().encode_body(Stray())


class NoteTakenV1(Event, tag="test.note_taken", frozen=True, kw_only=True):
    """Version 1 of a test-only event: a single text field."""

    text: str


class NoteTaken(Event, tag="test.note_taken", frozen=True, kw_only=True):
    """Version 2 renamed ``text`` to ``body`` and added ``lang``."""

    SCHEMA_VERSION: ClassVar[int] = 2
    body: str
    lang: str


def test_older_versions_are_upcast_on_read():
    """A v1 payload decodes as the current v2 type through the registered upcaster."""
    register_event_type(NoteTaken)
    v1 = b'{"type":"test.note_taken","text":"hello"}'
    header = (
        (1).to_bytes(1, "big")
        + b"\x00"
        + (1).to_bytes(2, "big")
        + (0).to_bytes(8, "big")
    )

    def v1_to_v2(payload: dict) -> dict:
        payload = dict(payload)
        payload["body"] = payload.pop("text")
        payload.setdefault("lang", "und")
        return payload

    with pytest.raises(
        CorruptRecordError, match=r"no upcaster registered for test\.note_taken v1"
    ):
        MsgspecMapper().decode_frame("test.note_taken", header + v1, lambda: "here")
    register_upcaster("test.note_taken", 1, v1_to_v2)
    _, event = MsgspecMapper().decode_frame(
        "test.note_taken", header + v1, lambda: "here"
    )
    assert event == NoteTaken(body="hello", lang="und")


def test_newer_schema_version_is_unknown():
    """A row written by a newer turnledger names the version it found."""
    frame = b"\x01\x00\x00\x07" + (0).to_bytes(8, "big") + b"{}"
    with pytest.raises(UnknownEventTypeError, match="schema version <= 1, found 7"):
        MsgspecMapper().decode_frame("turn.started", frame, lambda: "position 3")


def test_impossible_recorded_time_is_corrupt():
    """A header whose time is out of range is a corrupt record, not a crash."""
    frame = b"\x01\x00\x00\x01" + (2**62).to_bytes(8, "big") + b"{}"
    with pytest.raises(CorruptRecordError, match="expected a recorded time"):
        MsgspecMapper().decode_frame("turn.started", frame, lambda: "position 3")


def test_wrong_frame_format_is_corrupt():
    """An unknown frame format byte is reported with what was expected."""
    frame = b"\x09\x00\x00\x01" + (0).to_bytes(8, "big") + b"{}"
    with pytest.raises(
        CorruptRecordError, match=r"expected frame format 1 or 2 .*found format 9"
    ):
        MsgspecMapper().decode_frame("turn.started", frame, lambda: "position 3")


def test_tag_collision_is_refused():
    """Two classes cannot hold one tag."""

    class Impostor(Event, tag="turn.started", frozen=True, kw_only=True):
        pass

    with pytest.raises(ValueError, match="already held by TurnStarted"):
        register_event_type(Impostor)
