"""The per-agent memory strategy: the default strategy's consolidation (ADR-005).

Consolidation and governance belong to a strategy chosen per agent
(``[agents.<alias>] strategy = "default" | "none"``), never to a storage
backend. Every write goes through :class:`~pipeline.memory.MemoryService`
as a memory event, so rebuilding any backend from the ledger reproduces it.
The settings, reports, protocol and the ``none`` strategy are in
:mod:`pipeline.memory.strategy.types`; the core-fact steps (gate, de-duplication,
conflicts, supersession) are in :mod:`pipeline.memory.strategy.core`; governance
(retention) is in :mod:`pipeline.memory.strategy.governance`, which
:meth:`DefaultMemoryStrategy.govern` calls.

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
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy._store import store_entry
from turnledger.pipeline.memory.strategy.core import CoreFactRecorder
from turnledger.pipeline.memory.strategy.governance import govern_retention
from turnledger.pipeline.memory.strategy.types import (
    ConsolidationOutcome,
    ConsolidationReport,
    GovernReport,
    MemoryStrategy,
    NoStrategy,
    StrategySettings,
)
from turnledger.pipeline.providers.base import ChatRequest, Provider, ProviderError
from turnledger.policies.consolidation import (
    ConsolidationAnswer,
    build_consolidation_prompt,
    decide_consolidation,
    gate_memory_text,
    parse_consolidation_answer,
)
from turnledger.policies.fact_dedup import (
    conflict_decision,
    dedup_decision,
)
from turnledger.policies.memory_entries import (
    DAILY_CATEGORY,
    daily_key,
    importance_for,
)
from turnledger.policies.messages import make_message
from turnledger.policies.retention import plan_retention
from turnledger.policies.scrubbing import summarize


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


class _Refusal(msgspec.Struct, frozen=True, kw_only=True):
    outcome: ConsolidationOutcome = "skipped"
    detail: str


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
        self._core = CoreFactRecorder(memory, self.settings, new_id)

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
        core = self._core.record(agent, answer.memory_update)
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

    def _record_daily(self, agent: str, history_entry: str) -> str | None:
        gate = gate_memory_text(history_entry)
        if not gate.allowed:
            return None
        key = daily_key(self._clock(), self._new_id())
        importance = importance_for(gate.content, DAILY_CATEGORY)
        stored = store_entry(
            self.memory,
            agent,
            key,
            gate.content,
            category=DAILY_CATEGORY,
            importance=importance,
        )
        return key if stored else None

    # -- governance -----------------------------------------------------------

    def govern(
        self, agent: str, now: datetime, *, dry_run: bool = False
    ) -> GovernReport:
        """Apply retention at ``now`` (see :mod:`.governance`)."""
        return govern_retention(self.memory, self.settings, agent, now, dry_run=dry_run)


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
