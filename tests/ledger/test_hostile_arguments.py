"""Hostile arguments to the ledger (issue #26, item 6).

Error texts quote at most 200 characters of a value; ``None`` or a value of the
wrong type given to an append is a typed error; identifiers with control
characters are refused, naming the field and the character's position. Nothing
is written in any of these cases.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.errors import (
    QUOTED_CHARS,
    InvalidArgumentError,
    InvalidEventError,
    InvalidIdError,
    quote_value,
)
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    MemoryRecalled,
    MemoryStored,
    RecallRef,
    SessionForked,
    SessionOpened,
    SessionRewound,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.ids import (
    legacy_session_stream_id,
    memory_stream_id,
    session_stream_id,
)
from turnledger.ledger.store import Append, EventStore, open_store

ANY = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
CONTROL = st.one_of(st.integers(0, 0x1F), st.just(0x7F), st.integers(0x80, 0x9F)).map(
    chr
)
ID_CHARS = st.characters(
    blacklist_categories=("Cs",),
    blacklist_characters=[chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))],
)
IDS = st.text(ID_CHARS, min_size=1, max_size=30)
"""Identifiers valid before and after: any text but surrogates and controls."""


@pytest.fixture(name="store")
def _store(tmp_path) -> Iterator[EventStore]:
    with open_store(str(tmp_path / "l.db"), cipher_key="") as store:
        yield store


# -- quoting -------------------------------------------------------------------


@given(st.text(max_size=600))
def test_a_quoted_text_holds_at_most_200_of_its_characters(text: str) -> None:
    quoted = quote_value(text)
    if len(text) <= QUOTED_CHARS:
        assert quoted == repr(text)
    else:
        suffix = f"\u2026 ({len(text):,} characters)"
        assert quoted == repr(text[:QUOTED_CHARS]) + suffix


@given(st.lists(st.integers(), max_size=200))
def test_another_value_is_quoted_by_a_bounded_repr(value: list[int]) -> None:
    quoted = quote_value(value)
    text = repr(value)
    if len(text) <= QUOTED_CHARS:
        assert quoted == text
    else:
        assert (
            quoted == f"{text[:QUOTED_CHARS]}\u2026 ({len(text):,} characters of repr)"
        )


def test_a_10_mb_origin_is_quoted_bounded(store: EventStore) -> None:
    stream = session_stream_id("ops", "k")
    event = TurnStarted(turn_id="t1", origin="a" * 10_485_760, user_input="hi")  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError) as caught:
        store.append(stream, [event], expected_version=0)
    message = str(caught.value)
    assert "'" + "a" * QUOTED_CHARS + "'\u2026 (10,485,760 characters)" in message
    assert "$.origin" in message
    assert len(message) < 2 * QUOTED_CHARS + 200
    assert store.max_position() == 0


@ANY
@given(value=st.text(min_size=QUOTED_CHARS + 1, max_size=2_000))
def test_any_value_an_event_error_quotes_is_bounded(
    store: EventStore, value: str
) -> None:
    """A too-long value in a closed vocabulary, nested or not: quoted bounded."""
    stream = session_stream_id("ops", "k")
    bad = ToolResultRecorded(turn_id="t", call_id="c", tool="x", provenance=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError) as caught:
        store.append(stream, [bad], expected_version=0)
    assert repr(value) not in str(caught.value)
    assert quote_value(value) in str(caught.value)


# -- wrong types ---------------------------------------------------------------

STREAM = uuid.UUID("00000000-0000-4000-8000-000000000001")
GOOD = [SessionOpened(agent="ops", session_key="k")]
BAD_ARGUMENTS = [
    ({"stream_id": None}, "stream_id: expected a UUID, found None"),
    ({"stream_id": str(STREAM)}, "stream_id: expected a UUID, found str"),
    ({"events": None}, "events: expected a list or tuple of ledger events, found None"),
    ({"events": "abc"}, "events: expected a list or tuple of ledger events, found str"),
    ({"events": GOOD[0]}, "found SessionOpened"),
    ({"events": 3}, "events: expected a list or tuple of ledger events, found int"),
    ({"expected_version": None}, "expected_version: expected an int >= 0, found None"),
    ({"expected_version": True}, "expected_version: expected an int >= 0, found bool"),
    ({"expected_version": "0"}, "expected_version: expected an int >= 0, found str"),
    ({"expected_version": -1}, "expected_version: expected an int >= 0, found -1"),
    ({"idempotency_key": 7}, "idempotency_key: expected a str or None, found int"),
]


def _call(store: EventStore, how: str, **changed: object) -> object:
    args: dict[str, object] = {
        "stream_id": STREAM,
        "events": GOOD,
        "expected_version": 0,
        "idempotency_key": None,
    }
    args.update(changed)
    if how == "append":
        return store.append(
            args["stream_id"],  # type: ignore[arg-type]
            args["events"],  # type: ignore[arg-type]
            expected_version=args["expected_version"],  # type: ignore[arg-type]
            idempotency_key=args["idempotency_key"],  # type: ignore[arg-type]
        )
    one = Append(**args)  # type: ignore[arg-type]
    if how == "batch":
        return store.append_batch([one])
    if how == "atomic":
        return store.append_atomic([one])

    async def go() -> object:
        async with AsyncLedger(store, close_store=False) as ledger:
            return await ledger.append(
                args["stream_id"],  # type: ignore[arg-type]
                args["events"],  # type: ignore[arg-type]
                expected_version=args["expected_version"],  # type: ignore[arg-type]
                idempotency_key=args["idempotency_key"],  # type: ignore[arg-type]
            )

    return asyncio.run(go())


@pytest.mark.parametrize("how", ["append", "batch", "atomic", "aio"])
@pytest.mark.parametrize(("changed", "message"), BAD_ARGUMENTS)
def test_a_wrong_argument_is_a_typed_error(
    store: EventStore, how: str, changed: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        _call(store, how, **changed)
    assert message in str(caught.value)
    assert isinstance(caught.value, InvalidEventError)
    assert isinstance(caught.value, TypeError)  # what Python raised before
    assert store.max_position() == 0
    # The same arguments, corrected, are written.
    _call(store, how)
    assert store.max_position() == 1


@pytest.mark.parametrize(
    ("appends", "message"),
    [
        (None, "appends: expected a list or tuple of Append, found None"),
        ([None], "appends[0]: expected an Append, found None"),
        ([(STREAM, GOOD, 0)], "appends[0]: expected an Append, found tuple"),
    ],
)
@pytest.mark.parametrize("method", ["append_batch", "append_atomic"])
def test_a_wrong_batch_is_a_typed_error(
    store: EventStore, method: str, appends: object, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("[", r"\[")):
        getattr(store, method)(appends)
    assert store.max_position() == 0


def test_none_among_the_events_is_a_typed_error(store: EventStore) -> None:
    with pytest.raises(InvalidEventError, match="found NoneType"):
        store.append(STREAM, [GOOD[0], None], expected_version=0)  # type: ignore[list-item]
    assert store.max_position() == 0


def test_events_from_a_generator_are_still_written(store: EventStore) -> None:
    store.append(STREAM, (e for e in GOOD), expected_version=0)
    assert [r.event for r in store.read_stream(STREAM)] == GOOD


# -- identifiers ---------------------------------------------------------------


def _with_id(field: str, value: str) -> tuple[Event, str]:
    """An event holding ``value`` as the identifier ``field``; the field's path."""
    makers: dict[str, Callable[[], tuple[Event, str]]] = {
        "agent": lambda: (SessionOpened(agent=value, session_key="k"), "agent"),
        "session_key": lambda: (
            SessionOpened(agent="ops", session_key=value),
            "session_key",
        ),
        "turn_id": lambda: (
            TurnStarted(turn_id=value, origin="channel", user_input="hi"),
            "turn_id",
        ),
        "call_id": lambda: (
            ToolResultRecorded(turn_id="t", call_id=value, tool="x"),
            "call_id",
        ),
        "tool_call": lambda: (
            AssistantMessage(
                turn_id="t",
                tool_calls=(
                    ToolCallRecord(id="c0", name="x"),
                    ToolCallRecord(id=value, name="x"),
                ),
            ),
            "tool_calls[1].id",
        ),
        "source_stream": lambda: (
            SessionForked(
                agent="ops", session_key="k", source_stream=value, source_version=1
            ),
            "source_stream",
        ),
        "memory_session": lambda: (
            MemoryStored(agent="ops", key="k", content="c", session=value),
            "session",
        ),
        "rewound_turn": lambda: (
            SessionRewound(to_version=1, turns=("t0", value)),
            "turns[1]",
        ),
        "recalled_agent": lambda: (
            MemoryRecalled(
                turn_id="t",
                backend="sqlite",
                entries=(RecallRef(key="k", agent=value),),
            ),
            "entries[0].agent",
        ),
    }
    return makers[field]()


