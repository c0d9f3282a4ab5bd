"""Memory backends never leak driver errors: each failure is our typed error.

Real faults only: another connection holding ``BEGIN IMMEDIATE`` (locked), an
immutable file or folder (read-only, ``chattr +i`` as root ignores modes), a
database that may not grow (``PRAGMA max_page_count``: what a full disk does to
SQLite), a tiny tmpfs (a full disk for files), the server killing the
connection (``pg_terminate_backend``) and a PostgreSQL table lock held past the
lock timeout.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sqlite3
import subprocess
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import (
    LedgerFullError,
    LedgerLockedError,
    LedgerReadOnlyError,
    StoreUnavailableError,
)
from turnledger.ledger.events import MemoryStored
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.errors import (
    MemoryFullError,
    MemoryLockedError,
    MemoryReadOnlyError,
    MemoryStoreError,
    translate_memory_error,
)
from turnledger.projections.memory.lucid import LucidMemory
from turnledger.projections.memory.markdown import MarkdownMemory
from turnledger.projections.memory.postgres import PostgresMemory, split_url
from turnledger.projections.memory.postgres._sql import TABLE
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.qdrant import QdrantMemory
from turnledger.projections.memory.shred import KeyStore
from turnledger.projections.memory.sqlite import SQLiteMemory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def new(key: str, content: str = "a fact", *, category: str = "core") -> NewMemory:
    return NewMemory(
        agent="ops",
        key=key,
        content=content,
        category=category,
        entry_id=hashlib.sha256(key.encode()).hexdigest()[:32],
        at=T0,
    )


class BagEmbedder:
    """A deterministic 16-dimension embedder (no model needed)."""

    identity = EmbeddingIdentity("test", "bag", 16)

    def embed(self, texts):
        out = []
        for text in texts:
            vector = [0.0] * 16
            for word in text.split():
                vector[hashlib.sha256(word.encode()).digest()[0] % 16] += 1.0
            out.append(vector)
        return out


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """The files (or folders) refuse writes, even to root."""
    done: list[Path] = []
    try:
        for path in paths:
            if os.geteuid() != 0:
                path.chmod(0o555 if path.is_dir() else 0o444)
            else:
                run = subprocess.run(
                    ["chattr", "+i", str(path)], capture_output=True, check=False
                )
                if run.returncode != 0:
                    pytest.skip(f"cannot make {path} immutable: {run.stderr!r}")
            done.append(path)
        yield
    finally:
        for path in done:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(path)], check=False)
            else:
                path.chmod(0o755 if path.is_dir() else 0o644)


@contextlib.contextmanager
def tiny_disk(where: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only)."""
    where.mkdir()
    run = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if run.returncode != 0:
        pytest.skip(f"cannot mount a tiny tmpfs: {run.stderr!r}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# -- SQLite -------------------------------------------------------------------


def test_sqlite_locked_is_typed_after_the_busy_timeout(tmp_path):
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path)
    memory.store(new("seed"))
    with write_locked(path):
        with pytest.raises(MemoryLockedError) as caught:
            memory.store(new("k"))
        assert isinstance(caught.value, LedgerLockedError)
        message = str(caught.value)
        assert "sqlite memory store at" in message
        assert "m.db" in message
        assert "locked by another writer (waited 5 s)" in message
        # Reads still work under a writer's lock (WAL).
        assert [e.key for e in memory.list(agents=["ops"])] == ["seed"]
    assert memory.store(new("k")).key == "k"  # the lock gone, writes resume
    memory.close()


def test_sqlite_locked_at_open_is_typed(tmp_path):
    path = tmp_path / "m.db"
    SQLiteMemory(path).close()
    with write_locked(path), pytest.raises(MemoryLockedError, match="waited 5 s"):
        SQLiteMemory(path)


def test_sqlite_full_is_typed_and_writes_nothing(tmp_path):
    memory = SQLiteMemory(tmp_path / "m.db")
    memory.store(new("seed"))
    pages = memory._db.conn.execute("PRAGMA page_count").fetchone()[0]
    memory._db.conn.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(MemoryFullError, match=r"m\.db.*full") as caught:
        memory.store(new("big", "word " * 40_000))
    assert isinstance(caught.value, LedgerFullError)
    event = MemoryStored(agent="ops", key="applied", content="x " * 40_000)
    recorded = Recorded(
        position=1,
        stream_id=uuid.uuid4(),
        version=1,
        recorded_at=T0,
        event=event,
    )
    with pytest.raises(MemoryFullError):
        memory.apply([recorded], 1)
    assert memory.applied_position() == 0  # neither the effect nor the position
    assert [e.key for e in memory.list(agents=["ops"])] == ["seed"]
    memory.close()


def test_sqlite_read_only_file_is_typed(tmp_path):
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path)
    memory.store(new("seed"))
    memory.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with immutable(path), pytest.raises(MemoryStoreError) as caught:
        SQLiteMemory(path)
    assert isinstance(caught.value, StoreUnavailableError)
    assert "m.db" in str(caught.value)
    assert "sqlite3" not in type(caught.value).__module__


def test_closed_sqlite_store_is_typed(tmp_path):
    memory = SQLiteMemory(tmp_path / "m.db")
    memory.close()
    with pytest.raises(MemoryStoreError, match="closed database"):
        memory.list(agents=["ops"])
    assert memory.health() is False


