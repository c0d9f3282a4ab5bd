"""The ledger records that it holds sealed rows: the key store check at open is exact.

A trigger writes the first sealed row's position into ``turnledger_sealed`` in
the transaction that inserts it; opening a ledger whose erasure key store is
missing reads that one row, wherever the sealed row lies. A ledger from before
the marker (its table dropped here) is searched once, whole, and then carries
the marker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest

from turnledger.ledger.events import SessionOpened, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.subject_keys import ErasureKeysError, keys_path
from turnledger.pipeline.cli import main

CLEAR_ROWS = 600


@pytest.fixture(name="location", params=["sqlite", "postgresql"])
def _location(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(request.getfixturevalue("tmp_path") / "l.db")
    else:
        yield request.getfixturevalue("postgres_url")


def _sql(location: str, statement: str) -> list[tuple[object, ...]]:
    """Run one statement on the ledger's database, behind the store's back."""
    if location.startswith("postgresql://"):
        base, schema = location.split("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []
    conn = sqlite3.connect(location)
    try:
        with conn:
            return list(conn.execute(statement).fetchall())
    finally:
        conn.close()


def _drop_key_store(location: str) -> None:
    if location.startswith("postgresql://"):
        _sql(location, "DROP TABLE turnledger_subject_keys")
    else:
        Path(keys_path(location)).unlink()


def _marks(location: str) -> dict[object, object]:
    return dict(_sql(location, "SELECT one, position FROM turnledger_sealed"))  # type: ignore[arg-type]


def _write(location: str) -> int:
    """600 clear rows, then a sealed session; return its first position."""
    with open_store(location, erasable=False) as store:
        loose = uuid4()
        store.append(
            loose,
            [
                TurnStarted(turn_id=f"t{n}", origin="channel", user_input="clear")
                for n in range(CLEAR_ROWS)
            ],
            expected_version=0,
        )
        assert store.backend.first_sealed() is None
    with open_store(location, erasable=True) as store:
        stream = session_stream_id("ops", "late")
        store.append(
            stream,
            [
                SessionOpened(agent="ops", session_key="late"),
                TurnStarted(turn_id="t", origin="channel", user_input="sealed"),
            ],
            expected_version=0,
        )
        position = store.read_stream(stream)[0].position
    assert position > CLEAR_ROWS
    return position


def test_a_sealed_row_past_the_first_500_refuses_an_open_without_keys(
    location: str,
) -> None:
    position = _write(location)
    assert _marks(location)[1] == position  # written with the row
    _drop_key_store(location)
    for erasable in (None, False, True):
        with pytest.raises(ErasureKeysError) as refused:
            open_store(location, erasable=erasable)
        message = str(refused.value)
        assert "found none: its events are sealed" in message
        assert f"first at position {position})" in message
        assert "\n" not in message


def test_the_cli_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.db")
    position = _write(ledger)
    _drop_key_store(ledger)
    assert main(["--db", ledger, "sessions"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"first at position {position})" in err
    assert not Path(keys_path(ledger)).exists()  # no empty key store made


def test_a_ledger_from_before_the_marker_is_searched_once(location: str) -> None:
    position = _write(location)
    _sql(location, "DROP TABLE turnledger_sealed")  # as a ledger made before it
    _drop_key_store(location)
    with pytest.raises(ErasureKeysError, match=f"first at position {position}\\)"):
        open_store(location, erasable=False)
    marks = _marks(location)
    assert marks[1] == position
    assert int(marks[0]) >= position  # searched up to its last row  # type: ignore[call-overload]


def test_a_clear_ledger_from_before_the_marker_is_marked_searched(
    location: str,
) -> None:
    with open_store(location, erasable=False) as store:
        store.append(
            uuid4(),
            [TurnStarted(turn_id="t", origin="channel", user_input="clear")],
            expected_version=0,
        )
    _sql(location, "DROP TABLE turnledger_sealed")
    with open_store(location, erasable=False) as store:
        assert store.backend.first_sealed() is None
        last = store.max_position()
    assert _marks(location) == {0: last}
    assert not location.startswith("/") or not Path(keys_path(location)).exists()


def test_the_marker_is_append_only(location: str) -> None:
    _write(location)
    for statement in (
        "DELETE FROM turnledger_sealed",
        "UPDATE turnledger_sealed SET position = 1",
    ):
        with pytest.raises((sqlite3.Error, psycopg.Error), match="append-only"):
            _sql(location, statement)
