"""An agent's handle on a shared memory backend: its allowlist, enforced.

:class:`AgentScopedMemory` binds one agent. Reads see the agent's own rows and
its allowlisted peers' rows; a caller's agent list only narrows that (an empty
intersection returns nothing). Writes, forgets, supersedes and session purges
touch the bound agent's rows only: the allowlist grants recall, never delete.

Refusals are raised as :class:`ScopeViolationError` carrying the policy's
:class:`~policies.scoping.AccessDecision` (an exception rather than a returned
refusal, because a refused write is a programming or configuration error the
caller must not mistake for "nothing to do"). A row of a non-allowlisted agent
is never revealed, not even by a refusal: forgetting its key answers ``False``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

from turnledger.ledger.envelope import Recorded
from turnledger.policies.scoping import (
    AccessDecision,
    AgentScope,
    check_forget,
    check_write,
    recall_agents,
)
from turnledger.projections.memory.protocol import (
    MemoryBackend,
    MemoryEntry,
    NewMemory,
    Unsupported,
)


class ScopeViolationError(PermissionError):
    """An agent-scoped handle refused an operation.

    Attributes:
        decision: The refused access, with its reason and a sentence naming the
            agents.
    """

    def __init__(self, decision: AccessDecision) -> None:
        super().__init__(decision.detail)
        self.decision = decision


class AgentScopedMemory:
    """One agent's view of a shared backend (see the module docstring).

    Args:
        backend: The shared backend (not owned: :meth:`close` leaves it open).
        scope: The bound agent and its allowlist.
    """

    def __init__(self, backend: MemoryBackend, scope: AgentScope) -> None:
        self.backend = backend
        self.scope = scope
        self.name = backend.name
        self.capabilities = backend.capabilities

    @property
    def agent(self) -> str:
        """The bound agent."""
        return self.scope.agent

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Store an entry attributed to the bound agent.

        Raises:
            ScopeViolationError: The entry names another agent (peers included).
        """
        _require(check_write(self.scope, entry.agent))
        return self.backend.store(entry)

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str] | None = None,
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Recall among the allowlist, narrowed by ``agents`` (None/empty: all)."""
        allowed = recall_agents(self.scope, agents)
        if not allowed:
            return []
        return self.backend.recall(
            query,
            agents=allowed,
            limit=limit,
            session=session,
            since=since,
            until=until,
        )

    def get(
        self, key: str, *, agents: Sequence[str] | None = None
    ) -> MemoryEntry | None:
        """Return the row with that key: own first, then peers in allowlist order."""
        allowed = recall_agents(self.scope, agents)
        return self.backend.get(key, agents=allowed) if allowed else None

    def list(
        self,
        *,
        agents: Sequence[str] | None = None,
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> list[MemoryEntry]:
        """List the allowlist's rows (narrowed by ``agents``), newest first."""
        allowed = recall_agents(self.scope, agents)
        if not allowed:
            return []
        return self.backend.list(
            agents=allowed, category=category, session=session, limit=limit
        )

    def count(self, *, agents: Sequence[str] | None = None) -> int:
        """Count the allowlist's live rows (narrowed by ``agents``)."""
        allowed = recall_agents(self.scope, agents)
        return self.backend.count(agents=allowed) if allowed else 0

    def export(
        self,
        *,
        agents: Sequence[str] | None = None,
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Export the allowlist's rows (narrowed by ``agents``), oldest first."""
        allowed = recall_agents(self.scope, agents)
        if not allowed:
            return []
        return self.backend.export(
            agents=allowed, session=session, category=category, since=since, until=until
        )

    def forget(self, key: str, *, agent: str | None = None) -> bool | Unsupported:
        """Delete the bound agent's row with that key.

        Returns:
            True when it was deleted; False when no visible row has that key.

        Raises:
            ScopeViolationError: ``agent`` names another agent, or the only row
                with that key belongs to a peer (read access is not delete).
        """
        _require(check_forget(self.scope, agent or self.scope.agent))
        done = self.backend.forget(key, agent=self.scope.agent)
        if done is False:
            self._refuse_peer_row(key)
        return done

    def supersede(
        self, key: str, *, superseded_by: str, agent: str | None = None
    ) -> bool | Unsupported:
        """Hide the bound agent's row with that key behind a newer one.

        Raises:
            ScopeViolationError: As :meth:`forget`.
        """
        _require(check_forget(self.scope, agent or self.scope.agent))
        done = self.backend.supersede(
            key, agent=self.scope.agent, superseded_by=superseded_by
        )
        if done is False:
            self._refuse_peer_row(key)
        return done

    def purge_session(
        self, session: str, *, agent: str | None = None
    ) -> int | Unsupported:
        """Delete the bound agent's rows of a session (never a peer's).

        Raises:
            ScopeViolationError: ``agent`` names another agent.
        """
        _require(check_forget(self.scope, agent or self.scope.agent))
        return self.backend.purge_session(session, agent=self.scope.agent)

    def health(self) -> bool:
        """Return whether the shared backend answers."""
        return self.backend.health()

    def applied_position(self) -> int:
        """Return the shared backend's applied ledger position."""
        return self.backend.applied_position()

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Refuse: events of every agent are applied through the backend itself.

        Raises:
            ScopeViolationError: Always.
        """
        del events, position
        raise ScopeViolationError(
            AccessDecision(
                allowed=False,
                reason="admin_only",
                detail=(
                    f"{self.scope.agent!r} cannot apply ledger events; "
                    "use an admin memory handle"
                ),
            )
        )

    def close(self) -> None:
        """Release nothing: the shared backend is closed by its owner."""

    def _refuse_peer_row(self, key: str) -> None:
        peers = [a for a in self.scope.allowed if a != self.scope.agent]
        row = self.backend.get(key, agents=peers) if peers else None
        if row is not None:
            _require(check_forget(self.scope, row.agent))


def _require(decision: AccessDecision) -> None:
    if not decision.allowed:
        raise ScopeViolationError(decision)
