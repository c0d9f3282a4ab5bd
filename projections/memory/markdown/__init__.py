r"""Markdown memory: one agent's human-readable, append-only memory files (§2.2).

Layout under the agent's workspace: ``MEMORY.md`` holds ``core`` rows and
``memory/YYYY-MM-DD.md`` every other category, dated by the write's recorded time
in UTC (never the wall clock, so a rebuild writes the same files). One line per
write::

    - **editor** [category=core at=2026-11-01T12:00:00Z id=e1 pos=17]: Helix is mine

``memory/.applied_position`` tracks the last position applied and
``memory/.ledger_id`` the ledger the lines derive from (see
:meth:`MarkdownMemory.bind`): hidden one-line files, so the Markdown stays plain.

Fixed from the reference: category, session, creation time, entry id and the
ledger position are kept on every line (ZeroClaw collapsed every dated line to
``daily`` and dropped sessions, so conversation text leaked into every session);
``forget`` answers :class:`Unsupported` instead of a silent ``False``; reads keep
upsert semantics (the newest line of a key wins); keyword scores are on [0, 1]
(the keyword gate of the SQLite and PostgreSQL stores, each word's weight
counted on the rows the caller may see: :func:`~policies.relevance.scope_scores`,
where the reference scored the unweighted share of the query's tokens found as
substrings) with the session, time and agent filters applied before limiting;
peers' results are merged by score
(:class:`~projections.memory.markdown.peers.MarkdownPeers`).

Escaping keeps a line a line: ``\`` and newlines in keys and content are
backslash-escaped, ``*`` in keys too (a Markdown escape), and metadata values
that are not plain words are JSON strings.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import quote_value
from turnledger.ledger.events import MemoryForgotten, MemoryStored
from turnledger.ledger.numbers import parse_whole
from turnledger.policies.recall_scope import bound_recall_limit
from turnledger.policies.relevance import scope_scores
from turnledger.projections.base import LedgerHead, head_position
from turnledger.projections.memory.apply import new_memory
from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.markdown._lines import (
    FORGOTTEN_META,
    as_new,
    format_line,
    parse_line,
    utc,
)
from turnledger.projections.memory.protocol import (
    Capabilities,
    MemoryEntry,
    NewMemory,
    Unsupported,
    is_recent_query,
    visible_in_session,
)

CORE_FILE: Final = "MEMORY.md"
"""The file of ``core`` rows, at the workspace root."""

DAILY_DIR: Final = "memory"
"""The directory of dated files (every category but ``core``)."""

POSITION_FILE: Final = ".applied_position"
"""The tracking file (inside :data:`DAILY_DIR`) of positions without a line."""

LEDGER_FILE: Final = ".ledger_id"
"""The file (inside :data:`DAILY_DIR`) naming the ledger the lines derive from."""

APPEND_ONLY_REASON: Final = "markdown memory is append-only (an audit trail)"
"""Why supersede and purge_session are unsupported."""

CAPABILITIES: Final = Capabilities(append_only=True, purge_session=False, redacts=True)
"""Keyword recall, sessions, categories and time filters; forget redacts."""

_DATED = re.compile(r"\d{4}-\d{2}-\d{2}\.md")
_Entries: TypeAlias = list[MemoryEntry]


class _Line(msgspec.Struct, frozen=True, kw_only=True):
    """One parsed write, with where it sorts among writes."""

    entry: MemoryEntry
    position: int | None
    order: tuple[datetime, int, int, int]
    forgotten: bool = False


def newest_first(entry: MemoryEntry) -> tuple[float, str]:
    """Return a sort key ordering rows newest first (then by key)."""
    return (-entry.updated_at.timestamp(), entry.key)


def in_window(
    entry: MemoryEntry, since: datetime | None, until: datetime | None
) -> bool:
    """Return whether the row was created inside the inclusive window."""
    return (since is None or entry.created_at >= utc(since)) and (
        until is None or entry.created_at <= utc(until)
    )


class AppendOnlyRefusals:
    """The refusals every append-only Markdown handle answers with."""

    name: str = "markdown"
    capabilities: Capabilities = CAPABILITIES

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Refuse (a handle that owns files redacts instead)."""
        return self._refuse("forget", key, agent)

    def supersede(
        self, key: str, *, agent: str, superseded_by: str
    ) -> bool | Unsupported:
        """Refuse: nothing is ever hidden in the files."""
        return self._refuse("supersede", key, agent, superseded_by)

    def purge_session(self, session: str, *, agent: str) -> int | Unsupported:
        """Refuse: nothing is ever removed from the files."""
        return self._refuse("purge_session", session, agent)

    def _refuse(self, operation: str, *_: str) -> Unsupported:
        return Unsupported(
            operation=operation, backend=self.name, reason=APPEND_ONLY_REASON
        )


