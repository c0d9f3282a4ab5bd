"""Governance of the default memory strategy: retention at the caller's ``now``.

:func:`govern_retention` plans retention over the agent's own live entries
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

from collections.abc import Sequence
from datetime import datetime

import msgspec

from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy._store import store_entry
from turnledger.pipeline.memory.strategy.types import GovernReport, StrategySettings
from turnledger.policies.retention import (
    ARCHIVE_CATEGORY,
    MemoryItem,
    RetentionStep,
    plan_retention,
)
from turnledger.projections.memory.protocol import MemoryEntry


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


def govern_retention(
    memory: MemoryService,
    settings: StrategySettings,
    agent: str,
    now: datetime,
    *,
    dry_run: bool = False,
) -> GovernReport:
    """Apply retention to the agent's own entries at ``now``.

    Args:
        memory: The memory service every write goes through.
        settings: The retention windows and pinned keys.
        agent: The agent.
        now: The moment to plan for (the caller's clock).
        dry_run: Plan and report only; record nothing.

    Returns:
        The report: the plan with its reasons, the number of events
        recorded and the keys the backend refused.
    """
    backend = memory.backend(agent)
    entries = {e.key: e for e in backend.export(agents=[agent])}
    plan = plan_retention(
        [_item(entry) for entry in entries.values()],
        now,
        conversation_days=settings.conversation_days,
        daily_archive_days=settings.daily_archive_days,
        daily_purge_days=settings.daily_purge_days,
        pinned_keys=settings.pinned_keys,
    )
    report = GovernReport(agent=agent, now=now, dry_run=dry_run, plan=plan)
    if dry_run or plan.empty:
        return report
    if backend.capabilities.append_only:
        refused = tuple(step.key for step in plan.steps)
        return msgspec.structs.replace(report, refused=refused)
    recorded = _apply(memory, agent, plan.steps, entries)
    return msgspec.structs.replace(report, recorded=recorded)


def _apply(
    memory: MemoryService,
    agent: str,
    steps: Sequence[RetentionStep],
    entries: dict[str, MemoryEntry],
) -> int:
    recorded = 0
    for step in steps:
        if step.action == "archive":
            recorded += _archive(memory, agent, entries[step.key])
        else:
            forgotten = memory.forget(agent, step.key, source="governance")
            recorded += forgotten is True
    return recorded


def _archive(memory: MemoryService, agent: str, entry: MemoryEntry) -> bool:
    # Same key: the store replaces the daily row in place (id and creation
    # time kept), so no forget is needed, and one would delete the archive.
    return store_entry(
        memory,
        agent,
        entry.key,
        entry.content,
        category=ARCHIVE_CATEGORY,
        importance=entry.importance,
        session=entry.session,
        source="governance",
    )
