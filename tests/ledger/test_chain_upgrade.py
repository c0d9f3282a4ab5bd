"""A ledger written before the hash chain upgrades in place."""

from __future__ import annotations

import sqlite3
from uuid import UUID

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.chain import parse_chained
from turnledger.ledger.frame import now_us
from turnledger.ledger.seal import seal
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify


def _old_rows(store: EventStore, path: str, stream: UUID, turn: str) -> None:
    """Rows exactly as the pre-chain code wrote them (frame format 1)."""
    rows = store.mapper.encode_rows(turn_events(turn), 1, now_us())
    raw = sqlite3.connect(path)
    raw.executemany(
        "INSERT INTO stored_events VALUES (?,?,?,?)",
        [(stream.hex, r.originator_version, r.topic, r.state) for r in rows],
    )
    raw.commit()
    raw.close()


def test_old_rows_are_pre_chain_then_chained_and_sealed(sqlite_path: str):
    """Old rows verify as pre-chain; new appends chain on; the first seal pins all."""
    a, b = new_stream(), new_stream()
    with open_store(sqlite_path) as store:
        _old_rows(store, sqlite_path, a, "a1")
        _old_rows(store, sqlite_path, b, "b1")
        report = verify(store)
        assert report.ok, report.problems
        assert (report.pre_chain, report.sealed_position) == (16, 0)
        result = store.append(a, turn_events("a2"), expected_version=8)
        assert [r.version for r in store.read_stream(a)] == list(range(1, 17))
        new_row = next(store.iter_rows(after=result.positions[0] - 1))
        assert parse_chained(new_row.state) is not None
        assert parse_chained(next(store.iter_rows()).state) is None
        assert verify(store).ok
        sealed = seal(store, key="k")
        assert sealed.ok
        assert sealed.position == 24
        report = verify(store, seal_key="k")
        assert report.ok, report.problems
        assert (report.pre_chain, report.sealed_position) == (16, 24)


def test_an_edited_pre_chain_row_is_caught_by_the_chain_or_the_seal(sqlite_path: str):
    """A pre-chain row has no link of its own: its edit shows where the chain resumes."""
    a, b = new_stream(), new_stream()
    with open_store(sqlite_path) as store:
        _old_rows(store, sqlite_path, a, "a1")
        _old_rows(store, sqlite_path, b, "b1")
        store.append(a, turn_events("a2"), expected_version=8)
        assert seal(store, key="k").ok
    raw = sqlite3.connect(sqlite_path)
    raw.execute("DROP TRIGGER stored_events_no_update")
    for stream in (a, b):
        raw.execute(
            "UPDATE stored_events SET topic = topic WHERE originator_id = ?",
            (stream.hex,),
        )
        raw.execute(
            "UPDATE stored_events SET state = replace(state, X'68656c6c6f', "
            "X'48454c4c4f') WHERE originator_id = ? AND originator_version = 1",
            (stream.hex,),
        )
    raw.commit()
    raw.close()
    with open_store(sqlite_path) as store:
        problems = verify(store, seal_key="k").problems
    found = {(p.kind, p.stream, p.version) for p in problems}
    # Stream a: its first chained row (version 9) no longer chains from version 8.
    assert ("replaced", a, 8) in found
    # Stream b (pre-chain to its head): the seal's head link no longer matches.
    assert ("replaced", b, 8) in found
