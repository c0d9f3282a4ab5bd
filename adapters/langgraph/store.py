"""``TurnledgerStore``: LangGraph's long-term ``BaseStore`` over turnledger memory.

Every put is a ``memory.stored`` event (a delete, ``memory.forgotten``) in the
agent's memory stream of the ledger; reads are served by a memory backend (the
long-term memory projection, SQLite with FTS5 by default) caught up with the
ledger before each batch's reads, so ``turnledger memory list|recall|rebuild``
see exactly what the store wrote. A LangGraph namespace ``("memories", "u1")``
is the entry's ``namespace`` ``memories.u1`` (LangGraph forbids ``.`` in labels)
and the entry key is ``memories.u1/<key>``; the value is kept as its JSON text,
which is also what ``search`` ranks with the backend's hybrid (keyword + vector)
recall. Values must be JSON (as LangGraph's own stores require); anything else is
refused with :class:`TypeError` before anything is written.

TTL is not supported (``supports_ttl`` is ``False``: LangGraph refuses a ``ttl``
argument itself); memory entries live until deleted.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import msgspec
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event, MemoryForgotten, MemoryStored
from turnledger.ledger.file_keys import cipher_key_of
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.projections.memory.apply import BackendTarget
from turnledger.projections.memory.protocol import MemoryBackend, MemoryEntry
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.runner import catch_up

_RETRIES: Final = 50
_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder()
_OPS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
"""The comparison operators of a search filter (as LangGraph's stores take them)."""


class TurnledgerStore(BaseStore):
    """A LangGraph store whose items are turnledger long-term memory entries.

    Args:
        store: The ledger.
        backend: The memory view reads are served from (dedicated to this store:
            its applied position is the ledger position it has caught up to).
        agent: The agent whose memory the items are.
        close_store: Whether :meth:`close` closes ``store`` and ``backend``.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        store: EventStore,
        backend: MemoryBackend,
        *,
        agent: str = "langgraph",
        close_store: bool = False,
    ) -> None:
        if not agent:
            msg = "Expected a non-empty agent, found ''"
            raise ValueError(msg)
        self.store = store
        self.backend = backend
        self.agent = agent
        self.close_store = close_store
        self._lock = threading.RLock()

    @classmethod
    def from_url(
        cls,
        url: str | None = None,
        *,
        memory_path: str | Path | None = None,
        agent: str = "langgraph",
    ) -> TurnledgerStore:
        """Open the ledger at ``url`` and a SQLite memory view at ``memory_path``.

        The view defaults to ``<ledger file>.memory.sqlite`` (for PostgreSQL
        ledgers, ``./turnledger-langgraph-memory.sqlite``); it is rebuilt from the
        ledger whenever it is missing.
        """
        ledger = open_store(url)
        if memory_path is None:
            base = url or "turnledger.db"
            memory_path = (
                "turnledger-langgraph-memory.sqlite"
                if "://" in base
                else f"{base}.memory.sqlite"
            )
        # Keyed as the ledger is (encrypted at rest with its cipher key).
        memory = SQLiteMemory(memory_path, cipher_key=cipher_key_of(ledger))
        return cls(ledger, memory, agent=agent, close_store=True)

    def close(self) -> None:
        """Close the ledger and the view if the store owns them."""
        if self.close_store:
            self.backend.close()
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

    # -- the batch -----------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order; consecutive puts are one ledger append."""
        results: list[Result] = []
        pending: list[Event] = []
        with self._lock:
            for op in ops:
                if isinstance(op, PutOp):
                    pending.append(self._put_event(op))
                    results.append(None)
                    continue
                self._flush(pending)
                pending = []
                results.append(self._read(op))
            self._flush(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (runs in a worker thread)."""
        listed = list(ops)
        return await asyncio.to_thread(self.batch, listed)

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        msg = f"Expected a GetOp, PutOp, SearchOp or ListNamespacesOp, found {op!r}"
        raise TypeError(msg)

    # -- writes --------------------------------------------------------------------

    def _put_event(self, op: PutOp) -> Event:
        prefix = _prefix(op.namespace)
        key = f"{prefix}/{op.key}"
        if op.value is None:
            return MemoryForgotten(agent=self.agent, key=key, source="tool")
        try:
            content = _ENCODER.encode(op.value).decode("utf-8")
        except (TypeError, msgspec.EncodeError) as e:
            msg = f"Expected a JSON value for {key!r}, found {type(op.value).__name__}"
            raise TypeError(msg) from e
        return MemoryStored(
            agent=self.agent,
            key=key,
            content=content,
            category="core",
            namespace=prefix,
            source="tool",
            entry_id=uuid.uuid4().hex,
        )

    def _flush(self, events: Sequence[Event]) -> None:
        if events:
            stream = memory_stream_id(self.agent)
            for _ in range(_RETRIES):
                head = self.store.stream_version(stream)
                try:
                    self.store.append(stream, events, expected_version=head)
                    break
                except ConcurrencyError:
                    continue
            else:
                raise ConcurrencyError(stream, head, -1)
        self._catch_up()

    def _catch_up(self) -> None:
        """Apply this agent's memory events not applied yet (the runner's loop)."""
        target = BackendTarget(
            self.backend, name=f"langgraph store {self.agent}", accepts=self._owns
        )
        catch_up(self.store, target)

    def _owns(self, recorded: Recorded) -> bool:
        return getattr(recorded.event, "agent", None) == self.agent

    # -- reads ---------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        self._catch_up()
        entry = self.backend.get(
            f"{_prefix(op.namespace)}/{op.key}", agents=[self.agent]
        )
        if entry is None:
            return None
        found = _item(entry)
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _entries(self, query: str | None) -> list[MemoryEntry]:
        self._catch_up()
        every = max(1, self.backend.count(agents=[self.agent]))
        if query:
            return self.backend.recall(query, agents=[self.agent], limit=every)
        rows = self.backend.list(agents=[self.agent], limit=every)
        return sorted(rows, key=lambda e: e.updated_at, reverse=True)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        found = []
        for entry in self._entries(op.query):
            namespace = tuple(entry.namespace.split("."))
            if namespace[: len(prefix)] != tuple(prefix):
                continue
            value = _DECODER.decode(entry.content)
            if op.filter and not _matches(value, op.filter):
                continue
            found.append(_item(entry, score=entry.score if op.query else None))
        return found[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {
            tuple(e.namespace.split(".")) for e in self._entries(None) if e.namespace
        }
        for condition in op.match_conditions or ():
            spaces = {
                ns
                for ns in spaces
                if _condition(ns, condition.match_type, condition.path)
            }
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        ordered = sorted(spaces)
        return ordered[op.offset : op.offset + op.limit]


def _prefix(namespace: tuple[str, ...]) -> str:
    if not namespace or any(not label or "." in label for label in namespace):
        msg = f"Expected namespace labels without '.', found {namespace!r}"
        raise ValueError(msg)
    return ".".join(namespace)


def _item(entry: MemoryEntry, *, score: float | None = None) -> SearchItem:
    namespace = tuple(entry.namespace.split("."))
    key = entry.key.removeprefix(f"{entry.namespace}/")
    return SearchItem(
        namespace=namespace,
        key=key,
        value=_DECODER.decode(entry.content),
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        score=score,
    )


def _matches(value: Any, wanted: dict[str, Any]) -> bool:
    if not isinstance(value, dict):
        return False
    for field, expected in wanted.items():
        found = value.get(field)
        if isinstance(expected, dict) and expected and all(k in _OPS for k in expected):
            try:
                if not all(_OPS[k](found, v) for k, v in expected.items()):
                    return False
            except TypeError:  # an ordering between values that have none
                return False
        elif found != expected:
            return False
    return True


def _condition(ns: tuple[str, ...], kind: str, path: Sequence[str]) -> bool:
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path) :]
    if len(part) != len(path):
        return False
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))
