"""SQLite files beside the ledger, encrypted with SQLCipher when a cipher key is set.

:func:`connect_file` opens the view store, a SQLite memory database or the key
store. Without a cipher key it is the standard ``sqlite3`` driver. With one it
is SQLCipher (the ``sqlcipher3`` driver of the ``sqlcipher`` extra: SQLite with
every page encrypted, AES-256 with an HMAC per page, the write-ahead log
included; temporary tables and sorts kept in memory), keyed with the file's
own raw key derived from the cipher key
(:func:`~turnledger.ledger.file_keys.derive_file_key`), set before any other
statement. Full-text search (FTS5), WAL and every query work on the open
database as on a clear one.

The key is checked at open, before anything is read or written: the database's
first page is read (SQLCipher checks its HMAC, so a wrong key fails there, not
at some later row), and a file that does not fit is refused with a one-line
:class:`~turnledger.ledger.file_keys.FileKeyError`:

- a key set, and the file in clear with content (it is never opened and kept
  in clear: the caller's message says how to encrypt or replace it);
- a key set, and the file encrypted with another key (a wrong key, or a second
  key after the first);
- no key, and the file encrypted.

:func:`encrypt_in_place` encrypts a clear file (what ``turnledger
encrypt-files`` runs on an install that had no key before).

A key set without the ``sqlcipher`` extra installed is a
:class:`~turnledger.ledger.file_keys.SQLCipherMissingError` naming it; the file
is never opened in clear.

SQLCipher's driver raises its own exception classes; the connection returned
raises the ``sqlite3`` ones instead (same class, message, error code and name),
so every ``except sqlite3.Error`` and the typed-error translation in the stores
treat both drivers alike.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Final, cast

from turnledger.ledger.errors import quote_value
from turnledger.ledger.file_keys import FileKeyError, SQLCipherMissingError
from turnledger.ledger.key_check import CIPHER_KEY_ENV

__all__ = ["SQLCIPHER_EXTRA", "connect_file", "encrypt_in_place", "is_clear_database"]

SQLCIPHER_EXTRA: Final = "pip install 'turnledger[sqlcipher]'"
"""How to install SQLCipher, as the refusal names it."""

_MAGIC: Final = b"SQLite format 3\x00"
_WAL_FIRST_PAGE: Final = 32 + 24  # the WAL header, then the first frame's header
_NOT_A_DATABASE: Final = 26  # SQLITE_NOTADB
_IN_MEMORY: Final = frozenset({"", ":memory:"})


def connect_file(
    path: str | Path,
    *,
    key: bytes | None,
    what: str,
    clear_remedy: str,
    timeout: float = 5.0,
) -> sqlite3.Connection:
    """Open a SQLite file in autocommit mode, encrypted with ``key`` if given.

    Args:
        path: The file (created when missing); ``:memory:`` is never
            encrypted (nothing is at rest).
        key: The file's raw SQLCipher key, or None for a clear file.
        what: The file's kind as messages name it (``view store``...).
        clear_remedy: What the refusal of a clear file with a key set tells
            the user to do (e.g. ``move it away: it is rebuilt...``).
        timeout: Seconds a statement waits for another writer's lock.

    Returns:
        The connection (a SQLCipher one raises ``sqlite3`` errors).

    Raises:
        FileKeyError: The file does not fit the key (see the module).
        SQLCipherMissingError: A key is given and SQLCipher is not installed.
        sqlite3.Error: The file cannot be opened (not a database, a folder...).
    """
    location = str(path)
    if key is None or location in _IN_MEMORY:
        conn = sqlite3.connect(
            location, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        if location not in _IN_MEMORY:
            _check(conn, location, keyed=False, what=what, remedy=clear_remedy)
        return conn
    cipher = _open_cipher(_sqlcipher(location, what), location, timeout)
    conn = cast("sqlite3.Connection", cipher)
    try:
        # Its first statements: no log lines on stderr, then the key (before
        # any read).
        conn.execute("PRAGMA cipher_log_level = NONE")
        conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
    except BaseException:
        conn.close()
        raise
    _check(conn, location, keyed=True, what=what, remedy=clear_remedy)
    conn.execute("PRAGMA temp_store = MEMORY")  # sorts and temp tables: no file
    return conn


def _open_cipher(driver: ModuleType, location: str, timeout: float) -> CipherConnection:
    """A SQLCipher connection; its driver's errors leave as ``sqlite3``'s."""
    try:
        raw = driver.connect(
            location, timeout=timeout, isolation_level=None, check_same_thread=False
        )
    except driver.Error as e:
        raise _as_sqlite3(e) from e
    return CipherConnection(raw, driver.Error)


def encrypt_in_place(path: str | Path, *, key: bytes, what: str) -> bool:
    """Encrypt a clear SQLite file in place with ``key``; return whether it was clear.

    The file is taken exclusively (its write-ahead log folded in and removed;
    a file another connection has open is refused as locked), copied into an
    encrypted file beside it (``sqlcipher_export``: schema, rows, indexes,
    full-text tables, ``user_version``), synced, and renamed over it while the
    lock is held. A missing, empty or already encrypted file is left alone.
    The clear file's old blocks are freed, not overwritten: the file system
    may keep them until reused.

    Raises:
        SQLCipherMissingError: SQLCipher is not installed.
        sqlite3.Error: The file is in use (locked) or cannot be read or written;
            it is left as it was.
    """
    location = Path(path)
    if not _has_content(str(location)) or not is_clear_database(location):
        return False
    driver = _sqlcipher(str(location), what)
    staging = location.with_name(f".{location.name}.encrypting")
    staging.unlink(missing_ok=True)
    source = _open_cipher(driver, str(location), 0)
    try:
        source.execute("PRAGMA locking_mode = EXCLUSIVE")
        source.execute("PRAGMA journal_mode = DELETE")  # the log folded in, removed
        source.execute("BEGIN EXCLUSIVE")
        source.execute("COMMIT")  # the exclusive lock stays until close
        version = int(source.execute("PRAGMA user_version").fetchone()[0])
        source.execute(
            f"ATTACH DATABASE ? AS encrypted KEY \"x'{key.hex()}'\"", (str(staging),)
        )
        source.execute("SELECT sqlcipher_export('encrypted')").fetchall()
        source.execute(f"PRAGMA encrypted.user_version = {version}")
        source.execute("DETACH DATABASE encrypted")
        with staging.open("rb+") as handle:
            os.fsync(handle.fileno())
        staging.replace(location)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    return True


def is_clear_database(path: str | Path) -> bool:
    """Return whether a file is a clear SQLite database (by its header).

    A database whose main file is still empty is judged by its write-ahead
    log's first page.
    """
    location = Path(path)
    head = _head(location, 0)
    if head:
        return head == _MAGIC
    return _head(Path(f"{location}-wal"), _WAL_FIRST_PAGE) == _MAGIC


def _head(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read(len(_MAGIC))
    except OSError:
        return b""


def _has_content(location: str) -> bool:
    return any(
        Path(f"{location}{suffix}").is_file()
        and Path(f"{location}{suffix}").stat().st_size > 0
        for suffix in ("", "-wal")
    )


def _check(
    conn: sqlite3.Connection, location: str, *, keyed: bool, what: str, remedy: str
) -> None:
    """Read the first page; refuse a file that does not fit the key (closed then)."""
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        refusal = _refusal(e, location, keyed=keyed, what=what, remedy=remedy)
        conn.close()
        if refusal is None:
            raise
        raise refusal from None
    except BaseException:
        conn.close()
        raise


def _refusal(
    error: sqlite3.DatabaseError,
    location: str,
    *,
    keyed: bool,
    what: str,
    remedy: str,
) -> FileKeyError | None:
    if getattr(error, "sqlite_errorcode", None) != _NOT_A_DATABASE or not (
        _has_content(location)
    ):
        return None
    where = f"the {what} at {quote_value(location)}"
    clear = is_clear_database(location)
    if keyed and clear:
        msg = (
            f"Expected {where} encrypted ({CIPHER_KEY_ENV} is set), found it in"
            f" clear: {remedy}; nothing was read or written"
        )
    elif keyed:
        msg = (
            f"Expected {where} to decrypt with the cipher key ({CIPHER_KEY_ENV}),"
            " found it does not: it was encrypted with another key (or is no"
            " database); nothing was read or written"
        )
    elif not clear:
        msg = (
            f"Expected a cipher key ({CIPHER_KEY_ENV}) for {where}, found none:"
            " the file is encrypted (or is no database); nothing was read or"
            " written"
        )
    else:
        return None  # a clear file that is damaged: the driver's error stands
    return FileKeyError(msg, path=location)


def _sqlcipher(location: str, what: str) -> ModuleType:
    try:
        return importlib.import_module("sqlcipher3.dbapi2")
    except ImportError:
        msg = (
            f"Expected SQLCipher to encrypt the {what} at {quote_value(location)}"
            f" ({CIPHER_KEY_ENV} is set), found it not installed:"
            f" {SQLCIPHER_EXTRA}"
        )
        raise SQLCipherMissingError(msg) from None


def _as_sqlite3(error: BaseException) -> sqlite3.Error:
    """The ``sqlite3`` exception of the same class, message and error code."""
    kind = getattr(sqlite3, type(error).__name__, sqlite3.Error)
    if not (isinstance(kind, type) and issubclass(kind, sqlite3.Error)):
        kind = sqlite3.Error
    translated = kind(*error.args)
    for name in ("sqlite_errorcode", "sqlite_errorname"):
        if hasattr(error, name):
            setattr(translated, name, getattr(error, name))
    return translated


def _translated(errors: type[Exception], method: Callable[..., Any], *args: Any) -> Any:
    """Call ``method``; the driver's ``errors`` leave as the ``sqlite3`` ones."""
    try:
        return method(*args)
    except errors as e:
        raise _as_sqlite3(e) from e


