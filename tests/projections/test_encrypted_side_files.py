"""Every SQLite file beside the ledger encrypted with a cipher key (issue #26 item 3).

The view store, a SQLite memory database, the memory key store and the erasure
key store: with a key each is a
SQLCipher database keyed with its own key derived from the one cipher key. Per
file: the content round-trips and no byte of it is in clear (main file, -wal,
-shm); a wrong key, a second key (a file encrypted with key A opened with key B,
its first content far from the first page), a missing key and a clear file with
a key set are each refused at open with a one-line ``FileKeyError``, the file
left byte for byte as it was; a key without SQLCipher installed is refused
naming the extra, no file made.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnledger.ledger.errors import LedgerError, StoreUnavailableError
from turnledger.ledger.file_keys import (
    FileKeyError,
    SQLCipherMissingError,
    derive_file_key,
    file_key,
)
from turnledger.ledger.key_check import CIPHER_KEY_ENV, CipherKeyError
from turnledger.ledger.sqlite.encrypted import (
    SQLCIPHER_EXTRA,
    connect_file,
    encrypt_in_place,
    is_clear_database,
)
from turnledger.ledger.subject_keys import (
    SubjectKeyStore,
    open_sqlite_keys,
    raw_cipher_key,
)
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.errors import MemoryStoreError
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.shred import KeyStore
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.views import SQLiteViewStore

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_B = base64.b64encode(b"b" * 32).decode()
CANARY = "CANARY-okapi-9182"
AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch):
    monkeypatch.delenv(CIPHER_KEY_ENV, raising=False)


class WordEmbedder:
    """Deterministic bag of words: each word adds 1 at its hash slot."""

    def __init__(self, dims: int = 32) -> None:
        self._identity = EmbeddingIdentity("test", "words", dims)

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    def embed(self, texts):
        return [self.vector(t) for t in texts]

    def vector(self, text: str) -> list[float]:
        out = [0.0] * self._identity.dims
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            digest = hashlib.sha256(word.encode()).digest()
            out[int.from_bytes(digest[:4], "big") % self._identity.dims] += 1.0
        return out


def memory_entry(key: str, content: str) -> NewMemory:
    return NewMemory(agent="ops", key=key, content=content, entry_id=f"id-{key}", at=AT)


@dataclass(frozen=True)
class Kind:
    """One kind of side file: how to open it, write to it and read it back."""

    name: str
    what: str
    open: Callable[[Path, str], Any]
    write: Callable[[Any, str, int], None]
    read: Callable[[Any], str]


def _views_write(store: SQLiteViewStore, text: str, rows: int) -> None:
    states = {f"k{n:05}": {"text": f"filler {n}"} for n in range(rows)}
    states["zz-last"] = {"text": text}
    store.commit("p", states, store.tracking("p") + 1)


def _memory_write(memory: SQLiteMemory, text: str, rows: int) -> None:
    for n in range(rows):
        memory.store(memory_entry(f"k{n:05}", f"filler number {n}"))
    memory.store(memory_entry("zz-last", text))


def _keys_write(keys: KeyStore, text: str, rows: int) -> None:
    for n in range(rows):
        keys.seal("x", key_id=f"k{n:05}", agent="ops", memory_key=f"m{n}")
    keys.seal("x", key_id="zz-last", agent="ops", memory_key=text)


def _keys_read(keys: KeyStore) -> str:
    # The memory key recorded with the last key id (the canary).
    row = keys._db.execute(
        "SELECT memory_key FROM entry_keys WHERE key_id = 'zz-last'"
    ).fetchone()
    return str(row[0])


def _erasure_open(path: Path, key: str | None) -> SubjectKeyStore:
    text = key if key is not None else os.environ.get(CIPHER_KEY_ENV)
    store = open_sqlite_keys(
        str(path),
        ledger_id="ledger-1",
        wrap_key=raw_cipher_key(text),
        before_create=lambda: True,
    )
    assert store is not None
    return store


def _erasure_write(store: SubjectKeyStore, text: str, rows: int) -> None:
    for n in range(rows):
        store.create("session", UUID(int=n + 1), agent="ops", subject=f"s{n:05}")
    store.create("session", UUID(int=10**6), agent="ops", subject=text)


def _erasure_read(store: SubjectKeyStore) -> str:
    (row,) = store.select(stream_ids=[str(UUID(int=10**6))])
    return row.subject


KINDS = [
    Kind(
        "views",
        "view store",
        lambda path, key: SQLiteViewStore(str(path), cipher_key=key),
        _views_write,
        lambda store: store.get("p", "zz-last", dict)["text"],
    ),
    Kind(
        "memory",
        "memory database",
        lambda path, key: SQLiteMemory(path, cipher_key=key, embedder=WordEmbedder()),
        _memory_write,
        lambda memory: memory.get("zz-last", agents=["ops"]).content,
    ),
    Kind(
        "keys",
        "memory key store",
        lambda path, key: KeyStore(str(path), cipher_key=key),
        _keys_write,
        _keys_read,
    ),
    Kind("erasure", "erasure key store", _erasure_open, _erasure_write, _erasure_read),
]


@pytest.fixture(name="kind", params=KINDS, ids=[k.name for k in KINDS])
def _kind(request) -> Kind:
    return request.param


def files_of(path: Path) -> dict[str, bytes]:
    """The database and its -wal, -shm, as they are on disk now."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            out[side.name] = side.read_bytes()
    return out


