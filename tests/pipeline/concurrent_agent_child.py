"""A child process running engine turns of one agent beside its siblings.

::

    python -m tests.pipeline.concurrent_agent_child LEDGER AGENT SESSION CHILD
        --turns N [--memory-url URL] [--think SECONDS]

It opens the ledger at ``LEDGER`` (a SQLite path or a ``postgresql://`` URL) and
runs ``N`` turns of agent ``AGENT`` in session ``SESSION`` through the real
:class:`~turnledger.pipeline.engine.TurnEngine` (built by ``bootstrap``), with autosave on, the real
memory and knowledge tools, and the default memory strategy (consolidation
after each turn). Turn ``n`` of child ``CHILD``:

- the user says ``Remember fact CHILD-n: the build of round n is green.``
  (long enough to pass the autosave gate: one ``user_msg_*`` entry);
- the model calls ``memory_store`` (key ``fact_CHILD_n``, category ``core``) and
  ``knowledge_capture`` (``childCHILD --roundn--> green``) in parallel, then
  answers; with them it calls ``memory_store`` (odd turns) or
  ``memory_forget`` (even turns) of the key ``shared`` every child uses;
- consolidation writes one daily entry (``history_entry`` names the fact; no
  core update).

With ``--memory-url`` the agent's memory lives in that PostgreSQL schema, else
in a SQLite file beside the ledger. ``--think`` sleeps between turns (a user's
pause). A turn that raises is counted as crashed and the child goes on. The
child prints one JSON line at the end: ``child``, ``completed``, ``failed``
(turn outcomes that did not complete, with their failure) and ``crashed``
(exception type and message, per crashed turn), ``started`` and ``ended``
(wall-clock seconds around the turn loop) and ``conflicts`` (memory-stream
appends that lost a race and were retried). Logs go to stderr.

:func:`run_children` starts such children and :func:`check_run` checks what
they left in the ledger and in memory; ``tests/pipeline/test_concurrent_agents.py``
and ``benchmarks/stress_agents.py`` both use them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    KnowledgeCaptured,
    MemoryForgotten,
    MemoryStored,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config, parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.tools.base import Tool
from turnledger.pipeline.tools.knowledge_tools import knowledge_tools
from turnledger.pipeline.tools.memory_tools import memory_tools
from turnledger.policies.messages import ToolCall, starts_turn

_FACT = re.compile(r"Remember fact (\d+)-(\d+):")
SHARED_KEY = "shared"
"""The key every child stores (odd turns) and forgets (even turns)."""


def user_input(child: int, turn: int) -> str:
    """What the user says in turn ``turn`` of child ``child``."""
    return f"Remember fact {child}-{turn}: the build of round {turn} is green."


def fact_key(child: int, turn: int) -> str:
    """The key the model stores the turn's fact under."""
    return f"fact_{child}_{turn}"