class CipherConnection:
    """A SQLCipher connection that raises the ``sqlite3`` driver's errors.

    Args:
        raw: The ``sqlcipher3`` connection.
        errors: Its driver's base exception class.
    """

    __slots__ = ("_errors", "_raw")

    def __init__(self, raw: Any, errors: type[Exception]) -> None:
        self._raw = raw
        self._errors = errors

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        return _translated(self._errors, method, *args)

    def execute(self, sql: str, parameters: Any = ()) -> CipherCursor:
        """Run one statement; return its cursor."""
        return CipherCursor(
            self._call(self._raw.execute, sql, parameters), self._errors
        )

    def executemany(self, sql: str, rows: Any) -> CipherCursor:
        """Run one statement for each row of parameters."""
        return CipherCursor(self._call(self._raw.executemany, sql, rows), self._errors)

    def executescript(self, script: str) -> CipherCursor:
        """Run statements separated by semicolons."""
        return CipherCursor(self._call(self._raw.executescript, script), self._errors)

    def backup(self, target: CipherConnection, **options: Any) -> None:
        """Copy the database into another SQLCipher connection (keyed alike)."""
        try:
            self._raw.backup(target._raw, **options)
        except self._errors as e:
            raise _as_sqlite3(e) from e

    def close(self) -> None:
        """Close the connection."""
        self._call(self._raw.close)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open."""
        return bool(self._raw.in_transaction)

    @property
    def total_changes(self) -> int:
        """Rows changed since the connection opened."""
        return int(self._raw.total_changes)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._raw, name)
        if not callable(value):
            return value
        return lambda *args: self._call(value, *args)


class CipherCursor:
    """A SQLCipher cursor that raises the ``sqlite3`` driver's errors."""

    __slots__ = ("_errors", "_raw")

    def __init__(self, raw: Any, errors: type[Exception]) -> None:
        self._raw = raw
        self._errors = errors

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        return _translated(self._errors, method, *args)

    def execute(self, sql: str, parameters: Any = ()) -> CipherCursor:
        """Run one statement on this cursor."""
        self._call(self._raw.execute, sql, parameters)
        return self

    def executemany(self, sql: str, rows: Any) -> CipherCursor:
        """Run one statement for each row of parameters on this cursor."""
        self._call(self._raw.executemany, sql, rows)
        return self

    def fetchone(self) -> Any:
        """Return the next row, or None."""
        return self._call(self._raw.fetchone)

    def fetchall(self) -> list[Any]:
        """Return the remaining rows."""
        return cast("list[Any]", self._call(self._raw.fetchall))

    def close(self) -> None:
        """Close the cursor."""
        self._call(self._raw.close)

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed."""
        return int(self._raw.rowcount)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._raw, name)
        if not callable(value):
            return value
        return lambda *args: self._call(value, *args)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return self._call(next, self._raw)
