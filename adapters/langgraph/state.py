"""One LangGraph thread folded from its ledger stream.

The saver keeps this fold per thread as a cache of a stream prefix: before every
call it reads the events recorded after the fold's head (by any process), so the
ledger stays the truth. Records are the saver's ``item.recorded`` events
(``framework="langgraph"``): ``checkpoint`` (a checkpoint as what changed since its
parent) and ``writes`` (a task's pending writes), kinds ``cp``/``wr`` when compact
(``langgraph_format``); ``items.removed`` is a ``delete_thread``.

A stored channel value (namespace, channel, version) is a node: ``e`` empty, ``b``
a full blob, ``a`` a list extending the value at a base version by a blob of the
new items, ``m`` a message list extending its base by messages recorded as typed
events. Reading a value walks back to a full one (or to the last value read).
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import UUID

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.adapters.langgraph.codec import (
    Blob,
    TurnCursor,
    decode_json,
    dump_blob,
    load_blob,
    rebuild_message,
)
from turnledger.adapters.langgraph.format import (
    COMPACT_KINDS,
    CompactTable,
    record_of,
    successor,
)
from turnledger.adapters.langgraph.header import (
    DEFAULT_V,
    decode_ts,
    decode_updated,
)
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    SessionOpened,
    SessionRewound,
    SystemPromptSet,
    ToolResultRecorded,
    TurnStarted,
)

FRAMEWORK: Final = "langgraph"
"""The ``framework`` of the saver's item events."""

Version = str | int | float
"""A LangGraph channel version."""

MISSING: Final = object()
"""A channel with no stored value (empty, or not stored)."""

_MESSAGES = (TurnStarted, AssistantMessage, ToolResultRecorded)
_TYPED = (*_MESSAGES, SystemPromptSet)


def visible_at(version: int, at: int, rewinds: list[tuple[int, int]]) -> bool:
    """Whether what ``version`` recorded was in the history as of version ``at``.

    ``rewinds`` holds each ``session.rewound`` as ``(its version, the version it
    went back to)``: right after one, the history is what it was at its target
    (the history projection's rule, :mod:`turnledger.projections.history.rewind`).
    """
    while True:
        last = max((r for r in rewinds if r[0] <= at), default=None)
        if last is None or version > last[0]:
            return version <= at
        at = last[1]


@dataclass
class StoredCheckpoint:
    """A checkpoint without its channel values (those are nodes)."""

    ns: str
    id: str
    parent: str | None
    ts: str
    v: int
    versions: dict[str, Version]
    seen: dict[str, dict[str, Version]]
    updated: list[str] | None
    extra: Blob | None
    metadata_blob: Blob
    metadata: dict[str, Any]


@dataclass
class Node:
    """One stored channel value (see the module docstring)."""

    kind: str
    blob: Blob | None = None
    base: Version | None = None
    items: list[BaseMessage | Blob] = field(default_factory=list)
    single: bool = False
    key: str = ""


Write = tuple[str, str, Any, str]
"""A stored pending write: task id, channel, value (a blob or Messages), task path."""


@dataclass
class Messages:
    """A pending write of messages recorded as typed events (one or a list)."""

    items: list[BaseMessage | Blob]
    single: bool


