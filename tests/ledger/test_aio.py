"""The async facade: group commit, per-append conflicts, fail-fast validation."""

from __future__ import annotations

import asyncio

import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.errors import ConcurrencyError, InvalidEventError, LedgerError
from turnledger.ledger.events import ModelCalled
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify


async def run_sessions(ledger: AsyncLedger, sessions: int, turns: int) -> list:
    streams = [new_stream() for _ in range(sessions)]

    async def session(stream) -> None:
        version = 0
        for t in range(turns):
            result = await ledger.append(
                stream, turn_events(f"{stream}-{t}"), expected_version=version
            )
            # Acknowledged means durable and readable.
            assert (await ledger.stream_version(stream)) >= result.last_version
            version = result.last_version

    await asyncio.gather(*(session(s) for s in streams))
    return streams


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_concurrent_sessions_are_group_committed(backend, sqlite_path, request):
    """Appends from concurrent sessions share transactions; all land, in order."""
    url = (
        sqlite_path if backend == "sqlite" else request.getfixturevalue("postgres_url")
    )
    ledger = AsyncLedger(open_store(url))
    try:
        streams = await run_sessions(ledger, sessions=16, turns=5)
        assert ledger.appends_committed == 80
        assert ledger.groups_committed < 80  # several appends per commit
        for stream in streams:
            events = await ledger.read_stream(stream)
            assert [r.version for r in events] == list(range(1, 41))
        assert verify(ledger.store).ok
    finally:
        await ledger.aclose()


async def test_conflict_fails_only_its_own_append(sqlite_path):
    """A stale append in a group is refused; its neighbours commit."""
    ledger = AsyncLedger(open_store(sqlite_path))
    try:
        a, b = new_stream(), new_stream()
        await ledger.append(a, turn_events("a0"), expected_version=0)
        results = await asyncio.gather(
            ledger.append(a, turn_events("a1"), expected_version=0),  # stale
            ledger.append(b, turn_events("b1"), expected_version=0),
            return_exceptions=True,
        )
        assert isinstance(results[0], ConcurrencyError)
        assert results[0].found == 8
        assert results[1].last_version == 8
    finally:
        await ledger.aclose()


async def test_invalid_event_fails_before_queueing(sqlite_path):
    """Validation runs in the caller: nothing reaches the writer."""
    ledger = AsyncLedger(open_store(sqlite_path))
    try:
        bad = ModelCalled(turn_id="t", provider="p", model="m", output_tokens=-1)
        with pytest.raises(InvalidEventError, match="output_tokens"):
            await ledger.append(new_stream(), [bad], expected_version=0)
        assert ledger.groups_committed == 0
    finally:
        await ledger.aclose()


async def test_closed_ledger_refuses_appends(sqlite_path):
    """After aclose, appends fail with a typed error and the store is closed."""
    ledger = AsyncLedger(open_store(sqlite_path))
    await ledger.append(new_stream(), turn_events("t"), expected_version=0)
    await ledger.aclose()
    await ledger.aclose()  # idempotent
    with pytest.raises(LedgerError, match="found it closed"):
        await ledger.append(new_stream(), turn_events("t"), expected_version=0)


async def test_writer_failure_reaches_every_waiting_caller(sqlite_path):
    """If the transaction itself fails, every caller of the group hears of it."""
    store: EventStore = open_store(sqlite_path)
    ledger = AsyncLedger(store)
    store.backend.close()  # the writer's next transaction cannot get a connection
    try:
        results = await asyncio.gather(
            *(
                ledger.append(new_stream(), turn_events("t"), expected_version=0)
                for _ in range(3)
            ),
            return_exceptions=True,
        )
        assert all(isinstance(r, Exception) for r in results)
    finally:
        await ledger.aclose()
