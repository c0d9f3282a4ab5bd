"""Sealed rows read through the batch path: one key store check per read call.

``read_stream`` and ``read_all`` open sealed (and encrypted) rows on the same
fast path as clear ones, through an opener made once per call
(``ledger.erasable.Sealer.opener``). These tests hold that path to the row by
row one (``EventStore.decode``) on mixed batches, and check that a store
holding keys in its caches follows a destruction another connection committed:
its next read reads the session as erased, and its next append to that session
is sealed under a new key, not the destroyed one.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from uuid import UUID, uuid4

import pytest

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored, SessionOpened, TurnStarted
from turnledger.ledger.events.erasure import Erased
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify

KEY = base64.b64encode(bytes(range(32))).decode()
AGENT = "ops"


@pytest.fixture(name="location", params=["sqlite", "postgresql"])
def _location(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(request.getfixturevalue("tmp_path") / "l.db")
    else:
        yield request.getfixturevalue("postgres_url")


def _turn(n: int, text: str) -> TurnStarted:
    return TurnStarted(turn_id=f"t{n}", origin="channel", user_input=text)


def _session(store: EventStore, key: str, texts: list[str]) -> UUID:
    stream = session_stream_id(AGENT, key)
    store.append(
        stream,
        [
            SessionOpened(agent=AGENT, session_key=key),
            *(_turn(n, t) for n, t in enumerate(texts)),
        ],
        expected_version=0,
    )
    return stream


def _destroy(location: str, cipher_key: str | None, stream: UUID) -> None:
    """Destroy a session's key through another store (another connection)."""
    with open_store(location, cipher_key=cipher_key) as other:
        assert other.sealer is not None
        keys = other.sealer.keys
        assert keys.destroy(keys.select(stream_ids=[str(stream)])) == 1


def _events(records: list[Recorded]) -> list[object]:
    return [
        (r.stream_id, r.version, r.position, r.recorded_at, r.event) for r in records
    ]


@pytest.mark.parametrize("cipher_key", [None, KEY])
def test_batch_reads_equal_row_reads_on_mixed_rows(
    location: str, cipher_key: str | None
) -> None:
    with open_store(location, cipher_key=cipher_key, erasable=True) as store:
        gone = _session(store, "gone", ["canary one", "canary two"])
        kept = _session(store, "kept", ["kept one"])
        loose = uuid4()  # no session: written in clear (or only encrypted)
        store.append(loose, [_turn(0, "loose")], expected_version=0)
        store.append(
            memory_stream_id(AGENT),
            [MemoryStored(agent=AGENT, key="m1", content="fact", session="kept")],
            expected_version=0,
        )
        before = store.read_all(limit=100)  # every key now in the caches
        _destroy(location, cipher_key, gone)
        batch = store.read_all(limit=100)
        rows = [store.decode(row) for row in store.iter_rows()]
        assert _events(batch) == _events(rows)
        by_stream = {
            stream: [r.event for r in batch if r.stream_id == stream]
            for stream in (gone, kept, loose)
        }
        assert by_stream[gone] == [
            Erased(original_type=t)
            for t in ("session.opened", "turn.started", "turn.started")
        ]
        kept_before = [r.event for r in before if r.stream_id == kept]
        assert by_stream[kept] == kept_before
        assert isinstance(by_stream[kept][1], TurnStarted)
        assert by_stream[kept][1].user_input == "kept one"
        assert [e.user_input for e in by_stream[loose]] == ["loose"]  # type: ignore[attr-defined]
        assert [type(r.event) for r in store.read_stream(gone)] == [Erased] * 3
        memory = [r.event for r in batch if isinstance(r.event, MemoryStored)]
        assert [m.content for m in memory] == ["fact"]
        assert verify(store).ok


def test_an_append_after_another_connections_erasure_gets_a_new_key(
    location: str,
) -> None:
    with open_store(location, erasable=True) as store:
        stream = _session(store, "s", ["before"])
        store.append(stream, [_turn(1, "cached")], expected_version=2)  # key cached
        _destroy(location, None, stream)
        store.append(stream, [_turn(2, "after")], expected_version=3)
        events = [r.event for r in store.read_stream(stream)]
        assert [type(e) for e in events] == [Erased, Erased, Erased, TurnStarted]
        assert events[3].user_input == "after"  # type: ignore[attr-defined]
        assert store.sealer is not None
        keys = store.sealer.keys.select(stream_ids=[str(stream)])
        assert [k.kind for k in keys] == ["session"]  # the new key, alone
    with open_store(location) as again:
        read = [r.event for r in again.read_stream(stream)]
        assert read == events