@dataclass
class ThreadState:
    """The fold of one thread's stream."""

    thread_id: str
    stream: UUID
    head: int = 0
    opened: bool = False
    live_from: int = 1
    cursor: TurnCursor = field(default_factory=TurnCursor)
    checkpoints: dict[str, dict[str, StoredCheckpoint]] = field(default_factory=dict)
    order: dict[str, list[str]] = field(default_factory=dict)
    nodes: dict[tuple[str, str, Version], Node] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], Write]] = field(
        default_factory=dict
    )
    typed: dict[int, Event] = field(default_factory=dict)
    objects: dict[int, BaseMessage] = field(default_factory=dict)
    identity: dict[int, int] = field(default_factory=dict)
    residuals: dict[int, dict[str, Any]] = field(default_factory=dict)
    table: CompactTable = field(default_factory=CompactTable)
    memo: dict[tuple[str, str], tuple[Version, list[Any]]] = field(default_factory=dict)
    messages: list[int] = field(default_factory=list)
    rewinds: list[tuple[int, int]] = field(default_factory=list)
    recorded_at: dict[tuple[str, str], int] = field(default_factory=dict)

    def live(self, ns: str, checkpoint_id: str | None) -> StoredCheckpoint | None:
        """Return a live checkpoint of a namespace (the latest when no id)."""
        ids = self.order.get(ns)
        if not ids:
            return None
        return self.checkpoints[ns].get(checkpoint_id or ids[-1])

    @property
    def next_version(self) -> int:
        """The version the next event appended by the saver gets.

        The first append of a thread starts with its ``session.opened``.
        """
        return self.head + (1 if self.opened else 2)

    def has_checkpoints(self) -> bool:
        """Whether any checkpoint is live."""
        return any(self.order.values())

    def apply(
        self,
        version: int,
        event: Event,
        serde: SerializerProtocol,
        own: dict[int, BaseMessage] | None = None,
    ) -> None:
        """Fold one event of the stream (``own``: messages this process wrote)."""
        self.head = version
        if isinstance(event, SessionOpened):
            self.opened = True
        elif isinstance(event, _TYPED):
            self.cursor.observe(event)
            self.typed[version] = event
            if isinstance(event, _MESSAGES):
                self.messages.append(version)
        elif isinstance(event, ItemRecorded) and event.framework == FRAMEWORK:
            self._apply_record(event, serde, own or {})
        elif isinstance(event, SessionRewound):
            self.rewinds.append((version, event.to_version))
            self.cursor.resume(self.shown_at(event.to_version))
        elif isinstance(event, ItemsRemoved) and event.framework == FRAMEWORK:
            for part in (self.checkpoints, self.order, self.nodes, self.writes):
                part.clear()
            for fold in (self.typed, self.objects, self.identity, self.residuals):
                fold.clear()
            self.messages.clear()
            self.rewinds.clear()
            self.recorded_at.clear()
            self.table.latest.clear()
            self.memo.clear()
            self.live_from = version + 1

    def _apply_record(
        self,
        event: ItemRecorded,
        serde: SerializerProtocol,
        own: dict[int, BaseMessage],
    ) -> None:
        kind = COMPACT_KINDS.get(event.kind, event.kind)
        compact = kind != event.kind  # the compact form (langgraph_format)
        record = record_of(event, self.table) if compact else decode_json(event.fields)
        if kind == "checkpoint":
            self._apply_checkpoint(record, serde, own)
        elif kind == "writes":
            self._apply_writes(record, own)
        elif kind == "removed":
            self._remove(record)

    def _apply_checkpoint(
        self,
        record: dict[str, Any],
        serde: SerializerProtocol,
        own: dict[int, BaseMessage],
    ) -> None:
        ns: str = record.get("ns", "")
        parent_id = self.checkpoint_ref(ns, record["p"])
        parent = self.live(ns, parent_id) if parent_id else None
        if record.get("d") and parent is not None:
            changed = (
                record["cv"] if "cv" in record else {e[0]: e[2] for e in record["vals"]}
            )
            versions = {**parent.versions, **changed}
            for name in record.get("cvd", ()):
                versions.pop(name, None)
            seen = {**parent.seen, **record["vs"]}
            for name in record.get("vsd", ()):
                seen.pop(name, None)
        else:
            versions, seen = dict(record["cv"]), dict(record["vs"])
        if isinstance(record["md"], int | dict) and parent is not None:
            metadata = successor(parent.metadata, record["md"])
            md_blob = dump_blob(serde, metadata)
        else:
            md_blob = record["md"]
            metadata = load_blob(serde, md_blob)
        checkpoint = StoredCheckpoint(
            ns=ns,
            id=record["id"],
            parent=parent_id,
            ts=decode_ts(record["id"], record["ts"]),
            v=record.get("v", DEFAULT_V),
            versions=versions,
            seen=seen,
            updated=decode_updated(record["u"], record["vals"]),
            extra=record.get("x"),
            metadata_blob=md_blob,
            metadata=metadata,
        )
        for entry in record["vals"]:
            channel, spec = entry[0], entry[1]
            version = entry[2] if len(entry) > 2 else versions[channel]
            self.nodes[(ns, channel, version)] = self._node(spec, own)
        self.recorded_at[(ns, checkpoint.id)] = self.head
        by_id = self.checkpoints.setdefault(ns, {})
        ids = self.order.setdefault(ns, [])
        if checkpoint.id not in by_id:
            bisect.insort(ids, checkpoint.id)
        by_id[checkpoint.id] = checkpoint

    def shown_at(self, at: int) -> list[Event]:
        """The typed messages the history showed as of version ``at``, in order."""
        return [
            self.typed[v]
            for v in self.messages
            if v >= self.live_from and visible_at(v, at, self.rewinds)
        ]

    def ref_checkpoint(self, ns: str, checkpoint_id: str | None) -> str | int | None:
        """How a record names a checkpoint: ``1`` for the namespace's latest."""
        ids = self.order.get(ns)
        if checkpoint_id is not None and ids and ids[-1] == checkpoint_id:
            return 1
        return checkpoint_id

    def checkpoint_ref(self, ns: str, ref: str | int | None) -> str | None:
        """The checkpoint id a record's reference names (see :meth:`ref_checkpoint`)."""
        if isinstance(ref, int):
            return self.order[ns][-1]
        return ref

    def recorded_version(self, message: BaseMessage) -> int | None:
        """The version of the typed event recorded for this very message object."""
        at = self.identity.get(id(message))
        if at is not None and self.objects.get(at) is message:
            return at
        return None

    def _messages(
        self, refs: list[Any], own: dict[int, BaseMessage]
    ) -> list[BaseMessage | Blob]:
        """Messages from record references: typed-event versions or blobs."""
        items: list[BaseMessage | Blob] = []
        for ref in refs:
            if not isinstance(ref[0], int):
                items.append(ref)  # an untyped message's blob, loaded on read
                continue
            at = ref[0]
            residual = ref[1] if len(ref) > 1 else self.residuals.get(at, {})
            self.residuals.setdefault(at, residual)
            self.table.latest[at] = residual
            message = own.get(at)
            if message is None:
                message = rebuild_message(self.typed[at], residual)
            if at not in self.objects:
                self.objects[at] = message
                self.identity[id(message)] = at
            items.append(message)
        return items

    def _node(self, spec: list[Any], own: dict[int, BaseMessage]) -> Node:
        kind = spec[0]
        if kind == "e":
            return Node("e")
        if kind == "b":
            return Node("b", blob=spec[1])
        if kind == "n":
            return Node("b", blob=["null", ""])
        if kind == "a":
            return Node("a", blob=spec[2], base=spec[1])
        if kind == "s":
            items = self._messages(spec[2], own)
            return Node("s", blob=spec[1], items=items, single=spec[3], key=spec[4])
        return Node("m", base=spec[1], items=self._messages(spec[2], own))

    def _apply_writes(
        self, record: dict[str, Any], own: dict[int, BaseMessage]
    ) -> None:
        ns = record.get("ns", "")
        target = self.checkpoint_ref(ns, record["c"])
        stored = self.writes.setdefault((ns, target or ""), {})
        for entry in record["w"]:
            idx, channel = entry[0], entry[1]
            key = (record["t"], idx)
            if idx >= 0 and key in stored:
                continue
            value: Any = ["null", ""] if entry[2] == 0 else entry[2]
            if len(entry) > 3:
                value = Messages(self._messages(entry[3], own), single=entry[4])
            stored[key] = (record["t"], channel, value, record["p"])

    def _remove(self, record: dict[str, Any]) -> None:
        """Drop checkpoints (and their writes); their stored values stay as bases."""
        for ns, ids in record["ids"].items():
            by_id = self.checkpoints.get(ns, {})
            for checkpoint_id in ids:
                by_id.pop(checkpoint_id, None)
                self.writes.pop((ns, checkpoint_id), None)
            self.order[ns] = [i for i in self.order.get(ns, []) if i in by_id]

    def value(
        self, ns: str, channel: str, version: Version, serde: SerializerProtocol
    ) -> Any:
        """Return a channel's value at a version (a fresh list for lists).

        Raises:
            LookupError: An extension's base value is not stored.
        """
        chain: list[Node] = []
        key: Version = version
        while True:
            memo = self.memo.get((ns, channel))
            if memo is not None and memo[0] == key:
                base: Any = list(memo[1])
                break
            node = self.nodes.get((ns, channel, key))
            if node is None or node.kind == "e":
                if chain:
                    msg = f"Expected a stored base value of {channel!r} at {key!r}"
                    raise LookupError(msg)
                return MISSING
            if node.kind in ("b", "s"):
                base = _whole(node, serde)
                break
            chain.append(node)
            if node.base is None:
                base = []
                break
            key = node.base
        if not chain:
            return base
        result: list[Any] = list(base)
        for node in reversed(chain):
            if node.kind == "a":
                result.extend(load_blob(serde, node.blob or []))
            else:
                result.extend(_loaded(m, serde) for m in node.items)
        self.memo[(ns, channel)] = (version, result)
        return list(result)

    def pending_writes(
        self, ns: str, checkpoint_id: str, serde: SerializerProtocol
    ) -> list[tuple[str, str, Any]]:
        """Return a checkpoint's pending writes in ``writes_sort_key`` order."""
        stored = self.writes.get((ns, checkpoint_id), {})
        ordered = sorted(
            stored.items(), key=lambda kv: writes_sort_key(kv[1][3], kv[0][0], kv[0][1])
        )
        return [
            (task, channel, write_value(value, serde))
            for (task, _), (_, channel, value, _) in ordered
        ]

    def seen_copy(self, checkpoint: StoredCheckpoint) -> dict[str, dict[str, Version]]:
        """A copy of a checkpoint's ``versions_seen``."""
        return copy.deepcopy(checkpoint.seen)


def write_value(value: Any, serde: SerializerProtocol) -> Any:
    """The value of a stored write: a blob loaded, or its messages."""
    if not isinstance(value, Messages):
        return load_blob(serde, value)
    items = [_loaded(m, serde) for m in value.items]
    return items[0] if value.single else items


def _whole(node: Node, serde: SerializerProtocol) -> Any:
    """The value of a node that holds all of it (``b``, or ``s``: a dict + messages)."""
    value = load_blob(serde, node.blob or [])
    if node.kind == "s":
        held = [_loaded(m, serde) for m in node.items]
        value[node.key] = held[0] if node.single else held
    return value


def _loaded(item: BaseMessage | Blob, serde: SerializerProtocol) -> BaseMessage:
    """A message of a node: typed (kept) or a blob (loaded)."""
    return load_blob(serde, item) if isinstance(item, list) else item
