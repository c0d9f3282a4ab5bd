"""The store contract: one behavioural suite, run against every backend.

``StoreContract`` has no ``Test`` prefix, so pytest does not collect it; each backend
module subclasses it and provides the ``store`` and ``reopen`` fixtures.
"""

from __future__ import annotations

import contextlib
import threading
import time
from contextlib import AbstractContextManager
from typing import Protocol
from uuid import uuid4

import pytest

from turnledger.ledger.errors import (
    ConcurrencyError,
    IdempotencyKeyError,
    InvalidEventError,
    LedgerFullError,
    LedgerLockedError,
    StoreUnavailableError,
)
from turnledger.ledger.events import (
    AssistantMessage,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore


def turn_events(turn_id: str, n_tools: int = 2) -> list:
    """A realistic turn: the 8 events a turn with two tool calls records."""
    calls = tuple(
        ToolCallRecord(id=f"{turn_id}-c{i}", name="file_read", arguments='{"p": 1}')
        for i in range(n_tools)
    )
    return [
        TurnStarted(turn_id=turn_id, origin="interactive", user_input="hello " * 5),
        ModelCalled(turn_id=turn_id, provider="p", model="m", input_tokens=10),
        AssistantMessage(turn_id=turn_id, tool_calls=calls),
        *(
            ToolResultRecorded(turn_id=turn_id, call_id=c.id, tool=c.name, output="ok")
            for c in calls
        ),
        ModelCalled(turn_id=turn_id, provider="p", model="m", iteration=1),
        AssistantMessage(turn_id=turn_id, text="done", iteration=1),
        TurnCompleted(turn_id=turn_id),
    ]


def new_stream():
    return session_stream_id("agent", uuid4().hex)


class StoreContract:
    """Behaviour every backend must show."""

    def test_append_then_read_back(self, store: EventStore):
        """Events come back in order with their envelope."""
        stream = new_stream()
        events = [SessionOpened(agent="a", session_key="k"), *turn_events("t1")]
        result = store.append(stream, events, expected_version=0)
        assert (result.first_version, result.last_version) == (1, len(events))
        recorded = store.read_stream(stream)
        assert [r.event for r in recorded] == events
        assert [r.version for r in recorded] == list(range(1, len(events) + 1))
        assert [r.position for r in recorded] == list(result.positions)
        assert all(r.stream_id == stream for r in recorded)
        assert recorded[0].recorded_at.tzinfo is not None

    def test_empty_append_writes_nothing(self, store: EventStore):
        """An empty append is a no-op that still reports the head."""
        stream = new_stream()
        result = store.append(stream, [], expected_version=0)
        assert result.positions == ()
        assert store.max_position() == 0
        assert store.stream_version(stream) == 0

    def test_conflict_raises_and_writes_nothing(self, store: EventStore):
        """A stale expected version is refused with a typed error; nothing is written."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        before = store.max_position()
        with pytest.raises(ConcurrencyError) as caught:
            store.append(stream, turn_events("t2"), expected_version=3)
        assert caught.value.expected == 3
        assert caught.value.found == 8
        assert str(caught.value) == f"Expected stream {stream} at version 3, found 8"
        assert store.max_position() == before
        assert store.stream_version(stream) == 8

    def test_gap_is_refused(self, store: EventStore):
        """Expecting a version beyond the head is a conflict, never a gap."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        with pytest.raises(ConcurrencyError):
            store.append(stream, turn_events("t2"), expected_version=20)
        assert store.stream_version(stream) == 8

    def test_invalid_event_writes_nothing(self, store: EventStore):
        """One invalid event fails the whole append before anything is written."""
        stream = new_stream()
        bad = ModelCalled(turn_id="t", provider="p", model="m", input_tokens=-5)
        with pytest.raises(InvalidEventError, match=r"input_tokens"):
            store.append(stream, [*turn_events("t1"), bad], expected_version=0)
        assert store.max_position() == 0

    def test_positions_strictly_increase_and_do_not_interleave(self, store: EventStore):
        """One append's positions are contiguous; later appends come after."""
        a, b = new_stream(), new_stream()
        ra = store.append(a, turn_events("a1"), expected_version=0)
        rb = store.append(b, turn_events("b1"), expected_version=0)
        ra2 = store.append(a, turn_events("a2"), expected_version=8)
        for r in (ra, rb, ra2):
            assert list(r.positions) == list(
                range(r.positions[0], r.positions[0] + len(r.positions))
            )
        assert ra.positions[-1] < rb.positions[0] < ra2.positions[0]
        log = [r.position for r in store.read_all(limit=100)]
        assert log == sorted(log)
        assert len(set(log)) == len(log) == 24

    def test_read_all_resumes_exactly(self, store: EventStore):
        """Reading after a position gives exactly the rest, page by page."""
        for i in range(5):
            store.append(new_stream(), turn_events(f"t{i}"), expected_version=0)
        everything = store.read_all(limit=1000)
        assert len(everything) == 40
        middle = everything[16].position
        rest = store.read_all(after=middle, limit=1000)
        assert rest == everything[17:]
        paged = list(store.iter_all(after=0, page_size=7))
        assert paged == everything
        assert store.read_all(after=everything[-1].position) == []

    def test_read_all_filters_by_type(self, store: EventStore):
        """The global log can be filtered by event type (class or tag)."""
        store.append(new_stream(), turn_events("t1"), expected_version=0)
        started = store.read_all(types=[TurnStarted])
        assert [type(r.event) for r in started] == [TurnStarted]
        assert (
            store.read_all(types=["tool_result.recorded"])[0].event.call_id == "t1-c0"
        )

    def test_read_stream_from_a_version(self, store: EventStore):
        """A stream can be read from a version and up to a version."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        assert [r.version for r in store.read_stream(stream, after=5)] == [6, 7, 8]
        assert [r.version for r in store.read_stream(stream, after=2, until=4)] == [
            3,
            4,
        ]
        assert len(store.read_stream(stream, limit=2)) == 2

    def test_read_stream_filters_by_type(self, store: EventStore):
        """A stream read by type keeps versions and order, and leaves the rest out."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        store.append(new_stream(), turn_events("t2"), expected_version=0)
        said = store.read_stream(stream, types=[AssistantMessage, "turn.completed"])
        assert [(r.version, type(r.event)) for r in said] == [
            (3, AssistantMessage),
            (7, AssistantMessage),
            (8, TurnCompleted),
        ]
        bounded = store.read_stream(stream, after=3, until=7, types=[ModelCalled])
        assert [r.version for r in bounded] == [6]
        assert [r.version for r in store.read_stream(stream, types=())] == list(
            range(1, 9)
        )

    def test_group_commit_isolates_conflicts(self, store: EventStore):
        """In one batch a conflicting append fails alone; the others commit."""
        a, b, c = new_stream(), new_stream(), new_stream()
        store.append(b, turn_events("b0"), expected_version=0)
        results = store.append_batch(
            [
                Append(a, turn_events("a1"), 0),
                Append(b, turn_events("b1"), 0),  # stale: b is at 8
                Append(c, turn_events("c1"), 0),
                Append(a, turn_events("a2"), 8),  # sees a1 inside the same batch
            ]
        )
        assert isinstance(results[1], ConcurrencyError)
        assert results[1].found == 8
        assert [r.last_version for i, r in enumerate(results) if i != 1] == [8, 8, 16]
        assert store.stream_version(b) == 8
        assert store.stream_version(a) == 16
        positions = [p for i, r in enumerate(results) if i != 1 for p in r.positions]
        assert positions == sorted(positions)

    def test_batch_with_invalid_event_writes_nothing(self, store: EventStore):
        """Validation happens before the transaction: nothing of the batch lands."""
        bad = TurnStarted(turn_id="", origin="interactive", user_input="x")
        with pytest.raises(InvalidEventError, match=r"turn_id"):
            store.append_batch(
                [
                    Append(new_stream(), turn_events("ok"), 0),
                    Append(new_stream(), [bad], 0),
                ]
            )
        assert store.max_position() == 0

    def test_subscribe_delivers_existing_then_new(self, store: EventStore):
        """A subscription yields what is there, then what is appended later."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        received = []
        with store.subscribe(after=2) as subscription:

            def follow() -> None:
                for recorded in subscription:
                    received.append(recorded)
                    if len(received) == 14:
                        return

            follower = threading.Thread(target=follow)
            follower.start()
            store.append(stream, turn_events("t2"), expected_version=8)
            follower.join(timeout=30)
            assert not follower.is_alive()
        assert [r.version for r in received] == list(range(3, 17))

    def test_subscribe_filters_types(self, store: EventStore):
        """A subscription can follow only some event types."""
        store.append(new_stream(), turn_events("t1"), expected_version=0)
        with store.subscribe(types=[TurnCompleted]) as subscription:
            first = next(subscription)
        assert isinstance(first.event, TurnCompleted)

    def test_stop_ends_a_blocked_subscription(self, store: EventStore):
        """stop() from another thread ends an iteration waiting for events."""
        subscription = store.subscribe()
        done = threading.Event()

        def follow() -> None:
            for _ in subscription:
                pass
            done.set()

        follower = threading.Thread(target=follow)
        follower.start()
        time.sleep(0.1)
        subscription.stop()
        follower.join(timeout=30)
        assert done.is_set()

    def test_reopen_sees_everything(self, store: EventStore, reopen):
        """What was acknowledged is there after the store is closed and reopened."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        store.close()
        again = reopen()
        try:
            assert again.stream_version(stream) == 8
            assert again.count() == 8
            assert again.stream_ids() == [stream]
        finally:
            again.close()

    def test_encrypted_payloads_keep_envelope_readable(self, reopen):
        """With a cipher key payloads are encrypted; without it, a typed error."""
        key = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY="  # 32 bytes, base64
        encrypted = reopen(cipher_key=key)
        stream = new_stream()
        try:
            encrypted.append(stream, turn_events("secret-turn"), expected_version=0)
            assert encrypted.read_stream(stream)[0].event.turn_id == "secret-turn"
            row = next(encrypted.iter_rows())
            assert b"secret-turn" not in row.state
            assert row.topic == "turn.started"
            assert (row.stream_id, row.version) == (stream, 1)
        finally:
            encrypted.close()
        from turnledger.ledger.key_check import CipherKeyError

        with pytest.raises(CipherKeyError, match="found none"):
            reopen(cipher_key="")  # open_store checks the key (#17)
        plain = reopen(cipher_key="", check_key=False)
        try:
            from turnledger.ledger.errors import CorruptRecordError

            with pytest.raises(CorruptRecordError, match=r"position 1 .*cipher key"):
                plain.read_stream(stream)
            assert plain.stream_version(stream) == 8
        finally:
            plain.close()

    def test_atomic_batch_is_all_or_nothing(self, store: EventStore):
        """append_atomic writes every stream's append, or none when one conflicts."""
        a, b = new_stream(), new_stream()
        store.append(b, turn_events("b0"), expected_version=0)
        before = store.max_position()
        with pytest.raises(ConcurrencyError) as caught:
            store.append_atomic(
                [Append(a, turn_events("a1"), 0), Append(b, turn_events("b1"), 0)]
            )
        assert caught.value.stream_id == b
        assert store.max_position() == before
        assert store.stream_version(a) == 0
        results = store.append_atomic(
            [Append(a, turn_events("a1"), 0), Append(b, turn_events("b1"), 8)]
        )
        assert [r.last_version for r in results] == [8, 16]


class Faults(Protocol):
    """What a backend's test module can do to its database from outside."""

    def hold_write_lock(self) -> AbstractContextManager[None]:
        """Hold the ledger's write lock from another connection meanwhile."""
        ...

    def locked_store(self) -> EventStore:
        """Open the ledger with a 1 s lock timeout."""
        ...

    def fill_up(self, store: EventStore) -> None:
        """Make the next write fail for lack of space (or skip)."""
        ...

    def make_read_only(self) -> None:
        """Make the database refuse writes (or skip)."""
        ...

    def vanish(self) -> None:
        """Remove the database from under the open store (or skip)."""
        ...

    def kill_connections(self, store: EventStore) -> None:
        """Kill the store's server connections (or skip)."""
        ...


class StoreFaultContract:
    """Every driver failure is a typed ledger error, and nothing is half-written."""

    def test_locked_ledger_is_a_typed_error_after_the_timeout(
        self, store: EventStore, faults: Faults
    ):
        """A writer holding the lock past the busy timeout: LedgerLockedError."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        waiting = faults.locked_store()
        try:
            with faults.hold_write_lock(), pytest.raises(LedgerLockedError) as caught:
                waiting.append(stream, turn_events("t2"), expected_version=8)
            assert str(caught.value) == (
                "the ledger is locked by another writer (waited 1 s)"
            )
            assert waiting.stream_version(stream) == 8
            waiting.append(stream, turn_events("t2"), expected_version=8)
        finally:
            waiting.close()

    def test_full_disk_is_a_typed_error_writing_nothing(
        self, store: EventStore, faults: Faults
    ):
        """No space left: LedgerFullError, and the append is not half-written."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        faults.fill_up(store)
        big = [*turn_events("big", n_tools=200)]
        with pytest.raises(LedgerFullError, match=r"full"):
            store.append(stream, big, expected_version=8)
        assert store.stream_version(stream) == 8
        assert store.count() == 8

    def test_read_only_database_is_a_typed_error(
        self, store: EventStore, faults: Faults, reopen
    ):
        """A database refusing writes: a typed error at open or at append."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        store.close()
        faults.make_read_only()
        try:
            again = reopen()
        except StoreUnavailableError:
            return  # refused at open, typed
        with pytest.raises(StoreUnavailableError, match=r"read-only|refuses writes"):
            again.append(stream, turn_events("t2"), expected_version=8)
        assert again.stream_version(stream) == 8

    def test_vanished_database_is_a_typed_error(
        self, store: EventStore, faults: Faults
    ):
        """The database removed under an open store: a typed error, not silence."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        faults.vanish()
        with pytest.raises(StoreUnavailableError, match=r"gone|vanished"):
            store.append(stream, turn_events("t2"), expected_version=8)

    def test_killed_connection_is_typed_then_recovers(
        self, store: EventStore, faults: Faults
    ):
        """Server connections killed: a typed error at most, then appends work again."""
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)
        faults.kill_connections(store)
        with contextlib.suppress(StoreUnavailableError):
            store.read_stream(stream)  # a driver error here must come typed
        version = 8
        for attempt in range(3):
            try:
                store.append(
                    stream, turn_events(f"r{attempt}"), expected_version=version
                )
                version += 8
            except StoreUnavailableError:
                continue  # typed; the broken connection is dropped from the pool
        assert version > 8, "appends must work again after the connection died"
        assert store.stream_version(stream) == version
        assert [r.version for r in store.read_stream(stream)] == list(
            range(1, version + 1)
        )


