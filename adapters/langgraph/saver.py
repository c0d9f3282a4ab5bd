"""``TurnledgerSaver``: a LangGraph checkpointer that is a turnledger session.

Each LangGraph thread is one session stream of the ledger (agent ``agent``,
session key the thread id, channel ``langgraph``). A checkpoint is stored as what
changed since its parent, never as a snapshot: the channel versions and
``versions_seen`` entries that differ, and for each channel in ``new_versions``
either its value (the serializer's blob), or, when the value is a list extending
the parent's value, only the new items. New messages of the root namespace's
messages channel are the ledger's own typed events (user input, assistant message
with tool calls, tool result, and ``turn.completed`` after a final answer), each
recorded once: by the task write that carries it when it comes next in the
conversation, else by the checkpoint that holds it; records refer to them by
stream version. So ``turnledger history``, ``audit``, ``export`` and ``replay``
read the session, and bytes per checkpoint do not grow with the history of an
append-reducer channel (a value that is not a list is recorded whole each time it
changes). A text ``SystemMessage`` in the messages is recorded as ``system_prompt.set``
(a system prompt the graph adds at call time and never puts in its state is not
seen by a checkpointer, and not recorded); an ``AIMessage`` with
``usage_metadata`` recorded as a typed event is preceded by its ``model.called``
(the model ``response_metadata`` names, priced with ``pricing=``), once, with its
message (one kept as a blob records none).

A root checkpoint written from a parent that is not the thread's latest
checkpoint (a run resumed from an older checkpoint) is a fork: a
``session.rewound`` takes the history back to what it was when the parent was
recorded, so ``turnledger history`` shows the branch the graph holds (see
:meth:`~turnledger.adapters.langgraph.records.RecordEncoder.branch`). Channel
versions differ between branches (:meth:`TurnledgerSaver.get_next_version`), so
going back to a branch left earlier reads its checkpoints' own values.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.adapters.langgraph.admin import Removals
from turnledger.adapters.langgraph.aio import AsyncTwins
from turnledger.adapters.langgraph.codec import load_blob
from turnledger.adapters.langgraph.commit import GroupCommit, Ticket
from turnledger.adapters.langgraph.records import (
    Built,
    RecordEncoder,
    thread_removal,
)
from turnledger.adapters.langgraph.state import (
    MISSING,
    StoredCheckpoint,
    ThreadState,
    write_value,
)
from turnledger.adapters.langgraph.threads import CHANNEL, Threads
from turnledger.ledger.store import EventStore, open_store
from turnledger.policies.pricing import ModelPrice

_COUNTER_WIDTH = 10
"""Digits of a version's counter (a thread writes far fewer checkpoints)."""
_SUFFIX_BYTES = 6
"""Random bytes of a version's suffix (URL-safe base64: 8 characters, 48 bits)."""

# The class defines ``list`` (LangGraph's method), so its annotations use aliases.
Names = list[str]
Found = list[tuple[ThreadState, StoredCheckpoint]]


