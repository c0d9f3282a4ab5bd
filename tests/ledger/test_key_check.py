"""The key check's search for the first encrypted row, on both backends.

``check_cipher_key`` asks the backend for the first encrypted row among the first
``scan_rows`` positions; the database reads the frame headers and returns only that
row. Real SQLite files and the real PostgreSQL server.
"""

from __future__ import annotations

import base64
import sqlite3
import uuid

import pytest

from turnledger.ledger.events import SessionOpened
from turnledger.ledger.key_check import (
    CipherKeyError,
    check_cipher_key,
    key_fingerprint,
)
from turnledger.ledger.store import EventStore, open_store

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_B = base64.b64encode(b"b" * 32).decode()


def _opened(key: str) -> list[SessionOpened]:
    return [SessionOpened(agent="ops", session_key=key)]


def _fill(url: str) -> None:
    """Three clear rows (positions 1-3), then two encrypted ones (4-5)."""
    with open_store(url) as store:
        for key in "abc":
            store.append(uuid.uuid4(), _opened(key), expected_version=0)
    with open_store(url, cipher_key=KEY_A) as store:
        store.append(uuid.uuid4(), _opened("d") * 2, expected_version=0)


def _first_positions(store: EventStore) -> list[int | None]:
    found = [store.backend.first_encrypted(n) for n in (1, 3, 4, 10_000)]
    return [None if row is None else row.position for row in found]


@pytest.fixture(name="url", params=["sqlite", "postgresql"])
def _url(request: pytest.FixtureRequest, sqlite_path: str) -> str:
    if request.param == "sqlite":
        return sqlite_path
    fresh: str = request.getfixturevalue("postgres_url")  # dropped afterwards
    return fresh


def test_the_first_encrypted_row_within_the_scan(url: str):
    """Found at position 4 once 4 rows are scanned, not within the first 3."""
    _fill(url)
    with open_store(url, cipher_key=KEY_A) as store:
        assert _first_positions(store) == [None, None, 4, 4]
        row = store.backend.first_encrypted(10)
        assert row is not None
        assert store.decode(row).event == SessionOpened(agent="ops", session_key="d")
    with pytest.raises(CipherKeyError, match="position 4 does not decrypt"):
        open_store(url, cipher_key=KEY_B)
    with pytest.raises(CipherKeyError, match="first at position 4"):
        open_store(url)
    # Rows 1-3 are clear, but the ledger recorded KEY_A's fingerprint.
    with (
        open_store(url, cipher_key=KEY_B, check_key=False) as store,
        pytest.raises(CipherKeyError, match="recorded another key's fingerprint"),
    ):
        check_cipher_key(store, scan_rows=3)


def test_a_clear_ledger_has_no_encrypted_row(url: str):
    """Only clear rows: nothing found, any key accepted."""
    with open_store(url) as store:
        store.append(uuid.uuid4(), _opened("a"), expected_version=0)
        assert store.backend.first_encrypted(10_000) is None
    open_store(url, cipher_key=KEY_B).close()


def test_only_well_framed_rows_count(sqlite_path: str):
    """A row of another frame format with the flag bit set (written behind our
    back) is not the check value; the encrypted row after it is."""
    _fill(sqlite_path)
    raw = sqlite3.connect(sqlite_path)
    raw.execute("DROP TRIGGER stored_events_contiguous")  # a foreign client
    raw.execute(
        "INSERT INTO stored_events (rowid, originator_id, originator_version, "
        "topic, state) VALUES (0, ?, 1, 'session.opened', ?)",
        (uuid.uuid4().hex, bytes([9, 1]) + bytes(40)),
    )
    raw.commit()
    raw.close()
    with open_store(sqlite_path, cipher_key=KEY_A) as store:
        row = store.backend.first_encrypted(10)
        assert row is not None
        assert row.position == 4


def _far_encrypted(url: str) -> None:
    """10,001 clear rows, then encrypted ones under KEY_A (beyond the old scan)."""
    with open_store(url) as store:
        store.append(uuid.uuid4(), _opened("clear") * 10_001, expected_version=0)
    with open_store(url, cipher_key=KEY_A) as store:
        store.append(uuid.uuid4(), _opened("secret"), expected_version=0)


def test_a_second_key_is_refused_beyond_the_first_rows(url: str):
    """The first encrypted event at position 10,002: another key is still refused
    (the recorded fingerprint), in one line, and nothing is written."""
    _far_encrypted(url)
    with pytest.raises(CipherKeyError) as refused:
        open_store(url, cipher_key=KEY_B)
    assert "\n" not in str(refused.value)
    assert "recorded another key's fingerprint" in str(refused.value)
    assert KEY_B not in str(refused.value)
    with open_store(url, cipher_key=KEY_A) as store:
        assert store.count() == 10_002
        recorded = store.backend.cipher_fingerprint(None)
        assert recorded == key_fingerprint(KEY_A) != key_fingerprint(KEY_B)
        assert KEY_A not in recorded


def test_a_ledger_from_before_fingerprints(sqlite_path: str):
    """No fingerprint recorded (an older ledger): the whole ledger is searched for
    its first encrypted event once; a wrong key is refused, the right one is then
    recorded."""
    _far_encrypted(sqlite_path)
    raw = sqlite3.connect(sqlite_path)
    raw.execute("DROP TRIGGER turnledger_cipher_no_delete")
    raw.execute("DELETE FROM turnledger_cipher")
    raw.commit()
    raw.close()
    with pytest.raises(CipherKeyError, match="position 10002 does not decrypt"):
        open_store(sqlite_path, cipher_key=KEY_B)
    with open_store(sqlite_path, cipher_key=KEY_A) as store:
        assert store.backend.cipher_fingerprint(None) == key_fingerprint(KEY_A)
    with pytest.raises(CipherKeyError, match="found none"):
        open_store(sqlite_path)
