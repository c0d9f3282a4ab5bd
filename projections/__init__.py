"""Projections: every surface derived from the ledger, rebuildable, migratable.

Read models are pure folds (:mod:`projections.base`) kept current by the runner
(:mod:`projections.runner`) in view stores with exactly-once tracking; long-term
memory backends live in :mod:`projections.memory`.
"""

from turnledger.projections.base import Projection, digest, fold
from turnledger.projections.catalog import (
    LONG_TERM_MEMORY,
    PROJECTIONS,
    projection_named,
)
from turnledger.projections.costs import COST_RECORDS
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.read import history_digest, visible_messages
from turnledger.projections.knowledge import KNOWLEDGE_GRAPH
from turnledger.projections.observer import OBSERVER_VIEW
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import (
    SQLiteViewStore,
    TrackingConflictError,
    ViewStore,
)

__all__ = [
    "COST_RECORDS",
    "KNOWLEDGE_GRAPH",
    "LONG_TERM_MEMORY",
    "OBSERVER_VIEW",
    "PROJECTIONS",
    "SESSION_HISTORY",
    "Projection",
    "ProjectionRunner",
    "SQLiteViewStore",
    "TrackingConflictError",
    "ViewStore",
    "digest",
    "fold",
    "history_digest",
    "projection_named",
    "visible_messages",
]
