"""Replay: a session's projections as of any position, with recorded digests checked.

Replaying never writes. It reads the session's lineage up to a position, has
the query API (:mod:`turnledger.projections.prompt_history`) fold it, digests
the resulting projection states, and re-derives every digest the ledger recorded
along the way (the history section of each assembled prompt, and its system
section against the system prompt recorded by then), reporting any difference.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import text_digest
from turnledger.ledger.store import EventStore
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.read import (
    current_instructions,
    history_digest,
    visible_messages,
)
from turnledger.projections.lineage import lineage
from turnledger.projections.prompt_history import (
    histories_before_prompts,
    history_of,
    state_digest,
)


class DigestCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded digest compared with the one re-derived from the ledger."""

    kind: str
    turn_id: str
    position: int
    recorded: str
    derived: str
    ok: bool


class ReplayReport(msgspec.Struct, frozen=True, kw_only=True):
    """A session as of a position."""

    stream: str
    at: int
    events: int
    messages: int
    turns_completed: int
    turns_failed: tuple[str, ...]
    projections: dict[str, str]
    checks: tuple[DigestCheck, ...]
    system_prompts: int = 0
    system_digest: str | None = None

    @property
    def ok(self) -> bool:
        """Whether every recorded digest re-derives to the same value."""
        return all(c.ok for c in self.checks)


def replay_session(
    store: EventStore, stream_id: UUID, *, at: int | None = None
) -> ReplayReport:
    """Replay a session up to global position ``at`` (default: its end).

    A fork replays its lineage: the source prefix, then its own events.
    """
    events = lineage(store, stream_id, at=at)
    state = history_of(events)
    checks = tuple(_checks(events))
    reached = events[-1].position if events else 0
    return ReplayReport(
        stream=str(stream_id),
        at=at if at is not None else reached,
        events=len(events),
        messages=len(visible_messages(state)),
        turns_completed=state.turns_completed,
        turns_failed=state.turns_failed,
        projections={SESSION_HISTORY.name: state_digest(stream_id, state)},
        checks=checks,
        system_prompts=len(state.instructions),
        system_digest=_digest_of(current_instructions(state)),
    )


def _digest_of(text: str | None) -> str | None:
    return text_digest(text) if text is not None else None


def _checks(events: list[Recorded]) -> list[DigestCheck]:
    """Re-derive each prompt's history digest from the events before it."""
    checks: list[DigestCheck] = []
    for recorded, event, state in histories_before_prompts(events):
        derived = history_digest(visible_messages(state))
        checks.extend(
            DigestCheck(
                kind="prompt.history",
                turn_id=event.turn_id,
                position=recorded.position,
                recorded=section.digest,
                derived=derived,
                ok=derived == section.digest,
            )
            for section in event.sections
            if section.name == "history"
        )
        system = _digest_of(current_instructions(state))
        checks.extend(
            DigestCheck(
                kind="prompt.system",
                turn_id=event.turn_id,
                position=recorded.position,
                recorded=section.digest,
                derived=system,
                ok=system == section.digest,
            )
            for section in event.sections
            if section.name == "system" and system is not None
        )
    return checks
