"""The tamper matrix, extended: seals, idempotency records, rows beyond the sequence.

A hostile database owner works on a ledger sealed twice (and, in half the cases,
witnessed outside it: a SQLite witness for the SQLite ledger, another PostgreSQL
schema for the PostgreSQL one) through a raw SQL client: re-inserting an older
signed seal and cutting the rows after it, deleting seals with the tail, copying
a seal, deleting or editing idempotency records. ``verify`` (API and CLI) names
each by kind, with and without the witness; an untouched ledger exits 0. What a
witness alone can catch (every seal and its sequence wiped together with the
tail) is shown passing without one: the documented limit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import drop_schema, fresh_schema_url
from tests.contracts.store_contract import new_stream, turn_events
from tests.ledger.test_tamper import Raw
from turnledger.ledger.events import TurnCompleted
from turnledger.ledger.frame import now_us
from turnledger.ledger.seal import seal
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.ledger.witness import Witness, open_witness
from turnledger.pipeline.cli import main

KEY = "seal-key"


class Owner(Raw):
    """The raw client, able to reach the seals, keys and sequences too."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        prefix = "" if self.lite is not None else f'"{self.schema}".'
        self.seals = f"{prefix}turnledger_seals"
        self.keys = f"{prefix}turnledger_appends"

    def drop_all_triggers(self) -> None:
        self.drop_triggers()
        if self.pg is not None:
            for table in (self.seals, self.keys):
                self.run(f"ALTER TABLE {table} DISABLE TRIGGER ALL")

    def seal_rows(self) -> list[tuple[int, bytes, str]]:
        rows = self.run(f"SELECT id, body, mac FROM {self.seals} ORDER BY id")
        return [(int(i), bytes(b), str(m)) for i, b, m in rows]

    def insert_seal(self, body: bytes, mac: str) -> None:
        self.run(f"INSERT INTO {self.seals} (body, mac) VALUES (?, ?)", (body, mac))

    def delete_rows_after(self, position: int) -> None:
        self.run("DELETE FROM {t} WHERE {pos} > ?", (position,))

    def reset_seal_sequence(self) -> None:
        if self.lite is not None:
            self.run("DELETE FROM sqlite_sequence WHERE name = 'turnledger_seals'")
        else:
            self.run(
                f"SELECT setval('\"{self.schema}\".turnledger_seals_id_seq', 1, false)"
            )


@dataclass
class Sealed:
    """A ledger sealed twice: positions of each stream and what each seal covers."""

    url: str
    streams: list[uuid.UUID]
    positions: dict[str, list[int]]
    first_seal: int  # the position the first seal covers
    second_seal: int


def _build(url: str, witness: Witness | None) -> Sealed:
    """Three streams, two turns each (the first turn of stream a under a key)."""
    streams = [new_stream() for _ in range(3)]
    positions: dict[str, list[int]] = {name: [] for name in "abc"}
    with open_store(url) as store:
        for name, stream in zip("abc", streams, strict=True):
            key = "turn-a1" if name == "a" else None
            done = store.append(
                stream, turn_events("t1"), expected_version=0, idempotency_key=key
            )
            positions[name] += done.positions
        first = seal(store, key=KEY, witness=witness)
        for name, stream in zip("abc", streams, strict=True):
            key = "turn-a2" if name == "a" else None
            done = store.append(
                stream, turn_events("t2"), expected_version=8, idempotency_key=key
            )
            positions[name] += done.positions
        second = seal(store, key=KEY, witness=witness)
    assert first.ok
    assert second.ok
    return Sealed(url, streams, positions, first.position, second.position)


Case = Callable[[Owner, Sealed], set[str]]
"""Tampers; returns the kinds verify must name without a witness."""


def _seal_rollback(owner: Owner, ledger: Sealed) -> set[str]:
    """The issue's attack: the older signed seal again, the rows after it cut."""
    first = owner.seal_rows()[0]
    owner.insert_seal(first[1], first[2])  # the seals' triggers allow inserts
    owner.drop_all_triggers()
    owner.delete_rows_after(ledger.first_seal)
    return {"seal_reinserted", "truncated"}


