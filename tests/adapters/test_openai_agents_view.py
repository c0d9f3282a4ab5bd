"""TurnledgerSession's in-memory view: its own appends, the head check, other writers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adapters.test_openai_agents import items
from turnledger.adapters.openai_agents import TurnledgerSession
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.store import open_store


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(items(), min_size=1, max_size=4))
def test_own_appends_fold_to_what_the_ledger_folds(tmp_path_factory, batches):
    """The view built from this instance's appends is the ledger's, byte for byte.

    Same item bytes, same event versions per item, same turn and tool names as a
    fresh instance folding the stream from the ledger.
    """
    path = str(tmp_path_factory.mktemp("oa") / "l.db")

    async def scenario() -> None:
        session = TurnledgerSession("s", path)
        for batch in batches:
            await session.add_items(batch)  # type: ignore[arg-type]
        fresh = TurnledgerSession("s", path)
        await fresh.get_items()
        assert session._items == fresh._items
        assert session._version == fresh._version
        assert session._turn == fresh._turn
        assert session._tool_names == fresh._tool_names
        session.close()
        fresh.close()

    _run(scenario())


def test_get_items_reads_nothing_when_the_head_has_not_moved(sqlite_path):
    """After its own appends, get_items serves the fold without a ledger read."""

    async def scenario() -> None:
        session = TurnledgerSession("quiet", sqlite_path)
        await session.add_items([{"role": "user", "content": "hi"}])

        async def no_read(*_args: object, **_kwargs: object) -> list[Any]:
            pytest.fail("get_items re-read a stream whose head had not moved")

        session._handle.read_stream = no_read  # type: ignore[method-assign]
        assert await session.get_items() == [{"role": "user", "content": "hi"}]
        assert await session.get_items(limit=1) == [{"role": "user", "content": "hi"}]
        session.close()

    _run(scenario())


def test_another_writer_is_seen_by_the_next_get_items(sqlite_path):
    """Appends made on another connection (as another process would) are read."""

    async def scenario() -> None:
        session = TurnledgerSession("shared", sqlite_path)
        await session.add_items([{"role": "user", "content": "one"}])
        assert len(await session.get_items()) == 1
        with open_store(sqlite_path) as store:
            other = TurnledgerSession("shared", AsyncLedger(store, close_store=False))
            await other.add_items([{"role": "assistant", "content": "two"}])
            await other.aclose()
        assert await session.get_items() == [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
        ]
        await session.add_items([{"role": "user", "content": "three"}])
        fresh = TurnledgerSession("shared", sqlite_path)
        assert [i["content"] for i in await fresh.get_items()] == [  # type: ignore[typeddict-item]
            "one",
            "two",
            "three",
        ]
        session.close()
        fresh.close()

    _run(scenario())


def test_returned_items_are_fresh_copies(sqlite_path):
    """Mutating what get_items returned changes nothing the session gives back."""

    async def scenario() -> None:
        session = TurnledgerSession("copies", sqlite_path)
        item = {"type": "message", "role": "user", "content": [{"type": "input_text"}]}
        await session.add_items([item])  # type: ignore[list-item]
        got = await session.get_items()
        got[0]["content"].append("x")  # type: ignore[typeddict-item]
        item["content"].append("y")  # type: ignore[attr-defined]
        assert await session.get_items() == [
            {"type": "message", "role": "user", "content": [{"type": "input_text"}]}
        ]
        session.close()

    _run(scenario())
