"""Scale-out on PostgreSQL: 4 writer processes, 2 projection workers, one killed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

from turnledger.ledger.store import open_store
from turnledger.projections.base import digest, fold
from turnledger.projections.catalog import PROJECTIONS
from turnledger.projections.views.postgres import PostgresViewStore


def _turnledger() -> str:
    return shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"


def _worker(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [_turnledger(), "--db", url, "project", "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TURNLEDGER_CONFIG": os.devnull},
    )


def _wait_caught_up(url: str, deadline: float) -> None:
    store = open_store(url)
    views = PostgresViewStore(url)
    try:
        while time.monotonic() < deadline:
            target = store.max_position()
            if all(views.tracking(p.name) >= target for p in PROJECTIONS):
                return
            time.sleep(0.1)
        raise AssertionError("workers did not catch up in time")
    finally:
        views.close()
        store.close()


def test_writers_and_workers_with_a_killed_worker(postgres_url, rand):
    """Views built by workers (one SIGKILLed and restarted) equal a clean rebuild."""
    open_store(postgres_url).close()  # create the tables once
    workers = [_worker(postgres_url), _worker(postgres_url)]
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.projections.writer_child",
                postgres_url,
                f"w{i}",
                "12",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    try:
        time.sleep(rand.uniform(0.3, 1.0))
        victim = workers[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        victim.stdout.close()
        workers[0] = _worker(postgres_url)  # restarted: stands by or takes over
        for writer in writers:
            assert writer.wait(timeout=120) == 0
        _wait_caught_up(postgres_url, time.monotonic() + 60)
    finally:
        for process in [*workers, *writers]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*workers, *writers]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout:
                process.stdout.close()
    store = open_store(postgres_url)
    views = PostgresViewStore(postgres_url)
    try:
        events = list(store.iter_all())
        assert len(events) == 4 * (1 + 12 * 8)
        for projection in PROJECTIONS:
            live = views.all(projection.name, projection.state_type)
            assert digest(live) == digest(fold(projection, events)), projection.name
    finally:
        views.close()
        store.close()


def test_one_active_worker_per_projection(postgres_url):
    """A second worker cannot take a projection's lock while the first holds it."""
    first = PostgresViewStore(postgres_url)
    second = PostgresViewStore(postgres_url)
    try:
        assert first.try_lock("session_history")
        assert not second.try_lock("session_history")
        first.close()
        assert second.try_lock("session_history")
    finally:
        second.close()
