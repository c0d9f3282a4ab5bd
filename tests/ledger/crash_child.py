"""Crash testing of the ledger: the child that gets killed, the kill, the checks.

The child appends turns to a ledger until it is killed::

    python -m tests.ledger.crash_child DB_URL STREAM_AGENT [--async] [--sessions N]
        [--max-turns N]

It opens the store, resumes every stream it writes from the stream's head, writes a
``session.opened`` event to a new stream, then loops: each turn is ONE append of 8
events (see :func:`turn_events`) under a fresh uuid4-hex turn id. After an append
returns it prints ``committed <turn_id>`` and flushes stdout, so every line the
parent reads names a turn the ledger acknowledged. By default it writes through the
synchronous :class:`~ledger.store.EventStore` to one session (``STREAM_AGENT`` /
``main``); with ``--async`` it runs ``--sessions`` concurrent sessions (``s0``,
``s1``...) through :class:`~ledger.aio.AsyncLedger`, so kills also land in the
middle of group commits.

The parent side is shared by ``tests/ledger/test_crash.py`` and
``benchmarks/stress_crash.py``: :class:`CrashLoop` starts a child, SIGKILLs it at a
random moment (:func:`kill_child`) and checks the ledger (:func:`check_ledger`):
``verify`` is clean, every turn is whole (8 events, one stream, contiguous versions,
``turn.started`` ... ``turn.completed``), and every turn acknowledged so far, by
this child or an earlier one, is still there.

The child imports only the ledger and the standard library, so it starts fast.
"""

from __future__ import annotations

import argparse
import itertools
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import IO, TYPE_CHECKING
from uuid import UUID, uuid4

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
    tag_of,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify

if TYPE_CHECKING:
    from turnledger.ledger.aio import AsyncLedger

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The working directory the child runs in (so ``-m tests.ledger...`` resolves)."""

CHILD_MODULE = "tests.ledger.crash_child"
"""The module run as the child program."""

SYNC_SESSION_KEY = "main"
"""The session key of the synchronous child's single stream."""

COMMITTED_LINE = re.compile(r"committed ([0-9a-f]{32})\n")
"""A full line a child prints after an append returned (a partial line is ignored)."""


def turn_events(turn_id: str) -> list[Event]:
    """Return the 8 events of one turn with two tool calls, in order."""
    calls = tuple(
        ToolCallRecord(id=f"{turn_id}-c{i}", name="file_read", arguments='{"p": 1}')
        for i in range(2)
    )
    return [
        TurnStarted(turn_id=turn_id, origin="interactive", user_input="crash " * 8),
        ModelCalled(turn_id=turn_id, provider="p", model="m", input_tokens=120),
        AssistantMessage(turn_id=turn_id, tool_calls=calls),
        *(
            ToolResultRecorded(turn_id=turn_id, call_id=c.id, tool=c.name, output="ok")
            for c in calls
        ),
        ModelCalled(turn_id=turn_id, provider="p", model="m", iteration=1),
        AssistantMessage(turn_id=turn_id, text="done", iteration=1),
        TurnCompleted(turn_id=turn_id, iterations=2),
    ]


TURN_TAGS: tuple[str, ...] = tuple(tag_of(type(e)) for e in turn_events("shape"))
"""The tags of a whole turn's events, in version order."""


# --- the child -------------------------------------------------------------------


def _report(turn_id: str) -> None:
    sys.stdout.write(f"committed {turn_id}\n")
    sys.stdout.flush()


def _turn_numbers(max_turns: int | None) -> Iterator[int]:
    return itertools.count() if max_turns is None else iter(range(max_turns))


def run_sync(store: EventStore, agent: str, max_turns: int | None) -> None:
    """Append turns to one session through the synchronous store."""
    stream = session_stream_id(agent, SYNC_SESSION_KEY)
    head = store.stream_version(stream)
    if head == 0:
        opened = SessionOpened(agent=agent, session_key=SYNC_SESSION_KEY)
        head = store.append(stream, [opened], expected_version=0).last_version
    for _ in _turn_numbers(max_turns):
        turn_id = uuid4().hex
        head = store.append(
            stream, turn_events(turn_id), expected_version=head
        ).last_version
        _report(turn_id)


async def _run_session(
    ledger: AsyncLedger, agent: str, key: str, max_turns: int | None
) -> None:
    stream = session_stream_id(agent, key)
    head = await ledger.stream_version(stream)
    if head == 0:
        opened = SessionOpened(agent=agent, session_key=key)
        head = (await ledger.append(stream, [opened], expected_version=0)).last_version
    for _ in _turn_numbers(max_turns):
        turn_id = uuid4().hex
        result = await ledger.append(
            stream, turn_events(turn_id), expected_version=head
        )
        head = result.last_version
        _report(turn_id)


