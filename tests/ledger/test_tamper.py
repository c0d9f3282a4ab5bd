"""The tamper matrix: every way of rewriting history, on SQLite and PostgreSQL.

Each case builds a sealed ledger, tampers with it through a raw SQL client (first
with the triggers in place, which refuse it; then with the triggers dropped) and
checks that ``verify`` (API and CLI) names the tampering by kind and position,
while an untouched ledger verifies clean.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.events import TurnCompleted
from turnledger.ledger.frame import now_us
from turnledger.ledger.seal import seal
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.cli import main


class Raw:
    """A raw SQL client on the ledger's database (no turnledger code in the way)."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("postgresql://"):
            self.schema = url.rsplit("schema=", 1)[1]
            self.table = f'"{self.schema}".turnledger_events'
            self.pos = "notification_id"
            self.pg: Any = psycopg.connect(url.split("?", 1)[0], autocommit=True)
            self.lite: sqlite3.Connection | None = None
        else:
            self.table = "stored_events"
            self.pos = "rowid"
            self.lite = sqlite3.connect(url, isolation_level=None)
            self.pg = None

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("{t}", self.table).replace("{pos}", self.pos)
        if self.lite is not None:
            return self.lite.execute(sql, params).fetchall()
        rows = self.pg.execute(sql.replace("?", "%s"), params)
        return rows.fetchall() if rows.description else []

    def refused(self) -> type[Exception]:
        return sqlite3.IntegrityError if self.lite is not None else psycopg.Error

    def drop_triggers(self) -> None:
        if self.lite is not None:
            names = self.run("SELECT name FROM sqlite_master WHERE type='trigger'")
            for (name,) in names:
                self.run(f"DROP TRIGGER {name}")
        else:
            self.run("ALTER TABLE {t} DISABLE TRIGGER ALL")

    def row(self, position: int) -> tuple[Any, int, str, bytes]:
        found = self.run(
            "SELECT originator_id, originator_version, topic, state FROM {t} "
            "WHERE {pos} = ?",
            (position,),
        )[0]
        return found[0], found[1], found[2], bytes(found[3])

    def set_state(self, position: int, state: bytes) -> None:
        self.run("UPDATE {t} SET state = ? WHERE {pos} = ?", (state, position))

    def close(self) -> None:
        (self.lite or self.pg).close()


Case = Callable[[Raw, EventStore, dict[str, Any]], tuple[str, int]]


