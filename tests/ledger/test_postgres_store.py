"""The store contract on the real PostgreSQL server, plus what only it shows."""

from __future__ import annotations

import psycopg
import pytest

from tests.contracts.store_contract import StoreContract, new_stream, turn_events
from turnledger.ledger.errors import ConfigurationError
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify


class TestPostgresStore(StoreContract):
    @pytest.fixture(name="store")
    def _store(self, postgres_store: EventStore) -> EventStore:
        return postgres_store

    @pytest.fixture(name="reopen")
    def _reopen(self, postgres_url: str):
        opened: list[EventStore] = []

        def reopen(**options) -> EventStore:
            store = open_store(postgres_url, **options)
            opened.append(store)
            return store

        yield reopen
        for store in opened:
            store.close()


def test_table_is_append_only(postgres_store: EventStore, postgres_url: str):
    """Raw SQL cannot update, delete or truncate, nor leave a version gap."""
    stream = new_stream()
    postgres_store.append(stream, turn_events("t1"), expected_version=0)
    schema = postgres_url.rsplit("schema=", 1)[1]
    table = f'"{schema}".turnledger_events'
    with psycopg.connect(
        postgres_url.split("?", maxsplit=1)[0], autocommit=True
    ) as conn:
        for sql in (
            f"UPDATE {table} SET topic = 'x'",
            f"DELETE FROM {table}",
            f"TRUNCATE {table}",
        ):
            with pytest.raises(psycopg.errors.RestrictViolation, match="append-only"):
                conn.execute(sql)
        with pytest.raises(psycopg.errors.UniqueViolation, match="contiguous"):
            conn.execute(
                f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
                "VALUES (%s, 12, 'turn.started', '')",
                (stream,),
            )
    assert postgres_store.count() == 8
    assert verify(postgres_store).ok


def test_bad_postgres_urls_are_refused():
    """A URL with an unusable schema name is a configuration error."""
    with pytest.raises(ConfigurationError, match="schema"):
        open_store("postgresql://postgres@127.0.0.1:5432/test?schema=a;drop")
