"""The per-agent memory strategy: consolidation and governance (ADR-005).

Consolidation and governance belong to a strategy chosen per agent
(``[agents.<alias>] strategy = "default" | "none"``), never to a storage
backend. Every write goes through :class:`~pipeline.memory_service.MemoryService`
as a memory event, so rebuilding any backend from the ledger reproduces it.

**Consolidation** (:meth:`DefaultMemoryStrategy.consolidate_turn`), after a
qualifying turn (autosave on, user message of at least 20 characters): ONE
provider call; the answer's ``history_entry`` becomes a session-less ``daily``
entry ``daily_{YYYY-MM-DD}_{id}``; its ``memory_update``, when there is one,
passes the policy gate, de-duplication against the agent's own live core
facts (reject, or merge into the survivor's key) and conflict handling, then
becomes a core entry ``core_{id}``; each conflicting fact gets a
``memory.superseded`` event naming the new key. Every event has source
``consolidation`` and a heuristic importance. A provider failure or a
malformed answer records nothing and is reported, never raised.

Conflict scores: a backend recall score is a similarity only when vectors are
live. Keyword-only recall scores query coverage (the share of the new fact's
words an old fact holds), which says nothing of whether they disagree; the
reference's batch-max BM25 scored the best hit 1.0, so any shared word would
supersede a fact [gap in the reference]. With ``conflict_scores="auto"`` (the
default) the recall score is used when an embedding provider is configured and
the backend has vectors, and token Jaccard otherwise.

**Governance** (:meth:`DefaultMemoryStrategy.govern`) plans retention over the
agent's own live entries at the caller's ``now``
(:func:`policies.retention.plan_retention`) and records: a
``memory.forgotten`` event (source ``governance``) per expired or purged entry;
for an archived daily entry, one ``memory.stored`` event re-storing it under
the SAME key with category ``archive`` (source ``governance``). That store is
an upsert: it replaces the daily row (which is how the daily entry is
"forgotten": a separate forget of that key would delete the archive) and
keeps the row's id and creation time, so the purge age still counts from the
original write. ``dry_run`` records nothing and reports the plan. Append-only
backends (Markdown) refuse every step, which the report lists.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal, Protocol, TypeAlias

import msgspec

from turnledger.ledger.events import MemorySource, MemorySuperseded
from turnledger.ledger.ids import memory_stream_id
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.memory_service import MemoryService, StaleEntryError
from turnledger.pipeline.providers.base import ChatRequest, Provider, ProviderError
from turnledger.policies.consolidation import (
    CORE_CATEGORY,
    DAILY_CATEGORY,
    DEFAULT_CONFLICT_THRESHOLD,
    DEFAULT_DEDUP_THRESHOLD,
    ConsolidationAnswer,
    DedupMode,
    ExistingFact,
    build_consolidation_prompt,
    conflict_decision,
    core_key,
    daily_key,
    decide_consolidation,
    dedup_decision,
    gate_memory_text,
    importance_for,
    parse_consolidation_answer,
    token_jaccard,
)
from turnledger.policies.messages import make_message
from turnledger.policies.retention import (
    ARCHIVE_CATEGORY,
    DEFAULT_CONVERSATION_DAYS,
    DEFAULT_DAILY_ARCHIVE_DAYS,
    DEFAULT_DAILY_PURGE_DAYS,
    MemoryItem,
    RetentionPlan,
    RetentionStep,
    plan_retention,
)
from turnledger.policies.scrubbing import summarize
from turnledger.projections.memory.protocol import MemoryEntry, Unsupported

ConsolidationOutcome: TypeAlias = Literal[
    "recorded", "skipped", "provider_failed", "malformed", "unsupported"
]
"""How a consolidation ended."""

CoreOutcome: TypeAlias = Literal["none", "stored", "merged", "duplicate", "gated"]
"""What happened to the answer's durable fact."""

ConflictScores: TypeAlias = Literal["auto", "recall", "lexical"]
"""Where conflict scores come from (see the module docstring)."""

_CONFLICT_RECALL_LIMIT = 10
_STALE_REDECISIONS = 8


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


