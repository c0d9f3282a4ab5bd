"""TurnledgerSaver's group commit: overlapping writes share one transaction, all durable."""

from __future__ import annotations

import threading
import time
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from turnledger.adapters.langgraph import TurnledgerSaver
from turnledger.ledger.events import ItemRecorded
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store

TASKS = 8


def first_checkpoint(savers: list[Any], thread_id: str) -> dict[str, Any]:
    """Put one checkpoint of ``thread_id`` into every saver; return its config."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": 0}
    checkpoint["channel_versions"] = {"x": 1}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    stored = [saver.put(config, checkpoint, {"step": 0}, {"x": 1}) for saver in savers]
    return stored[0]


def queue_while_locked(saver: TurnledgerSaver, calls: list[Any]) -> list[Any]:
    """Start ``calls`` in threads while the saver's lock is held; return errors.

    Each call queues its ticket and waits for the lock; once all have queued, the
    lock is released and the first to take it commits every ticket.
    """
    errors: list[Any] = []

    def run(call: Any) -> None:
        try:
            call()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    with saver.lock:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(saver.write_queue) < len(calls) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(saver.write_queue) == len(calls)
    for thread in threads:
        thread.join(timeout=10)
    return errors


def test_writes_queued_together_commit_in_one_transaction(sqlite_path: str) -> None:
    """Eight tasks' writes, two threads: one transaction, each as if alone."""
    oracle = InMemorySaver()
    with TurnledgerSaver.from_url(sqlite_path) as saver:
        configs = {t: first_checkpoint([saver, oracle], t) for t in ("a", "b")}
        calls = [
            (lambda t=t, k=k: saver.put_writes(configs[t], [("x", k)], f"task-{k}"))
            for t in configs
            for k in range(TASKS)
        ]
        assert queue_while_locked(saver, calls) == []
        for config in configs.values():
            for k in range(TASKS):
                oracle.put_writes(config, [("x", k)], f"task-{k}")
    with open_store(sqlite_path) as store:
        at = {
            r.recorded_at
            for t in configs
            for r in store.read_stream(session_stream_id("langgraph", t))
            if isinstance(r.event, ItemRecorded) and r.event.kind == "wr"
        }
        assert len(at) == 1  # one append_batch: one timestamp for all 16
    with TurnledgerSaver.from_url(sqlite_path) as fresh:
        for config in configs.values():
            ours = fresh.get_tuple(config)
            theirs = oracle.get_tuple(config)
            assert ours is not None
            assert theirs is not None
            assert sorted(ours.pending_writes) == sorted(theirs.pending_writes)


def test_a_failed_ticket_fails_only_its_caller(sqlite_path: str) -> None:
    """A write that cannot be built raises to its caller; the others land."""
    with TurnledgerSaver.from_url(sqlite_path) as saver:
        config = first_checkpoint([saver], "a")
        unencodable = threading.Lock()  # the serializer refuses it
        calls = [
            lambda: saver.put_writes(config, [("x", 1)], "task-1"),
            lambda: saver.put_writes(config, [("x", unencodable)], "task-2"),
            lambda: saver.put_writes(config, [("x", 3)], "task-3"),
        ]
        errors = queue_while_locked(saver, calls)
        assert [type(e) for e in errors] == [TypeError]
    with TurnledgerSaver.from_url(sqlite_path) as fresh:
        stored = fresh.get_tuple(config)
        assert stored is not None
        assert sorted(w[2] for w in stored.pending_writes) == [1, 3]
