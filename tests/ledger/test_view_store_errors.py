"""View stores (projections) raise the ledger's typed errors, never driver errors."""

from __future__ import annotations

import psycopg
import pytest

from turnledger.ledger.errors import LedgerFullError, StoreUnavailableError
from turnledger.projections.views import SQLiteViewStore
from turnledger.projections.views.postgres import PostgresViewStore


def test_sqlite_view_store_full_is_typed(tmp_path):
    """A view database that may not grow: LedgerFullError, naming the file."""
    path = str(tmp_path / "views.db")
    views = SQLiteViewStore(path)
    try:
        views.commit("p", {"k": {"n": 1}}, 1)
        pages = views._conn.execute("PRAGMA page_count").fetchone()[0]
        views._conn.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(LedgerFullError, match=r"views\.db"):
            views.commit("p", {f"k{i}": {"n": "x" * 500} for i in range(200)}, 2)
        assert views.tracking("p") == 1
    finally:
        views.close()


def test_postgres_view_store_killed_connection_is_typed(postgres_url: str):
    """The view store's server connection killed: StoreUnavailableError."""
    views = PostgresViewStore(postgres_url)
    try:
        views.commit("p", {"k": {"n": 1}}, 1)
        pid = views._conn.info.backend_pid
        with psycopg.connect(postgres_url.split("?", 1)[0], autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreUnavailableError):
            views.tracking("p")
    finally:
        views.close()