def _older_seal_moved(owner: Owner, ledger: Sealed) -> set[str]:
    """Every seal deleted, the older one put back, the rows after it cut."""
    first = owner.seal_rows()[0]
    owner.drop_all_triggers()
    owner.run(f"DELETE FROM {owner.seals}")
    owner.insert_seal(first[1], first[2])
    owner.delete_rows_after(ledger.first_seal)
    return {"seal_deleted"}


def _seal_deletion(owner: Owner, ledger: Sealed) -> set[str]:
    """The newest seal deleted together with the rows after the older one."""
    newest = owner.seal_rows()[-1][0]
    owner.drop_all_triggers()
    owner.run(f"DELETE FROM {owner.seals} WHERE id = ?", (newest,))
    owner.delete_rows_after(ledger.first_seal)
    return {"seal_deleted"}


def _middle_seal_deleted(owner: Owner, _: Sealed) -> set[str]:
    """The older seal deleted: the newer one's index skips it."""
    oldest = owner.seal_rows()[0][0]
    owner.drop_all_triggers()
    owner.run(f"DELETE FROM {owner.seals} WHERE id = ?", (oldest,))
    return {"seal_deleted"}


def _reinserted_seal(owner: Owner, _: Sealed) -> set[str]:
    """A copy of the newest seal inserted again (no trigger needs dropping)."""
    newest = owner.seal_rows()[-1]
    owner.insert_seal(newest[1], newest[2])
    return {"seal_reinserted"}


def _idempotency_deleted(owner: Owner, _: Sealed) -> set[str]:
    """A key's record deleted (a retry would then write the turn twice)."""
    owner.drop_all_triggers()
    owner.run(f"DELETE FROM {owner.keys} WHERE key = 'turn-a2'")
    return {"idempotency_deleted"}


def _idempotency_edited(owner: Owner, ledger: Sealed) -> set[str]:
    """A key's record pointed at another stream's rows."""
    owner.drop_all_triggers()
    moved = json.dumps(ledger.positions["b"][8:])
    owner.run(f"UPDATE {owner.keys} SET positions = ? WHERE key = 'turn-a2'", (moved,))
    return {"idempotency_edited"}


def _idempotency_nowhere(owner: Owner, ledger: Sealed) -> set[str]:
    """A key's record made to name a position that holds no row."""
    owner.drop_all_triggers()
    positions = json.dumps([0, *ledger.positions["a"][1:8]])
    owner.run(
        f"UPDATE {owner.keys} SET positions = ? WHERE key = 'turn-a1'", (positions,)
    )
    return {"idempotency_edited"}


def _idempotency_renamed(owner: Owner, _: Sealed) -> set[str]:
    """A key renamed (its rows still match it): the seal's digest shows it."""
    owner.drop_all_triggers()
    owner.run(f"UPDATE {owner.keys} SET key = 'another' WHERE key = 'turn-a1'")
    return {"idempotency_edited"}


CASES: dict[str, Case] = {
    "seal_rollback": _seal_rollback,
    "older_seal_moved": _older_seal_moved,
    "seal_deletion": _seal_deletion,
    "middle_seal_deleted": _middle_seal_deleted,
    "reinserted_seal": _reinserted_seal,
    "idempotency_deleted": _idempotency_deleted,
    "idempotency_edited": _idempotency_edited,
    "idempotency_nowhere": _idempotency_nowhere,
    "idempotency_renamed": _idempotency_renamed,
}
WITNESS_ADDS: dict[str, set[str]] = {
    # What the witness adds: the witnessed seals gone, the ledger short of them.
    "seal_rollback": set(),  # both seals still there; named without it already
    "older_seal_moved": {"truncated"},
    "seal_deletion": {"truncated"},
    "middle_seal_deleted": set(),
}