def _edit_payload(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    position = ctx["a"][8]  # the second turn's TurnStarted: "hello hello ..."
    state = raw.row(position)[3]
    assert b"hello" in state
    raw.set_state(position, state.replace(b"hello", b"HELLO"))
    return "edited_payload", position


def _edit_envelope(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    position = ctx["a"][2]
    state = raw.row(position)[3]
    # The recorded time in the clear header, a year earlier.
    at = int.from_bytes(state[4:12], "big") - 365 * 86_400 * 1_000_000
    raw.set_state(position, state[:4] + at.to_bytes(8, "big") + state[12:])
    return "edited_envelope", position


def _delete(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    raw.run("DELETE FROM {t} WHERE {pos} = ?", (ctx["a"][3],))
    return "deleted", ctx["a"][4]


def _replace(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    target = ctx["b"][5]
    stream, version, _topic, _ = raw.row(target)
    _, _, topic, state = raw.row(ctx["a"][5])  # another row's bytes
    if raw.lite is not None:
        raw.run(
            "REPLACE INTO {t} (rowid, originator_id, originator_version, topic, state)"
            " VALUES (?,?,?,?,?)",
            (target, stream, version, topic, state),
        )
    else:
        raw.run("DELETE FROM {t} WHERE {pos} = ?", (target,))
        raw.run(
            "INSERT INTO {t} (originator_id, originator_version, topic, state, "
            "notification_id) VALUES (?,?,?,?,?)",
            (stream, version, topic, state, target),
        )
    return "replaced", target


def _reorder(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    first, second = ctx["a"][6], ctx["b"][6]
    raw.run("UPDATE {t} SET {pos} = ? WHERE {pos} = ?", (-1, first))
    raw.run("UPDATE {t} SET {pos} = ? WHERE {pos} = ?", (first, second))
    raw.run("UPDATE {t} SET {pos} = ? WHERE {pos} = ?", (second, -1))
    return "reordered", first


def _forge(raw: Raw, store: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    stream = ctx["streams"][0]
    frame = store.mapper.encode_rows([TurnCompleted(turn_id="x")], 17, now_us())[0]
    sid = stream.hex if raw.lite is not None else stream
    raw.run(
        "INSERT INTO {t} (originator_id, originator_version, topic, state) "
        "VALUES (?,?,?,?)",
        (sid, 17, frame.topic, frame.state),
    )
    last = raw.run("SELECT max({pos}) FROM {t}")[0][0]
    return "forged", last


def _truncate(raw: Raw, _: EventStore, ctx: dict[str, Any]) -> tuple[str, int]:
    for position in ctx["c"][-2:]:
        raw.run("DELETE FROM {t} WHERE {pos} = ?", (position,))
    return "truncated", ctx["c"][-1]


CASES: dict[str, Case] = {
    "edit_payload": _edit_payload,
    "edit_envelope": _edit_envelope,
    "delete": _delete,
    "replace": _replace,
    "reorder": _reorder,
    "forge": _forge,
    "truncate": _truncate,
}


@pytest.fixture(name="ledger_url", params=["sqlite", "postgresql"])
def _ledger_url(request: pytest.FixtureRequest, sqlite_path: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_path
    else:
        yield request.getfixturevalue("postgres_url")


def _build(url: str) -> tuple[EventStore, dict[str, Any]]:
    store = open_store(url)
    streams = [new_stream() for _ in range(3)]
    positions: dict[str, list[int]] = {}
    for name, stream in zip("abc", streams, strict=True):
        first = store.append(stream, turn_events("t1"), expected_version=0)
        second = store.append(stream, turn_events("t2"), expected_version=8)
        positions[name] = [*first.positions, *second.positions]
    assert seal(store, key="k").ok
    return store, {"streams": streams, **positions}


def _cli_verify(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["--db", url, "verify", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_untouched_ledger_verifies(
    ledger_url: str, capsys: pytest.CaptureFixture[str], monkeypatch
):
    """A sealed, untouched ledger exits 0, with its seal checked under the key."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", "k")
    store, _ = _build(ledger_url)
    try:
        report = verify(store)
        assert report.ok, report.problems
        assert report.sealed_position == store.max_position() == 48
    finally:
        store.close()
    code, out = _cli_verify(ledger_url, capsys)
    assert code == 0
    assert out["problems"] == []


@pytest.mark.parametrize("case", list(CASES))
def test_triggers_refuse_or_verify_names_it(
    ledger_url: str, case: str, capsys: pytest.CaptureFixture[str], monkeypatch
):
    """With the triggers in place the tampering is refused (forging is detected)."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", "k")
    store, ctx = _build(ledger_url)
    raw = Raw(ledger_url)
    try:
        if case == "forge":
            kind, position = CASES[case](raw, store, ctx)
            found = {(p.kind, p.position) for p in verify(store).problems}
            assert (kind, position) in found
        else:
            with pytest.raises(raw.refused(), match=r"append-only|contiguous"):
                CASES[case](raw, store, ctx)
            assert verify(store).ok
    finally:
        raw.close()
        store.close()


@pytest.mark.parametrize("case", list(CASES))
def test_triggers_dropped_then_verify_names_it(
    ledger_url: str, case: str, capsys: pytest.CaptureFixture[str], monkeypatch
):
    """With the triggers dropped every tampering lands, and verify names it: exit 1."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", "k")
    store, ctx = _build(ledger_url)
    raw = Raw(ledger_url)
    try:
        raw.drop_triggers()
        kind, position = CASES[case](raw, store, ctx)
        problems = verify(store).problems
        assert (kind, position) in {(p.kind, p.position) for p in problems}, problems
    finally:
        raw.close()
        store.close()
    code, out = _cli_verify(ledger_url, capsys)
    assert code == 1
    named = {(p["kind"], p["position"]) for p in out["problems"]}
    assert (kind, position) in named
    assert all(
        {"kind", "stream", "version", "position"} <= set(p) for p in out["problems"]
    )
