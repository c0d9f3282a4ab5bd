"""A session's record (the web UI's read): a fork of a fork numbered through its lineage."""

from __future__ import annotations

from tests.contracts.store_contract import turn_events
from turnledger.ledger.events import SessionForked, SessionOpened, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.projections.base import digest
from turnledger.projections.queries import SessionHistories, cost_records
from turnledger.projections.record import advance_record, read_record


def _fork(store, source, key: str, version: int, base: int):
    stream = session_stream_id("agent", key)
    at = store.read_stream(source, after=version - 1, limit=1)[0].position
    store.append(
        stream,
        [
            SessionForked(
                agent="agent",
                session_key=key,
                source_stream=str(source),
                source_version=version,
                source_position=at,
                base_version=base,
            )
        ],
        expected_version=0,
    )
    return stream


def test_a_fork_of_a_fork_reads_as_one_session(tmp_path):
    store = open_store(str(tmp_path / "ledger.db"))
    main = session_stream_id("agent", "main")
    store.append(
        main,
        [SessionOpened(agent="agent", session_key="main"), *turn_events("m1")],
        expected_version=0,
    )
    store.append(main, turn_events("m2"), expected_version=9)
    first = _fork(store, main, "first", version=9, base=9)  # after turn m1
    store.append(first, turn_events("f1"), expected_version=1)
    second = _fork(store, first, "second", version=5, base=14)  # inside turn f1
    store.append(second, turn_events("s1"), expected_version=1)

    record = read_record(store, second)
    assert record.forked is not None
    assert record.inherited == 9 + 5  # main's 9, then first's 5
    assert [r.version for r in record.events] == list(range(1, 14 + 9 + 1))
    assert {r.stream_id for r in record.events} == {second}
    turns = [r.event.turn_id for r in record.events if isinstance(r.event, TurnStarted)]
    assert turns == ["m1", "f1", "s1"]  # m2 is after the first fork point
    # The transcript numbers its entries as the record numbers its events.
    by_version = {r.version: r for r in record.events}
    for entry in record.transcript.entries:
        assert by_version[entry.version].event.turn_id == entry.turn_id
    # The same history the query API reads, the same costs.
    assert record.transcript == SessionHistories(store).transcript(second)
    assert digest(record.costs) == digest(cost_records(store, stream_id=second))

    store.append(second, turn_events("s2"), expected_version=9)
    advanced = advance_record(store, record)
    fresh = read_record(store, second)
    assert advanced == fresh
    assert advanced.events[-1].version == 14 + 9 + 8
    assert advance_record(store, fresh) is fresh  # nothing new: the same record
    store.close()
