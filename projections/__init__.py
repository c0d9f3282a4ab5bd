"""Projections: every surface derived from the ledger, rebuildable, migratable.

Read models are pure folds (:mod:`projections.base`) kept current by the runner
(:mod:`projections.runner`) in view stores with exactly-once tracking; long-term
memory backends live in :mod:`projections.memory`.
"""

from projections.base import Projection, digest, fold
from projections.catalog import LONG_TERM_MEMORY, PROJECTIONS, projection_named
from projections.costs import COST_RECORDS
from projections.history import SESSION_HISTORY, history_digest, visible_messages
from projections.knowledge import KNOWLEDGE_GRAPH
from projections.observer import OBSERVER_VIEW
from projections.runner import ProjectionRunner
from projections.views import SQLiteViewStore, TrackingConflictError, ViewStore

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