@typed_memory_errors("markdown")
class MarkdownMemory(AppendOnlyRefusals):
    """One agent's Markdown memory files (append-only; reads see upserts).

    Args:
        workspace_root: The agent's workspace directory (created if missing).
        agent: The agent the workspace belongs to; writes for others are refused.
    """

    def __init__(self, workspace_root: str | os.PathLike[str], *, agent: str) -> None:
        self.root = Path(workspace_root)
        self.agent = agent
        self._lock = threading.Lock()
        (self.root / DAILY_DIR).mkdir(parents=True, exist_ok=True)

    def file_for(self, entry: NewMemory) -> Path:
        """Return the file a write goes to (by category and UTC date of ``at``)."""
        if entry.category == "core":
            return self.root / CORE_FILE
        return self.root / DAILY_DIR / f"{utc(entry.at).date().isoformat()}.md"

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Append the write as a line; the returned row is what reads now show."""
        refused = self._append(entry, None)
        if refused is not None:
            return refused
        found = self._rows().get(entry.key)
        if found is None:  # pragma: no cover - the line was just written
            msg = f"Expected key {entry.key!r} after writing it, found none"
            raise RuntimeError(msg)
        return found

    def _append(self, entry: NewMemory, position: int | None) -> Unsupported | None:
        if entry.agent != self.agent:
            reason = (
                f"markdown memory at {self.root} belongs to agent {self.agent!r},"
                f" not {entry.agent!r}"
            )
            return Unsupported(operation="store", backend=self.name, reason=reason)
        path = self.file_for(entry)
        with self._lock:
            _append_line(path, _header(path), format_line(entry, position))
        return None

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Redact every line of ``agent``'s key (the audit trail keeps its shape).

        Each line of the key is rewritten in place with content
        :data:`FORGOTTEN_TEXT` and ``forgotten=true`` (files are replaced
        atomically), so no file holds the content any more and reads no longer
        show the key; storing the key again appends a new, visible line.

        Returns:
            Whether the key was visible before.
        """
        if agent != self.agent:
            return False
        visible = key in self._rows()
        self._redact(key, before=None)
        return visible

    def _redact(self, key: str, *, before: int | None) -> None:
        """Rewrite the key's lines (those written below ``before``) as forgotten."""
        with self._lock:
            for path in self._files():
                if not path.is_file():
                    continue
                text = path.read_text("utf-8")
                out = []
                changed = False
                for line in text.split("\n"):
                    parsed = parse_line(line, agent=self.agent)
                    kept = line
                    if parsed is not None and parsed[0].key == key:
                        entry, position = parsed
                        if before is None or (position or 0) < before:
                            kept = format_line(as_new(entry), position, forgotten=True)
                            changed = True
                    out.append(kept)
                if changed:
                    _write_atomically(path, "\n".join(out))

    def _files(self) -> list[Path]:
        daily = self.root / DAILY_DIR
        return [
            self.root / CORE_FILE,
            *sorted(p for p in daily.iterdir() if _DATED.fullmatch(p.name)),
        ]

    def _lines(self) -> list[_Line]:
        files = self._files()
        lines: list[_Line] = []
        for rank, path in enumerate(files):
            if not path.is_file():
                continue
            for number, text in enumerate(path.read_text("utf-8").split("\n")):
                parsed = parse_line(text, agent=self.agent)
                if parsed is not None:
                    entry, position = parsed
                    order = (entry.updated_at, position or 0, rank, number)
                    gone = FORGOTTEN_META in text
                    lines.append(
                        _Line(
                            entry=entry, position=position, order=order, forgotten=gone
                        )
                    )
        return lines

    def _rows(self) -> dict[str, MemoryEntry]:
        """Fold the lines per key: newest content, first id and creation time."""
        rows: dict[str, MemoryEntry] = {}
        for line in sorted(self._lines(), key=lambda line: line.order):
            if line.forgotten:
                rows.pop(line.entry.key, None)  # a new write after it starts anew
                continue
            first = rows.get(line.entry.key)
            if first is None:
                rows[line.entry.key] = line.entry
            else:
                rows[line.entry.key] = msgspec.structs.replace(
                    line.entry, id=first.id, created_at=first.created_at
                )
        return rows

    def _visible(self, agents: Sequence[str]) -> _Entries:
        return list(self._rows().values()) if self.agent in agents else []

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
        """Return the best keyword matches (or the newest rows), filters first."""
        limit = bound_recall_limit(limit)
        rows = [
            row
            for row in self._visible(agents)
            if visible_in_session(row.session, row.category, session)
            and in_window(row, since, until)
        ]
        if is_recent_query(query):
            return sorted(rows, key=newest_first)[:limit]
        scores = scope_scores(query, [f"{row.key} {row.content}" for row in rows])
        scored = [
            msgspec.structs.replace(row, score=score)
            for row, score in zip(rows, scores, strict=True)
            if score > 0.0
        ]
        scored.sort(key=lambda row: (-(row.score or 0.0), *newest_first(row)))
        return scored[:limit]

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the newest write of ``key`` when this agent is allowed."""
        return self._rows().get(key) if self.agent in agents else None

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> _Entries:
        """Return one row per key, newest first (strict session filter)."""
        rows = [
            row
            for row in self._visible(agents)
            if (category is None or row.category == category)
            and (session is None or row.session == session)
        ]
        return sorted(rows, key=newest_first)[:limit]

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many keys the files hold (when this agent is allowed)."""
        return len(self._visible(agents))

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Return one row per key matching the filters, oldest first."""
        rows = [
            row
            for row in self.list(agents=agents, category=category, session=session)
            if in_window(row, since, until)
        ]
        return sorted(rows, key=lambda row: (row.created_at, row.key))

    def health(self) -> bool:
        """Return whether the workspace directory exists."""
        return (self.root / DAILY_DIR).is_dir()

    def applied_position(self) -> int:
        """Return the highest position written to a line or tracked (0: none)."""
        tracked = self.root / DAILY_DIR / POSITION_FILE
        text = tracked.read_text("utf-8").strip() if tracked.is_file() else ""
        done = parse_whole(text) if text else 0
        if done is None:
            msg = (
                f"Expected a position (ASCII digits) in {tracked}, found "
                f"{quote_value(text)}: `turnledger memory rebuild` writes it again"
            )
            raise ValueError(msg)
        return max([done, *(line.position or 0 for line in self._lines())])

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply this agent's memory events above the position.

        ``memory.stored`` appends a line carrying the position that wrote it,
        so a crash between the append and the tracking write never duplicates
        a line; ``memory.forgotten`` redacts the key's earlier lines (see
        :meth:`forget`), so a rebuild never brings a forgotten entry back.
        Supersessions are not applied: the files are an audit trail.
        """
        done = self.applied_position()
        if position <= done:
            return
        for recorded in events:
            event = recorded.event
            if recorded.position <= done or getattr(event, "agent", "") != self.agent:
                continue
            if isinstance(event, MemoryStored):
                self._append(new_memory(recorded), recorded.position)
            elif isinstance(event, MemoryForgotten):
                self._redact(event.key, before=recorded.position)
        _write_atomically(self.root / DAILY_DIR / POSITION_FILE, str(position))

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the files to the ledger they derive from; never empty them.

        The ledger's id is recorded in :data:`LEDGER_FILE` beside the dated
        files (a hidden one-line file, so ``MEMORY.md`` and the daily logs
        stay plain Markdown); a workspace made before ids takes the ledger's.
        Files the user may have edited are never deleted: a workspace naming
        another ledger, or holding a line or tracked position past ``head``
        (read after that position: :data:`~projections.base.LedgerHead`), is
        refused.

        Returns:
            False (nothing is emptied).

        Raises:
            ValueError: The files derive from another ledger, or from
                positions this ledger does not have, naming the file and
                what to do.
        """
        recorded_file = self.root / DAILY_DIR / LEDGER_FILE
        recorded = (
            recorded_file.read_text("utf-8").strip()
            if recorded_file.is_file()
            else None
        )
        where = self.root / DAILY_DIR / POSITION_FILE
        found = f"ledger {recorded[:200]}" if recorded else "no ledger id"
        if recorded and ledger_id is not None and recorded != ledger_id:
            where = recorded_file
            found = f"one of ledger {recorded[:200]}"
        elif (done := self.applied_position()) > (end := head_position(head)):
            found = f"{found} and position {done} past the ledger's end ({end})"
        else:
            if ledger_id is not None and recorded is None:
                _write_atomically(recorded_file, f"{ledger_id}\n")
            return False
        msg = (
            f"Expected the Markdown memory {str(where)!r} of ledger "
            f"{ledger_id or '(no id)'}, found {found}: it is not rewritten as "
            f"it may hold edits; move {CORE_FILE} and {DAILY_DIR}/ out of "
            f"{str(self.root)!r} and the ledger's memory is written there again"
        )
        raise ValueError(msg)

    def close(self) -> None:
        """Release nothing: every call opens and closes its files."""


def _header(path: Path) -> str:
    if path.name == CORE_FILE:
        return "# Long-Term Memory"
    return f"# Daily Log — {path.stem}"


def _append_line(path: Path, header: str, line: str) -> None:
    """Append one line; a torn last line (a crash mid-write) is closed first."""
    with path.open("ab") as handle:
        if handle.tell() == 0:
            handle.write(f"{header}\n\n".encode())
        else:
            with path.open("rb") as reader:
                reader.seek(-1, os.SEEK_END)
                if reader.read(1) != b"\n":
                    handle.write(b"\n")
        handle.write(f"{line}\n".encode())
        handle.flush()
        os.fsync(handle.fileno())


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.tmp")
    temporary.write_text(text, "utf-8")
    temporary.replace(path)
