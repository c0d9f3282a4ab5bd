"""Governance over a neutral memory entry: retention (reference §2.8).

Retention (:func:`plan_retention`) decides, for a given ``now``, which entries
expire, are archived or are purged; the shell records each decision as a
memory event, so a rebuild of any backend reproduces it:

- ``conversation`` entries not updated for more than 30 days expire;
- ``daily`` entries older than 7 days (since creation) are archived, and
  ``daily`` or ``archive`` entries older than 30 days are purged;
- ``core`` and custom categories are never touched, nor is a pinned key.

A window of 0 days disables its rule (ZeroClaw's "0 = keep"). Ages are
strict: an entry exactly 30 days old is kept.

This module also holds what recall tuning (:mod:`policies.recall_tuning`:
decay, importance blend, MMR) shares with retention: the entry
(:class:`MemoryItem`), its age (:func:`age_days`) and the error of an unusable
window or setting (:class:`RetentionConfigError`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.memory_entries import DAILY_CATEGORY
from turnledger.policies.types import CONVERSATION_CATEGORY

ARCHIVE_CATEGORY: Final = "archive"
"""The category a daily entry is moved to when it is archived."""

DEFAULT_CONVERSATION_DAYS: Final = 30
"""Conversation entries not updated for longer than this expire."""
DEFAULT_DAILY_ARCHIVE_DAYS: Final = 7
"""Daily entries older than this are archived."""
DEFAULT_DAILY_PURGE_DAYS: Final = 30
"""Daily and archived entries older than this are purged."""

_SECONDS_PER_DAY: Final = 86_400.0

RetentionAction: TypeAlias = Literal["expire", "archive", "purge"]
"""What governance does to an entry."""


class RetentionConfigError(PolicyError):
    """A retention window or recall tuning value is unusable."""


class MemoryItem(msgspec.Struct, frozen=True, kw_only=True):
    """A memory entry as governance and recall tuning see it.

    Attributes:
        key: The entry's key (unique per agent).
        content: Its text.
        category: ``core``, ``daily``, ``conversation``, ``archive`` or custom.
        created_at: When it was first stored (naive values are taken as UTC).
        updated_at: When it was last stored; ``None`` means ``created_at``.
        score: Relevance on [0, 1]; ``None`` when unscored.
        importance: Importance on [0, 1], when known.
    """

    key: str
    content: str = ""
    category: str
    created_at: datetime
    updated_at: datetime | None = None
    score: float | None = None
    importance: float | None = None


class RetentionStep(msgspec.Struct, frozen=True, kw_only=True):
    """One governance decision.

    Attributes:
        key: The entry's key.
        action: ``expire``, ``archive`` or ``purge``.
        category: The entry's category when planned.
        age_days: The age the rule measured, in days.
        reason: Why, in a sentence naming the rule.
    """

    key: str
    action: RetentionAction
    category: str
    age_days: float
    reason: str


class RetentionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What governance does, grouped by action, each in input order.

    Attributes:
        expire: Conversation entries to forget.
        archive: Daily entries to move to ``archive``.
        purge: Daily and archived entries to forget.
    """

    expire: tuple[RetentionStep, ...] = ()
    archive: tuple[RetentionStep, ...] = ()
    purge: tuple[RetentionStep, ...] = ()

    @property
    def steps(self) -> tuple[RetentionStep, ...]:
        """Every step: expiries, then archives, then purges."""
        return (*self.expire, *self.archive, *self.purge)

    @property
    def empty(self) -> bool:
        """Whether the plan does nothing."""
        return not self.steps


# -- time --------------------------------------------------------------------


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def age_days(moment: datetime, now: datetime) -> float:
    """Return how many days before ``now`` a moment is (0 for the future).

    Naive datetimes are taken as UTC.
    """
    seconds = (_aware(now) - _aware(moment)).total_seconds()
    return max(seconds, 0.0) / _SECONDS_PER_DAY


# -- retention ---------------------------------------------------------------


def _check_days(name: str, days: int) -> None:
    if days < 0:
        msg = f"Expected {name} >= 0 (0 disables the rule), found {days}"
        raise RetentionConfigError(msg)


def _older(age: float, days: int) -> bool:
    return days > 0 and age > days


def _conversation_step(
    item: MemoryItem, now: datetime, days: int
) -> RetentionStep | None:
    age = age_days(item.updated_at or item.created_at, now)
    if not _older(age, days):
        return None
    reason = f"conversation entry not updated for {age:.1f} days (kept {days})"
    return RetentionStep(
        key=item.key,
        action="expire",
        category=item.category,
        age_days=age,
        reason=reason,
    )


def _daily_step(
    item: MemoryItem, now: datetime, archive_days: int, purge_days: int
) -> RetentionStep | None:
    age = age_days(item.created_at, now)
    if _older(age, purge_days):
        reason = (
            f"{item.category} entry is {age:.1f} days old (purged after {purge_days})"
        )
        action: RetentionAction = "purge"
    elif item.category == DAILY_CATEGORY and _older(age, archive_days):
        reason = f"daily entry is {age:.1f} days old (archived after {archive_days})"
        action = "archive"
    else:
        return None
    return RetentionStep(
        key=item.key, action=action, category=item.category, age_days=age, reason=reason
    )


def plan_retention(
    entries: Iterable[MemoryItem],
    now: datetime,
    *,
    conversation_days: int = DEFAULT_CONVERSATION_DAYS,
    daily_archive_days: int = DEFAULT_DAILY_ARCHIVE_DAYS,
    daily_purge_days: int = DEFAULT_DAILY_PURGE_DAYS,
    pinned_keys: frozenset[str] = frozenset(),
) -> RetentionPlan:
    """Plan which entries expire, are archived or are purged at ``now``.

    Args:
        entries: The agent's live entries.
        now: The moment governance runs (the caller's clock).
        conversation_days: Conversation entries whose last update is older
            expire (0: never).
        daily_archive_days: Daily entries created longer ago are archived
            (0: never).
        daily_purge_days: Daily and archived entries created longer ago are
            purged (0: never); purging wins over archiving.
        pinned_keys: Keys never touched.

    Returns:
        The plan; core and custom-category entries never appear in it.

    Raises:
        RetentionConfigError: A window is negative.
    """
    _check_days("conversation_days", conversation_days)
    _check_days("daily_archive_days", daily_archive_days)
    _check_days("daily_purge_days", daily_purge_days)
    planned: dict[RetentionAction, list[RetentionStep]] = {
        "expire": [],
        "archive": [],
        "purge": [],
    }
    for item in entries:
        step = None
        if item.key in pinned_keys:
            continue
        if item.category == CONVERSATION_CATEGORY:
            step = _conversation_step(item, now, conversation_days)
        elif item.category in (DAILY_CATEGORY, ARCHIVE_CATEGORY):
            step = _daily_step(item, now, daily_archive_days, daily_purge_days)
        if step is not None:
            planned[step.action].append(step)
    return RetentionPlan(
        expire=tuple(planned["expire"]),
        archive=tuple(planned["archive"]),
        purge=tuple(planned["purge"]),
    )
