"""SIGKILL the turn engine between steps; the next turn repairs the session.

A child (``tests/pipeline/crash_turn_child.py``) runs engine turns with tool
calls on a durable SQLite ledger and reports each append and each tool call as
it starts. The parent kills it at a seeded random moment, chosen one of three
ways: while tool calls are in flight (right after a ``nap`` line), right after
any reported line (an append, a nap, a turn's end), or at a random time after
start (maybe before the session exists). After each kill a fresh engine runs
one more turn in the same session. Then:

- the interrupted turn, if any, is closed by ``turn.failed`` (kind
  ``interrupted``), preceded by a synthesized result for each call that had
  none, and for exactly those;
- the new turn completes, its prompt audits clean, and every started turn of
  the session is closed;
- ``verify`` is clean, and so is the pairing audit of the session history.

The ledger grows across kills. Kill moments come from the seeded ``rand``
fixture (TURNLEDGER_TEST_SEED replays a failure; the seed is in the message).
"""

from __future__ import annotations

import asyncio
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.pipeline.crash_turn_child import NapTool, child_config
from turnledger.ledger.events import (
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.engine import TurnOutcome
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import load_history
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.history import SessionHistoryState
from turnledger.projections.history.read import visible_messages

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD = "tests.pipeline.crash_turn_child"
AGENT = "crash"
SESSION = "s1"
NAP_SECONDS = 0.05
KILLS = 12
MODES = ("nap", "line", "line", "nap", "line", "start")
HANG_GUARD = 60.0  # seconds to wait for a child's line: a hang guard, not a bound


@dataclass(frozen=True)
class Kill:
    """How one child was killed."""

    mode: str
    lines: tuple[str, ...]
    returncode: int
    stderr: str

    def describe(self) -> str:
        tail = " | ".join(self.lines[-4:])
        return f"{self.mode} kill after {len(self.lines)} lines (... {tail})"


def _read_lines(stdout: IO[str], lines: queue.SimpleQueue[str | None]) -> None:
    try:
        for line in stdout:
            lines.put(line.strip())
    finally:
        lines.put(None)


def _wait_for(lines: queue.SimpleQueue[str | None], seen: list[str], want) -> None:
    """Read lines until ``want(line, seen)`` holds; fail on EOF or a hang."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if line is None:
            raise AssertionError(f"the child ended by itself after {seen[-5:]}")
        seen.append(line)
        if want(line, seen):
            return


def kill_child(db_path: str, rand, mode: str, stderr_path: Path) -> Kill:
    """Start a child and SIGKILL it at a moment chosen by ``mode``; always reap it."""
    command = [
        sys.executable,
        "-m",
        CHILD,
        db_path,
        AGENT,
        SESSION,
        "--nap",
        str(NAP_SECONDS),
    ]
    seen: list[str] = []
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    with (
        stderr_path.open("wb") as stderr,
        subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        ) as proc,
    ):
        assert proc.stdout is not None
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines))
        reader.start()
        try:
            if mode == "start":
                time.sleep(rand.uniform(0.0, 1.2))
            elif mode == "nap":
                naps = rand.randint(1, 6)
                _wait_for(
                    lines,
                    seen,
                    lambda line, s: sum(x.startswith("nap ") for x in s) >= naps,
                )
                time.sleep(rand.uniform(0.0, NAP_SECONDS / 2))
            else:
                count = rand.randint(1, 30)
                _wait_for(lines, seen, lambda line, s: len(s) > count)
                time.sleep(rand.uniform(0.0, 0.005))
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.join()
    while (line := _drain(lines)) is not None:
        seen.append(line)
    return Kill(
        mode=mode,
        lines=tuple(seen),
        returncode=proc.returncode,
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
    )


def _drain(lines: queue.SimpleQueue[str | None]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


async def next_turn(db_path: str) -> tuple[TurnOutcome, list[ChatRequest]]:
    """A fresh engine (as after a restart) runs one turn in the session."""
    config = child_config(db_path)
    provider = ScriptedProvider([ChatResponse(text="back after the crash")])
    async with bootstrap(
        config, provider=provider, ledger_url=db_path, tools={"nap": NapTool(0.0)}
    ) as runtime:
        outcome = await runtime.engine.run_turn(AGENT, SESSION, "are you back?")
    return outcome, provider.requests


def dangling_calls(state: SessionHistoryState) -> list[str]:
    """The ids of the open turn's calls that have no result."""
    answered = {r.call_id for e in state.entries for r in e.message.tool_results}
    return [
        call.id
        for e in state.entries
        if e.turn_id == state.open_turn
        for call in e.message.tool_calls
        if call.id not in answered
    ]


def check_after_kill(db_path: str, kill: Kill) -> tuple[bool, int]:
    """Run the next turn and check the repair; returns (repaired, synthesized)."""
    stream = session_stream_id(AGENT, SESSION)
    with open_store(db_path) as store:
        before = load_history(store, stream)
        head = store.stream_version(stream)
    open_turn, dangling = before.open_turn, dangling_calls(before)
    outcome, requests = asyncio.run(next_turn(db_path))
    where = kill.describe()
    assert outcome.completed, where
    with open_store(db_path) as store:
        report = verify(store)
        assert report.ok, (where, report.problems)
        events = [r.event for r in store.read_stream(stream)]
        new = [r.event for r in store.read_stream(stream, after=head)]
        history = load_history(store, stream)
    synthesized = [
        e.call_id
        for e in new
        if isinstance(e, ToolResultRecorded) and e.provenance == "synthesized"
    ]
    interrupted = [
        e.turn_id for e in new if isinstance(e, TurnFailed) and e.kind == "interrupted"
    ]
    if open_turn is None:
        assert (synthesized, interrupted) == ([], []), where
    else:
        assert sorted(synthesized) == sorted(dangling), where
        assert interrupted == [open_turn], where
        # The repair is one step, before the new turn starts.
        repair = new[: len(dangling) + 1]
        assert isinstance(repair[-1], TurnFailed), (where, repair)
        assert isinstance(new[len(dangling) + 1], TurnStarted), where
    assert isinstance(new[-1], TurnCompleted), where
    assert history.open_turn is None, where
    started = {e.turn_id for e in events if isinstance(e, TurnStarted)}
    closed = {e.turn_id for e in events if isinstance(e, TurnCompleted | TurnFailed)}
    assert started == closed, where
    assert audit_pairing(visible_messages(history)).clean, where
    assert all(audit_pairing(r.messages).clean for r in requests), where
    return open_turn is not None, len(synthesized)


def test_child_left_alone_completes_its_turns(tmp_path):
    """Unkilled, the child runs its turns to the end on a clean ledger."""
    db_path = str(tmp_path / "ledger.db")
    done = subprocess.run(
        [sys.executable, "-m", CHILD, db_path, AGENT, SESSION, "--turns", "2"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "ready"
    assert [line.split()[2] for line in lines if line.startswith("turn ")] == [
        "completed",
        "completed",
    ]
    assert sum(line.startswith("nap ") for line in lines) == 6
    with open_store(db_path) as store:
        assert verify(store).ok
        history = load_history(store, session_stream_id(AGENT, SESSION))
    assert history.turns_completed == 2
    assert audit_pairing(visible_messages(history)).clean


@pytest.mark.slow
def test_sigkill_between_steps_is_repaired_by_the_next_turn(tmp_path, rand):
    """12 kills on one growing ledger; after each, the next turn repairs it."""
    db_path = str(tmp_path / "ledger.db")
    repaired = synthesized = 0
    for i in range(KILLS):
        mode = MODES[i % len(MODES)]
        kill = kill_child(db_path, rand, mode, tmp_path / f"child{i}.err")
        assert kill.returncode == -signal.SIGKILL, (
            f"{rand!r}: {kill.describe()}\n{kill.stderr[-3000:]}"
        )
        fixed, made = check_after_kill(db_path, kill)
        repaired += fixed
        synthesized += made
    # The kills did land mid-turn, with calls in flight.
    assert repaired >= 3, rand
    assert synthesized >= 3, rand
