"""Vectors off the write path: the thread that embeds the rows lacking one.

A memory backend writes its row (keywords included) without a vector and wakes a
:class:`Backfill`; the backfill's thread (started by the first wake) waits until
the wakes have paused for :data:`SETTLE_SECONDS` (or :data:`MAX_DEFER_SECONDS`
after a wake, however busy the writes are), then runs the backend's batch
function, cursor after cursor, until a batch finds no row or embeds none (the
embedder fails: the rows wait for the next wake). A wake that arrives between
batches has it wait for the writes to pause again. :meth:`Backfill.drain` runs
the same batches on the caller's thread (``reindex``, a rebuild);
:meth:`Backfill.stop` ends the thread after the batch under way, then drains for
a bounded time (a handle's close).

The batch function is the backend's: it reads the next rows lacking a vector
after the cursor, embeds them outside any transaction, and commits the vectors
of the rows still holding the text it embedded. It returns the next cursor, how
many rows it read and how many got a vector. One batch runs at a time, from any
thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, Generic, TypeAlias, TypeVar

SETTLE_SECONDS: Final = 0.05
"""How long the writes must have paused before the thread embeds: a run of
writes is embedded in a few batches instead of one row at a time, and the
thread's tokenising (Python, under the GIL) does not slow the writes."""

MAX_DEFER_SECONDS: Final = 1.0
"""The longest the thread defers a batch to writes that do not pause (then it
embeds one batch and defers again)."""

Cursor = TypeVar("Cursor")

Batch: TypeAlias = Callable[[Cursor], tuple[Cursor, int, int]]
"""``batch(after) -> (next cursor, rows read, rows embedded)``."""

Progress: TypeAlias = Callable[[int, int], None]
"""Called with ``(rows done, rows to do)`` after each batch of a drain."""


class Backfill(Generic[Cursor]):
    """Runs a backend's embedding batches on a thread of its own, or on request.

    Args:
        batch: The backend's batch function (see the module's doc).
        start: The cursor a pass starts from (before every row).
        on_error: Called with what the thread's batch raised (the thread then
            waits for the next wake; the rows keep waiting).
        name: The thread's name.
    """

    def __init__(
        self,
        batch: Batch[Cursor],
        start: Cursor,
        on_error: Callable[[Exception], None],
        *,
        name: str = "memory-vectors",
    ) -> None:
        self._batch_fn = batch
        self._start = start
        self._on_error = on_error
        self._name = name
        self._batch_lock = threading.Lock()  # one batch at a time, any thread
        # The thread's state, under one condition: a wake asked for
        # (``_wanted``), a stop asked for (``_stopping``), the thread itself.
        self._signal = threading.Condition(threading.Lock())
        self._wanted = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the thread has been started and not stopped."""
        with self._signal:
            return self._thread is not None

    def wake(self) -> None:
        """Have the thread embed the rows lacking vectors (soon); starts it once."""
        with self._signal:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=self._name, daemon=True
                )
                self._thread.start()
            self._wanted = True
            self._signal.notify()

    def batch(self, after: Cursor) -> tuple[Cursor, int, int]:
        """Run one batch after ``after`` (waits for one under way elsewhere)."""
        with self._batch_lock:
            return self._batch_fn(after)

    def drain(
        self,
        total: int,
        progress: Progress | None = None,
        *,
        deadline: float | None = None,
    ) -> int:
        """Run batches on this thread until one reads no row; return rows embedded.

        Each row is tried once (a cursor pass); one whose embedding fails stays
        without a vector.

        Args:
            total: How many rows lack a vector (what ``progress`` counts to).
            progress: Called with ``(rows done, rows to do)`` after each batch.
            deadline: A ``time.monotonic()`` after which no batch starts.
        """
        after = self._start
        tried, done = 0, 0
        while deadline is None or time.monotonic() < deadline:
            after, rows, embedded = self.batch(after)
            if not rows:
                break
            tried, done = tried + rows, done + embedded
            if progress is not None:
                progress(tried, max(total, tried))
        return done

    def stop(
        self, drain_seconds: float = 0.0, pending: Callable[[], int] | None = None
    ) -> None:
        """End the thread (its batch under way is committed), then drain a while.

        After the first stop, rows lacking vectors are embedded on this thread
        for up to ``drain_seconds`` (no batch starts after; ``pending`` counts
        them for the drain). The rest wait for a later handle (its thread,
        woken by its first write; its close) or ``reindex``. A drain that fails
        (a full disk, a lost server) goes to ``on_error``, never raised: the
        rows were committed, only their vectors wait.
        """
        deadline = time.monotonic() + drain_seconds
        with self._signal:
            first = not self._stopping  # a second stop does nothing
            self._stopping = True
            self._signal.notify()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if first and drain_seconds > 0:
            try:
                self.drain(pending() if pending else 0, deadline=deadline)
            except Exception as e:  # noqa: BLE001 - the writes are durable; the vectors wait
                self._on_error(e)

    def _run(self) -> None:
        """The thread: on each wake, a pass over every row lacking a vector.

        Between batches, a write that woke it meanwhile has it wait for the
        writes to pause again (:meth:`_settle`).
        """
        while self._next_wake():
            after = self._start
            while not self._stopping:
                try:
                    after, rows, embedded = self.batch(after)
                except Exception as e:  # noqa: BLE001 - the thread must not die; the rows wait for the next wake
                    self._on_error(e)
                    break
                if not rows or not embedded:  # done, or the embedder fails
                    break
                if self._wanted and not self._settle():  # a writer is busy
                    return

    def _next_wake(self) -> bool:
        """Wait for a wake, then for the writes to pause; False once stopping."""
        with self._signal:
            self._signal.wait_for(lambda: self._wanted or self._stopping)
        return self._settle()

    def _settle(self) -> bool:
        """Wait until no write has woken the thread for :data:`SETTLE_SECONDS`.

        At most :data:`MAX_DEFER_SECONDS`; False once stopping. The wake is
        taken (``_wanted`` cleared) before the batches read the rows, so a
        write committed after that read wakes the thread again; the stop flag
        is read under the same condition, so a stop is never missed between
        the two (a lost stop would hang :meth:`stop`).
        """
        with self._signal:
            deadline = time.monotonic() + MAX_DEFER_SECONDS
            while not self._stopping:
                self._wanted = False
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                woken = self._signal.wait_for(
                    lambda: self._stopping or self._wanted, min(SETTLE_SECONDS, left)
                )
                if not woken:
                    return True  # the writes paused
            return False