FIELDS = st.sampled_from(
    [
        "agent",
        "session_key",
        "turn_id",
        "call_id",
        "tool_call",
        "source_stream",
        "memory_session",
        "rewound_turn",
        "recalled_agent",
    ]
)


@ANY
@given(field=FIELDS, head=st.text(ID_CHARS, max_size=20), bad=CONTROL, tail=IDS)
def test_an_id_with_a_control_character_is_refused(
    store: EventStore, field: str, head: str, bad: str, tail: str
) -> None:
    event, path = _with_id(field, head + bad + tail)
    before = store.max_position()
    with pytest.raises(InvalidIdError) as caught:
        store.append(uuid.uuid4(), [event], expected_version=0)
    error = caught.value
    assert (error.field, error.position, error.char) == (path, len(head), bad)
    assert str(error).startswith(f"{path}: expected an identifier without control")
    assert f"U+{ord(bad):04X} at character {len(head)}" in str(error)
    assert store.max_position() == before


@ANY
@given(field=FIELDS, value=IDS)
def test_an_id_without_one_stays_valid(
    store: EventStore, field: str, value: str
) -> None:
    event, _ = _with_id(field, value)
    stream = uuid.uuid4()
    store.append(stream, [event], expected_version=0)
    assert [r.event for r in store.read_stream(stream)] == [event]


