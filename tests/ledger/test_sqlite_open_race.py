"""Processes opening one new SQLite ledger at the same moment all open it.

Switching a new file to WAL answers "database is locked" at once, without the
busy handler, while another process switches it too; ``set_wal`` tries again
until the lock timeout (found by the concurrent-agent tests: a child exited with
``LedgerLockedError ... (waited 0 s)`` at open).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from turnledger.ledger.sqlite.setup import set_wal
from turnledger.ledger.store import open_store

ROOT = Path(__file__).resolve().parents[2]
OPENER = """
import sys, time
from turnledger.ledger.store import open_store
start = float(sys.argv[2])
while time.time() < start:
    pass
open_store(sys.argv[1]).close()
"""


class _Rows:
    def __init__(self, value: str) -> None:
        self.value = value

    def fetchone(self) -> tuple[str]:
        return (self.value,)


class _Busy:
    """A connection whose journal mode switch is busy ``times`` times first."""

    def __init__(self, times: int, code: int = sqlite3.SQLITE_BUSY) -> None:
        self.times = times
        self.code = code
        self.mode = "delete"
        self.tries = 0

    def execute(self, sql: str) -> _Rows:
        if sql == "PRAGMA journal_mode=WAL":
            self.tries += 1
            if self.tries <= self.times:
                error = sqlite3.OperationalError("database is locked")
                error.sqlite_errorcode = self.code
                raise error
            self.mode = "wal"
        return _Rows(self.mode)


def test_a_busy_switch_is_tried_again_until_it_goes_through():
    slept: list[float] = []
    busy = _Busy(times=3)
    assert set_wal(busy, 5.0, sleep=slept.append) is True  # type: ignore[arg-type]
    assert busy.tries == 4
    assert slept == [0.001, 0.002, 0.004]
    assert set_wal(busy, 5.0, sleep=slept.append) is False  # type: ignore[arg-type]


def test_a_busy_switch_past_the_timeout_and_other_errors_are_raised():
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        set_wal(_Busy(times=10**6), 0.0, sleep=lambda _s: None)  # type: ignore[arg-type]
    other = _Busy(times=1, code=sqlite3.SQLITE_IOERR)
    with pytest.raises(sqlite3.OperationalError):
        set_wal(other, 5.0, sleep=lambda _s: None)  # type: ignore[arg-type]
    assert other.tries == 1


def test_four_processes_open_one_new_ledger_at_once(tmp_path: Path):
    for round_ in range(8):
        path = str(tmp_path / f"ledger{round_}.db")
        start = time.time() + 0.6
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, path, str(start)],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        errors = [p.communicate(timeout=60)[1] for p in openers]
        assert [p.returncode for p in openers] == [0] * 4, errors
        with open_store(path) as store:
            assert store.kind == "sqlite"
