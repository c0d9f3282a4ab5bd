"""Erasure that proves itself (issue #26 item 2): canary tests on every file.

A unique canary goes into a session through the real turn engine: the user's
message, a ``memory_store`` call's arguments (and so the memory entry), a
``knowledge_capture`` triple, a tool result (a workspace file read), the
answer, and an attachment. After
``turnledger erase`` every file in the ledger's folder (ledger, WAL, views,
memory, erasure keys, media) is read as raw bytes and searched for the canary in
UTF-8, UTF-16, JSON-escaped and hex form: no hit; on PostgreSQL the same in a
``pg_dump`` of the test schema. A second session's canary stays readable (the
erasure is that session's only), ``verify`` still passes, and the erased
events read as ``Erased`` placeholders with the receipt beside them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from turnledger.ledger.events import MemoryStored, SessionOpened, TurnStarted
from turnledger.ledger.events.erasure import (
    ERASURE_STREAM,
    Erased,
    ErasureRecorded,
    subject_digest,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.key_check import CIPHER_KEY_ENV
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.subject_keys import ErasureKeysError, keys_path
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import Config, parse_config
from turnledger.pipeline.erasure import receipts_for
from turnledger.pipeline.media import MediaRef, MediaStore, attachment_event
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.messages import ToolCall
from turnledger.projections.memory.sqlite.cache import content_hash

AGENT = "ops"
CIPHER_KEY = base64.b64encode(bytes(range(32))).decode()
CANARY = "Zq\u00e9Canary-7781xK"
KEPT = "KeptCanary-5523pW"


def encodings(text: str) -> list[bytes]:
    """The byte forms a leaked copy of ``text`` could take in a file or a dump."""
    utf8 = text.encode()
    escaped = json.dumps(text).strip('"').encode()
    return [
        utf8,
        text.encode("utf-16-le"),
        text.encode("utf-16-be"),
        escaped,
        utf8.hex().encode(),
        # The ASCII tail catches a copy re-encoded at the non-ASCII letter.
        text.rsplit("\u00e9", 1)[-1].encode(),
    ]


def hits(folder: Path, text: str) -> list[str]:
    """Every file under ``folder`` holding ``text`` in any of its encodings."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found.extend(
                f"{path.name}: {form!r}" for form in encodings(text) if form in data
            )
    return found


def _call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def record_session(
    store: EventStore, config: Config, ledger_url: str, key: str, canary: str
) -> None:
    """One turn through the engine carrying ``canary`` everywhere it can go."""
    workspace = Path(config.data_dir) / "agents" / AGENT / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text(f"notes {canary} end\n")
    image = MediaStore(config.data_dir).ingest(
        "note.txt", f"attached {canary}".encode()
    )
    assert isinstance(image, MediaRef)
    script = [
        ChatResponse(
            text="Storing it.",
            tool_calls=(
                _call("c1", "memory_store", key=f"fact-{key}", content=f"{canary}!"),
                _call("c2", "file_read", path="notes.txt"),
                _call(
                    "c3",
                    "knowledge_capture",
                    subject=f"user {key}",
                    relation="said",
                    object=f"{canary}?",
                ),
            ),
        ),
        ChatResponse(text=f"Noted: {canary}."),
    ]

    async def run() -> None:
        async with bootstrap(
            config,
            provider=ScriptedProvider(script, model="scripted-1"),
            store=store,
            ledger_url=ledger_url,
        ) as runtime:
            await runtime.engine.run_turn(
                AGENT,
                key,
                f"Remember {canary} please",
                channel="cli",
                attachments=(attachment_event(image, turn_id="pending"),),
            )

    asyncio.run(run())
    # The workspace file is the user's own, not a copy turnledger keeps.
    (workspace / "notes.txt").unlink()


def setup_folder(
    tmp_path: Path, ledger: str, *, shredding: bool = False
) -> tuple[Config, Path]:
    del ledger
    text = f'data_dir = "{tmp_path / "data"}"\n\n[privacy]\nerasable = true\n'
    if shredding:  # memory contents sealed by the memory's own key store too
        text += "\n[memory]\nshredding = true\n"
    config_file = tmp_path / "turnledger.toml"
    config_file.write_text(text)
    return parse_config(text), config_file


