"""The async facade hands each event-loop iteration's appends to the writer together."""

from __future__ import annotations

import asyncio

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify


async def test_appends_of_one_iteration_share_one_commit(sqlite_path):
    """32 sessions appending in the same loop iteration: one group, one commit."""
    ledger = AsyncLedger(open_store(sqlite_path))
    streams = [new_stream() for _ in range(32)]
    try:
        results = await asyncio.gather(
            *(
                ledger.append(s, turn_events(f"t-{i}"), expected_version=0)
                for i, s in enumerate(streams)
            )
        )
        assert ledger.groups_committed == 1
        assert ledger.appends_committed == 32
        assert [r.first_version for r in results] == [1] * 32
        positions = [p for r in results for p in r.positions]
        assert positions == list(range(1, len(positions) + 1))
        assert verify(ledger.store).ok
    finally:
        await ledger.aclose()


async def test_max_group_splits_a_batch(sqlite_path):
    """A batch larger than ``max_group`` is committed in several groups, all of it."""
    ledger = AsyncLedger(open_store(sqlite_path), max_group=5)
    streams = [new_stream() for _ in range(12)]
    try:
        await asyncio.gather(
            *(
                ledger.append(s, turn_events(f"t-{i}"), expected_version=0)
                for i, s in enumerate(streams)
            )
        )
        assert ledger.groups_committed == 3
        assert ledger.appends_committed == 12
    finally:
        await ledger.aclose()


async def test_appends_queued_before_close_are_written(sqlite_path):
    """aclose in the iteration the appends were made: they commit, then it closes."""
    store = open_store(sqlite_path)
    ledger = AsyncLedger(store, close_store=False)
    stream = new_stream()
    task = asyncio.create_task(
        ledger.append(stream, turn_events("t1"), expected_version=0)
    )
    await asyncio.sleep(0)  # the task has run up to its await: its append is batched
    await ledger.aclose()
    result = await task
    assert result.last_version == len(turn_events("t1"))
    assert store.stream_version(stream) == result.last_version
    store.close()