def hits(path: Path, text: str) -> list[str]:
    return [name for name, data in files_of(path).items() if text.encode() in data]


def written(kind: Kind, path: Path, key: str, rows: int = 3) -> None:
    handle = kind.open(path, key)
    try:
        kind.write(handle, CANARY, rows)
    finally:
        handle.close()


def test_the_content_round_trips_and_no_copy_is_in_clear(kind, tmp_path):
    """Encrypted at rest while open (WAL and -shm included) and after close."""
    path = tmp_path / f"{kind.name}.db"
    handle = kind.open(path, KEY_A)
    try:
        kind.write(handle, CANARY, 3)
        assert kind.read(handle) == CANARY
        assert files_of(path)  # written
        assert hits(path, CANARY) == []
        assert hits(path, "filler") == []
    finally:
        handle.close()
    assert not is_clear_database(path)
    assert hits(path, CANARY) == []
    again = kind.open(path, KEY_A)
    try:
        assert kind.read(again) == CANARY
    finally:
        again.close()


def test_the_same_file_without_a_key_keeps_the_text_in_clear(kind, tmp_path):
    """The control of the grep above: without a key the canary is found."""
    path = tmp_path / f"{kind.name}.db"
    written(kind, path, "")
    assert is_clear_database(path)
    assert hits(path, CANARY)


