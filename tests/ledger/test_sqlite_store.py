"""The store contract on SQLite, plus what only SQLite shows."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.store_contract import (
    IdempotencyContract,
    StoreContract,
    StoreFaultContract,
    new_stream,
    turn_events,
)
from turnledger.ledger.chain import BODY_OFFSET
from turnledger.ledger.errors import (
    ConfigurationError,
    CorruptRecordError,
    UnknownEventTypeError,
)
from turnledger.ledger.sqlite import SQLiteBackend
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify


class SQLiteFaults:
    """Faults done to a SQLite ledger file from outside the store."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.immutable: list[str] = []

    @contextlib.contextmanager
    def hold_write_lock(self) -> Iterator[None]:
        other = sqlite3.connect(self.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()

    def locked_store(self) -> EventStore:
        return EventStore(SQLiteBackend(self.path, lock_timeout=1))

    def fill_up(self, store: EventStore) -> None:
        # The database may not grow: what a full disk does to SQLite (set on
        # the store's writer connection, the one its appends use).
        with store.backend._writer() as raw:
            pages = raw.execute("PRAGMA page_count").fetchone()[0]
            raw.execute(f"PRAGMA max_page_count={pages}")

    def make_read_only(self) -> None:
        for suffix in ("-wal", "-shm"):
            Path(self.path + suffix).unlink(missing_ok=True)
        Path(self.path).chmod(0o444)
        if os.geteuid() == 0:  # root ignores modes: make the file immutable
            done = subprocess.run(
                ["chattr", "+i", self.path], capture_output=True, check=False
            )
            if done.returncode != 0:
                pytest.skip(f"cannot make a file read-only as root: {done.stderr!r}")
            self.immutable.append(self.path)

    def vanish(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(self.path + suffix).unlink(missing_ok=True)

    def kill_connections(self, store: EventStore) -> None:
        pytest.skip("SQLite has no server connections")

    def undo(self) -> None:
        for path in self.immutable:
            subprocess.run(["chattr", "-i", path], check=False)


class TestSQLiteStore(StoreContract, StoreFaultContract, IdempotencyContract):
    @pytest.fixture(name="faults")
    def _faults(self, sqlite_path: str) -> Iterator[SQLiteFaults]:
        faults = SQLiteFaults(sqlite_path)
        yield faults
        faults.undo()

    @pytest.fixture(name="store")
    def _store(self, sqlite_store: EventStore) -> EventStore:
        return sqlite_store

    @pytest.fixture(name="reopen")
    def _reopen(self, sqlite_path: str):
        opened: list[EventStore] = []

        def reopen(**options) -> EventStore:
            store = open_store(sqlite_path, **options)
            opened.append(store)
            return store

        yield reopen
        for store in opened:
            store.close()


def test_table_is_append_only(sqlite_store: EventStore, sqlite_path: str):
    """Raw SQL cannot update or delete rows, nor leave a version gap."""
    stream = new_stream()
    sqlite_store.append(stream, turn_events("t1"), expected_version=0)
    raw = sqlite3.connect(sqlite_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("UPDATE stored_events SET topic='x'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("DELETE FROM stored_events")
        with pytest.raises(sqlite3.IntegrityError, match="contiguous"):
            raw.execute(
                "INSERT INTO stored_events VALUES (?,?,?,?)",
                (stream.hex, 10, "turn.started", b""),
            )
    finally:
        raw.close()
    assert sqlite_store.count() == 8


def test_durability_pragmas(sqlite_store: EventStore):
    """The ledger runs in WAL mode with synchronous=FULL by default."""
    pool = sqlite_store.backend._datastore.pool
    connection = pool.get_connection(is_writer=True)
    try:
        raw = connection._sqlite_conn
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        pool.put_connection(connection)


def test_synchronous_is_configurable(sqlite_path: str):
    """A rebuildable ledger copy may trade durability for speed; bad values are refused."""
    store = open_store(sqlite_path, synchronous="normal")
    try:
        pool = store.backend._datastore.pool
        connection = pool.get_connection(is_writer=False)
        try:
            assert (
                connection._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0] == 1
            )
        finally:
            pool.put_connection(connection)
    finally:
        store.close()
    with pytest.raises(ConfigurationError, match="found 'sometimes'"):
        open_store(sqlite_path, synchronous="sometimes")


def _raw_insert(path: str, stream_hex: str, version: int, topic: str, state: bytes):
    raw = sqlite3.connect(path)
    try:
        raw.execute(
            "INSERT INTO stored_events VALUES (?,?,?,?)",
            (stream_hex, version, topic, state),
        )
        raw.commit()
    finally:
        raw.close()


def test_corrupt_row_is_a_typed_error_naming_its_position(
    sqlite_store: EventStore, sqlite_path: str
):
    """A row whose payload does not decode names its position and what was expected."""
    stream = new_stream()
    sqlite_store.append(stream, turn_events("t1"), expected_version=0)
    good = next(sqlite_store.iter_rows())
    _raw_insert(
        sqlite_path,
        stream.hex,
        9,
        "turn.completed",
        good.state[:BODY_OFFSET] + b"{nope",
    )
    with pytest.raises(CorruptRecordError) as caught:
        sqlite_store.read_stream(stream)
    assert str(caught.value).startswith(
        f"Corrupt record at position 9 (stream {stream} version 9): "
        "expected a valid turn.completed event"
    )
    report = verify(sqlite_store)
    assert not report.ok
    # It does not decode, and the ledger did not write it: both are named.
    assert [(p.position, p.kind) for p in report.problems] == [
        (9, "corrupt"),
        (9, "edited_payload"),
    ]


def test_unknown_tag_is_a_typed_error(sqlite_store: EventStore, sqlite_path: str):
    """A row with a tag this code does not know is refused with a typed error."""
    stream = new_stream()
    sqlite_store.append(stream, turn_events("t1"), expected_version=0)
    good = next(sqlite_store.iter_rows())
    _raw_insert(sqlite_path, stream.hex, 9, "turn.teleported", good.state)
    with pytest.raises(UnknownEventTypeError) as caught:
        sqlite_store.read_all(after=8)
    assert "position 9" in str(caught.value)
    assert "Expected one of the known event tags, found 'turn.teleported'" in str(
        caught.value
    )
    assert [p.kind for p in verify(sqlite_store).problems] == [
        "unknown_type",
        "forged",  # a copy of position 1's bytes
    ]


def test_short_frame_is_corrupt(sqlite_store: EventStore, sqlite_path: str):
    """A payload shorter than the frame header is reported as corrupt."""
    stream = new_stream()
    _raw_insert(sqlite_path, stream.hex, 1, "turn.started", b"\x01\x00")
    with pytest.raises(
        CorruptRecordError, match="expected a frame of at least 12 bytes"
    ):
        sqlite_store.read_stream(stream)


def test_bad_urls_are_refused(tmp_path):
    """A store URL that names no usable ledger is a configuration error."""
    for url in (":memory:", "mysql://x/y", ""):
        if url == "":
            continue
        with pytest.raises(ConfigurationError, match="Expected a SQLite file path"):
            open_store(url)
    with pytest.raises(ConfigurationError, match="AES key"):
        open_store(str(tmp_path / "x.db"), cipher_key="not-a-key")
