"""The memory backends' typed errors: no driver error leaves a memory store.

Every backend class (SQLite, PostgreSQL, Qdrant, Markdown, Lucid) and the key
store is decorated with :func:`typed_memory_errors`: a ``sqlite3.Error``,
``psycopg.Error``, ``OSError``, qdrant-client ``ApiException`` (a server's
answer or an unreachable server) or qdrant-client local mode's "folder already
accessed" / "instance is closed" ``RuntimeError`` raised by its constructor or
any public method leaves as a :class:`MemoryStoreError` (or its locked / full /
read-only subclasses), naming the store (a URL without its credentials) and the
wait it took. The busy timeout is the stores' own: 5 s for SQLite
(``busy_timeout``) and the key store, ``lock_timeout`` 5 s for PostgreSQL;
qdrant-client's folder lock does not wait. The tree is rooted in the
ledger's :class:`~turnledger.ledger.errors.StoreUnavailableError`, so
``except LedgerLockedError`` (and the CLI's ``except LedgerError``: one line on
stderr, exit 2) catch a memory store's failures as they catch the ledger's.

Errors that are ours (``ValueError`` for bad arguments, ``LedgerError``
subclasses raised inside a nested store) pass through unchanged.
"""

from __future__ import annotations

import errno
import functools
import inspect
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from turnledger.ledger.errors import (
    LedgerError,
    LedgerFullError,
    LedgerLockedError,
    LedgerReadOnlyError,
    StoreUnavailableError,
)

C = TypeVar("C", bound=type)

_READ_ONLY_ERRNOS: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class MemoryStoreError(StoreUnavailableError):
    """A memory store (or the key store) failed; the operation took no effect.

    Attributes:
        store: Which store, e.g. ``sqlite memory store at 'x.memory.db'``.
    """

    def __init__(self, message: str, *, store: str) -> None:
        self.store = store
        super().__init__(message)


class MemoryLockedError(MemoryStoreError, LedgerLockedError):
    """Another writer held the memory store's lock for the whole busy timeout."""


class MemoryFullError(MemoryStoreError, LedgerFullError):
    """The memory store's disk (or size limit) is full; nothing was written."""


class MemoryReadOnlyError(MemoryStoreError, LedgerReadOnlyError):
    """The memory store's file or database refuses writes; nothing was written."""


def translate_memory_error(
    error: BaseException, *, store: str, waited: float
) -> MemoryStoreError | None:
    """Return the typed error for a driver or file-system error, else None.

    Args:
        error: What the driver, client or file system raised.
        store: The store, as a message names it.
        waited: Seconds the failed call took (the real wait when locked).
    """
    kind = _classify(error)
    if kind is None:
        return None
    detail = " ".join(str(error).split()) or type(error).__name__
    if kind == "locked":
        return MemoryLockedError(
            f"the {store} is locked by another writer (waited {round(waited)} s)",
            store=store,
        )
    if kind == "full":
        return MemoryFullError(
            f"the {store} is full (disk or size limit): {detail}; nothing was written",
            store=store,
        )
    if kind == "read-only":
        return MemoryReadOnlyError(
            f"the {store} refuses writes (read-only): {detail}; nothing was written",
            store=store,
        )
    return MemoryStoreError(f"the {store} failed: {detail}", store=store)


def _classify(error: BaseException) -> str | None:
    if isinstance(error, sqlite3.Error):
        return _sqlite_kind(error)
    if isinstance(error, OSError):
        if error.errno in _FULL_ERRNOS:
            return "full"
        if error.errno in _READ_ONLY_ERRNOS:
            return "read-only"
        return "failed"
    pg = _postgres_kind(error)
    if pg is not None:
        return pg
    if _is_qdrant_error(error):
        return "failed"
    if isinstance(error, RuntimeError):
        text = str(error)
        if "already accessed by another instance" in text:
            return "locked"  # qdrant-client's local mode: the folder's lock
        if "QdrantLocal instance is closed" in text:
            return "failed"
    return None


def _sqlite_kind(error: sqlite3.Error) -> str:
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(error).lower()
    if primary in {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED} or (
        primary is None and ("locked" in text or "busy" in text)
    ):
        return "locked"
    if primary == sqlite3.SQLITE_FULL or (primary is None and "full" in text):
        return "full"
    if primary == sqlite3.SQLITE_READONLY or (primary is None and "readonly" in text):
        return "read-only"
    return "failed"


def _postgres_kind(error: BaseException) -> str | None:
    try:
        import psycopg  # noqa: PLC0415 - optional at import time
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    if not isinstance(error, psycopg.Error):
        return None
    if isinstance(error, psycopg.errors.LockNotAvailable):
        return "locked"
    if isinstance(error, psycopg.errors.DiskFull):
        return "full"
    if isinstance(error, psycopg.errors.ReadOnlySqlTransaction):
        return "read-only"
    return "failed"


def _is_qdrant_error(error: BaseException) -> bool:
    try:
        from qdrant_client.http.exceptions import ApiException  # noqa: PLC0415
    except ImportError:  # pragma: no cover - an optional extra
        return False
    return isinstance(error, ApiException)


def typed_memory_errors(backend: str) -> Callable[[C], C]:
    """Wrap a store class's constructor and public methods: errors leave typed.

    The constructor's ``path`` / ``workspace_root`` / ``url`` / ``location``
    argument (a URL without its credentials) is what messages name.

    Args:
        backend: The store's kind as messages name it (``sqlite``, ``qdrant``,
            ``key`` for the key store...).

    Returns:
        The class decorator.
    """

    def decorate(cls: C) -> C:
        for name, method in list(vars(cls).items()):
            if not inspect.isfunction(method):
                continue
            if name.startswith("_") and name != "__init__":
                continue
            setattr(cls, name, _guarded(method, backend))
        return cls

    return decorate


_LOCATION: Final = "_memory_store_location"


def _guarded(method: Callable[..., Any], backend: str) -> Callable[..., Any]:
    opening = method.__name__ == "__init__"

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        if opening:
            vars(self).setdefault(_LOCATION, _location(method, args, kwargs))
        try:
            return method(self, *args, **kwargs)
        except LedgerError:
            raise
        except Exception as e:
            location = vars(self).get(_LOCATION)
            label = (
                "memory key store" if backend == "key" else f"{backend} memory store"
            )
            store = label if not location else f"{label} at {location!r}"
            typed = translate_memory_error(
                e, store=store, waited=time.monotonic() - started
            )
            if typed is None:
                raise
            raise typed from e

    return guarded


def _location(
    method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str | None:
    """The path / URL a constructor was given (a URL without credentials)."""
    try:
        bound = inspect.signature(method).bind(None, *args, **kwargs)
    except TypeError:
        return None
    for name in ("path", "workspace_root", "url", "location"):
        value = bound.arguments.get(name)
        if value is not None:
            return _without_credentials(str(value))
    return None


def _without_credentials(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.partition("/")[0]:
        return url
    return f"{scheme}://{rest.partition('@')[2]}"