@pytest.fixture(name="ledger_url", params=["sqlite", "postgresql"])
def _ledger_url(request: pytest.FixtureRequest, sqlite_path: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_path
    else:
        yield request.getfixturevalue("postgres_url")


@pytest.fixture(name="witness_target")
def _witness_target(ledger_url: str, tmp_path: Path) -> Iterator[str]:
    """A witness outside the ledger's database: a SQLite file, or another schema."""
    if not ledger_url.startswith("postgresql://"):
        yield f"sqlite:{tmp_path / 'witness.db'}"
        return
    other = fresh_schema_url(ledger_url.split("?", 1)[0])
    yield other
    drop_schema(other)


@pytest.fixture(name="target", params=["alone", "witnessed"])
def _target(request: pytest.FixtureRequest) -> str | None:
    """No witness, or the witness target."""
    if request.param == "alone":
        return None
    found: str = request.getfixturevalue("witness_target")
    return found


def _witness(target: str | None, ledger_url: str, *, reading: bool) -> Witness | None:
    if target is None:
        return None
    return open_witness(target, ledger=ledger_url, reading=reading)


def _kinds(url: str, target: str | None) -> set[str]:
    witness = _witness(target, url, reading=True)
    try:
        with open_store(url) as store:
            return {
                p.kind for p in verify(store, seal_key=KEY, witness=witness).problems
            }
    finally:
        if witness is not None:
            witness.close()


def _cli(url: str, target: str | None, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    extra = ["--witness", target] if target else []
    code = main(["--db", url, "verify", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_untouched_ledger_verifies(
    ledger_url: str,
    target: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    """Sealed twice, untouched: no problem, exit 0; the witness's two seals checked."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", KEY)
    writer = _witness(target, ledger_url, reading=False)
    _build(ledger_url, writer)
    if writer is not None:
        writer.close()
    assert _kinds(ledger_url, target) == set()
    code, out = _cli(ledger_url, target, capsys)
    assert code == 0, out
    assert out["problems"] == []
    assert out["seals"] == 2
    assert out["witnessed"] == (2 if target else 0)


@pytest.mark.parametrize("case", list(CASES))
def test_verify_names_it(
    ledger_url: str,
    target: str | None,
    case: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    """Each tampering is named by kind, exit 1; the witness names more."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", KEY)
    writer = _witness(target, ledger_url, reading=False)
    ledger = _build(ledger_url, writer)
    if writer is not None:
        writer.close()
    owner = Owner(ledger_url)
    try:
        expected = CASES[case](owner, ledger)
    finally:
        owner.close()
    if target:
        expected |= WITNESS_ADDS.get(case, set())
    found = _kinds(ledger_url, target)
    assert expected <= found, found
    code, out = _cli(ledger_url, target, capsys)
    assert code == 1
    assert expected <= {p["kind"] for p in out["problems"]}
    assert all(
        {"kind", "stream", "version", "position", "message"} <= set(p)
        for p in out["problems"]
    )


def test_only_a_witness_sees_every_seal_wiped_with_the_tail(
    ledger_url: str, witness_target: str, monkeypatch: pytest.MonkeyPatch
):
    """Every seal deleted, their id sequence reset, the tail cut: without a
    witness the ledger verifies clean (the documented limit); the witness names
    both seals gone and the ledger short of them."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", KEY)
    writer = _witness(witness_target, ledger_url, reading=False)
    ledger = _build(ledger_url, writer)
    assert writer is not None
    writer.close()
    owner = Owner(ledger_url)
    try:
        owner.drop_all_triggers()
        owner.run(f"DELETE FROM {owner.seals}")
        owner.reset_seal_sequence()
        owner.delete_rows_after(ledger.first_seal)
    finally:
        owner.close()
    assert _kinds(ledger_url, None) == set()
    assert {"seal_deleted", "truncated"} <= _kinds(ledger_url, witness_target)


def test_a_row_beyond_the_sequence_is_named(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
):
    """PostgreSQL: a row placed above the position sequence is invisible to every
    reader until the next real append; verify names it by position."""
    ledger = _build(postgres_url, None)
    owner = Owner(postgres_url)
    try:
        with open_store(postgres_url) as store:
            frame = store.mapper.encode_rows([TurnCompleted(turn_id="x")], 1, now_us())
            owner.run(
                "INSERT INTO {t} (originator_id, originator_version, topic, state, "
                "notification_id) VALUES (?,?,?,?,?)",
                (uuid.uuid4(), 1, frame[0].topic, frame[0].state, 1000),
            )
            assert store.max_position() == ledger.second_seal  # unseen
            report = verify(store, seal_key=KEY)
    finally:
        owner.close()
    assert ("beyond_sequence", 1000) in {(p.kind, p.position) for p in report.problems}
    code, out = _cli(postgres_url, None, capsys)
    assert code == 1
    assert ("beyond_sequence", 1000) in {
        (p["kind"], p["position"]) for p in out["problems"]
    }


def test_a_retried_append_after_its_record_is_deleted(
    ledger_url: str, monkeypatch: pytest.MonkeyPatch
):
    """The record deleted, a retry writes the turn twice: verify names the first
    write's last row (the header flag its link covers) as idempotency_deleted."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", KEY)
    ledger = _build(ledger_url, None)
    owner = Owner(ledger_url)
    try:
        owner.drop_all_triggers()
        owner.run(f"DELETE FROM {owner.keys} WHERE key = 'turn-a2'")
    finally:
        owner.close()
    with open_store(ledger_url) as store:
        again = store.append(
            ledger.streams[0],
            turn_events("t2"),
            expected_version=16,
            idempotency_key="turn-a2",
        )
        assert again.positions  # written twice: the record was gone
        problems = verify(store, seal_key=KEY).problems
    named = {(p.kind, p.position) for p in problems}
    assert ("idempotency_deleted", ledger.positions["a"][-1]) in named
    assert not any(p.position in again.positions for p in problems)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    turns=st.lists(st.integers(0, 2), min_size=2, max_size=6),
    sealed_after=st.integers(1, 6),
    cut=st.floats(0, 1, exclude_max=True),
)
def test_any_truncation_after_any_seal_is_named(
    tmp_path_factory: pytest.TempPathFactory,
    turns: list[int],
    sealed_after: int,
    cut: float,
):
    """Seal after any turn, then delete every row from any position the seals
    cover to the end: verify names ``truncated``."""
    path = str(tmp_path_factory.mktemp("cut") / "ledger.db")
    streams = [new_stream() for _ in range(3)]
    versions = [0, 0, 0]
    with open_store(path) as store:
        covered = 0
        for number, which in enumerate(turns, 1):
            store.append(
                streams[which],
                turn_events(f"t{number}"),
                expected_version=versions[which],
            )
            versions[which] += 8
            if number == min(sealed_after, len(turns)):
                covered = seal(store, key=KEY).position
        if len(turns) > sealed_after:
            seal(store, key=KEY)  # a later seal too, sometimes
    first_cut = 1 + int(cut * covered)
    owner = Owner(path)
    try:
        owner.drop_all_triggers()
        owner.delete_rows_after(first_cut - 1)
    finally:
        owner.close()
    with open_store(path) as store:
        kinds = {p.kind for p in verify(store, seal_key=KEY).problems}
    assert "truncated" in kinds, kinds


def test_records_from_before_the_flag_verify_clean(
    ledger_url: str, monkeypatch: pytest.MonkeyPatch
):
    """A keyed append written before the header flag existed (rows without the
    flag, the record beside them: built here as such a writer left it) verifies
    clean; a record added later for a row written without a key is named."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", KEY)
    stream = new_stream()
    with open_store(ledger_url) as store:
        old = store.append(stream, turn_events("t1"), expected_version=0)
    owner = Owner(ledger_url)
    stream_value = stream.hex if owner.lite is not None else stream

    def record(key: str, first: int, positions: tuple[int, ...]) -> None:
        owner.run(
            f"INSERT INTO {owner.keys} VALUES (?, ?, ?, ?, ?)",
            (key, stream_value, first, first + 7, json.dumps(list(positions))),
        )

    try:
        record("old", 1, old.positions)
        with open_store(ledger_url) as store:
            store.append(
                stream, turn_events("t2"), expected_version=8, idempotency_key="new"
            )
            plain = store.append(stream, turn_events("t3"), expected_version=16)
            assert verify(store).ok
            assert seal(store).ok
        record("forged", 17, plain.positions)
    finally:
        owner.close()
    with open_store(ledger_url) as store:
        problems = verify(store).problems
    assert {(p.kind, p.position) for p in problems} == {
        ("idempotency_edited", plain.positions[-1])
    }


def test_seals_written_at_once_stay_one_chain(ledger_url: str):
    """Four stores sealing at the same moment: each seal chains from the one
    before it (an insert whose predecessor moved is redone), verify is clean."""
    _build(ledger_url, None)
    stores = [open_store(ledger_url) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as pool:
            reports = list(pool.map(lambda s: seal(s, key=KEY), stores))
    finally:
        for store in stores:
            store.close()
    assert sorted(r.index for r in reports) == [3, 4, 5, 6]
    assert _kinds(ledger_url, None) == set()
