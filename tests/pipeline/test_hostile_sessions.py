"""Session keys never collide (issue #17, item 4).

``--session "bob.smith"`` and ``--session "bob smith"`` used to be one stream
(every non-alphanumeric became ``_``), so one user read the other's history.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.ledger.events import SessionOpened, TurnCompleted, TurnStarted
from turnledger.ledger.ids import (
    CONTROL_CHARACTERS,
    decode_session_key,
    encode_session_key,
    legacy_session_stream_id,
    session_stream_id,
)
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import list_sessions, resolve_session

SCRIPT = """
model = "scripted-1"
[[steps]]
text = "Noted."
[[steps]]
text = "I have nothing from you yet."
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_keys_that_used_to_collide_are_two_sessions(tmp_path, capsys):
    """Bob's PIN, said in "bob.smith", is not in the history of "bob smith"."""
    db = str(tmp_path / "l.db")
    script = tmp_path / "script.toml"
    script.write_text(SCRIPT)
    code, _, err = run(
        capsys,
        "--db", db, "run", str(script), "--agent", "ops",
        "--session", "bob.smith", "--turn", "my PIN is 4711",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run(
        capsys,
        "--db", db, "run", str(script), "--agent", "ops",
        "--session", "bob smith", "--turn", "what is my PIN?",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(capsys, "--db", db, "history", "bob smith", "--json")
    assert code == 0, err
    assert "4711" not in out
    assert "what is my PIN?" in out
    with open_store(db) as store:
        keys = sorted(s.key for s in list_sessions(store))
        assert keys == ["bob smith", "bob.smith"]
        first = resolve_session(store, "bob.smith", agent="ops")
        assert first.stream_id == session_stream_id("ops", "bob.smith")
        assert first.stream_id != session_stream_id("ops", "bob smith")
    code, out, _ = run(capsys, "--db", db, "history", "bob.smith", "--json")
    assert "4711" in out
    json.loads(out)


def test_a_session_recorded_under_the_old_derivation_is_still_found(tmp_path, capsys):
    """A pre-#17 ledger: the stream of "bob_smith" keeps its key and history."""
    db = str(tmp_path / "old.db")
    old_stream = legacy_session_stream_id("ops", "bob.smith")
    with open_store(db) as store:
        store.append(
            old_stream,
            [
                SessionOpened(agent="ops", session_key="bob_smith", channel="cli"),
                TurnStarted(turn_id="t1", origin="interactive", user_input="old turn"),
                TurnCompleted(turn_id="t1"),
            ],
            expected_version=0,
        )
        assert resolve_session(store, "bob_smith").stream_id == old_stream
    assert old_stream == session_stream_id("ops", "bob_smith")
    code, out, err = run(capsys, "--db", db, "history", "bob_smith", "--json")
    assert code == 0, err
    assert "old turn" in out


@pytest.mark.parametrize("key", ["telegram_42", "demo-1", "café_日本", "k"])
def test_keys_the_old_rule_kept_name_the_same_stream(key):
    """Existing ledgers keep working: canonical keys derive the same id."""
    assert legacy_session_stream_id("ops", key) == session_stream_id("ops", key)


@settings(max_examples=200)
@given(st.text(max_size=30), st.text(max_size=30))
def test_distinct_keys_distinct_streams_and_file_names(a, b):
    """Stream ids and encoded file names are injective; encoding reverses."""
    for key in (a, b):
        try:
            encoded = encode_session_key(key)
        except UnicodeEncodeError:
            continue  # lone surrogates are refused at the input edge
        assert decode_session_key(encoded) == key
        assert "/" not in encoded
        assert "\0" not in encoded
        assert not encoded.startswith(".")
    if a != b and not CONTROL_CHARACTERS.search(a + b):  # refused: tests/ledger
        assert session_stream_id("ops", a) != session_stream_id("ops", b)
        with contextlib.suppress(UnicodeEncodeError):
            assert encode_session_key(a) != encode_session_key(b)


def test_encoding_examples():
    """The encoded names are readable for ordinary keys."""
    assert encode_session_key("telegram_42") == "telegram_42"
    assert encode_session_key("bob smith") == "bob%20smith"
    assert encode_session_key("bob.smith") == "bob.smith"
    assert encode_session_key("..") == "%2E."
    assert encode_session_key("a/b%c") == "a%2Fb%25c"
    assert decode_session_key("%2E.") == ".."