def test_key_store_locked_is_typed(tmp_path):
    path = tmp_path / "k.keys.db"
    keys = KeyStore(str(path))
    keys.seal("secret", key_id="a", agent="ops", memory_key="k")
    with write_locked(path), pytest.raises(MemoryLockedError) as caught:
        keys.seal("other", key_id="b", agent="ops", memory_key="j")
    assert "memory key store at" in str(caught.value)
    assert keys.count() == 1
    keys.close()


def test_lucid_local_store_failures_are_typed(tmp_path):
    path = tmp_path / "lucid.db"
    lucid = LucidMemory(SQLiteMemory(path), ["true"])
    lucid.store(new("seed"))
    with write_locked(path), pytest.raises(MemoryLockedError):
        lucid.store(new("k"))
    lucid.close()


# -- Markdown -----------------------------------------------------------------


def test_markdown_read_only_folder_is_typed(tmp_path):
    memory = MarkdownMemory(tmp_path / "ws", agent="ops")
    memory.store(new("seed"))
    files = sorted(p for p in (tmp_path / "ws").rglob("*"))
    with immutable(*files, tmp_path / "ws"):
        with pytest.raises(MemoryReadOnlyError) as caught:
            memory.store(new("k"))
        assert isinstance(caught.value, LedgerReadOnlyError)
        assert "markdown memory store at" in str(caught.value)
    assert [e.key for e in memory.list(agents=["ops"])] == ["seed"]


def fill(memory: MarkdownMemory) -> None:
    for n in range(100):
        memory.store(new(f"k{n}", "word " * 2_000))


def test_markdown_full_disk_is_typed(tmp_path):
    with tiny_disk(tmp_path / "disk", "64k") as disk:
        memory = MarkdownMemory(disk / "ws", agent="ops")
        memory.store(new("seed"))
        with pytest.raises(MemoryFullError, match="full"):
            fill(memory)


# -- Qdrant -------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_qdrant_folder_in_use_is_typed(tmp_path):
    first = QdrantMemory(path=tmp_path / "q", embedder=BagEmbedder())
    try:
        with pytest.raises(MemoryLockedError, match="qdrant memory store at"):
            QdrantMemory(path=tmp_path / "q", embedder=BagEmbedder())
    finally:
        first.close()
    gc.collect()  # qdrant-client leaves the refused client's lock file open


def test_qdrant_closed_client_is_typed(tmp_path):
    memory = QdrantMemory(path=tmp_path / "q", embedder=BagEmbedder())
    memory.store(new("seed", "alpha beta"))
    memory.close()
    with pytest.raises(MemoryStoreError):
        memory.store(new("k", "gamma"))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_qdrant_server_unreachable_is_typed():
    with pytest.raises(MemoryStoreError, match="qdrant memory store"):
        QdrantMemory(url="http://127.0.0.1:9", embedder=BagEmbedder())
    for thread in threading.enumerate():  # qdrant-client's version check
        if "compatibility" in thread.name:
            thread.join(timeout=30)


# -- PostgreSQL ---------------------------------------------------------------


def test_postgres_killed_connection_is_typed_then_reconnects(postgres_url):
    memory = PostgresMemory(postgres_url)
    try:
        memory.store(new("seed"))
        pid = memory._conn.info.backend_pid
        with psycopg.connect(postgres_url.split("?", 1)[0], autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(MemoryStoreError) as caught:
            memory.list(agents=["ops"])
        assert isinstance(caught.value, StoreUnavailableError)
        assert "postgres memory store" in str(caught.value)
        assert not isinstance(caught.value, psycopg.Error)
        assert [e.key for e in memory.list(agents=["ops"])] == ["seed"]
    finally:
        memory.close()


def test_postgres_locked_table_is_typed_after_the_lock_timeout(postgres_url):
    memory = PostgresMemory(postgres_url)
    conninfo, schema = split_url(postgres_url)
    try:
        memory.store(new("seed"))
        with psycopg.connect(conninfo) as other:
            other.execute(f'LOCK TABLE "{schema}"."{TABLE}" IN ACCESS EXCLUSIVE MODE')
            with pytest.raises(MemoryLockedError, match=r"waited 5 s"):
                memory.store(new("k"))
            other.rollback()
        assert memory.store(new("k")).key == "k"
    finally:
        memory.close()


def test_postgres_unreachable_is_typed_without_credentials():
    url = "postgresql://someone:hunter2@127.0.0.1:9/nowhere"
    with pytest.raises(MemoryStoreError) as caught:
        PostgresMemory(url)
    assert "hunter2" not in str(caught.value)
    assert "127.0.0.1:9/nowhere" in str(caught.value)


# -- the translation itself ---------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sqlite3.OperationalError("database is locked"), MemoryLockedError),
        (sqlite3.OperationalError("database or disk is full"), MemoryFullError),
        (
            sqlite3.OperationalError("attempt to write a readonly database"),
            MemoryReadOnlyError,
        ),
        (OSError(28, "No space left on device"), MemoryFullError),
        (OSError(30, "Read-only file system"), MemoryReadOnlyError),
        (OSError(5, "Input/output error"), MemoryStoreError),
        (psycopg.errors.LockNotAvailable("lock timeout"), MemoryLockedError),
        (psycopg.OperationalError("terminating connection"), MemoryStoreError),
    ],
)
def test_driver_errors_map_to_their_kind(error, kind):
    typed = translate_memory_error(error, store="x store", waited=5.2)
    assert type(typed) is kind
    assert str(typed).startswith("the x store ")


def test_our_own_errors_are_not_translated():
    assert translate_memory_error(ValueError("bad"), store="s", waited=0) is None
    assert translate_memory_error(KeyError("k"), store="s", waited=0) is None
