"""Encryption at rest, said exactly, and the cipher key checked by ``open_store`` (#17).

With a key set, a turn's planted text is grepped for in every file written: it
is in exactly the files ``pipeline.lifecycle.AT_REST`` declares clear, and a
plain SQLite turn writes none (the SQLite memory store, the view database and
the key store are SQLCipher files since #26), nor in any ledger file.

``open_store`` itself refuses a wrong or missing key (library callers, the
bootstrap and the adapters as well as the CLI) before anything is written, on
SQLite and on the real PostgreSQL server; a store opened with ``check_key=False``
and a wrong key reads "does not decrypt", never garbage.
"""

from __future__ import annotations

import asyncio
import base64

import pytest

from turnledger.ledger.errors import CorruptRecordError
from turnledger.ledger.events import SessionOpened, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.key_check import CipherKeyError
from turnledger.ledger.store import CIPHER_KEY_ENV, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import Config
from turnledger.pipeline.lifecycle import AT_REST
from turnledger.pipeline.providers.scripted import ScriptedProvider

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_B = base64.b64encode(b"b" * 32).decode()
STREAM = session_stream_id("ops", "k")


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch):
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", CIPHER_KEY_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(name="url", params=["sqlite", "postgresql"])
def _url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "l.db")
    return request.getfixturevalue("postgres_url")


def rows(url: str) -> int:
    with open_store(url, check_key=False) as store:
        return sum(1 for _ in store.iter_rows())


def encrypted_ledger(url: str) -> None:
    with open_store(url, cipher_key=KEY_A) as store:
        store.append(
            STREAM, [SessionOpened(agent="ops", session_key="k")], expected_version=0
        )


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (KEY_B, "Expected the cipher key this ledger was encrypted with, found another"),
        (None, f"Expected a cipher key ({CIPHER_KEY_ENV}) for this ledger, found none"),
    ],
)  # fmt: skip
def test_open_store_refuses_a_wrong_or_missing_key(url, key, expected):
    """The library path: refused at open, before any append can be tried."""
    encrypted_ledger(url)
    before = rows(url)
    with pytest.raises(CipherKeyError) as caught:
        open_store(url, cipher_key=key or "")
    assert str(caught.value).startswith(expected)
    assert "nothing was written" in str(caught.value)
    assert rows(url) == before
    with open_store(url, cipher_key=KEY_A) as store:
        assert verify(store).ok
        store.append(
            STREAM,
            [TurnStarted(turn_id="t1", origin="channel", user_input="hi")],
            expected_version=1,
        )
    assert rows(url) == before + 1


def test_the_key_from_the_environment_is_checked_too(url, monkeypatch):
    encrypted_ledger(url)
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_B)
    with pytest.raises(CipherKeyError, match="does not decrypt"):
        open_store(url)


def test_reading_with_a_wrong_key_is_a_clear_error(url):
    """Skipping the check, a wrong key reads "does not decrypt", never garbage."""
    encrypted_ledger(url)
    with (
        open_store(url, cipher_key=KEY_B, check_key=False) as store,
        pytest.raises(CorruptRecordError, match="does not decrypt"),
    ):
        list(store.read_stream(STREAM))


def test_bootstrap_refuses_a_wrong_key_before_a_turn(tmp_path, monkeypatch):
    """The composition root opens through open_store: refused, nothing written."""
    db = str(tmp_path / "l.db")
    encrypted_ledger(db)
    before = rows(db)
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_B)

    async def start() -> None:
        provider = ScriptedProvider([])
        async with bootstrap(Config(ledger=db), provider=provider):
            pass

    with pytest.raises(CipherKeyError):
        asyncio.run(start())
    assert rows(db) == before


def test_a_clear_ledger_takes_a_key(url):
    """No encrypted row yet: a key is accepted, and its first append is the check."""
    with open_store(url) as store:
        store.append(
            STREAM, [SessionOpened(agent="ops", session_key="k")], expected_version=0
        )
    with open_store(url, cipher_key=KEY_A) as store:
        store.append(
            STREAM,
            [TurnStarted(turn_id="t1", origin="channel", user_input="hi")],
            expected_version=1,
        )
    with pytest.raises(CipherKeyError):
        open_store(url, cipher_key=KEY_B)
    with pytest.raises(CipherKeyError):
        open_store(url)


PLANTED = "PLANTED-zebra-4471"
SCRIPT = f"""
[[steps]]
text = "noting"
[[steps.tool_calls]]
name = "memory_store"
arguments = {{ key = "vault", content = "{PLANTED} memory" }}
[[steps]]
text = "Noted {PLANTED} answer"
"""

CLEAR_FILES: set[str] = set()
"""The files of the declared-clear surfaces a plain SQLite turn writes the text to:
none (no Markdown, PostgreSQL or Qdrant memory, no PostgreSQL views, no media)."""


def test_with_a_key_plaintext_is_only_where_declared(tmp_path, monkeypatch):
    """Grep every file a keyed turn writes: hits exactly in the declared-clear files."""
    declared_clear = {name for name, _, encrypted, _ in AT_REST if not encrypted}
    assert declared_clear == {
        "Other memory backends",
        "PostgreSQL view store",
        "Media files",
    }
    script = tmp_path / "s.toml"
    script.write_text(SCRIPT, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)
    turn = ["run", str(script), "--agent", "ops", "--turn", f"remember {PLANTED}"]
    assert main(turn) == 0
    assert main(["project", "catch-up"]) == 0
    assert main(["memory", "list", "--agent", "ops"]) == 0
    files = {p.name: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    assert {"turnledger.memory.db", "turnledger.views.db"} <= set(files)
    hits = {name for name, data in files.items() if PLANTED.encode() in data}
    assert hits == CLEAR_FILES, (hits, sorted(files))
    ledger = [n for n in files if n.startswith("turnledger.db")]
    assert "turnledger.db" in ledger
    assert not hits & set(ledger)