async def run_async(
    store: EventStore, agent: str, sessions: int, max_turns: int | None
) -> None:
    """Append turns to several sessions at once through the group-commit facade."""
    import asyncio  # here, not at the top: the sync child starts ~0.1 s faster

    from turnledger.ledger.aio import AsyncLedger  # idem (it imports asyncio)

    async with AsyncLedger(store) as ledger:
        await asyncio.gather(
            *(_run_session(ledger, agent, f"s{i}", max_turns) for i in range(sessions))
        )


def child_main(argv: Sequence[str] | None = None) -> int:
    """Run the child program (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Append turns until killed.")
    parser.add_argument("db_url", help="a SQLite file path or a postgresql:// URL")
    parser.add_argument("agent", help="the agent whose session stream(s) to write")
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--sessions", type=int, default=4, help="with --async")
    parser.add_argument("--max-turns", type=int, default=None, help="per session")
    args = parser.parse_args(argv)
    store = open_store(args.db_url)
    if args.use_async:  # the facade owns the store and closes it
        import asyncio  # idem

        asyncio.run(run_async(store, args.agent, args.sessions, args.max_turns))
    else:
        with store:
            run_sync(store, args.agent, args.max_turns)
    return 0


# --- the parent: start, kill ----------------------------------------------------


def child_command(
    db_url: str,
    agent: str,
    *,
    use_async: bool = False,
    sessions: int = 4,
    max_turns: int | None = None,
) -> list[str]:
    """Return the command line of a child (to run with ``cwd=REPO_ROOT``)."""
    command = [sys.executable, "-m", CHILD_MODULE, db_url, agent]
    if use_async:
        command += ["--async", "--sessions", str(sessions)]
    if max_turns is not None:
        command += ["--max-turns", str(max_turns)]
    return command


class _CommitReader(threading.Thread):
    """Collects a child's ``committed`` lines; flags the first one (or EOF)."""

    def __init__(self, stdout: IO[str]) -> None:
        super().__init__(daemon=True)
        self._stdout = stdout
        self.committed: list[str] = []
        self.first_commit_or_eof = threading.Event()

    def run(self) -> None:
        try:
            for line in self._stdout:
                match = COMMITTED_LINE.fullmatch(line)
                if match:
                    self.committed.append(match[1])
                    self.first_commit_or_eof.set()
        finally:
            self.first_commit_or_eof.set()


@dataclass(frozen=True)
class KillTiming:
    """When to kill a child.

    Attributes:
        early_probability: The chance of killing at a random moment after start,
            commit or not (during imports, opening, the first append...).
        early_window: Seconds after start within which an early kill lands.
        max_delay: Otherwise, the longest delay after the first commit line.
        hang_guard: Seconds to wait for a first commit before killing anyway
            (reported as a problem: the child should commit well before).
    """

    early_probability: float = 0.15
    early_window: float = 0.5
    max_delay: float = 0.04
    hang_guard: float = 60.0


@dataclass(frozen=True)
class ChildRun:
    """What one killed child did: the turns it acknowledged, how it ended."""

    committed: tuple[str, ...]
    early: bool
    delay: float
    returncode: int
    stderr: str

    @property
    def by_sigkill(self) -> bool:
        """Whether the child died of our SIGKILL (not on its own)."""
        return self.returncode == -signal.SIGKILL


def run_child(command: Sequence[str], *, timeout: float) -> ChildRun:
    """Run a child to completion (no kill); a hang past ``timeout`` is killed."""
    with subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    committed = tuple(m[1] for m in COMMITTED_LINE.finditer(out or ""))
    return ChildRun(
        committed=committed,
        early=False,
        delay=0.0,
        returncode=proc.returncode,
        stderr=err or "",
    )


def kill_child(command: Sequence[str], rand: Random, timing: KillTiming) -> ChildRun:
    """Start a child and SIGKILL it at a random moment; always reap it."""
    early = rand.random() < timing.early_probability
    delay = rand.uniform(0.0, timing.early_window if early else timing.max_delay)
    with subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        reader = _CommitReader(proc.stdout)
        reader.start()
        try:
            if not early:
                reader.first_commit_or_eof.wait(timing.hang_guard)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)  # a no-op if it already ended
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.join()
        stderr = proc.stderr.read()
    return ChildRun(
        committed=tuple(reader.committed),
        early=early,
        delay=delay,
        returncode=proc.returncode,
        stderr=stderr,
    )


# --- the parent: check -----------------------------------------------------------


@dataclass(frozen=True)
class LedgerCheck:
    """What :func:`check_ledger` found."""

    events: int
    streams: int
    turns: frozenset[str]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.problems


