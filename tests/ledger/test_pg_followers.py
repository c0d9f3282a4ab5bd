"""PostgreSQL writers commit in parallel; a follower never misses or reorders an event.

A trigger installed by the test sleeps a random 0-20 ms after each insert, inside
the writer's transaction: positions are handed out in one order and committed in
another. Followers (the catch-up loop projections use, and a subscription) must
still see every event exactly once, in position order.
"""

from __future__ import annotations

import threading
import time
from uuid import UUID

import psycopg

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify

WRITERS = 4
TURNS = 12


def _delay_commits(url: str) -> None:
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".test_delay() RETURNS trigger '
            "LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(random() * 0.02); "
            "RETURN NULL; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER test_delay AFTER INSERT ON "{schema}".turnledger_events '
            f'FOR EACH STATEMENT EXECUTE FUNCTION "{schema}".test_delay()'
        )


def _writer(url: str, own: UUID, shared: UUID, errors: list[BaseException]) -> None:
    try:
        with open_store(url) as store:
            for t in range(TURNS):
                store.append(own, turn_events(f"t{t}"), expected_version=t * 8)
                while True:  # a stream every writer appends to: conflicts retried
                    head = store.stream_version(shared)
                    try:
                        store.append(shared, turn_events("s"), expected_version=head)
                        break
                    except ConcurrencyError:
                        continue
    except BaseException as e:
        errors.append(e)


def _catch_up(store: EventStore, done: threading.Event, seen: list[int]) -> None:
    position = 0
    while True:
        finished = done.is_set()
        target = store.max_position()
        seen.extend(
            r.position
            for r in store.iter_all(after=position, until=target, page_size=37)
        )
        position = max(position, target)
        if finished and position == store.max_position():
            return


def test_followers_never_miss_or_reorder(postgres_url: str):
    """4 writers with random commit delays; both followers see the whole log."""
    open_store(postgres_url).close()
    _delay_commits(postgres_url)
    shared = new_stream()
    errors: list[BaseException] = []
    done = threading.Event()
    follower_store = open_store(postgres_url)
    caught: list[int] = []
    follower = threading.Thread(target=_catch_up, args=(follower_store, done, caught))
    subscribed: list[int] = []
    subscription = follower_store.subscribe()

    def follow() -> None:
        subscribed.extend(recorded.position for recorded in subscription)

    listener = threading.Thread(target=follow)
    follower.start()
    listener.start()
    writers = [
        threading.Thread(
            target=_writer, args=(postgres_url, new_stream(), shared, errors)
        )
        for _ in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=300)
    done.set()
    follower.join(timeout=60)
    try:
        assert not errors, errors
        with open_store(postgres_url) as store:
            log = [r.position for r in store.iter_all()]
            assert len(log) == WRITERS * TURNS * 16
            assert verify(store).ok
        deadline = time.monotonic() + 30
        while len(subscribed) < len(log) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert caught == log, "the catch-up follower missed or reordered events"
        assert subscribed[: len(log)] == log, "the subscription missed or reordered"
    finally:
        subscription.stop()
        listener.join(timeout=30)
        follower_store.close()
