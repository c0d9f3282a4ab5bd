"""One turn at a time per session, across processes: the session lock.

Two processes running turns in the SAME session would interleave their steps on
one stream: the engine appends each step expecting the version it last wrote,
so the slower writer's step conflicts in the middle of its turn (a half turn),
and a process opening the session while another's turn is open would "repair"
that live turn as interrupted. The engine therefore holds the session's lock
from opening the session (and repairing a crashed turn) to the turn's last
step. A second writer waits for it, then runs its turn on the history the first
left; after ``timeout`` seconds of waiting it gets :class:`SessionBusyError`
before anything of its turn is written. Turns of one session are serialized,
never interleaved; the waiting is not fair (a process turning back to back may
take the lock again first).

Guarded by:

- SQLite: an open-file-description lock (``F_OFD_SETLK``) on one byte of a lock
  file beside the ledger (``<ledger>-turnlock``), the byte picked by the session
  stream id. Each :class:`SessionLocks` opens the file once and keeps that
  descriptor (a hold locks its byte, a release unlocks it: no open or close per
  turn); locks of distinct descriptors exclude each other, so two engines in
  one process exclude each other too, and one engine's holders are excluded by
  the in-process set and a byte map. The kernel releases every lock when the
  holder dies.
- PostgreSQL: a session-level advisory lock (two-key form: the schema's hash and
  the stream's hash) on a connection of the engine's own, open only while one
  of its turns holds a lock; the server releases the lock when the connection
  closes. Holders sharing that connection (one engine's concurrent turns) are
  excluded by an in-process set first.
- Any other backend: only the in-process set (one engine, one process).

Distinct sessions whose hashes collide only wait for each other, never fail.
Waiting polls with short growing sleeps on the event loop, so it never ties up
a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import threading
import time
import weakref
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final
from uuid import UUID

from turnledger.ledger.errors import StoreUnavailableError
from turnledger.ledger.store import EventStore
from turnledger.pipeline.errors import PipelineError

DEFAULT_WAIT: Final = 60.0
"""Seconds a turn waits for its session before :class:`SessionBusyError`."""

_FIRST_POLL: Final = 0.001
_MAX_POLL: Final = 0.02
_FLOCK: Final = "hhqqi4x"  # struct flock on Linux: type, whence, start, len, pid


class SessionBusyError(PipelineError):
    """Another writer held the session for the whole wait; nothing was written."""

    def __init__(self, stream_id: UUID, waited: float) -> None:
        self.stream_id = stream_id
        self.waited = waited
        super().__init__(
            f"Expected session stream {stream_id} to be free within {waited:g} s, "
            "found another writer running a turn in it"
        )


def _byte(stream_id: UUID) -> int:
    return int.from_bytes(stream_id.bytes[:7], "big")


def _int4(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


class _FileLocks:
    """Open-file-description locks on one byte per session, on one descriptor.

    Two sessions whose bytes collide must still wait for each other, and one
    descriptor holds a byte once: ``_bytes`` says which stream holds each byte.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._bytes: dict[int, UUID] = {}
        self._closer: weakref.finalize[[int], _FileLocks] | None = None

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            # An engine dropped without close() still gives its descriptor back.
            self._closer = weakref.finalize(self, os.close, self._fd)
        return self._fd

    def try_acquire(self, stream_id: UUID) -> bool:
        byte = _byte(stream_id)
        if byte in self._bytes:  # a colliding session of this engine holds it
            return False
        lock = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
        try:
            fcntl.fcntl(self._descriptor(), fcntl.F_OFD_SETLK, lock)
        except OSError:
            return False
        self._bytes[byte] = stream_id
        return True

    def release(self, stream_id: UUID) -> None:
        byte = _byte(stream_id)
        if self._bytes.get(byte) != stream_id or self._fd is None:
            return
        del self._bytes[byte]
        unlock = struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, byte, 1, 0)
        fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, unlock)

    def close(self) -> None:
        self._bytes.clear()
        self._fd = None
        closer, self._closer = self._closer, None
        if closer is not None:
            closer()  # closing the descriptor drops every lock it holds


