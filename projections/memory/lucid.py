"""Lucid memory: a local backend first, an external ``lucid`` command second (§2.5).

Every write and read goes to the local backend (SQLite, usually), which stays
authoritative. A keyword recall also asks the external command when the local
hits are fewer than ``min(limit, local_hit_threshold)``, unless a recent failure
started the cooldown. A timeout, a non-zero exit or a missing command starts the
cooldown and the local results are returned as they are. Results are merged
local first, de-duplicated by content and by (agent, key), cut at the limit.

The command protocol (an argv list, never a shell)::

    <command> context --budget=200 --agent=alice [--agent=bob] [--project=P] -- QUERY
    <command> store --type=decision --agent=alice [--project=P] -- "KEY: CONTENT"

``context`` prints, among any other output, one block::

    <lucid-context>
    - [decision] Helix is the editor
    - [context agent=alice key=standup session=s1 at=2026-11-01T12:00Z score=0.8] ok
    </lucid-context>

The label maps to a category as in ZeroClaw (``decision``/``learning``/
``solution`` → core, ``context``/``conversation`` → conversation, ``bug`` →
daily, ``*visual*`` → ``visual``, anything else is kept as a custom category).
Optional ``name=value`` attributes (JSON-quoted when they hold spaces) carry the
agent, key, session, time and score; an unscored line ranks by position
(``1 - 0.05 * rank``, at least 0.1). Leak guard, added to the reference: the
allowlist is passed to the command, a line naming an agent outside it is
dropped, and a line naming no agent is kept only when exactly one agent was
asked for (it is attributed to that agent). Session and time filters apply to
the external lines as to local rows. A recent query (``""``/``*``) never runs
the command.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final, TypeAlias

from turnledger.ledger.envelope import Recorded
from turnledger.policies.recall_scope import bound_recall_limit
from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.protocol import (
    MemoryBackend,
    MemoryEntry,
    NewMemory,
    Unsupported,
    is_recent_query,
    visible_in_session,
)

CONTEXT_OPEN: Final = "<lucid-context>"
CONTEXT_CLOSE: Final = "</lucid-context>"
DEFAULT_TOKEN_BUDGET: Final = 200
_LINE = re.compile(r'^- \[(?P<meta>(?:[^\]"]|"(?:[^"\\]|\\.)*")*)\]\s*(?P<content>.*)$')
_ATTRIBUTE = re.compile(r'(?P<name>\w+)=(?P<value>"(?:[^"\\]|\\.)*"|\S+)')
_CATEGORIES: Final = {
    "decision": "core",
    "learning": "core",
    "solution": "core",
    "context": "conversation",
    "conversation": "conversation",
    "bug": "daily",
}
_TYPES: Final = {"core": "decision", "daily": "context", "conversation": "conversation"}
_Entries: TypeAlias = list[MemoryEntry]


def lucid_category(label: str) -> str:
    """Return the memory category of a Lucid type label."""
    label = label.strip().lower()
    return "visual" if "visual" in label else _CATEGORIES.get(label, label)


def _attributes(meta: str) -> tuple[str, dict[str, str]]:
    label, _, rest = meta.strip().partition(" ")
    values: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(rest):
        value = match["value"]
        values[match["name"]] = (
            str(json.loads(value)) if value.startswith('"') else value
        )
    return label, values


def _score(values: dict[str, str], rank: int) -> float:
    try:
        return min(1.0, max(0.0, float(values["score"])))
    except (KeyError, ValueError):
        return max(0.1, 1.0 - rank * 0.05)


def _time(values: dict[str, str], now: datetime) -> datetime:
    try:
        found = datetime.fromisoformat(values["at"])
    except (KeyError, ValueError):
        return now
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def parse_context(output: str, *, agents: Sequence[str], now: datetime) -> _Entries:
    """Parse a ``<lucid-context>`` block into scored entries, leak guard applied.

    Args:
        output: The command's standard output.
        agents: The agents the command was asked about.
        now: The time given to lines without ``at=``.

    Returns:
        The entries in output order; lines naming an agent outside ``agents``,
        or naming none when several agents were asked about, are dropped.
    """
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == CONTEXT_OPEN]
    entries: _Entries = []
    for line in lines[starts[0] + 1 :] if starts else []:
        line = line.strip()  # noqa: PLW2901 - the stripped line is the line
        if line == CONTEXT_CLOSE:
            break
        match = _LINE.match(line)
        if match is None or not match["content"].strip():
            continue
        label, values = _attributes(match["meta"])
        agent = values.get("agent") or (agents[0] if len(agents) == 1 else None)
        if agent is None or agent not in agents:
            continue
        content, rank = match["content"].strip(), len(entries)
        digest = hashlib.sha256(f"{agent}\x00{content}".encode()).hexdigest()[:16]
        at = _time(values, now)
        entries.append(
            MemoryEntry(
                id=f"lucid:{digest}",
                key=values.get("key", f"lucid_{rank}"),
                content=content,
                category=lucid_category(label),
                agent=agent,
                session=values.get("session"),
                created_at=at,
                updated_at=at,
                score=_score(values, rank),
            )
        )
    return entries


def _signature(entry: MemoryEntry) -> str:
    return " ".join(entry.content.casefold().split())


def merge_local_first(local: _Entries, external: _Entries, limit: int) -> _Entries:
    """Return local results, then new external ones, de-duplicated, cut at limit."""
    merged: _Entries = []
    seen: set[object] = set()
    for entry in [*local, *external]:
        marks = {_signature(entry), (entry.agent, entry.key)}
        if marks & seen:
            continue
        seen |= marks
        merged.append(entry)
    return merged[:limit]


@typed_memory_errors("lucid")
class LucidMemory:
    """A local backend plus the external Lucid command.

    Args:
        local: The authoritative backend (SQLite or any other).
        command: The command's argv prefix, e.g. ``["lucid"]``.
        recall_timeout: Seconds a ``context`` call may take.
        store_timeout: Seconds a ``store`` call may take.
        local_hit_threshold: Enough local hits to skip the command.
        failure_cooldown: Seconds the command is skipped after a failure.
        token_budget: The ``--budget`` passed to ``context``.
        project: The ``--project`` passed to the command, when given.
        sync_writes: Also send each write to ``store`` (best effort).
        clock: Monotonic seconds (tests pass a fake).
        now: The time of undated external lines.
    """

    name = "lucid"

    def __init__(
        self,
        local: MemoryBackend,
        command: Sequence[str],
        *,
        recall_timeout: float = 3.0,
        store_timeout: float = 3.0,
        local_hit_threshold: int = 3,
        failure_cooldown: float = 15.0,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        project: str | None = None,
        sync_writes: bool = False,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.local = local
        self.command = list(command)
        self.capabilities = local.capabilities
        self.recall_timeout, self.store_timeout = recall_timeout, store_timeout
        self.local_hit_threshold = max(1, local_hit_threshold)
        self.failure_cooldown = failure_cooldown
        self._budget, self._project, self._sync = token_budget, project, sync_writes
        self._clock, self._now = clock, now
        self._failed_at: float | None = None

    def in_cooldown(self) -> bool:
        """Return whether a recent failure still keeps the command off."""
        failed = self._failed_at
        return failed is not None and self._clock() - failed < self.failure_cooldown

    def _run(self, args: list[str], timeout: float) -> str | None:
        """Run the command; ``None`` (and a cooldown) on any failure."""
        output = _run_command([*self.command, *args], timeout)
        self._failed_at = self._clock() if output is None else None
        return output

    def _options(self, agents: Sequence[str]) -> list[str]:
        project = [f"--project={self._project}"] if self._project else []
        return [*(f"--agent={agent}" for agent in agents), *project]

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Write locally; with ``sync_writes``, also send it to the command."""
        result = self.local.store(entry)
        if self._sync and isinstance(result, MemoryEntry) and not self.in_cooldown():
            kind = _TYPES.get(entry.category, "learning")
            args = ["store", f"--type={kind}", *self._options([entry.agent])]
            self._run(
                [*args, "--", f"{entry.key}: {entry.content}"], self.store_timeout
            )
        return result

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str],
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Recall locally; ask the command when local hits are too few."""
        limit = bound_recall_limit(limit)
        local = self.local.recall(
            query, agents=agents, limit=limit, session=session, since=since, until=until
        )
        enough = len(local) >= min(limit, self.local_hit_threshold)
        if enough or not agents or is_recent_query(query) or self.in_cooldown():
            return local
        args = ["context", f"--budget={self._budget}", *self._options(agents)]
        output = self._run([*args, "--", query], self.recall_timeout)
        if output is None:
            return local
        external = [
            entry
            for entry in parse_context(output, agents=agents, now=self._now())
            if visible_in_session(entry.session, entry.category, session)
            and (since is None or entry.created_at >= since)
            and (until is None or entry.created_at <= until)
        ]
        return merge_local_first(local, external, limit)

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the local row with that key."""
        return self.local.get(key, agents=agents)

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> _Entries:
        """Return local rows, newest first."""
        return self.local.list(
            agents=agents, category=category, session=session, limit=limit
        )

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Forget locally (the external store has no delete)."""
        return self.local.forget(key, agent=agent)

    def supersede(
        self, key: str, *, agent: str, superseded_by: str
    ) -> bool | Unsupported:
        """Supersede locally."""
        return self.local.supersede(key, agent=agent, superseded_by=superseded_by)

    def purge_session(self, session: str, *, agent: str) -> int | Unsupported:
        """Purge locally."""
        return self.local.purge_session(session, agent=agent)

    def count(self, *, agents: Sequence[str]) -> int:
        """Count local rows."""
        return self.local.count(agents=agents)

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Export local rows."""
        return self.local.export(
            agents=agents, session=session, category=category, since=since, until=until
        )

    def health(self) -> bool:
        """Return the local backend's health (the command is optional)."""
        return self.local.health()

    def applied_position(self) -> int:
        """Return the local backend's position."""
        return self.local.applied_position()

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply the ledger to the local backend; a rebuild never calls the command."""
        self.local.apply(events, position)

    def close(self) -> None:
        """Close the local backend."""
        self.local.close()


def _run_command(argv: list[str], timeout: float) -> str | None:
    """Run argv without a shell; its stdout, or ``None`` on failure or timeout.

    The child gets its own process group, killed whole on timeout, so a
    grandchild holding the pipe cannot hang the caller.
    """
    try:
        child = subprocess.Popen(  # noqa: S603 - argv from configuration; the query is one argument, no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return None
    return output.decode("utf-8", "replace") if child.returncode == 0 else None
