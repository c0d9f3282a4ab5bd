"""The async facade: one writer thread, fed by a queue, that group-commits.

Concurrent sessions call :meth:`AsyncLedger.append` from the event loop. Events are
validated and encoded right there (an invalid event fails at once, with no thread
hop); the encoded append joins the loop's current batch, which is handed to the
single writer thread once per event-loop iteration (``call_soon``: the appends
every task made in this iteration travel together, and an idle ledger waits for
nothing but the end of the current iteration). The writer takes everything
queued (up to ``max_group`` appends; what arrived while the previous commit's
fsync ran included), writes it in ONE transaction (a savepoint per append, so a
version conflict fails only its own append) and acknowledges every caller only
after that transaction's single commit, with one wake-up per event loop. Reads
run in a worker thread (one hop each).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Sequence
from types import TracebackType
from typing import Final, NamedTuple, Self
from uuid import UUID

from turnledger.ledger.backend import AppendRequest
from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.errors import LedgerError
from turnledger.ledger.events import Event
from turnledger.ledger.frame import now_us
from turnledger.ledger.store import EventStore, check_version

_STOP: Final = object()
_new_job: Final = tuple.__new__  # a NamedTuple built without its Python __new__


class _Job(NamedTuple):
    request: AppendRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[AppendResult]


class AsyncLedger:
    """Async access to an :class:`~ledger.store.EventStore` with group commit.

    Args:
        store: The store to write to.
        max_group: The most appends one transaction takes.
        close_store: Whether :meth:`aclose` also closes the store.
    """

    def __init__(
        self, store: EventStore, *, max_group: int = 512, close_store: bool = True
    ) -> None:
        self.store = store
        self.close_store = close_store
        self.max_group = max_group
        self.groups_committed = 0
        self.appends_committed = 0
        self._queue: queue.SimpleQueue[list[_Job] | object] = queue.SimpleQueue()
        self._batches: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._closed = False
        self._stopping = False
        self._writer = threading.Thread(
            target=self._run, name="turnledger-writer", daemon=True
        )
        self._writer.start()

    async def append(
        self,
        stream_id: UUID,
        events: Sequence[Event],
        *,
        expected_version: int,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append events to a stream; returns once they are durable.

        ``idempotency_key`` works as in :meth:`EventStore.append`, inside the
        group commit too: a key already committed (or used earlier in the same
        group) returns the first result and writes nothing.

        Raises:
            ConcurrencyError: The stream is not at ``expected_version``.
            IdempotencyKeyError: The key was first used on another stream.
            InvalidEventError: An event fails validation (raised before queueing);
                :class:`~ledger.errors.InvalidArgumentError` when an argument is
                ``None`` or of the wrong type (:func:`~ledger.store.check_append`),
                :class:`~ledger.errors.InvalidIdError` when an identifier holds a
                control character.
            LedgerError: The ledger is closed.
        """
        if self._closed:
            msg = "Expected an open ledger, found it closed"
            raise LedgerError(msg)
        check_version(expected_version)
        request = self.store.encode(
            stream_id, events, expected_version + 1, now_us(), idempotency_key
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        batch = self._batches.get(loop)
        if batch is None:
            batch = self._batches[loop] = []
            loop.call_soon(self._flush, loop)
        batch.append(_new_job(_Job, (request, loop, future)))
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the loop's batch to the writer (runs on the loop, once per batch)."""
        batch = self._batches.pop(loop, None)
        if not batch:
            return
        if self._writer.is_alive() and not self._stopping:
            self._queue.put(batch)
            return
        closed = LedgerError("Expected an open ledger, found it closed")
        for job in batch:
            _fail(job.future, closed)

    async def read_stream(
        self, stream_id: UUID, *, after: int = 0, until: int | None = None
    ) -> list[Recorded]:
        """Return a stream's events after ``after`` (read in a worker thread)."""
        return await asyncio.to_thread(
            self.store.read_stream, stream_id, after=after, until=until
        )

    async def read_all(self, *, after: int = 0, limit: int = 500) -> list[Recorded]:
        """Return one page of the global log after ``after``."""
        return await asyncio.to_thread(self.store.read_all, after=after, limit=limit)

    async def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version."""
        return await asyncio.to_thread(self.store.stream_version, stream_id)

    async def aclose(self) -> None:
        """Finish queued appends, stop the writer and close the store."""
        if self._closed:
            return
        self._closed = True
        self._flush(asyncio.get_running_loop())  # appends already made go first
        self._stopping = True
        self._queue.put(_STOP)
        await asyncio.to_thread(self._writer.join)
        if self.close_store:
            self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _run(self) -> None:
        backlog: deque[_Job] = deque()
        stopping = False
        while not (stopping and not backlog):
            if not backlog and not stopping:
                stopping = self._take(self._queue.get(), backlog)
            # The only consumer: a queue that is not empty has an item to take
            # (no queue.Empty raised on every group).
            while len(backlog) < self.max_group and not stopping:
                if self._queue.empty():
                    break
                stopping = self._take(self._queue.get_nowait(), backlog)
            size = min(len(backlog), self.max_group)
            if size:
                self._commit([backlog.popleft() for _ in range(size)])

    @staticmethod
    def _take(item: object, backlog: deque[_Job]) -> bool:
        """Add a queued batch to the backlog; whether the item was the stop mark."""
        if item is _STOP:
            return True
        if isinstance(item, list):
            backlog.extend(item)
        return False

    def _commit(self, jobs: list[_Job]) -> None:
        try:
            results = self.store.write_requests([job.request for job in jobs])
        except BaseException as e:  # noqa: BLE001 - every waiting caller must hear of it
            for job in jobs:
                job.loop.call_soon_threadsafe(_fail, job.future, e)
            return
        self.groups_committed += 1
        self.appends_committed += sum(1 for r in results if isinstance(r, AppendResult))
        # One wake-up per event loop, not per caller.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, object]]] = {}
        for job, result in zip(jobs, results, strict=True):
            by_loop.setdefault(job.loop, []).append((job, result))
        for loop, settled in by_loop.items():
            loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: list[tuple[_Job, object]]) -> None:
    for job, result in settled:
        future = job.future
        if future.done():  # its caller was cancelled
            continue
        if isinstance(result, AppendResult):
            future.set_result(result)
        else:
            future.set_exception(result)  # type: ignore[arg-type]


def _fail(future: asyncio.Future[AppendResult], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
