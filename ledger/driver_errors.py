"""Driver errors become the ledger's typed errors, for stores outside ``ledger/``.

The view stores (``projections``) talk to SQLite and PostgreSQL directly; the
class decorator :func:`typed_driver_errors` wraps every public method so that a
driver error leaves as a :class:`~ledger.errors.StoreUnavailableError` (or its
locked / full / read-only subclasses), with the wait it took, the same as the
ledger's own backends.
"""

from __future__ import annotations

import functools
import inspect
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from turnledger.ledger.errors import LedgerError

C = TypeVar("C", bound=type)


def translate_driver_error(
    error: BaseException, *, where: str, waited: float
) -> LedgerError | None:
    """Return the typed error for a SQLite or PostgreSQL driver error, else None."""
    if isinstance(error, sqlite3.Error):
        from turnledger.ledger.sqlite import translate  # noqa: PLC0415 - no cycle

        return translate(error, where, waited)
    try:
        import psycopg  # noqa: PLC0415 - optional at import time
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    if isinstance(error, psycopg.Error):
        from turnledger.ledger.postgres import translate as pg  # noqa: PLC0415

        return pg(error, waited)
    return None


def typed_driver_errors(cls: C) -> C:
    """Wrap a store class's public methods: driver errors leave typed.

    The constructor is left alone: callers that open stores map opening errors
    to their own messages.
    """
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(method):
            continue
        setattr(cls, name, _guarded(method))
    return cls


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return method(self, *args, **kwargs)
        except LedgerError:
            raise
        except Exception as e:
            where = str(getattr(self, "path", type(self).__name__))
            typed = translate_driver_error(
                e, where=where, waited=time.monotonic() - started
            )
            if typed is None:
                raise
            raise typed from e

    return guarded
