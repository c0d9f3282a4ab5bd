"""Python API strings the ledger cannot hold are typed errors naming the field (#17).

The red team's cases: lone surrogates raised ``UnicodeEncodeError`` and deep
nesting ``RecursionError``, both untyped, through ``store.append`` and
``AsyncLedger.append``. Now each is an ``InvalidEventError`` naming the field,
quoting a bounded prefix of the value, with nothing written. Real SQLite files.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.errors import InvalidEventError
from turnledger.ledger.events import (
    AssistantMessage,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import CIPHER_KEY_ENV, open_store

STREAM = session_stream_id("ops", "k")
SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",)), max_size=50
)  # encodable text


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv(CIPHER_KEY_ENV, raising=False)


def with_surrogate(prefix: str, surrogate: str, suffix: str) -> str:
    return prefix + surrogate + suffix


def events_for(field: str, text: str):
    """An event with ``text`` in ``field``, and the field's expected path."""
    if field == "user_input":
        return TurnStarted(turn_id="t1", origin="channel", user_input=text), field
    if field == "output":
        event = ToolResultRecorded(turn_id="t1", call_id="c1", tool="x", output=text)
        return event, field
    call = ToolCallRecord(id="c1", name="lookup", arguments=text)
    event = AssistantMessage(turn_id="t1", text="ok", tool_calls=(call,))
    return event, "tool_calls[0].arguments"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    prefix=TEXT,
    surrogate=SURROGATES,
    suffix=TEXT,
    field=st.sampled_from(["user_input", "output", "arguments"]),
)
def test_a_lone_surrogate_anywhere_is_a_typed_error(
    tmp_path, prefix, surrogate, suffix, field
):
    """Sync append: InvalidEventError naming the field and the character."""
    text = with_surrogate(prefix, surrogate, suffix)
    event, path = events_for(field, text)
    with open_store(str(tmp_path / "l.db")) as store:
        before = store.max_position()
        with pytest.raises(InvalidEventError) as caught:
            store.append(STREAM, [SessionOpened(agent="ops", session_key="k"), event], expected_version=store.stream_version(STREAM))  # fmt: skip
        message = str(caught.value)
        assert f": {path}: expected text encodable as UTF-8" in message
        assert f"U+{ord(surrogate):04X} at character {len(prefix)}" in message
        assert store.max_position() == before


def test_the_async_facade_raises_the_same_typed_error(tmp_path):
    event, _ = events_for("user_input", "hi \udcff there")

    async def go() -> None:
        ledger = AsyncLedger(open_store(str(tmp_path / "l.db")))
        try:
            with pytest.raises(InvalidEventError, match="user_input: expected text"):
                await ledger.append(STREAM, [event], expected_version=0)
            assert ledger.store.max_position() == 0
        finally:
            await ledger.aclose()

    asyncio.run(go())


def test_the_message_quotes_a_bounded_prefix(tmp_path):
    """A 10 MB value with a surrogate at its end: the message stays short."""
    text = "x" * 10_000_000 + "\ud800"
    event, _ = events_for("output", text)
    with open_store(str(tmp_path / "l.db")) as store, pytest.raises(InvalidEventError) as caught:  # fmt: skip
        store.append(STREAM, [event], expected_version=0)
    message = str(caught.value)
    assert len(message) < 300
    assert "(10000001 characters)" in message
    assert "at character 10000000" in message


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deep_nesting_is_a_typed_error(tmp_path, depth):
    """A value nested far past the recursion limit: typed, names the field."""
    nested: list[object] = []
    for _ in range(depth):
        nested = [nested]
    event = TurnStarted(turn_id="t1", origin="channel", user_input=nested)  # type: ignore[arg-type]
    with open_store(str(tmp_path / "l.db")) as store:
        with pytest.raises(
            InvalidEventError, match="user_input: expected values nested"
        ):
            store.append(STREAM, [event], expected_version=0)
        assert store.max_position() == 0