def check_ledger(store: EventStore, expected: Iterable[str] = ()) -> LedgerCheck:
    """Check that the ledger is whole and holds every ``expected`` turn.

    ``verify`` must be clean; every event is either a ``session.opened`` at version
    1 or part of a turn; every turn id has exactly the 8 events of
    :data:`TURN_TAGS`, in one stream at contiguous versions; every expected turn is
    present. ``turns`` lists the whole turns found.
    """
    report = verify(store)
    problems = [
        f"verify: {p.kind} at position {p.position}: {p.message}"
        for p in report.problems
    ]
    by_turn: dict[str, list[tuple[UUID, int, str]]] = defaultdict(list)
    try:
        for recorded in store.iter_all(page_size=2000):
            event = recorded.event
            where = f"stream {recorded.stream_id} version {recorded.version}"
            if isinstance(event, SessionOpened):
                if recorded.version != 1:
                    problems.append(f"session.opened at {where}, expected version 1")
                continue
            turn_id = getattr(event, "turn_id", None)
            if not isinstance(turn_id, str):
                problems.append(f"{tag_of(type(event))} at {where} is not in a turn")
                continue
            by_turn[turn_id].append(
                (recorded.stream_id, recorded.version, tag_of(type(event)))
            )
    except LedgerError as e:
        problems.append(f"reading the ledger failed: {e!r}")
    whole = set()
    for turn_id, rows in by_turn.items():
        found = _turn_problems(turn_id, rows)
        problems.extend(found)
        if not found:
            whole.add(turn_id)
    problems.extend(
        f"turn {turn_id} was acknowledged but is not (whole) in the ledger"
        for turn_id in sorted(set(expected) - whole)
    )
    return LedgerCheck(
        events=report.events,
        streams=report.streams,
        turns=frozenset(whole),
        problems=tuple(problems),
    )


def _turn_problems(turn_id: str, rows: list[tuple[UUID, int, str]]) -> list[str]:
    rows = sorted(rows, key=lambda r: r[1])
    streams = {stream for stream, _, _ in rows}
    versions = [version for _, version, _ in rows]
    tags = tuple(tag for _, _, tag in rows)
    problems = []
    if len(streams) != 1:
        problems.append(f"turn {turn_id} spans {len(streams)} streams")
    if versions != list(range(versions[0], versions[0] + len(versions))):
        problems.append(f"turn {turn_id} has versions {versions}, not contiguous")
    if tags != TURN_TAGS:
        problems.append(f"turn {turn_id} is partial: {len(tags)} events {tags}")
    return problems


# --- the parent: the loop -------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One kill and the check after it."""

    kill: ChildRun
    check: LedgerCheck
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether the child died of the kill and the ledger is whole."""
        return not self.problems


@dataclass
class CrashLoop:
    """Kill children writing to one ledger, again and again, checking after each.

    The ledger grows across kills. Every turn a child acknowledged, and every whole
    turn a check found, must be found by every later check.
    """

    db_url: str
    agent: str = "crash"
    sessions: int = 4
    timing: KillTiming = field(default_factory=KillTiming)
    kills: int = 0
    early_kills: int = 0
    acknowledged: int = 0
    known: set[str] = field(default_factory=set)
    last_check: LedgerCheck | None = None

    def step(self, rand: Random, *, use_async: bool = False) -> Step:
        """Start a child, kill it at a random moment, check the ledger."""
        command = child_command(
            self.db_url, self.agent, use_async=use_async, sessions=self.sessions
        )
        kill = kill_child(command, rand, self.timing)
        self.kills += 1
        self.early_kills += kill.early
        self.acknowledged += len(kill.committed)
        problems = []
        if not kill.by_sigkill:
            problems.append(
                f"the child ended by itself (code {kill.returncode}) "
                f"before the kill:\n{kill.stderr[-3000:]}"
            )
        elif not kill.early and not kill.committed:
            problems.append(
                f"the child acknowledged no turn within {self.timing.hang_guard}s:\n"
                f"{kill.stderr[-3000:]}"
            )
        self.known.update(kill.committed)
        with open_store(self.db_url) as store:
            check = check_ledger(store, self.known)
        self.known.update(check.turns)
        self.last_check = check
        return Step(kill, check, (*problems, *check.problems))

    def describe(self, step: Step) -> str:
        """Say what a step did, for a failure message."""
        kill = step.kill
        when = "from start" if kill.early else "after the first commit"
        lines = [
            (
                f"kill {self.kills}: SIGKILL {kill.delay * 1000:.0f} ms {when}, "
                f"{len(kill.committed)} turns acknowledged, code {kill.returncode}"
            ),
            (
                f"ledger: {step.check.events} events, {step.check.streams} streams, "
                f"{len(step.check.turns)} whole turns"
            ),
            *step.problems[:20],
        ]
        if len(step.problems) > 20:
            lines.append(f"... and {len(step.problems) - 20} more problems")
        return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(child_main())
