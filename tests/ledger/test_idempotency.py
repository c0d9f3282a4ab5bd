"""Idempotent appends across the async facade, processes and a crash before the ack."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.store import open_store

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys
from uuid import UUID
from tests.contracts.store_contract import turn_events
from turnledger.ledger.store import open_store
url, stream, mode = sys.argv[1], UUID(sys.argv[2]), sys.argv[3]
store = open_store(url)
result = store.append(stream, turn_events("t1"), expected_version=0,
                      idempotency_key="turn-1:step-0")
if mode == "crash":
    os._exit(9)  # committed, never acknowledged
print(",".join(map(str, result.positions)), flush=True)
"""


@pytest.fixture(name="url", params=["sqlite", "postgresql"])
def _url(request: pytest.FixtureRequest, sqlite_path: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_path
    else:
        yield request.getfixturevalue("postgres_url")


def _child(url: str, stream: UUID, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(stream), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_retry_after_a_crash_between_commit_and_ack(url: str):
    """A writer dies after its commit; the retry in a new process writes nothing."""
    stream = new_stream()
    child = _child(url, stream, "crash")
    out, _ = child.communicate(timeout=60)
    assert (child.returncode, out) == (9, "")
    with open_store(url) as store:
        assert store.count() == 8
        result = store.append(
            stream,
            turn_events("t1"),
            expected_version=0,
            idempotency_key="turn-1:step-0",
        )
        assert (result.first_version, result.last_version) == (1, 8)
        assert result.positions == tuple(r.position for r in store.read_stream(stream))
        assert store.count() == 8


def test_processes_racing_with_one_key_write_once(url: str):
    """4 processes append with the same key at once: one write, the same answer."""
    stream = new_stream()
    with open_store(url):
        pass  # tables exist before the race
    children = [_child(url, stream, "ack") for _ in range(4)]
    answers = [c.communicate(timeout=60)[0].strip() for c in children]
    assert [c.returncode for c in children] == [0, 0, 0, 0]
    assert len(set(answers)) == 1
    with open_store(url) as store:
        assert store.count() == 8
        assert answers[0] == ",".join(
            str(r.position) for r in store.read_stream(stream)
        )


def test_async_group_commit_keeps_keys(url: str):
    """Concurrent async appends with one key, in one group or several: one write."""

    async def scenario() -> None:
        async with AsyncLedger(open_store(url)) as ledger:
            stream = new_stream()
            results = await asyncio.gather(
                *(
                    ledger.append(
                        stream,
                        turn_events("t1"),
                        expected_version=0,
                        idempotency_key="turn-1:step-0",
                    )
                    for _ in range(10)
                )
            )
            assert len(set(results)) == 1
            again = await ledger.append(
                stream,
                turn_events("t1"),
                expected_version=0,
                idempotency_key="turn-1:step-0",
            )
            assert again == results[0]
            assert await ledger.stream_version(stream) == 8
            assert ledger.store.count() == 8

    asyncio.run(scenario())