def record_superseded(
    memory: MemoryService,
    agent: str,
    key: str,
    *,
    superseded_by: str,
    source: MemorySource = "consolidation",
    reason: str = "",
) -> None:
    """Append a ``memory.superseded`` event to the agent's memory stream.

    The agent's backend is brought up to date afterwards, so the superseded
    entry is hidden from the next read. Written through
    :func:`~turnledger.pipeline.appending.append_decided`: before every attempt
    the entry must still be live (another writer may have forgotten or
    superseded it meanwhile); when it is not, nothing is written.

    Args:
        memory: The memory service (its ledger is written).
        agent: The agent owning the entry.
        key: The superseded entry's key.
        superseded_by: The key of the entry that replaces it.
        source: What wrote it.
        reason: Why, in a sentence.
    """
    event = MemorySuperseded(
        agent=agent, key=key, superseded_by=superseded_by, source=source, reason=reason
    )

    def decide(_head: int) -> list[MemorySuperseded] | None:
        live = memory.backend(agent).get(key, agents=[agent])
        return None if live is None else [event]

    append_decided(memory.store, memory_stream_id(agent), decide)
    memory.backend(agent)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


class _Refusal(msgspec.Struct, frozen=True, kw_only=True):
    outcome: ConsolidationOutcome = "skipped"
    detail: str


class _CoreResult(msgspec.Struct, frozen=True, kw_only=True):
    core: CoreOutcome = "none"
    key: str | None = None
    duplicate_of: str | None = None
    superseded: tuple[str, ...] = ()
    detail: str = ""


def _fact(entry: MemoryEntry, score: float | None = None) -> ExistingFact:
    return ExistingFact(
        key=entry.key,
        content=entry.content,
        category=entry.category,
        score=score,
    )


def _item(entry: MemoryEntry) -> MemoryItem:
    return MemoryItem(
        key=entry.key,
        content=entry.content,
        category=entry.category,
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        score=entry.score,
        importance=entry.importance,
    )


def _validated(settings: StrategySettings) -> StrategySettings:
    # Run each policy once on empty input, so a bad setting fails here, at
    # wiring time, and never in the middle of a turn.
    dedup_decision("", [], settings.dedup_threshold, settings.dedup_mode)
    conflict_decision("", "", [], settings.conflict_threshold)
    plan_retention(
        [],
        datetime.now(UTC),
        conversation_days=settings.conversation_days,
        daily_archive_days=settings.daily_archive_days,
        daily_purge_days=settings.daily_purge_days,
    )
    return settings