class ChildModel:
    """A provider answering turns with two tool calls, and consolidation."""

    name = "scripted"
    model = "child-1"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Tools first, then an answer; a tool-less request is consolidation."""
        messages = request.messages
        users = [m.text for m in messages if m.role == "user"]
        found = _FACT.search(" ".join(users[-1:])) if users else None
        child, turn = (found.group(1), found.group(2)) if found else ("x", "x")
        if not request.tools:
            entry = f"child {child} noted that round {turn} is green"
            return ChatResponse(
                text=json.dumps({"history_entry": entry, "memory_update": None})
            )
        start = max(i for i, m in enumerate(messages) if starts_turn(m))
        if any(m.role == "assistant" for m in messages[start:]):
            return ChatResponse(text=f"Noted fact {child}-{turn}.")
        store = json.dumps(
            {
                "key": f"fact_{child}_{turn}",
                "content": f"round {turn} of child {child} is green",
                "category": "core",
            }
        )
        capture = json.dumps(
            {"subject": f"child{child}", "relation": f"round{turn}", "object": "green"}
        )
        calls = [
            ToolCall(id=f"call_s_{child}_{turn}", name="memory_store", arguments=store),
            ToolCall(
                id=f"call_k_{child}_{turn}", name="knowledge_capture", arguments=capture
            ),
        ]
        # Every child stores and forgets the same key on alternate turns.
        if turn.isdigit() and int(turn) % 2:
            shared = json.dumps({"key": SHARED_KEY, "content": f"set by {child}"})
            calls.append(
                ToolCall(
                    id=f"call_f_{child}_{turn}", name="memory_store", arguments=shared
                )
            )
        else:
            shared = json.dumps({"key": SHARED_KEY})
            calls.append(
                ToolCall(
                    id=f"call_f_{child}_{turn}", name="memory_forget", arguments=shared
                )
            )
        return ChatResponse(tool_calls=tuple(calls))

    async def aclose(self) -> None:
        """Nothing to release."""


def child_config(ledger: str, agent: str, memory_url: str | None) -> Config:
    """Autosave on, the default strategy, memory in SQLite or PostgreSQL."""
    base = Path(ledger).parent if "://" not in ledger else Path.cwd()
    lines = [
        f'data_dir = "{base / "data"}"',
        "[runtime]",
        "max_tool_iterations = 4",
        "context_budget_tokens = 4000",
        f"[agents.{agent}]",
        f'memory = "{"postgres" if memory_url else "sqlite"}"',
        "autosave = true",
    ]
    if memory_url:
        lines += ["[storage.postgres.default]", f'url = "{memory_url}"']
    return parse_config("\n".join(lines) + "\n")


async def run(args: argparse.Namespace) -> dict[str, object]:
    """Run the turns; return the report."""
    config = child_config(args.ledger, args.agent, args.memory_url)
    model = ChildModel()
    tools: dict[str, Tool] = {
        t.spec.name: t for t in (*memory_tools(), *knowledge_tools())
    }
    completed = 0
    failed: list[str] = []
    crashed: list[str] = []
    runtime = bootstrap(
        config,
        provider=model,
        ledger_url=args.ledger,
        tools=tools,
        consolidate_agent=args.agent,
    )
    async with runtime:
        engine = runtime.engine
        started = time.time()
        for turn in range(args.turns):
            try:
                outcome = await engine.run_turn(
                    args.agent, args.session, user_input(args.child, turn)
                )
            except Exception as e:  # counted: the parent asserts there were none
                crashed.append(f"{type(e).__name__}: {e}")
            else:
                if outcome.completed:
                    completed += 1
                else:
                    failed.append(str(outcome.failure))
            if args.think:
                await asyncio.sleep(args.think)
        ended = time.time()
    return {
        "child": args.child,
        "completed": completed,
        "failed": failed,
        "crashed": crashed,
        "started": started,
        "ended": ended,
        "conflicts": CONFLICTS["append.conflict"],
    }


CONFLICTS: Counter[str] = Counter()
"""Log events counted by the child (memory-stream conflicts that were retried)."""


def _count_conflicts(_logger: object, _name: str, event: dict) -> dict:
    CONFLICTS[str(event.get("event"))] += 1
    return event


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run, print the report."""
    parser = argparse.ArgumentParser(description="Run turns of a shared agent.")
    parser.add_argument("ledger")
    parser.add_argument("agent")
    parser.add_argument("session")
    parser.add_argument("child", type=int)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--memory-url", default=None)
    parser.add_argument("--think", type=float, default=0.0)
    args = parser.parse_args(argv)
    structlog.configure(
        processors=[_count_conflicts, *structlog.get_config()["processors"]],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    report = asyncio.run(run(args))
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


REPO_ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD = 600.0
"""Seconds a child may run before it is killed: a hang guard, not a bound."""


@dataclass
class Run:
    """What a run of children reported, and what the checks found."""

    children: int
    turns: int
    sessions: list[str]
    reports: list[dict[str, object]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def run_children(
    ledger: str,
    agent: str,
    sessions: Sequence[str],
    turns: int,
    *,
    memory_url: str | None = None,
    think: float = 0.0,
) -> Run:
    """Start one child per session entry (repeat a session to share it); wait."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = []
    for child, session in enumerate(sessions):
        command = [
            sys.executable,
            "-m",
            "tests.pipeline.concurrent_agent_child",
            ledger,
            agent,
            session,
            str(child),
            "--turns",
            str(turns),
            "--think",
            str(think),
        ]
        if memory_url:
            command += ["--memory-url", memory_url]
        procs.append(
            subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    run = Run(children=len(sessions), turns=turns, sessions=list(sessions))
    for child, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if proc.returncode != 0 or not out.strip():
            last = err.strip().splitlines()[-3:]  # why it exited, for the report
            run.problems.append(f"child {child} exited {proc.returncode}: {last}")
            continue
        report = json.loads(out.strip().splitlines()[-1])
        run.reports.append(report)
        for crash in report["crashed"]:
            run.problems.append(f"child {child} crashed a turn: {crash}")
        for failure in report["failed"]:
            run.problems.append(f"child {child} had a turn fail: {failure}")
        run.counts["completed"] += int(report["completed"])
        run.counts["conflicts_retried"] += int(report["conflicts"])
    if run.reports:
        run.seconds = max(float(str(r["ended"])) for r in run.reports) - min(
            float(str(r["started"])) for r in run.reports
        )
    return run


def _check_session(events: list[Recorded], expected_turns: int, run: Run) -> None:
    started = [e.event for e in events if isinstance(e.event, TurnStarted)]
    completed = [e.event for e in events if isinstance(e.event, TurnCompleted)]
    failed = [e.event for e in events if isinstance(e.event, TurnFailed)]
    run.counts["turns_started"] += len(started)
    run.counts["turns_recorded_complete"] += len(completed)
    if len(started) != expected_turns or len(completed) != expected_turns:
        run.problems.append(
            f"expected {expected_turns} started and completed turns in a session, "
            f"found {len(started)} and {len(completed)}"
        )
    if failed:
        run.problems.append(f"found failed turns: {[f.kind for f in failed]}")
    open_turn: str | None = None
    for recorded in events:
        event = recorded.event
        turn = getattr(event, "turn_id", None)
        if isinstance(event, TurnStarted):
            if open_turn is not None:
                run.problems.append(f"turn {event.turn_id} began inside {open_turn}")
            open_turn = event.turn_id
        elif turn is not None and turn != open_turn:
            run.problems.append(f"v{recorded.version} of turn {turn} is outside it")
        if isinstance(event, TurnCompleted | TurnFailed):
            open_turn = None
        if isinstance(event, ToolResultRecorded):
            run.counts["tool_results"] += 1
            run.counts[f"tool:{event.output.split(':')[0]}"] += event.success
            if not event.success:
                run.problems.append(f"a tool failed: {event.tool}: {event.error}")


def _check_memory(store: EventStore, agent: str, run: Run) -> None:
    stored = Counter[str]()
    sources = Counter[str]()
    captures: set[tuple[str, str]] = set()
    live = False
    for recorded in store.read_stream(memory_stream_id(agent)):
        event = recorded.event
        if isinstance(event, MemoryStored):
            stored[event.key] += 1
            sources[event.source if event.category != "daily" else "daily"] += 1
            live = live or event.key == SHARED_KEY
        elif isinstance(event, MemoryForgotten) and event.key == SHARED_KEY:
            run.counts["shared_forgets"] += 1
            if not live:
                run.problems.append(f"v{recorded.version} forgot a forgotten entry")
            live = False
        elif isinstance(event, KnowledgeCaptured):
            captures.add((event.subject, event.relation))
            run.counts["captures"] += 1
    total = run.children * run.turns
    facts = {fact_key(c, n) for c in range(run.children) for n in range(run.turns)}
    missing = sorted(k for k in facts if stored[k] != 1)
    run.counts["fact_writes"] = sum(stored[k] for k in facts)
    run.counts["autosaves"] = sources["autosave"]
    run.counts["daily_entries"] = sources["daily"]
    run.counts["shared_stores"] = stored[SHARED_KEY]
    expected_captures = {
        (f"child{c}", f"round{n}")
        for c in range(run.children)
        for n in range(run.turns)
    }
    if missing:
        run.problems.append(f"fact writes missing or doubled: {missing[:5]}")
    for name in ("autosaves", "daily_entries", "captures"):
        if run.counts[name] != total:
            run.problems.append(f"expected {total} {name}, found {run.counts[name]}")
    if captures != expected_captures:
        run.problems.append("knowledge captures differ from the calls made")
    stores_ok = run.counts["tool:Stored memory"] - run.counts["fact_writes"]
    if stores_ok != run.counts["shared_stores"]:
        run.problems.append("shared stores answered and recorded differ")
    if run.counts["tool:Forgot memory"] != run.counts["shared_forgets"]:
        run.problems.append("shared forgets answered and recorded differ")


def check_run(
    run: Run, ledger: str, agent: str, *, memory_url: str | None = None
) -> Run:
    """Check the ledger, the sessions and the memory the children left; in place."""
    store = open_store(ledger)
    try:
        report = verify(store)
        run.counts["verify_problems"] = len(report.problems)
        if not report.ok:
            run.problems.append(f"verify: {report.problems[:3]}")
        for session in sorted(set(run.sessions)):
            events = store.read_stream(session_stream_id(agent, session))
            expected = run.turns * run.sessions.count(session)
            _check_session(events, expected, run)
        _check_memory(store, agent, run)
        memory = MemoryService(
            store, child_config(ledger, agent, memory_url), ledger_url=ledger
        )
        try:
            lost = [
                fact_key(c, n)
                for c in range(run.children)
                for n in range(run.turns)
                if memory.get(agent, fact_key(c, n)) is None
            ]
        finally:
            memory.close()
        run.counts["facts_lost_in_memory"] = len(lost)
        if lost:
            run.problems.append(f"facts missing from the memory backend: {lost[:5]}")
    finally:
        store.close()
    return run


if __name__ == "__main__":
    sys.exit(main())