def test_the_async_facade_refuses_the_same_ids(store: EventStore) -> None:
    async def go() -> None:
        async with AsyncLedger(store, close_store=False) as ledger:
            with pytest.raises(InvalidIdError, match="turn_id: expected an identifier"):
                await ledger.append(
                    STREAM, [_with_id("turn_id", "t\x00")[0]], expected_version=0
                )

    asyncio.run(go())
    assert store.max_position() == 0


@given(agent=IDS, key=IDS, bad=CONTROL, where=st.sampled_from(["agent", "key"]))
def test_stream_ids_refuse_a_control_character(
    agent: str, key: str, bad: str, where: str
) -> None:
    """``a\\x1fb``'s session ``c`` and ``a``'s session ``b\\x1fc`` never share a stream."""
    if where == "agent":
        with pytest.raises(InvalidIdError, match=r"^agent: "):
            session_stream_id(agent + bad, key)
        with pytest.raises(InvalidIdError, match=r"^agent: "):
            memory_stream_id(agent + bad)
    else:
        with pytest.raises(InvalidIdError, match=r"^session_key: "):
            session_stream_id(agent, key + bad)
        with pytest.raises(InvalidIdError, match=r"^session_key: "):
            legacy_session_stream_id(agent, key + bad)
    assert session_stream_id(agent, key) == session_stream_id(agent, key)
    assert memory_stream_id(agent) == memory_stream_id(agent)


def test_stream_ids_refuse_a_value_that_is_not_text() -> None:
    with pytest.raises(
        InvalidArgumentError, match="session_key: expected str, found None"
    ):
        session_stream_id("ops", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="agent: expected str, found int"):
        memory_stream_id(3)  # type: ignore[arg-type]


def test_a_huge_id_is_quoted_bounded() -> None:
    with pytest.raises(InvalidIdError) as caught:
        session_stream_id("ops", "k" * 1_000_000 + "\x00")
    assert "(1,000,001 characters)" in str(caught.value)
    assert len(str(caught.value)) < 2 * QUOTED_CHARS + 200


@pytest.mark.parametrize("stream_id", [None, str(STREAM), STREAM.bytes])
def test_reads_refuse_a_stream_id_that_is_not_a_uuid(
    store: EventStore, stream_id: object
) -> None:
    found = type(stream_id).__name__ if stream_id is not None else "None"
    message = f"stream_id: expected a UUID, found {found}"
    with pytest.raises(InvalidArgumentError, match=message):
        store.read_stream(stream_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=message):
        store.stream_version(stream_id)  # type: ignore[arg-type]

    async def go() -> None:
        async with AsyncLedger(store, close_store=False) as ledger:
            with pytest.raises(InvalidArgumentError, match=message):
                await ledger.read_stream(stream_id)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgumentError, match=message):
                await ledger.stream_version(stream_id)  # type: ignore[arg-type]

    asyncio.run(go())
