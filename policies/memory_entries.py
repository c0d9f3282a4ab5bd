"""Memory entries of consolidation: their categories, keys and importance.

A consolidated turn writes a ``daily`` history entry and may write a ``core``
durable fact (reference §2.8). This module names those categories, builds their
keys from ids and dates the caller passes (:func:`daily_key`, :func:`core_key`:
policies have no clock and no randomness), weighs an entry by
:func:`importance_for` (category base plus keyword boost), and defines
:class:`ConsolidationConfigError`, which every consolidation policy raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Final

from turnledger.policies.errors import PolicyError

CORE_CATEGORY: Final = "core"
"""The category of durable facts."""
DAILY_CATEGORY: Final = "daily"
"""The category of daily history entries."""

CATEGORY_BASE_IMPORTANCE: Final[Mapping[str, float]] = {
    CORE_CATEGORY: 0.7,
    DAILY_CATEGORY: 0.3,
    "conversation": 0.2,
}
"""Base importance per category."""
CUSTOM_BASE_IMPORTANCE: Final = 0.4
"""Base importance of any other (custom) category."""
HIGH_SIGNAL_KEYWORDS: Final = (
    "decision",
    "always",
    "never",
    "important",
    "critical",
    "must",
    "requirement",
    "policy",
    "rule",
    "principle",
)
"""Words that raise importance by :data:`KEYWORD_BOOST` each."""
KEYWORD_BOOST: Final = 0.1
"""The boost per high-signal keyword found."""
MAX_KEYWORD_BOOST: Final = 0.2
"""The cap of the total keyword boost."""


class ConsolidationConfigError(PolicyError):
    """A consolidation policy got an unusable threshold, mode or id."""


def importance_for(content: str, category: str) -> float:
    """Return the heuristic importance of an entry.

    The base is 0.7 for core, 0.3 for daily, 0.2 for conversation and 0.4 for
    any other category; each high-signal keyword found (a case-insensitive
    substring match, counted once) adds 0.1, the boost is capped at 0.2 and the
    total at 1.0.

    Args:
        content: The entry's text.
        category: The entry's category.

    Returns:
        The importance on [0, 1], rounded to 6 decimals.
    """
    base = CATEGORY_BASE_IMPORTANCE.get(category, CUSTOM_BASE_IMPORTANCE)
    lowered = content.lower()
    found = sum(1 for word in HIGH_SIGNAL_KEYWORDS if word in lowered)
    boost = min(found * KEYWORD_BOOST, MAX_KEYWORD_BOOST)
    return round(min(base + boost, 1.0), 6)


def _check_id(entry_id: str) -> str:
    if not entry_id.strip():
        msg = f"Expected a non-empty entry id for a memory key, found {entry_id!r}"
        raise ConsolidationConfigError(msg)
    return entry_id


def daily_key(day: date, entry_id: str) -> str:
    """Return the key of a daily entry: ``daily_{YYYY-MM-DD}_{id}``.

    Args:
        day: The entry's day (a datetime gives its date part).
        entry_id: A unique id the caller minted.

    Returns:
        The key.

    Raises:
        ConsolidationConfigError: ``entry_id`` is empty.
    """
    return f"{DAILY_CATEGORY}_{day:%Y-%m-%d}_{_check_id(entry_id)}"


def core_key(entry_id: str) -> str:
    """Return the key of a consolidated core fact: ``core_{id}``.

    Args:
        entry_id: A unique id the caller minted.

    Returns:
        The key.

    Raises:
        ConsolidationConfigError: ``entry_id`` is empty.
    """
    return f"{CORE_CATEGORY}_{_check_id(entry_id)}"