class _AdvisoryLocks:
    """Session-level advisory locks on a dedicated PostgreSQL connection."""

    def __init__(self, conninfo: str, schema: str) -> None:
        self._conninfo = conninfo
        self._space = _int4(zlib.crc32(f"turnledger:session:{schema}".encode()))
        self._conn: Any = None
        self._count = 0
        self._guard = threading.Lock()

    def _run(self, query: str, stream_id: UUID, change: int) -> bool:
        import psycopg  # noqa: PLC0415 - the PostgreSQL extra loads lazily

        key = _int4(zlib.crc32(stream_id.bytes))
        with self._guard:
            try:
                if self._conn is None:
                    self._conn = psycopg.connect(self._conninfo, autocommit=True)
                row = self._conn.execute(query, (self._space, key)).fetchone()
            except psycopg.Error as e:
                self._count = 0
                self._drop()  # its locks die with it
                msg = f"Cannot lock session stream {stream_id} on PostgreSQL: {e}"
                raise StoreUnavailableError(" ".join(msg.split())) from e
            done = bool(row and row[0])
            self._count = max(0, self._count + (change if done or change < 0 else 0))
            if change < 0 and self._count == 0:
                self._drop()  # open only while a turn holds (or waits for) a lock
        return done

    def settle(self) -> None:
        with self._guard:
            if self._count == 0:
                self._drop()

    def try_acquire(self, stream_id: UUID) -> bool:
        return self._run("SELECT pg_try_advisory_lock(%s, %s)", stream_id, 1)

    def release(self, stream_id: UUID) -> None:
        self._run("SELECT pg_advisory_unlock(%s, %s)", stream_id, -1)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()  # a broken connection's locks die with it

    def close(self) -> None:
        with self._guard:
            self._drop()


class _NoLocks:
    def try_acquire(self, stream_id: UUID) -> bool:
        del stream_id
        return True

    def release(self, stream_id: UUID) -> None:
        del stream_id

    def close(self) -> None:
        """Nothing to close."""


def _backend_locks(store: EventStore) -> _FileLocks | _AdvisoryLocks | _NoLocks:
    backend = store.backend
    path = getattr(backend, "path", None)
    if store.kind == "sqlite" and isinstance(path, str):
        return _FileLocks(str(Path(path).with_name(f"{Path(path).name}-turnlock")))
    url = getattr(backend, "url", None)
    if store.kind == "postgresql" and url is not None:
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415 - lazy extra

        conninfo = make_conninfo(
            host=url.host,
            port=url.port,
            dbname=url.dbname,
            user=url.user,
            password=url.password or None,
        )
        return _AdvisoryLocks(conninfo, url.schema)
    return _NoLocks()


class SessionLocks:
    """The session locks of one engine (see the module docstring).

    Args:
        store: The ledger the sessions live in (its kind picks the mechanism).
        wait: Seconds to wait for a busy session before :class:`SessionBusyError`.
        clock: Monotonic seconds (the wait's deadline).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        wait: float = DEFAULT_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.wait = wait
        self._clock = clock
        self._locks = _backend_locks(store)
        self._held: set[UUID] = set()

    def _try(self, stream_id: UUID) -> bool:
        if stream_id in self._held:
            return False
        if not self._locks.try_acquire(stream_id):
            return False
        self._held.add(stream_id)
        return True

    async def _try_off_loop(self, stream_id: UUID) -> bool:
        if isinstance(self._locks, _AdvisoryLocks):
            if stream_id in self._held:
                return False
            self._held.add(stream_id)  # reserved while the server is asked
            try:
                got = await asyncio.to_thread(self._locks.try_acquire, stream_id)
            except BaseException:
                self._held.discard(stream_id)
                raise
            if not got:
                self._held.discard(stream_id)
            return got
        return self._try(stream_id)

    @contextlib.asynccontextmanager
    async def hold(self, stream_id: UUID) -> AsyncIterator[None]:
        """Hold the session's lock for the block; wait for it first.

        Raises:
            SessionBusyError: It stayed busy for :attr:`wait` seconds (raised
                before the block runs).
            StoreUnavailableError: PostgreSQL could not be asked.
        """
        deadline = self._clock() + self.wait
        pause = _FIRST_POLL
        while not await self._try_off_loop(stream_id):
            if self._clock() >= deadline:
                if isinstance(self._locks, _AdvisoryLocks):
                    await asyncio.to_thread(self._locks.settle)
                raise SessionBusyError(stream_id, self.wait)
            await asyncio.sleep(pause)
            pause = min(_MAX_POLL, pause * 2)
        try:
            yield
        finally:
            self._held.discard(stream_id)
            if isinstance(self._locks, _AdvisoryLocks):
                await asyncio.to_thread(self._locks.release, stream_id)
            else:
                self._locks.release(stream_id)

    def close(self) -> None:
        """Release every lock and close the lock connection or descriptors."""
        self._held.clear()
        self._locks.close()
