"""Cipher keys: a wrong or missing key is refused before anything is written (#17).

The red team's case: an append with a wrong key was accepted, leaving a row
``verify`` reported as corrupt forever. Now the ledger's first encrypted event
is its key check value (``ledger/key_check.py``).
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from turnledger.ledger.errors import CorruptRecordError
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.key_check import CipherKeyError, check_cipher_key
from turnledger.ledger.store import CIPHER_KEY_ENV, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.cli import main

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_B = base64.b64encode(b"b" * 32).decode()
PLANTED = "the-vault-combination-31-17-4"


@pytest.fixture(name="db")
def _db(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", CIPHER_KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "l.db"


def store_memory(capsys, monkeypatch, db: Path, key: str | None, content: str):
    if key is None:
        monkeypatch.delenv(CIPHER_KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(CIPHER_KEY_ENV, key)
    code = main(["--db", str(db), "memory", "store", "--agent", "ops", "k", content])
    out, err = capsys.readouterr()
    return code, out, err


def count(db: Path, key: str) -> int:
    with open_store(str(db), cipher_key=key) as store:
        return store.count()


def test_wrong_and_missing_keys_are_refused_before_writing(capsys, monkeypatch, db):
    """Key A encrypts; key B and no key are one-line exit 2; nothing is added."""
    code, _, err = store_memory(capsys, monkeypatch, db, KEY_A, PLANTED)
    assert code == 0, err
    before = count(db, KEY_A)
    assert before > 0
    for key, expected in (
        (KEY_B, "Expected the cipher key this ledger was encrypted with, found"),
        (None, f"Expected a cipher key ({CIPHER_KEY_ENV}) for this ledger, found"),
    ):
        code, _, err = store_memory(capsys, monkeypatch, db, key, "second")
        assert code == 2
        assert err.count("\n") == 1
        assert err.startswith(f"turnledger: {expected}")
        assert count(db, KEY_A) == before
    with open_store(str(db), cipher_key=KEY_A) as store:
        assert verify(store).ok
    code, _, err = store_memory(capsys, monkeypatch, db, KEY_A, "third")
    assert code == 0, err
    assert count(db, KEY_A) > before


def test_the_ledger_file_holds_no_plaintext(capsys, monkeypatch, db):
    """With a key, the planted content is in no byte of the ledger's files."""
    code, _, err = store_memory(capsys, monkeypatch, db, KEY_A, PLANTED)
    assert code == 0, err
    raw = b"".join(p.read_bytes() for p in db.parent.glob("l.db*"))
    assert PLANTED.encode() not in raw


def test_reading_with_a_wrong_key_is_a_clear_error(db):
    """The library: a wrong key reads as CorruptRecordError, and the check says so."""
    stream = session_stream_id("ops", "k")
    with open_store(str(db), cipher_key=KEY_A) as store:
        store.append(
            stream, [SessionOpened(agent="ops", session_key="k")], expected_version=0
        )
        check_cipher_key(store)
    with pytest.raises(CipherKeyError, match="position 1 does not decrypt"):
        open_store(str(db), cipher_key=KEY_B)
    with open_store(str(db), cipher_key=KEY_B, check_key=False) as store:
        with pytest.raises(CorruptRecordError, match="does not decrypt"):
            list(store.read_stream(stream))
        with pytest.raises(CipherKeyError, match="position 1 does not decrypt"):
            check_cipher_key(store)


def test_a_clear_ledger_accepts_a_key_and_checks_nothing(db):
    """No encrypted row yet: any key is accepted; a clear ledger needs no key."""
    with open_store(str(db)) as store:
        store.append(
            session_stream_id("ops", "k"),
            [SessionOpened(agent="ops", session_key="k")],
            expected_version=0,
        )
        check_cipher_key(store)
    with open_store(str(db), cipher_key=KEY_B) as store:
        check_cipher_key(store)
        check_cipher_key(store, scan_rows=0)


def test_the_scan_bounds_only_the_named_position(db):
    """Past ``scan_rows`` clear rows the check no longer finds the first encrypted
    event, but the fingerprint the ledger recorded still refuses another key."""
    with open_store(str(db)) as store:
        for key in ("a", "b"):
            store.append(
                session_stream_id("ops", key),
                [SessionOpened(agent="ops", session_key=key)],
                expected_version=0,
            )
    with open_store(str(db), cipher_key=KEY_A) as store:
        store.append(
            session_stream_id("ops", "c"),
            [SessionOpened(agent="ops", session_key="c")],
            expected_version=0,
        )
    with open_store(str(db), cipher_key=KEY_B, check_key=False) as store:
        with pytest.raises(CipherKeyError, match="recorded another key's fingerprint"):
            check_cipher_key(store, scan_rows=2)
        with pytest.raises(CipherKeyError, match="position 3 does not decrypt"):
            check_cipher_key(store)
