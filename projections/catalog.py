"""Every projection of the ledger, and what each declares about its data."""

from __future__ import annotations

from typing import Any, Final

from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.projections.base import Projection
from turnledger.projections.costs import COST_RECORDS
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.knowledge import KNOWLEDGE_GRAPH
from turnledger.projections.observer import OBSERVER_VIEW

PROJECTIONS: Final[tuple[Projection[Any], ...]] = (
    SESSION_HISTORY,
    COST_RECORDS,
    OBSERVER_VIEW,
    KNOWLEDGE_GRAPH,
)
"""The keyed-fold projections the runner keeps current."""

LONG_TERM_MEMORY: Final = LifecycleDeclaration(
    surface="Long-term memory",
    owner="projections.memory (backends the memory events are applied to)",
    durability="memory",
    scope="agent",
    reviewers_check=(
        "Stores and recalls stay scoped to the agent and its configured peers "
        "(filters inside every query). A tool result, log line or session row is "
        "not long-term memory unless a memory.stored event was recorded."
    ),
)
"""Long-term memory: a projection applied to a backend rather than a view store."""


def projection_named(name: str) -> Projection[Any]:
    """Return the projection with that name.

    Raises:
        KeyError: No projection has that name; the message lists the names.
    """
    for projection in PROJECTIONS:
        if projection.name == name:
            return projection
    names = ", ".join(p.name for p in PROJECTIONS)
    msg = f"Expected one of {names}, found {name!r}"
    raise KeyError(msg)


def declarations() -> tuple[LifecycleDeclaration, ...]:
    """Return the declarations of every projection, memory included."""
    return (*(p.lifecycle for p in PROJECTIONS), LONG_TERM_MEMORY)
