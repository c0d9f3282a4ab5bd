"""SIGKILL a writer at random moments: no turn is ever partial, none acknowledged lost.

The child (``tests/ledger/crash_child.py``) appends 8-event turns in a loop and
prints each turn id once its append returned. Each test kills children again and
again on ONE ledger, so it grows across kills, and checks it after every kill (see
``check_ledger``). Kill moments come from the seeded ``rand`` fixture
(TURNLEDGER_TEST_SEED replays a failure's choices; the seed is in the message).
"""

from __future__ import annotations

import pytest

from tests.ledger.crash_child import (
    CrashLoop,
    check_ledger,
    child_command,
    run_child,
    turn_events,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store

SQLITE_SYNC_KILLS = 28
SQLITE_ASYNC_KILLS = 22
POSTGRES_KILLS = 10
CLEAN_RUN_TIMEOUT = 60.0  # a hang guard, not a performance bound


def _kill_repeatedly(loop: CrashLoop, rand, kills: int, *, modes: tuple[bool, ...]):
    for i in range(kills):
        step = loop.step(rand, use_async=modes[i % len(modes)])
        assert step.ok, f"{rand!r}\n{loop.describe(step)}"
    assert loop.last_check is not None
    assert loop.known == loop.last_check.turns
    # The kills hit children that had acknowledged turns, not only starting ones.
    assert loop.acknowledged > 0


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_child_left_alone_commits_whole_turns(sqlite_path, use_async):
    """Unkilled, the child exits cleanly and every turn it prints is whole."""
    command = child_command(sqlite_path, "calm", use_async=use_async, max_turns=3)
    run = run_child(command, timeout=CLEAN_RUN_TIMEOUT)
    assert run.returncode == 0, run.stderr
    assert len(run.committed) == (12 if use_async else 3)
    with open_store(sqlite_path) as store:
        check = check_ledger(store, run.committed)
    assert check.ok, check.problems
    assert check.turns == set(run.committed)
    assert check.streams == (4 if use_async else 1)


def test_check_catches_partial_and_missing_turns(sqlite_path):
    """The post-kill check is not vacuous: it reports a partial and a lost turn."""
    stream = session_stream_id("check", "k")
    with open_store(sqlite_path) as store:
        store.append(stream, turn_events("a" * 32), expected_version=0)
        store.append(stream, turn_events("b" * 32)[:5], expected_version=8)
        check = check_ledger(store, ["a" * 32, "c" * 32])
    assert check.turns == {"a" * 32}
    assert any("b" * 32 in p and "partial" in p for p in check.problems)
    assert any("c" * 32 in p and "acknowledged" in p for p in check.problems)
    assert not any("a" * 32 in p for p in check.problems)


@pytest.mark.slow
def test_sigkill_sync_writer_sqlite(sqlite_path, rand):
    """28 kills of the synchronous writer on one growing SQLite ledger."""
    loop = CrashLoop(sqlite_path)
    _kill_repeatedly(loop, rand, SQLITE_SYNC_KILLS, modes=(False,))


@pytest.mark.slow
def test_sigkill_async_group_committer_sqlite(sqlite_path, rand):
    """22 kills of 4 concurrent sessions on the group-commit facade, SQLite."""
    loop = CrashLoop(sqlite_path)
    _kill_repeatedly(loop, rand, SQLITE_ASYNC_KILLS, modes=(True,))


@pytest.mark.slow
@pytest.mark.postgres
def test_sigkill_writers_postgres(postgres_url, rand):
    """10 kills on PostgreSQL, alternating the sync and the async child."""
    loop = CrashLoop(postgres_url)
    _kill_repeatedly(loop, rand, POSTGRES_KILLS, modes=(False, True))
