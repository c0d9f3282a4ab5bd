"""The store contract on the real PostgreSQL server, plus what only it shows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import pytest

from tests.contracts.store_contract import (
    IdempotencyContract,
    StoreContract,
    StoreFaultContract,
    new_stream,
    turn_events,
)
from turnledger.ledger.errors import ConfigurationError, StoreUnavailableError
from turnledger.ledger.postgres import PostgresBackend
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify


class PostgresFaults:
    """Faults done to the PostgreSQL ledger from outside the store."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.schema = url.rsplit("schema=", 1)[1]
        self.server = url.split("?", 1)[0]

    @contextlib.contextmanager
    def hold_write_lock(self) -> Iterator[None]:
        with psycopg.connect(self.server) as other:
            other.execute(
                f'LOCK TABLE "{self.schema}".turnledger_events IN EXCLUSIVE MODE'
            )
            yield
            other.rollback()

    def locked_store(self) -> EventStore:
        return EventStore(PostgresBackend(self.url, lock_timeout=1))

    def fill_up(self, store: EventStore) -> None:
        pytest.skip("the shared PostgreSQL server's disk cannot be filled in a test")

    def make_read_only(self) -> None:
        pytest.skip("the shared test database cannot be made read-only for others")

    def vanish(self) -> None:
        with psycopg.connect(self.server, autocommit=True) as other:
            other.execute(f'DROP SCHEMA "{self.schema}" CASCADE')

    def kill_connections(self, store: EventStore) -> None:
        datastore = store.backend._datastore
        with datastore.get_connection() as one, datastore.get_connection() as two:
            pids = [one.info.backend_pid, two.info.backend_pid]
        with psycopg.connect(self.server, autocommit=True) as other:
            killed = other.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                "pg_stat_activity WHERE pid = ANY(%s)) AS k",
                (pids,),
            ).fetchone()
        assert killed == (2,)


class TestPostgresStore(StoreContract, StoreFaultContract, IdempotencyContract):
    @pytest.fixture(name="faults")
    def _faults(self, postgres_url: str) -> PostgresFaults:
        return PostgresFaults(postgres_url)

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


def test_unreachable_server_is_a_typed_error():
    """No server listening (a stopped server): StoreUnavailableError at open."""
    with pytest.raises(StoreUnavailableError, match=r"Cannot open the PostgreSQL"):
        open_store("postgresql://postgres@127.0.0.1:1/test")