class TurnledgerSaver(AsyncTwins):
    """A LangGraph checkpointer on the turnledger ledger (SQLite or PostgreSQL).

    Args:
        store: The ledger.
        agent: The agent the threads' sessions belong to.
        serde: LangGraph's serializer for values no typed event models
            (default: LangGraph's ``JsonPlusSerializer``).
        messages_channel: The root-namespace channel whose messages become typed
            events.
        max_cached_threads: Threads whose fold is kept in memory (older ones are
            folded again from the ledger when next used).
        close_store: Whether :meth:`close` closes ``store``.
        pricing: The rate sheet model calls are priced with (the ``[pricing]``
            table, e.g. ``load_config().pricing``; a model it does not name
            costs 0).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        agent: str = "langgraph",
        serde: SerializerProtocol | None = None,
        messages_channel: str = "messages",
        max_cached_threads: int = 1024,
        close_store: bool = False,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if not agent:
            msg = "Expected a non-empty agent, found ''"
            raise ValueError(msg)
        self.store = store
        self.messages_channel = messages_channel
        self.close_store = close_store
        self.channel = CHANNEL
        self.lock = threading.RLock()
        self._records = RecordEncoder(self.serde, messages_channel, pricing)
        self._threads = Threads(
            store, agent=agent, serde=self.serde, max_cached=max_cached_threads
        )
        self._commits = GroupCommit(store, self._threads, self.lock, self.serde)
        self._removals = Removals(self._threads, self._commits)
        self.write_queue = self._commits.queue

    @property
    def agent(self) -> str:
        """The agent the threads' sessions belong to (fixed at construction)."""
        return self._threads.agent

    @property
    def max_cached_threads(self) -> int:
        """Threads whose fold is kept in memory (fixed at construction)."""
        return self._threads.max_cached

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> TurnledgerSaver:
        """Open the ledger at ``url`` (see ``open_store``) and a saver owning it."""
        return cls(open_store(url), close_store=True, **kwargs)

    def close(self) -> None:
        """Drop the cache; close the store if the saver owns it."""
        with self.lock:
            self._threads.clear()
        if self.close_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def get_next_version(  # type: ignore[override]  # an int thread stays int
        self, current: str | int | None, channel: None
    ) -> str | int:
        """The version a channel written after ``current`` gets; unique per thread.

        A zero-padded counter, ``.``, and a random suffix (LangGraph's own savers'
        shape, shorter), so the versions a fork writes never equal the ones of the
        branch it left (each stored channel value is looked up by its version),
        and they sort as the counter does (the suffix: 48 random bits). A thread
        stored before this (int versions) keeps counting in ints, as LangGraph
        compares a thread's versions and an int with a str raises; on such a
        thread a fork still reuses the versions of the branch it left, whose
        checkpoints then read back the fork's values.
        """
        del channel
        if isinstance(current, int):
            return current + 1
        count = 0 if current is None else int(str(current).split(".", 1)[0])
        return f"{count + 1:0{_COUNTER_WIDTH}}.{secrets.token_urlsafe(_SUFFIX_BYTES)}"

    # -- folding -------------------------------------------------------------------

    def thread_state(self, thread_id: str, *, catch_up: bool = True) -> ThreadState:
        """The thread's fold, caught up with the ledger (call under the lock).

        Without ``catch_up`` a cached fold is returned as it is (an append made
        on it fails if another writer has moved the stream on).
        """
        return self._threads.state(thread_id, catch_up=catch_up)

    def forget(self, thread_id: str) -> None:
        """Drop a thread's cached fold (the next use folds it from the ledger)."""
        self._threads.forget(thread_id)

    # -- reads ---------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return a checkpoint (the thread's latest when the config names none)."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self.lock:
            state = self.thread_state(thread_id)
            checkpoint = state.live(ns, get_checkpoint_id(config))
            return (
                None if checkpoint is None else self.checkpoint_tuple(state, checkpoint)
            )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's keyword
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Return matching checkpoints, newest (highest id) first."""
        conf = (config or {}).get("configurable", {})
        before_id = get_checkpoint_id(before) if before else None
        wanted_id = conf.get("checkpoint_id")
        with self.lock:
            if "thread_id" in conf:
                threads = [str(conf["thread_id"])]
            else:
                threads = self.thread_ids()
            found: Found = []
            for thread_id in threads:
                state = self.thread_state(thread_id)
                for ns, by_id in state.checkpoints.items():
                    if "checkpoint_ns" in conf and ns != conf["checkpoint_ns"]:
                        continue
                    found.extend(
                        (state, c)
                        for c in by_id.values()
                        if (wanted_id is None or c.id == wanted_id)
                        and (before_id is None or c.id < before_id)
                        and _matches(c.metadata, filter)
                    )
            found.sort(key=lambda pair: pair[1].id, reverse=True)
            chosen = found if limit is None else found[:limit]
            tuples = [self.checkpoint_tuple(state, c) for state, c in chosen]
        yield from tuples

    def thread_ids(self) -> Names:
        """Every thread id the saver's agent has a session for (deleted ones too)."""
        return self._threads.ids()

    def checkpoint_tuple(
        self, state: ThreadState, c: StoredCheckpoint
    ) -> CheckpointTuple:
        """A stored checkpoint as LangGraph reads it (call under the lock)."""
        values: dict[str, Any] = {}
        for channel, version in c.versions.items():
            value = state.value(c.ns, channel, version, self.serde)
            if value is not MISSING:
                values[channel] = value
        checkpoint: dict[str, Any] = {
            "v": c.v,
            "id": c.id,
            "ts": c.ts,
            "channel_values": values,
            "channel_versions": dict(c.versions),
            "versions_seen": state.seen_copy(c),
            "updated_channels": None if c.updated is None else list(c.updated),
        }
        if c.extra is not None:
            checkpoint.update(load_blob(self.serde, c.extra))
        configurable = {"thread_id": state.thread_id, "checkpoint_ns": c.ns}
        parent = (
            {"configurable": {**configurable, "checkpoint_id": c.parent}}
            if c.parent
            else None
        )
        return CheckpointTuple(
            config={"configurable": {**configurable, "checkpoint_id": c.id}},
            checkpoint=cast("Checkpoint", checkpoint),
            metadata=load_blob(self.serde, c.metadata_blob),
            parent_config=cast("RunnableConfig | None", parent),
            pending_writes=state.pending_writes(c.ns, c.id, self.serde),
        )

    # -- writes --------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Record a checkpoint as what changed since its parent; durable on return."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        parent_id = conf.get("checkpoint_id")
        md = dict(get_checkpoint_metadata(config, metadata))

        def build(state: ThreadState) -> Built:
            return self._records.checkpoint(
                state,
                ns=ns,
                parent_id=parent_id,
                checkpoint=checkpoint,
                md=md,
                new_versions=dict(new_versions),
            )

        self._commits.commit(Ticket(thread_id, build))
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record a task's pending writes (a write already stored is not repeated)."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = conf["checkpoint_id"]

        def build(state: ThreadState) -> Built:
            return self._records.writes(
                state,
                ns=ns,
                checkpoint_id=checkpoint_id,
                task_id=task_id,
                task_path=task_path,
                writes=writes,
            )

        self._commits.commit(Ticket(thread_id, build))

    def delete_thread(self, thread_id: str) -> None:
        """Append the removal of the thread's checkpoints and writes (all kept)."""
        self._commits.commit(Ticket(str(thread_id), thread_removal))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Append the removal of every checkpoint (and its writes) of those runs."""
        with self.lock:
            self._removals.delete_for_runs(run_ids)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Keep each namespace's latest checkpoint (``keep_latest``), or none.

        Raises:
            ValueError: Another strategy.
        """
        with self.lock:
            self._removals.prune(thread_ids, strategy)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Write the source's checkpoints and writes to the target, oldest first.

        The target records them as a thread of its own (its messages as its own
        typed events), each checkpoint as what changed since its parent.
        """
        with self.lock:
            source = self.thread_state(str(source_thread_id))
            for ns, ids in list(source.order.items()):
                for checkpoint_id in list(ids):
                    checkpoint = source.checkpoints[ns][checkpoint_id]
                    self._copy_one(source, checkpoint, str(target_thread_id))

    def _copy_one(self, source: ThreadState, c: StoredCheckpoint, target: str) -> None:
        """Put one source checkpoint, then its writes, on the target thread."""
        found = self.checkpoint_tuple(source, c)
        parent = source.checkpoints.get(c.ns, {}).get(c.parent or "")
        before = parent.versions if parent is not None else {}
        new_versions = {k: v for k, v in c.versions.items() if before.get(k) != v}
        conf: dict[str, Any] = {"thread_id": target, "checkpoint_ns": c.ns}
        if c.parent:
            conf["checkpoint_id"] = c.parent
        config = cast("RunnableConfig", {"configurable": conf})
        stored = self.put(config, found.checkpoint, found.metadata, new_versions)
        tasks: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        ordered = sorted(
            source.writes.get((c.ns, c.id), {}).items(), key=lambda kv: kv[0][1]
        )
        for (task, _), (_, channel, value, path) in ordered:
            loaded = write_value(value, self.serde)
            tasks.setdefault((task, path), []).append((channel, loaded))
        for (task, path), writes in tasks.items():
            self.put_writes(stored, writes, task, path)


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())