class DefaultMemoryStrategy:
    """Consolidation and governance as the reference does them (§1.7, §2.8).

    Args:
        memory: The memory service every write goes through.
        provider: The model for consolidation; ``None`` skips consolidation.
        settings: Thresholds, retention windows and call options.
        clock: The shell's clock (the daily key's date, UTC by default).
        new_id: Mints entry ids for keys.

    Raises:
        ConsolidationConfigError: A dedup or conflict setting is out of range.
        RetentionConfigError: A retention window is negative.
    """

    name = "default"

    def __init__(
        self,
        memory: MemoryService,
        provider: Provider | None,
        *,
        settings: StrategySettings | None = None,
        clock: Callable[[], datetime] = _utc_now,
        new_id: Callable[[], str] = _new_id,
    ) -> None:
        self.memory = memory
        self.provider = provider
        self.settings = _validated(settings or StrategySettings())
        self._clock = clock
        self._new_id = new_id

    # -- consolidation --------------------------------------------------------

    async def consolidate_turn(
        self,
        agent: str,
        session: str | None,
        user_message: str,
        assistant_response: str,
    ) -> ConsolidationReport:
        """Consolidate a finished turn: one provider call, then memory events.

        Args:
            agent: The agent whose memory is written.
            session: The turn's session (reported; the entries are global).
            user_message: The user's message as sent.
            assistant_response: The assistant's final answer.

        Returns:
            The report; a skipped turn, a provider failure and a malformed
            answer record nothing.
        """
        report = ConsolidationReport(agent=agent, session=session, outcome="skipped")
        refusal = self._refusal(agent, user_message)
        answer = (
            refusal
            if refusal is not None
            else await self._ask(self.provider, user_message, assistant_response)
        )
        if isinstance(answer, _Refusal):
            return msgspec.structs.replace(
                report, outcome=answer.outcome, detail=answer.detail
            )
        written_daily = self._record_daily(agent, answer.history_entry)
        core = self._record_core_decided(agent, answer.memory_update)
        recorded = written_daily is not None or core.core in ("stored", "merged")
        return msgspec.structs.replace(
            report,
            outcome="recorded" if recorded else "skipped",
            detail="" if recorded else core.detail or "the answer held nothing new",
            daily_key=written_daily,
            core=core.core,
            core_key=core.key,
            duplicate_of=core.duplicate_of,
            superseded=core.superseded,
        )

    def _refusal(self, agent: str, user_message: str) -> _Refusal | None:
        autosave = self.memory.config.memory.autosave
        trigger = decide_consolidation(
            user_message, autosave=autosave and self.memory.config.agent(agent).autosave
        )
        if not trigger.run:
            return _Refusal(detail=f"turn does not qualify: {trigger.reason}")
        backend = self.memory.backend(agent)
        if not backend.capabilities.stores:
            return _Refusal(
                outcome="unsupported", detail=f"{backend.name} memory stores nothing"
            )
        return None

    async def _ask(
        self, provider: Provider | None, user_message: str, assistant_response: str
    ) -> ConsolidationAnswer | _Refusal:
        if provider is None:
            return _Refusal(detail="no provider is configured for consolidation")
        prompt = build_consolidation_prompt(user_message, assistant_response)
        request = ChatRequest(
            messages=(
                make_message("system", prompt.system),
                make_message("user", prompt.turn),
            ),
            temperature=self.settings.temperature,
            max_output_tokens=self.settings.max_output_tokens,
        )
        try:
            response = await provider.complete(request)
        except ProviderError as e:
            return _Refusal(
                outcome="provider_failed", detail=f"{e.kind}: {summarize(str(e))}"
            )
        parsed = parse_consolidation_answer(response.text)
        if isinstance(parsed, ConsolidationAnswer):
            return parsed
        return _Refusal(
            outcome="malformed", detail=f"{parsed.reason} (answer: {parsed.excerpt!r})"
        )

    def _store(
        self,
        agent: str,
        key: str,
        content: str,
        *,
        category: str,
        importance: float | None,
        session: str | None = None,
        source: MemorySource = "consolidation",
        if_content: str | None = None,
    ) -> bool:
        written = self.memory.store_entry(
            agent,
            key,
            content,
            category=category,
            session=session,
            source=source,
            importance=importance,
            if_content=if_content,
        )
        return not isinstance(written, Unsupported)

    def _record_daily(self, agent: str, history_entry: str) -> str | None:
        gate = gate_memory_text(history_entry)
        if not gate.allowed:
            return None
        key = daily_key(self._clock(), self._new_id())
        importance = importance_for(gate.content, DAILY_CATEGORY)
        stored = self._store(
            agent, key, gate.content, category=DAILY_CATEGORY, importance=importance
        )
        return key if stored else None

    def _own_core(self, agent: str) -> dict[str, MemoryEntry]:
        backend = self.memory.backend(agent)
        rows = backend.export(agents=[agent], category=CORE_CATEGORY)
        return {row.key: row for row in rows}

    def _record_core_decided(self, agent: str, update: str | None) -> _CoreResult:
        """Record the core update; decide again when a merge's survivor changed.

        Another process may rewrite the survivor between the read and the write:
        the merge is a compare-and-set, and a stale one is decided again on the
        new state (up to :data:`_STALE_REDECISIONS` times, then the error).
        """
        for _ in range(_STALE_REDECISIONS - 1):
            try:
                return self._record_core(agent, update)
            except StaleEntryError:
                continue
        return self._record_core(agent, update)

    def _record_core(self, agent: str, update: str | None) -> _CoreResult:
        if update is None:
            return _CoreResult()
        gate = gate_memory_text(update)
        if not gate.allowed:
            return _CoreResult(
                core="gated", detail=f"memory update refused: {gate.reason}"
            )
        existing = self._own_core(agent)
        dedup = dedup_decision(
            gate.content,
            [_fact(entry) for entry in existing.values()],
            self.settings.dedup_threshold,
            self.settings.dedup_mode,
        )
        if dedup.action == "reject":
            return _CoreResult(
                core="duplicate",
                duplicate_of=dedup.duplicate_of,
                detail=f"memory update duplicates {dedup.duplicate_of}",
            )
        if dedup.action == "merge" and dedup.duplicate_of and dedup.merged_content:
            return self._merge(
                agent, existing[dedup.duplicate_of], dedup.merged_content
            )
        return self._insert(agent, gate.content, existing)

    def _merge(self, agent: str, survivor: MemoryEntry, content: str) -> _CoreResult:
        importance = survivor.importance
        if importance is None:
            importance = importance_for(content, CORE_CATEGORY)
        self._store(
            agent,
            survivor.key,
            content,
            category=CORE_CATEGORY,
            importance=importance,
            session=survivor.session,
            if_content=survivor.content,  # a compare-and-set: no lost merge
        )
        return _CoreResult(core="merged", key=survivor.key, duplicate_of=survivor.key)

    def _insert(
        self, agent: str, content: str, existing: dict[str, MemoryEntry]
    ) -> _CoreResult:
        key = core_key(self._new_id())
        scored = self._scored(agent, content, existing)
        losers = conflict_decision(
            key, content, scored, self.settings.conflict_threshold
        )
        importance = importance_for(content, CORE_CATEGORY)
        if not self._store(
            agent, key, content, category=CORE_CATEGORY, importance=importance
        ):
            return _CoreResult(detail="the backend stores nothing")
        for loser in losers:
            record_superseded(
                self.memory,
                agent,
                loser,
                superseded_by=key,
                reason=f"conflicts with the newer fact {key}",
            )
        return _CoreResult(core="stored", key=key, superseded=losers)

    def _uses_recall_scores(self, agent: str) -> bool:
        mode = self.settings.conflict_scores
        if mode != "auto":
            return mode == "recall"
        embedded = self.memory.config.embedding.provider != "none"
        return embedded and self.memory.backend(agent).capabilities.vectors

    def _scored(
        self, agent: str, content: str, existing: dict[str, MemoryEntry]
    ) -> list[ExistingFact]:
        if not self._uses_recall_scores(agent):
            return [
                _fact(entry, token_jaccard(content, entry.content))
                for entry in existing.values()
            ]
        found = self.memory.recall(
            agent, content, limit=_CONFLICT_RECALL_LIMIT, agents=[agent]
        )
        return [_fact(entry, entry.score) for entry in found if entry.key in existing]

    # -- governance -----------------------------------------------------------

    def govern(
        self, agent: str, now: datetime, *, dry_run: bool = False
    ) -> GovernReport:
        """Apply retention to the agent's own entries at ``now``.

        Args:
            agent: The agent.
            now: The moment to plan for (the caller's clock).
            dry_run: Plan and report only; record nothing.

        Returns:
            The report: the plan with its reasons, the number of events
            recorded and the keys the backend refused.
        """
        backend = self.memory.backend(agent)
        entries = {e.key: e for e in backend.export(agents=[agent])}
        plan = plan_retention(
            [_item(entry) for entry in entries.values()],
            now,
            conversation_days=self.settings.conversation_days,
            daily_archive_days=self.settings.daily_archive_days,
            daily_purge_days=self.settings.daily_purge_days,
            pinned_keys=self.settings.pinned_keys,
        )
        report = GovernReport(agent=agent, now=now, dry_run=dry_run, plan=plan)
        if dry_run or plan.empty:
            return report
        if backend.capabilities.append_only:
            refused = tuple(step.key for step in plan.steps)
            return msgspec.structs.replace(report, refused=refused)
        recorded = self._apply(agent, plan.steps, entries)
        return msgspec.structs.replace(report, recorded=recorded)

    def _apply(
        self,
        agent: str,
        steps: Sequence[RetentionStep],
        entries: dict[str, MemoryEntry],
    ) -> int:
        recorded = 0
        for step in steps:
            if step.action == "archive":
                recorded += self._archive(agent, entries[step.key])
            else:
                forgotten = self.memory.forget(agent, step.key, source="governance")
                recorded += forgotten is True
        return recorded

    def _archive(self, agent: str, entry: MemoryEntry) -> bool:
        # Same key: the store replaces the daily row in place (id and creation
        # time kept), so no forget is needed, and one would delete the archive.
        return self._store(
            agent,
            entry.key,
            entry.content,
            category=ARCHIVE_CATEGORY,
            importance=entry.importance,
            session=entry.session,
            source="governance",
        )


def strategy_for(
    agent: str,
    memory: MemoryService,
    provider: Provider | None,
    *,
    settings: StrategySettings | None = None,
) -> MemoryStrategy:
    """Return the memory strategy configured for an agent.

    Args:
        agent: The agent alias.
        memory: The memory service.
        provider: The model consolidation calls (``None``: no consolidation).
        settings: Settings of the default strategy.

    Returns:
        :class:`NoStrategy` for ``strategy = "none"``, else a
        :class:`DefaultMemoryStrategy`.
    """
    if memory.config.agent(agent).strategy == "none":
        return NoStrategy()
    return DefaultMemoryStrategy(memory, provider, settings=settings)
