"""Several processes append at once: nothing is lost, duplicated or interleaved.

Four spawned processes open a fresh ledger at the same moment (a barrier), then
start appending together, on SQLite and on the real PostgreSQL server. Racing on ONE stream, each retries on ``ConcurrencyError``
(re-reading the head); afterwards the stream's versions are exactly 1..N and every
turn is there once, whole, where its acknowledgement said. On DIFFERENT streams no
append conflicts and the global positions are unique and strictly increasing.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.ledger.crash_child import check_ledger, turn_events
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store

WORKERS = 4
TURNS = {"sqlite": 25, "postgres": 15}  # per worker
EVENTS_PER_TURN = len(turn_events("x"))
MAX_ATTEMPTS = 1000  # per turn: a livelock fails the worker instead of hanging
HANG_GUARD = 300.0  # seconds for all workers together; not a performance bound
BARRIER_TIMEOUT = 120.0  # a worker that never arrives breaks the barrier


@contextmanager
def _open_together(url: str, barrier: Any) -> Iterator[EventStore]:
    """Open the store at the same moment as the other workers, then start together.

    A worker that fails to open breaks the barrier, so the others fail at once
    instead of waiting for it.
    """
    try:
        barrier.wait(timeout=BARRIER_TIMEOUT)
        store = open_store(url)
    except BaseException:
        barrier.abort()
        raise
    with store:
        barrier.wait(timeout=BARRIER_TIMEOUT)
        yield store


# --- the workers (run in spawned processes: module-level, picklable) -------------


def _racing_worker(
    url: str, stream_hex: str, turns: int, barrier: Any, out: str
) -> None:
    """Append ``turns`` turns to a shared stream, retrying on conflicts."""
    stream = UUID(stream_hex)
    appends = []
    conflicts = 0
    with _open_together(url, barrier) as store:
        for n in range(turns):
            turn_id = uuid4().hex
            for _ in range(MAX_ATTEMPTS):
                head = store.stream_version(stream)
                try:
                    result = store.append(
                        stream, turn_events(turn_id), expected_version=head
                    )
                except ConcurrencyError:
                    conflicts += 1
                    continue
                appends.append([turn_id, result.first_version, result.positions])
                break
            else:
                raise RuntimeError(f"turn {n} not appended in {MAX_ATTEMPTS} tries")
    Path(out).write_text(json.dumps({"appends": appends, "conflicts": conflicts}))


def _own_stream_worker(
    url: str, stream_hex: str, turns: int, barrier: Any, out: str
) -> None:
    """Append ``turns`` turns to a stream of its own; a conflict fails the worker."""
    stream = UUID(stream_hex)
    appends = []
    head = 0
    with _open_together(url, barrier) as store:
        for _ in range(turns):
            turn_id = uuid4().hex
            result = store.append(stream, turn_events(turn_id), expected_version=head)
            head = result.last_version
            appends.append([turn_id, result.first_version, result.positions])
    Path(out).write_text(json.dumps({"appends": appends, "conflicts": 0}))


def _run_workers(
    target: Callable[..., None], url: str, streams: list[UUID], turns: int, tmp: Path
) -> list[dict[str, Any]]:
    """Run one spawned worker per stream; always reap them; return their reports."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(streams))
    outs = [tmp / f"worker{i}.json" for i in range(len(streams))]
    processes = [
        context.Process(target=target, args=(url, s.hex, turns, barrier, str(out)))
        for s, out in zip(streams, outs, strict=True)
    ]
    try:
        for process in processes:
            process.start()
        deadline = time.monotonic() + HANG_GUARD
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        codes = [process.exitcode for process in processes]
    finally:
        for process in processes:
            if process.pid is not None:
                if process.is_alive():
                    process.kill()
                process.join()
            process.close()
    assert codes == [0] * len(streams), f"worker exit codes (None = hung): {codes}"
    return [json.loads(out.read_text()) for out in outs]


# --- the tests -------------------------------------------------------------------


@pytest.fixture(
    name="backend",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def _backend(request, tmp_path) -> tuple[str, str]:
    """(kind, URL) of a ledger not created yet: the workers create it at once."""
    kind = request.param
    if kind == "sqlite":
        return kind, str(tmp_path / "turnledger.db")
    return kind, request.getfixturevalue("postgres_url")


def test_racing_writers_on_one_stream(backend, tmp_path):
    """4 processes race on one stream: versions 1..N, every turn exactly once."""
    kind, url = backend
    turns = TURNS[kind]
    stream = session_stream_id("race", uuid4().hex)
    reports = _run_workers(_racing_worker, url, [stream] * WORKERS, turns, tmp_path)

    appends = [a for report in reports for a in report["appends"]]
    turn_ids = [turn_id for turn_id, _, _ in appends]
    n_events = WORKERS * turns * EVENTS_PER_TURN
    assert len(turn_ids) == len(set(turn_ids)) == WORKERS * turns
    print(f"{kind}: {sum(r['conflicts'] for r in reports)} conflicts retried")
    with open_store(url) as store:
        recorded = store.read_stream(stream)
        assert [r.version for r in recorded] == list(range(1, n_events + 1))
        assert store.stream_version(stream) == n_events
        check = check_ledger(store, turn_ids)
        assert check.ok, check.problems
        assert check.turns == set(turn_ids)
        assert check.events == n_events
    # Each acknowledgement names exactly where its turn is.
    for turn_id, first_version, positions in appends:
        block = recorded[first_version - 1 : first_version - 1 + EVENTS_PER_TURN]
        assert {r.event.turn_id for r in block} == {turn_id}
        assert [r.position for r in block] == positions


def test_writers_on_own_streams_never_conflict(backend, tmp_path):
    """4 processes on 4 streams: no conflict; positions unique, strictly rising."""
    kind, url = backend
    turns = TURNS[kind]
    streams = [session_stream_id("own", uuid4().hex) for _ in range(WORKERS)]
    reports = _run_workers(_own_stream_worker, url, streams, turns, tmp_path)

    per_stream = turns * EVENTS_PER_TURN
    acknowledged: list[int] = []
    turn_ids = []
    for report in reports:
        positions = [p for _, _, ps in report["appends"] for p in ps]
        assert positions == sorted(set(positions)), "a writer's positions must rise"
        acknowledged += positions
        turn_ids += [turn_id for turn_id, _, _ in report["appends"]]
    assert len(acknowledged) == len(set(acknowledged)) == WORKERS * per_stream
    with open_store(url) as store:
        for stream in streams:
            versions = [r.version for r in store.read_stream(stream)]
            assert versions == list(range(1, per_stream + 1))
        log = [r.position for r in store.iter_all()]
        check = check_ledger(store, turn_ids)
    assert log == sorted(set(log)), "global positions must be unique and rising"
    assert log == sorted(acknowledged)
    assert check.ok, check.problems
    assert check.turns == set(turn_ids)
