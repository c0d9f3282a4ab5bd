"""The runner: exactly-once pages, resumable rebuilds, rebuild equals live."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.contracts.store_contract import turn_events
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.projections.base import digest, fold
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore, TrackingConflictError


def fill(store, sessions: int, turns: int) -> None:
    for s in range(sessions):
        stream = session_stream_id("agent", f"s{s}")
        version = store.append(
            stream,
            [SessionOpened(agent="agent", session_key=f"s{s}")],
            expected_version=0,
        ).last_version
        for t in range(turns):
            version = store.append(
                stream, turn_events(f"s{s}t{t}"), expected_version=version
            ).last_version


def view_digest(views: SQLiteViewStore) -> str:
    return digest(views.all(SESSION_HISTORY.name, SESSION_HISTORY.state_type))


def test_live_catch_up_equals_rebuild_and_in_memory_fold(tmp_path):
    """Views built live in small steps equal a rebuild and a plain fold."""
    store = open_store(str(tmp_path / "ledger.db"))
    live = SQLiteViewStore(str(tmp_path / "live.db"))
    runner = ProjectionRunner(store, live, [SESSION_HISTORY])
    for round_ in range(3):
        fill_round(store, round_)
        runner.catch_up(page_size=7)
    rebuilt = SQLiteViewStore(str(tmp_path / "rebuilt.db"))
    applied = ProjectionRunner(store, rebuilt, [SESSION_HISTORY]).rebuild(page_size=50)
    relevant = len(list(store.iter_all(types=SESSION_HISTORY.event_types)))
    assert applied == {"session_history": relevant}
    expected = digest(fold(SESSION_HISTORY, store.iter_all()))
    assert view_digest(live) == view_digest(rebuilt) == expected
    assert live.tracking("session_history") == store.max_position()
    store.close()


def fill_round(store, round_: int) -> None:
    for s in range(4):
        stream = session_stream_id("agent", f"s{s}")
        version = store.stream_version(stream)
        events = (
            [SessionOpened(agent="agent", session_key=f"s{s}")] if version == 0 else []
        )
        events += turn_events(f"s{s}r{round_}")
        store.append(stream, events, expected_version=version)


def test_a_page_is_never_applied_twice(tmp_path):
    """Committing at or below the tracking position is refused, changing nothing."""
    views = SQLiteViewStore(str(tmp_path / "v.db"))
    views.commit("p", {"k": {"n": 1}}, 10)
    with pytest.raises(
        TrackingConflictError, match="Expected a position after 10 for p, found 10"
    ):
        views.commit("p", {"k": {"n": 2}}, 10)
    assert views.tracking("p") == 10
    assert views.get("p", "k", dict) == {"n": 1}


def test_progress_is_reported(tmp_path):
    """Long catch-ups report progress per page."""
    store = open_store(str(tmp_path / "ledger.db"))
    fill(store, 2, 3)
    seen = []
    ProjectionRunner(
        store, SQLiteViewStore(str(tmp_path / "v.db")), [SESSION_HISTORY]
    ).catch_up(
        page_size=10, progress=lambda name, at, target: seen.append((name, at, target))
    )
    assert seen[-1] == ("session_history", store.max_position(), store.max_position())
    relevant = len(list(store.iter_all(types=SESSION_HISTORY.event_types)))
    assert len(seen) == -(-relevant // 10)  # pages of 10 matching events
    store.close()


def test_killed_rebuild_resumes_to_the_clean_result(tmp_path, rand):
    """SIGKILL mid-rebuild, several times: resuming equals a clean rebuild."""
    ledger_path = str(tmp_path / "ledger.db")
    store = open_store(ledger_path)
    fill(store, 12, 5)
    views_path = str(tmp_path / "views.db")
    for _ in range(6):
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.projections.runner_child",
                ledger_path,
                views_path,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout.readline().strip() == "started"
            time.sleep(rand.uniform(0.0, 0.3))
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
    views = SQLiteViewStore(views_path)
    partial = views.tracking("session_history")
    ProjectionRunner(store, views, [SESSION_HISTORY]).catch_up(page_size=5)
    clean = SQLiteViewStore(str(tmp_path / "clean.db"))
    ProjectionRunner(store, clean, [SESSION_HISTORY]).rebuild()
    assert view_digest(views) == view_digest(clean), f"resumed from {partial}"
    store.close()