class IdempotencyContract:
    """An append with an idempotency key happens once, whatever the retries."""

    def test_same_key_returns_the_first_result_and_writes_nothing(
        self, store: EventStore
    ):
        """A retry (even with a now-stale expected version) replays the first result."""
        stream = new_stream()
        first = store.append(
            stream, turn_events("t1"), expected_version=0, idempotency_key="t1:0"
        )
        again = store.append(
            stream, turn_events("t1"), expected_version=0, idempotency_key="t1:0"
        )
        assert again == first
        assert store.count() == 8
        other = store.append(
            stream, turn_events("t2"), expected_version=8, idempotency_key="t2:0"
        )
        assert other.first_version == 9
        assert store.count() == 16

    def test_same_key_twice_in_one_group(self, store: EventStore):
        """Inside one group commit the second use of a key replays the first."""
        stream = new_stream()
        results = store.append_batch(
            [
                Append(stream, turn_events("t1"), 0, "k"),
                Append(stream, turn_events("t1"), 0, "k"),
                Append(new_stream(), turn_events("x"), 0),
            ]
        )
        assert results[0] == results[1]
        assert store.count() == 16

    def test_key_on_another_stream_is_refused(self, store: EventStore):
        """A key first used on stream A cannot write to stream B."""
        a, b = new_stream(), new_stream()
        store.append(a, turn_events("t1"), expected_version=0, idempotency_key="k")
        with pytest.raises(IdempotencyKeyError, match=r"'k'"):
            store.append(b, turn_events("t1"), expected_version=0, idempotency_key="k")
        assert store.stream_version(b) == 0

    def test_bad_keys_are_refused(self, store: EventStore):
        """Empty and oversized keys are invalid input; nothing is written."""
        for key in ("", "x" * 513):
            with pytest.raises(InvalidEventError, match=r"idempotency key"):
                store.append(
                    new_stream(),
                    turn_events("t"),
                    expected_version=0,
                    idempotency_key=key,
                )
        assert store.count() == 0

    def test_key_survives_reopen(self, store: EventStore, reopen):
        """Keys are durable with their rows: a new process replays them."""
        stream = new_stream()
        first = store.append(
            stream, turn_events("t1"), expected_version=0, idempotency_key="t1:0"
        )
        store.close()
        again = reopen()
        replay = again.append(
            stream, turn_events("t1"), expected_version=0, idempotency_key="t1:0"
        )
        assert replay == first
        assert again.count() == 8