REFUSALS = {
    "wrong key": (
        KEY_A,
        KEY_B,
        "to decrypt with the cipher key (TURNLEDGER_CIPHER_KEY), found it does not",
    ),
    "missing key": (
        KEY_A,
        "",
        "Expected a cipher key (TURNLEDGER_CIPHER_KEY) for the",
    ),
    "clear file with a key set": (
        "",
        KEY_A,
        "encrypted (TURNLEDGER_CIPHER_KEY is set), found it in clear",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_file_that_does_not_fit_the_key_is_refused_at_open(kind, tmp_path, case):
    """One typed line naming the file; the file is left exactly as it was."""
    made_with, opened_with, expected = REFUSALS[case]
    path = tmp_path / f"{kind.name}.db"
    written(kind, path, made_with)
    before = files_of(path)
    with pytest.raises(FileKeyError) as caught:
        kind.open(path, opened_with)
    message = str(caught.value)
    assert expected in message
    assert f"the {kind.what} at {str(path)!r}" in message
    assert message.endswith("nothing was read or written")
    assert "\n" not in message
    assert caught.value.path == str(path)
    assert isinstance(caught.value, CipherKeyError)  # the CLI: one line, exit 2
    assert files_of(path) == before
    reopened = kind.open(path, made_with)  # the right key still opens it
    try:
        assert kind.read(reopened) == CANARY
    finally:
        reopened.close()


def test_a_second_key_is_refused_wherever_the_content_lies(kind, tmp_path):
    """A file grown under key A (its canary row far from the first page) and
    reopened under key B: refused at open, before any row is read."""
    path = tmp_path / f"{kind.name}.db"
    written(kind, path, KEY_A, rows=400)
    assert sum(len(data) for data in files_of(path).values()) > 32 * 1024
    before = files_of(path)
    with pytest.raises(FileKeyError, match="encrypted with another key"):
        kind.open(path, KEY_B)
    assert files_of(path) == before


def test_the_key_comes_from_the_environment_by_default(kind, tmp_path, monkeypatch):
    path = tmp_path / f"{kind.name}.db"
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)
    written(kind, path, None)
    assert not is_clear_database(path)
    with pytest.raises(FileKeyError):
        kind.open(path, "")  # an explicit empty key: none
    monkeypatch.delenv(CIPHER_KEY_ENV)
    with pytest.raises(FileKeyError, match="found none"):
        kind.open(path, None)


def test_without_sqlcipher_a_key_is_refused_naming_the_extra(
    kind, tmp_path, monkeypatch
):
    """Never a silent clear file: refused, nothing created."""
    monkeypatch.setitem(sys.modules, "sqlcipher3.dbapi2", None)
    path = tmp_path / f"{kind.name}.db"
    with pytest.raises(SQLCipherMissingError) as caught:
        kind.open(path, KEY_A)
    assert str(caught.value).endswith(SQLCIPHER_EXTRA)
    assert kind.what in str(caught.value)
    assert isinstance(caught.value, LedgerError)
    assert not path.exists()


def test_each_kind_has_its_own_key(tmp_path):
    """One derivation: labelled per purpose, so a file opens with its own key only."""
    raw = b"a" * 32
    keys = {p: derive_file_key(raw, p) for p in ("views", "memory", "keys", "erasure")}
    assert len(set(keys.values())) == 4
    assert all(len(k) == 32 for k in keys.values())
    assert file_key("views", KEY_A) == keys["views"]
    assert file_key("views", "") is None
    path = tmp_path / "x.db"
    conn = connect_file(path, key=keys["views"], what="view store", clear_remedy="-")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(FileKeyError, match="encrypted with another key"):
        connect_file(path, key=keys["memory"], what="view store", clear_remedy="-")


@given(
    raw=st.sampled_from([16, 24, 32]).flatmap(
        lambda n: st.binary(min_size=n, max_size=n)
    )
)
def test_the_derivation_is_one_key_per_purpose(raw):
    """Deterministic, 32 bytes, distinct per purpose, never the cipher key itself,
    and the same from the base64 text the environment holds."""
    purposes = ("views", "memory", "keys", "erasure")
    derived = {p: derive_file_key(raw, p) for p in purposes}
    assert len(set(derived.values())) == len(purposes)
    assert raw not in derived.values()
    assert all(len(k) == 32 for k in derived.values())
    text = base64.b64encode(raw).decode()
    assert all(file_key(p, text) == k for p, k in derived.items())


@pytest.mark.parametrize("bad", ["not base64!", base64.b64encode(b"short").decode()])
def test_a_malformed_key_is_a_configuration_error(tmp_path, bad):
    with pytest.raises(LedgerError, match="Expected a base64 AES key of 16, 24 or 32"):
        SQLiteViewStore(str(tmp_path / "v.db"), cipher_key=bad)
    assert not (tmp_path / "v.db").exists()


def test_memory_in_ram_is_never_encrypted(tmp_path):
    """``:memory:`` has nothing at rest: a key is accepted and no file appears."""
    with SQLiteMemory(":memory:", cipher_key=KEY_A) as memory:
        memory.store(memory_entry("a", "hello there"))
        assert memory.count(agents=["ops"]) == 1


# -- the stores work on the open encrypted database ---------------------------


@pytest.fixture(name="memory")
def _memory(tmp_path) -> Iterator[SQLiteMemory]:
    with SQLiteMemory(
        tmp_path / "m.db", cipher_key=KEY_A, embedder=WordEmbedder()
    ) as memory:
        yield memory


def test_full_text_recall_on_an_encrypted_memory(memory, tmp_path):
    memory.search_mode = "bm25"
    memory.store(memory_entry("editor", "the team prefers the helix editor"))
    memory.store(memory_entry("lunch", "lunch is at noon on fridays"))
    found = memory.recall("helix editor", agents=["ops"])
    assert [e.key for e in found] == ["editor"]
    assert found[0].score is not None
    assert found[0].score > 0
    assert hits(tmp_path / "m.db", "helix") == []


def test_vector_search_on_an_encrypted_memory(memory, tmp_path):
    memory.search_mode = "embedding"
    memory.store(memory_entry("editor", "helix editor keybindings"))
    memory.store(memory_entry("lunch", "noon fridays lunch"))
    memory.embed_pending()  # vectors come after the write
    found = memory.recall("keybindings helix", agents=["ops"])
    assert found
    assert found[0].key == "editor"
    stored = memory._db.conn.execute(
        "SELECT count(*) FROM memories WHERE embedding IS NOT NULL"
    ).fetchone()[0]
    assert stored == 2
    assert hits(tmp_path / "m.db", "keybindings") == []


def test_reindex_and_scrub_on_an_encrypted_memory(tmp_path):
    path = tmp_path / "m.db"
    with SQLiteMemory(path, cipher_key=KEY_A) as memory:  # no embedder yet
        memory.store(memory_entry("editor", "helix editor keybindings"))
    with SQLiteMemory(path, cipher_key=KEY_A, embedder=WordEmbedder()) as memory:
        assert memory.reindex() == 1
        memory.search_mode = "embedding"
        assert [e.key for e in memory.recall("helix", agents=["ops"])] == ["editor"]
        assert memory.forget("editor", agent="ops")
        memory.scrub()
        assert memory.count(agents=["ops"]) == 0
    assert hits(path, "helix") == []


def test_the_ledger_binding_works_on_encrypted_files(tmp_path):
    with SQLiteMemory(tmp_path / "m.db", cipher_key=KEY_A) as memory:
        memory.store(memory_entry("a", "hello there"))
        assert not memory.bind("ledger-1", 10)
        assert memory.bind("ledger-2", 10)  # another ledger's rows: emptied
        assert memory.count(agents=["ops"]) == 0
    views = SQLiteViewStore(str(tmp_path / "v.db"), cipher_key=KEY_A)
    try:
        views.commit("p", {"k": {"n": 1}}, 3)
        assert not views.bind("ledger-1", 10)
        assert views.load("p", ["k"], dict) == {"k": {"n": 1}}
        assert views.all("p", dict) == {"k": {"n": 1}}
        assert views.bind("ledger-1", 2)  # tracking past the head: emptied
        assert views.tracking("p") == 0
        assert views.try_lock("p")
    finally:
        views.close()


def test_the_key_store_seals_and_shreds_when_encrypted(tmp_path):
    keys = KeyStore(str(tmp_path / "k.db"), cipher_key=KEY_A)
    try:
        sealed = keys.seal(CANARY, key_id="k1", agent="ops", memory_key="m")
        assert keys.open(sealed) == CANARY
        assert keys.destroy(agent="ops", memory_key="m") == 1
        assert keys.open(sealed) == "[forgotten]"
    finally:
        keys.close()


def test_driver_errors_of_an_encrypted_file_leave_typed(tmp_path):
    """SQLCipher's own exception classes never escape: sqlite3's, then typed."""
    conn = connect_file(
        tmp_path / "x.db",
        key=file_key("views", KEY_A),
        what="view store",
        clear_remedy="-",
    )
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("SELEKT 1")
    assert caught.value.sqlite_errorname == "SQLITE_ERROR"
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        list(conn.execute("SELECT * FROM nowhere"))
    assert conn.execute("PRAGMA temp_store").fetchone()[0] == 2  # memory
    conn.execute("CREATE TABLE t (x UNIQUE)")
    assert conn.execute("INSERT INTO t VALUES (1)").lastrowid == 1
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    nowhere = tmp_path / "no such folder" / "x.db"
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        SQLiteViewStore(str(nowhere), cipher_key=KEY_A)
    with pytest.raises(MemoryStoreError, match="unable to open"):
        SQLiteMemory(nowhere, cipher_key=KEY_A)
    views = SQLiteViewStore(str(tmp_path / "v.db"), cipher_key=KEY_A)
    views.close()
    with pytest.raises(StoreUnavailableError):
        views.tracking("p")
    memory = SQLiteMemory(tmp_path / "m.db", cipher_key=KEY_A)
    memory.close()
    with pytest.raises(MemoryStoreError):
        memory.count(agents=["ops"])


def test_encrypt_in_place_keeps_everything_and_leaves_no_clear_copy(tmp_path):
    path = tmp_path / "x.db"
    clear = sqlite3.connect(path, isolation_level=None)
    clear.execute("PRAGMA journal_mode=WAL")
    clear.execute("CREATE VIRTUAL TABLE f USING fts5 (body)")
    clear.execute("INSERT INTO f VALUES (?)", (f"{CANARY} helix",))
    clear.execute("PRAGMA user_version = 7")
    clear.close()
    key = file_key("memory", KEY_A)
    assert key is not None
    assert encrypt_in_place(path, key=key, what="memory database")
    assert not is_clear_database(path)
    assert hits(path, CANARY) == []
    assert not list(tmp_path.glob(".*encrypting"))
    conn = connect_file(path, key=key, what="memory database", clear_remedy="-")
    try:
        found = conn.execute("SELECT body FROM f WHERE f MATCH 'helix'").fetchall()
        assert found == [(f"{CANARY} helix",)]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    finally:
        conn.close()
    assert not encrypt_in_place(path, key=key, what="memory database")  # done
    assert not encrypt_in_place(tmp_path / "none.db", key=key, what="memory database")
    assert not (tmp_path / "none.db").exists()