@pytest.mark.parametrize(
    ("cipher_key", "shredding"),
    [("", False), (CIPHER_KEY, False), ("", True)],
    ids=["clear", "cipher", "memory-shredding"],
)
def test_erase_session_leaves_no_copy_in_any_sqlite_file(
    tmp_path: Path,
    cipher_key: str,
    shredding: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if cipher_key:  # erasure is on with a cipher key, the side files SQLCipher
        monkeypatch.setenv(CIPHER_KEY_ENV, cipher_key)
    ledger = str(tmp_path / "l.db")
    config, config_file = setup_folder(tmp_path, ledger, shredding=shredding)
    store = open_store(ledger, erasable=True if not cipher_key else None)
    try:
        record_session(store, config, ledger, "telegram_42", CANARY)
        record_session(store, config, ledger, "telegram_7", KEPT)
    finally:
        store.close()
    if not cipher_key:  # the canary is there to be found (views, memory)
        assert hits(tmp_path, CANARY)
        # A vector of the entry, as an embedder caches it (the default one has).
        with sqlite3.connect(tmp_path / "l.memory.db") as conn:
            conn.execute(
                "INSERT OR IGNORE INTO embedding_cache VALUES (?, ?, 1)",
                (content_hash(f"{CANARY}!"), b"\0" * 16),
            )

    args = ["--db", ledger, "--config", str(config_file), "erase"]
    assert main([*args, "--session", "telegram_42", "--agent", AGENT]) == 2
    assert "--yes" in capsys.readouterr().err
    code = main([*args, "--session", "telegram_42", "--agent", AGENT, "--yes"])
    assert code == 0, capsys.readouterr().err
    assert "erased session" in capsys.readouterr().out

    assert hits(tmp_path, CANARY) == []
    if not cipher_key:
        assert hits(tmp_path, KEPT)  # the other session is untouched
        with sqlite3.connect(tmp_path / "l.memory.db") as conn:
            cached = conn.execute("SELECT hash FROM embedding_cache").fetchall()
        assert (content_hash(f"{CANARY}!"),) not in cached

    with open_store(ledger) as store:
        assert verify(store).ok
        stream = session_stream_id(AGENT, "telegram_42")
        events = [r.event for r in store.read_stream(stream)]
        assert events
        assert all(isinstance(e, Erased) for e in events)
        assert {e.original_type for e in events if isinstance(e, Erased)} >= {
            "session.opened",
            "turn.started",
            "assistant.message",
            "tool_result.recorded",
        }
        kept = [
            r.event for r in store.read_stream(session_stream_id(AGENT, "telegram_7"))
        ]
        assert any(isinstance(e, TurnStarted) and KEPT in e.user_input for e in kept)
        (receipt,) = receipts_for(store, str(stream))
        assert isinstance(receipt.event, ErasureRecorded)
        assert receipt.event.subject == "session"
        assert receipt.event.subject_digest == subject_digest(
            "session", AGENT, "telegram_42"
        )
        assert receipt.event.command == "turnledger erase --session"
        assert "telegram_42" not in json.dumps(receipt.event.streams)
        memory = MemoryService(store, config, ledger_url=ledger)
        try:
            assert memory.get(AGENT, "fact-telegram_42") is None
            kept_entry = memory.get(AGENT, "fact-telegram_7")
            assert kept_entry is not None
            assert KEPT in kept_entry.content
        finally:
            memory.close()

    # The commands that read a session say it was erased, and how.
    base = ["--db", ledger, "--config", str(config_file)]
    named = ["telegram_42", "--agent", AGENT]
    for command in (
        ["history", *named],
        ["export", *named, "--format", "openai-chat"],
        ["replay", *named],
        ["audit", *named],
        ["history", str(session_stream_id(AGENT, "telegram_42"))],
    ):
        assert main([*base, *command]) == 2, command
        err = capsys.readouterr().err
        assert "'telegram_42' erased" in err or "erased: its events" in err, err
        assert "erasure receipt at position" in err
        assert "turnledger erase --session" in err
        assert err.count("\n") == 1
        assert CANARY not in err

    # Erased already: nothing to erase, exit 1, nothing written.
    code = main([*args, "--session", "telegram_42", "--agent", AGENT, "--yes"])
    assert code == 1
    assert "found none" in capsys.readouterr().err


def test_erase_session_leaves_no_copy_in_postgresql(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pg_dump = shutil.which("pg_dump")
    assert pg_dump is not None, "pg_dump is needed to read the database back"
    config, config_file = setup_folder(tmp_path, postgres_url)
    store = open_store(postgres_url, erasable=True)
    try:
        record_session(store, config, postgres_url, "telegram_42", CANARY)
        record_session(store, config, postgres_url, "telegram_7", KEPT)
    finally:
        store.close()

    def dump() -> Path:
        base, schema = postgres_url.split("?schema=")
        out = subprocess.run(
            [pg_dump, "--dbname", base, "--schema", schema, "--data-only"],
            check=True,
            capture_output=True,
        ).stdout
        path = tmp_path / "dump" / "pg.sql"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(out)
        return path.parent

    assert hits(dump(), CANARY)  # the views hold it before the erasure
    args = ["--db", postgres_url, "--config", str(config_file), "erase"]
    code = main([*args, "--session", "telegram_42", "--agent", AGENT, "--yes"])
    assert code == 0, capsys.readouterr().err
    assert hits(dump(), CANARY) == []
    assert hits(dump(), KEPT)
    assert hits(tmp_path, CANARY) == []  # memory files and media, on disk
    with open_store(postgres_url) as store:
        assert verify(store).ok
        stream = session_stream_id(AGENT, "telegram_42")
        assert all(isinstance(r.event, Erased) for r in store.read_stream(stream))


def _open(store: EventStore, agent: str, key: str, text: str) -> None:
    store.append(
        session_stream_id(agent, key),
        [
            SessionOpened(agent=agent, session_key=key),
            TurnStarted(turn_id=f"t-{key}", origin="interactive", user_input=text),
        ],
        expected_version=0,
    )


def _texts(store: EventStore) -> str:
    out = []
    for r in store.iter_all():
        if isinstance(r.event, TurnStarted):
            out.append(r.event.user_input)
        elif isinstance(r.event, MemoryStored):
            out.append(r.event.content)
    return " ".join(out)


@pytest.mark.parametrize(
    ("option", "erased", "kept"),
    [
        (["--agent", AGENT], {"s1", "s2", "m1", "m2"}, {"b1"}),
        (["--user", "shared"], {"s2", "b1", "m1"}, {"s1", "m2"}),
        (["--memory", "k1", "--agent", AGENT], {"m1"}, {"s1", "s2", "b1", "m2"}),
    ],
)
def test_erase_agent_user_and_memory_key(
    tmp_path: Path,
    option: list[str],
    erased: set[str],
    kept: set[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger = str(tmp_path / "l.db")
    _, config_file = setup_folder(tmp_path, ledger)
    with open_store(ledger, erasable=True) as store:
        _open(store, AGENT, "own", "canary-s1")
        _open(store, AGENT, "shared", "canary-s2")
        _open(store, "bob", "shared", "canary-b1")
        store.append(
            memory_stream_id(AGENT),
            [
                MemoryStored(
                    agent=AGENT, key="k1", content="canary-m1", session="shared"
                ),
                MemoryStored(agent=AGENT, key="k2", content="canary-m2"),
            ],
            expected_version=0,
        )
    argv = ["--db", ledger, "--config", str(config_file), "erase", *option, "--yes"]
    assert main(argv) == 0, capsys.readouterr().err
    with open_store(ledger) as store:
        texts = _texts(store)
        assert verify(store).ok
    for name in erased:
        assert f"canary-{name}" not in texts
        assert hits(tmp_path, f"canary-{name}") == []
    for name in kept:
        assert f"canary-{name}" in texts


def test_a_key_store_of_another_ledger_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "l.db", tmp_path / "b" / "l.db"
    for path in (first, second):
        path.parent.mkdir()
        with open_store(str(path), erasable=True) as store:
            _open(store, AGENT, "own", "text")
    shutil.copy(keys_path(str(first)), keys_path(str(second)))
    with pytest.raises(ErasureKeysError, match=r"of ledger .*found the key store of"):
        open_store(str(second))


def test_a_missing_key_store_is_refused_at_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.db")
    with open_store(ledger, erasable=True) as store:
        _open(store, AGENT, "own", "text")
    Path(keys_path(ledger)).unlink()
    for erasable in (None, True):
        with pytest.raises(ErasureKeysError, match="found none: its events are sealed"):
            open_store(ledger, erasable=erasable)
    assert not Path(keys_path(ledger)).exists()  # no empty key store made
    assert main(["--db", ledger, "sessions"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "erasure key store" in err


@pytest.mark.parametrize(
    "option", [["--agent", AGENT], ["--user", "own"]], ids=["agent", "user"]
)
def test_a_session_erased_and_continued_gets_a_new_key(
    tmp_path: Path, option: list[str]
) -> None:
    ledger = str(tmp_path / "l.db")
    _, config_file = setup_folder(tmp_path, ledger)
    with open_store(ledger, erasable=True) as store:
        _open(store, AGENT, "own", "before")
    args = ["--db", ledger, "--config", str(config_file), "erase"]
    assert main([*args, "--session", "own", "--agent", AGENT, "--yes"]) == 0
    stream = session_stream_id(AGENT, "own")
    with open_store(ledger, erasable=True) as store:
        store.append(
            stream,
            [TurnStarted(turn_id="t2", origin="interactive", user_input="after")],
            expected_version=2,
        )
        events = [r.event for r in store.read_stream(stream)]
        assert [type(e) for e in events] == [Erased, Erased, TurnStarted]
    # The new key is the agent's, under the session's stream: erasing the agent,
    # or the user key, erases it.
    assert main([*args, *option, "--yes"]) == 0
    with open_store(ledger) as store:
        assert all(isinstance(r.event, Erased) for r in store.read_stream(stream))
        assert len(store.read_stream(ERASURE_STREAM)) == 2


def test_erase_refuses_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.db")
    with open_store(ledger) as store:  # erasure off, nothing sealed
        _open(store, AGENT, "own", "text")
    base = ["--db", ledger, "erase"]
    cases = [
        ([*base, "--session", "own", "--yes"], "Expected --agent with --session"),
        ([*base, "--user", "u", "--agent", AGENT, "--yes"], "Expected --user alone"),
        ([*base, "--yes"], "Expected --session, --agent, --user or --memory"),
        ([*base, "--session", "a", "--user", "b", "--yes"], "found --session, --user"),
        ([*base, "--agent", AGENT, "--yes"], "found erasure off"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected in err
        assert err.count("\n") == 1
    assert not Path(keys_path(ledger)).exists()
    with sqlite3.connect(ledger) as conn:  # nothing written
        assert conn.execute("SELECT count(*) FROM stored_events").fetchone()[0] == 2


def test_erase_names_the_memory_it_did_not_rebuild(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.db")
    config_file = tmp_path / "turnledger.toml"
    config_file.write_text(
        f'data_dir = "{tmp_path / "data"}"\n\n[privacy]\nerasable = true\n\n'
        '[agents.ops]\nmemory = "markdown"\n'
    )
    with open_store(ledger, erasable=True) as store:
        _open(store, AGENT, "own", "text")
        store.append(
            memory_stream_id(AGENT),
            [MemoryStored(agent=AGENT, key="k", content="entry", session="own")],
            expected_version=0,
        )
    argv = ["--db", ledger, "--config", str(config_file), "erase", "--json"]
    assert main([*argv, "--session", "own", "--agent", AGENT, "--yes"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["memory_not_rebuilt"] == ["ops (markdown)"]
    assert report["memory_agents"] == []
    assert "the memory of ops (markdown) was not rebuilt" in captured.err


def test_a_reader_open_during_an_erasure_reads_erased_after_it(tmp_path: Path) -> None:
    """Another connection's key cache is not served once the erasure committed."""
    ledger = str(tmp_path / "l.db")
    _, config_file = setup_folder(tmp_path, ledger)
    stream = session_stream_id(AGENT, "own")
    with open_store(ledger, erasable=True) as reader:
        _open(reader, AGENT, "own", "canary-read")
        assert isinstance(reader.read_stream(stream)[1].event, TurnStarted)  # cached
        argv = ["--db", ledger, "--config", str(config_file), "erase"]
        assert main([*argv, "--session", "own", "--agent", AGENT, "--yes"]) == 0
        assert [type(r.event) for r in reader.read_stream(stream)] == [Erased, Erased]


def test_postgresql_key_tables_missing_or_of_another_ledger_are_refused(
    postgres_url: str,
) -> None:
    import psycopg

    with open_store(postgres_url, erasable=True) as store:
        _open(store, AGENT, "own", "text")
    base, schema = postgres_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}".turnledger_subject_keys_meta SET value = %s',
            ("another-ledger",),
        )
    with pytest.raises(ErasureKeysError, match="found the key store of ledger"):
        open_store(postgres_url)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{schema}".turnledger_subject_keys')
    for erasable in (None, True):
        with pytest.raises(ErasureKeysError, match="found none: its events are sealed"):
            open_store(postgres_url, erasable=erasable)
