"""The PostgreSQL write path: remembered heads, the statement-level trigger, wake-ups.

A writer remembers the heads it committed (``HeadCache``) instead of reading them
before every group. Another process moving a stream, or a ledger recreated under
a live process, must still give a conflict or a correct chain, never a stale
link. The contiguity trigger runs once per INSERT and also checks each chained
row's ``prev``; ledgers created with the older row-level trigger get the new one
on open. Followers are woken after the commit, by a NOTIFY of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.chain import HEADER_SIZE
from turnledger.ledger.errors import ConcurrencyError, StoreUnavailableError
from turnledger.ledger.postgres.recorder import MAX_IDENTIFIER, channel_for
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify


def _server(url: str) -> str:
    return url.split("?", 1)[0]


def _table(url: str) -> str:
    return f'"{url.rsplit("schema=", 1)[1]}".turnledger_events'


def test_another_store_moves_the_head(postgres_url: str):
    """A stream advanced by another process is seen, whatever was remembered."""
    with open_store(postgres_url) as first, open_store(postgres_url) as second:
        stream = new_stream()
        first.append(stream, turn_events("t1"), expected_version=0)
        second.append(stream, turn_events("t2"), expected_version=8)
        with pytest.raises(ConcurrencyError) as caught:
            first.append(stream, turn_events("t3"), expected_version=8)
        assert caught.value.found == 16
        result = first.append(stream, turn_events("t3"), expected_version=16)
        assert result.first_version == 17
        # The first store's next append rides on what it now remembers.
        first.append(stream, turn_events("t4"), expected_version=24)
        assert [r.version for r in first.read_stream(stream)] == list(range(1, 33))
        assert verify(first).ok


def test_a_recreated_ledger_is_not_chained_to_a_remembered_head(postgres_url: str):
    """The schema dropped and written again under a live writer: the chain holds.

    The live writer remembers its head (version 8, its link); the new ledger's
    stream has another version 8. Appending at version 8 must chain to the row the
    database holds, not to the remembered one.
    """
    with open_store(postgres_url) as live:
        stream = new_stream()
        live.append(stream, turn_events("old"), expected_version=0)
        with psycopg.connect(_server(postgres_url), autocommit=True) as conn:
            schema = postgres_url.rsplit("schema=", 1)[1]
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        with open_store(postgres_url) as other:
            other.append(stream, turn_events("new"), expected_version=0)
        result = live.append(stream, turn_events("t2"), expected_version=8)
        assert result.first_version == 9
        assert verify(live).ok


def test_a_row_not_chained_to_its_predecessor_is_refused(
    postgres_url: str,
):
    """Raw SQL cannot append a chained row whose prev is not the head's link."""
    with open_store(postgres_url) as store:
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        state = store.backend.select_stream(stream, gt=7, lte=8, limit=1)[0].state
    prev = HEADER_SIZE + 8
    forged = state[:prev] + bytes(16) + state[prev + 16 :]  # a wrong prev
    with (
        psycopg.connect(_server(postgres_url), autocommit=True) as conn,
        pytest.raises(psycopg.errors.UniqueViolation, match="chained"),
    ):
        conn.execute(
            f"INSERT INTO {_table(postgres_url)} (originator_id, "
            "originator_version, topic, state) VALUES (%s, 9, 'x', %s)",
            (stream, forged),
        )


def test_an_old_row_trigger_is_replaced_on_open(postgres_url: str):
    """A ledger made with the row-level contiguity trigger gets the new one."""
    schema = postgres_url.rsplit("schema=", 1)[1]
    table = _table(postgres_url)
    open_store(postgres_url).close()
    with psycopg.connect(_server(postgres_url), autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER turnledger_contiguous_rows ON {table}")
        conn.execute(
            f'CREATE FUNCTION "{schema}".turnledger_contiguous() RETURNS trigger '
            "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER turnledger_contiguous BEFORE INSERT ON {table} "
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".turnledger_contiguous()'
        )
    with open_store(postgres_url) as store:
        store.append(new_stream(), turn_events("t1"), expected_version=0)
        with psycopg.connect(_server(postgres_url), autocommit=True) as conn:
            names = {
                row[0]
                for row in conn.execute(
                    "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass "
                    "AND NOT tgisinternal",
                    (table,),
                ).fetchall()
            }
        assert "turnledger_contiguous" not in names
        assert "turnledger_contiguous_rows" in names


@contextmanager
def _own_database(url: str) -> Iterator[str]:
    """A database of its own for the test (then dropped): its URL, ``url``'s schema.

    A channel is the database's: other tests' ledgers (other schemas of the
    test database, written by other workers) notify the same channel name.
    """
    parts = urlsplit(url)
    name = f"tl_notify_{uuid.uuid4().hex[:12]}"
    admin = urlunsplit(parts._replace(query=""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_each_write_wakes_listeners(postgres_url: str):
    """A write that commits rows sends a NOTIFY on the ledger's channel."""
    with _own_database(postgres_url) as url, open_store(url) as store:
        channel = store.backend._recorder.channel_name
        with psycopg.connect(_server(url), autocommit=True) as listener:
            listener.execute(f'LISTEN "{channel}"')
            store.append(new_stream(), turn_events("t1"), expected_version=0)
            woken = list(listener.notifies(timeout=30, stop_after=1))
        assert [n.channel for n in woken] == [channel]


def test_each_schema_has_its_own_channel():
    """The public schema keeps the library's name; another adds its own name,
    or a hash of it when the name would pass PostgreSQL's 63 bytes."""
    assert channel_for("public") == "turnledger_events"
    assert channel_for("tenant_a") == "turnledger_events_tenant_a"
    long_a, long_b = "t" * 60 + "a", "t" * 60 + "b"
    channels = {channel_for(long_a), channel_for(long_b)}
    assert len(channels) == 2  # cut to 63 bytes, they would be one
    assert all(len(c) <= MAX_IDENTIFIER for c in channels)
    assert channel_for(long_a) == channel_for(long_a)


def test_a_write_wakes_no_follower_of_another_schema(postgres_url: str):
    """Two ledgers in two schemas of one database: a write to one notifies its
    own channel only. Fails with one channel for every schema (each write woke
    the followers of every ledger in the database)."""
    with _own_database(postgres_url) as url:
        other = url.replace("schema=", "schema=other_")
        with open_store(url) as store, open_store(other) as neighbour:
            channel = store.backend._recorder.channel_name
            with psycopg.connect(_server(url), autocommit=True) as listener:
                listener.execute(f'LISTEN "{channel}"')
                neighbour.append(new_stream(), turn_events("t1"), expected_version=0)
                assert list(listener.notifies(timeout=0.5)) == []
                store.append(new_stream(), turn_events("t1"), expected_version=0)
                woken = list(listener.notifies(timeout=30, stop_after=1))
        assert [n.channel for n in woken] == [channel]


def test_a_failed_wake_up_after_the_commit_fails_no_append(postgres_url: str):
    """The COMMIT and the wake-up share a message; only the COMMIT's fate counts."""
    with open_store(postgres_url) as store:
        sql = store.backend._write_sql
        sql.commit_and_wake = b"COMMIT; SELECT 1/0"  # fails after the COMMIT
        stream = new_stream()
        result = store.append(stream, turn_events("t1"), expected_version=0)
        assert list(result.positions) == [r.position for r in store.read_all()]
        sql.commit_and_wake = b"SELECT 1/0; COMMIT"  # fails before it
        with pytest.raises(StoreUnavailableError, match="division by zero"):
            store.append(stream, turn_events("t2"), expected_version=8)
        assert store.stream_version(stream) == 8
        assert verify(store).ok
