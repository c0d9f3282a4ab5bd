"""The memory strategy's public types: settings, reports and the protocol.

What a per-agent memory strategy (ADR-005) is configured with
(:class:`StrategySettings`), what it reports (:class:`ConsolidationReport`,
:class:`GovernReport`), the :class:`MemoryStrategy` protocol the engine calls,
and :class:`NoStrategy`, the ``none`` strategy that consolidates and governs
nothing. The default strategy's decisions live in :mod:`pipeline.memory.strategy`
(consolidation) and :mod:`pipeline.memory.strategy.governance` (retention).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol, TypeAlias

import msgspec

from turnledger.policies.fact_dedup import (
    DEFAULT_CONFLICT_THRESHOLD,
    DEFAULT_DEDUP_THRESHOLD,
    DedupMode,
)
from turnledger.policies.retention import (
    DEFAULT_CONVERSATION_DAYS,
    DEFAULT_DAILY_ARCHIVE_DAYS,
    DEFAULT_DAILY_PURGE_DAYS,
    RetentionPlan,
)

ConsolidationOutcome: TypeAlias = Literal[
    "recorded", "skipped", "provider_failed", "malformed", "unsupported"
]
"""How a consolidation ended."""

CoreOutcome: TypeAlias = Literal["none", "stored", "merged", "duplicate", "gated"]
"""What happened to the answer's durable fact."""

ConflictScores: TypeAlias = Literal["auto", "recall", "lexical"]
"""Where conflict scores come from (see :mod:`pipeline.memory.strategy`)."""


class StrategySettings(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of the default strategy (defaults are the reference's).

    Attributes:
        dedup_mode: ``reject`` or ``merge`` near-duplicate facts.
        dedup_threshold: Token Jaccard at or above which a fact is a duplicate.
        conflict_threshold: Score above which another core fact is superseded.
        conflict_scores: ``auto``, ``recall`` (backend scores) or ``lexical``.
        conversation_days: Retention of conversation entries (0: forever).
        daily_archive_days: Age at which daily entries are archived (0: never).
        daily_purge_days: Age at which daily/archived entries are purged.
        pinned_keys: Keys governance never touches.
        temperature: Sampling temperature of the consolidation call.
        max_output_tokens: Output cap of the consolidation call.
    """

    dedup_mode: DedupMode = "reject"
    dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD
    conflict_threshold: float = DEFAULT_CONFLICT_THRESHOLD
    conflict_scores: ConflictScores = "auto"
    conversation_days: int = DEFAULT_CONVERSATION_DAYS
    daily_archive_days: int = DEFAULT_DAILY_ARCHIVE_DAYS
    daily_purge_days: int = DEFAULT_DAILY_PURGE_DAYS
    pinned_keys: frozenset[str] = frozenset()
    temperature: float | None = None
    max_output_tokens: int | None = None


class ConsolidationReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one consolidation did.

    Attributes:
        agent: The agent.
        session: The turn's session (reported only: entries are session-less).
        outcome: How it ended.
        detail: Why, for anything but ``recorded`` (scrubbed).
        daily_key: The daily entry written, if any.
        core: What happened to the durable fact.
        core_key: The core entry written or merged into, if any.
        duplicate_of: The existing fact a rejected update duplicates.
        superseded: Keys of the core facts superseded by the new one.
    """

    agent: str
    session: str | None = None
    outcome: ConsolidationOutcome
    detail: str = ""
    daily_key: str | None = None
    core: CoreOutcome = "none"
    core_key: str | None = None
    duplicate_of: str | None = None
    superseded: tuple[str, ...] = ()


class GovernReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one governance run planned and recorded.

    Attributes:
        agent: The agent.
        now: The moment the plan was made for.
        dry_run: Whether recording was skipped.
        plan: The retention plan, with a reason per step.
        recorded: How many memory events were appended.
        refused: Keys whose step the backend refused (append-only).
    """

    agent: str
    now: datetime
    dry_run: bool
    plan: RetentionPlan = RetentionPlan()
    recorded: int = 0
    refused: tuple[str, ...] = ()

    @property
    def expired(self) -> tuple[str, ...]:
        """Keys of the expired conversation entries."""
        return tuple(step.key for step in self.plan.expire)

    @property
    def archived(self) -> tuple[str, ...]:
        """Keys of the archived daily entries."""
        return tuple(step.key for step in self.plan.archive)

    @property
    def purged(self) -> tuple[str, ...]:
        """Keys of the purged daily and archived entries."""
        return tuple(step.key for step in self.plan.purge)


class MemoryStrategy(Protocol):
    """Consolidation and governance of an agent's long-term memory."""

    @property
    def name(self) -> str:
        """The strategy's name (``default``, ``none``)."""
        ...

    async def consolidate_turn(
        self,
        agent: str,
        session: str | None,
        user_message: str,
        assistant_response: str,
    ) -> ConsolidationReport:
        """Consolidate a finished turn into memory; never raises for the provider."""
        ...

    def govern(
        self, agent: str, now: datetime, *, dry_run: bool = False
    ) -> GovernReport:
        """Apply retention at ``now`` (or only plan it, with ``dry_run``)."""
        ...


class NoStrategy:
    """The ``none`` strategy: consolidates nothing, governs nothing."""

    name = "none"

    async def consolidate_turn(
        self,
        agent: str,
        session: str | None,
        user_message: str,
        assistant_response: str,
    ) -> ConsolidationReport:
        """Report that the agent has no memory strategy."""
        del user_message, assistant_response  # the none strategy reads nothing
        return ConsolidationReport(
            agent=agent,
            session=session,
            outcome="skipped",
            detail="the agent's memory strategy is none",
        )

    def govern(
        self, agent: str, now: datetime, *, dry_run: bool = False
    ) -> GovernReport:
        """Report an empty plan."""
        return GovernReport(agent=agent, now=now, dry_run=dry_run)
