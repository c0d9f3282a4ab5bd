"""The erasure key store: one data key per erasable subject, destroyable.

Every payload of an erasable subject is sealed under a data key of its own
(:mod:`ledger.erasable`); the keys live here, and nowhere else. Destroying a
key (:meth:`SubjectKeyStore.destroy`) makes every row sealed under it unreadable
by anyone, while the rows, their hash chain and every other event stay as
they were.

A key row says whose key it is: a **session** key (one per session stream,
listed with its agent and session key), a **memory** key (one per
``memory.stored`` event, listed with its agent, memory key and the session key
that wrote it) or a **knowledge** key (one per ``knowledge.captured`` triple,
listed with its agent). Erasing a session, an agent or a user key
destroys the rows that name them (:meth:`SubjectKeyStore.select`); a session
stream erased keeps a tombstone naming its stream and agent alias only, so a
session that goes on after its erasure gets a new key still listed under its
agent.

Where it lives: beside a SQLite ledger, ``<ledger stem>.erasure-keys.db``
(``secure_delete`` on, rollback journal, ``VACUUM`` after each destruction, so
no page keeps a destroyed key); with a PostgreSQL ledger, the table
``turnledger_subject_keys`` in the ledger's schema (``VACUUM FULL`` after each
destruction). It is bound to its ledger's id: a key store of another ledger is
refused at open (:class:`ErasureKeysError`). With a cipher key set, every data
key is stored wrapped (AES-GCM under a key derived from the cipher key by
HKDF-SHA256, label ``turnledger erasure keys``), and the SQLite file is a
SQLCipher database keyed with its own derived key (``ledger.file_keys``), so
the subjects it lists are not in clear either.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, TypeAlias
from uuid import UUID

from turnledger.ledger.errors import LedgerError, StoreUnavailableError
from turnledger.ledger.file_keys import derive_file_key
from turnledger.ledger.sqlite.encrypted import connect_file

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_ID_BYTES: Final = 16
"""A data key's id: 16 random bytes, written at the head of every sealed body."""

CACHED: Final = 65_536
"""The most secrets (and session keys) a SQLite store keeps cached (then it
starts over)."""

KeyKind: TypeAlias = Literal["session", "memory", "knowledge"]

TABLE: Final = "turnledger_subject_keys"
TOMBSTONES: Final = "turnledger_erased_streams"
META: Final = "turnledger_subject_keys_meta"

_WRAP_LABEL: Final = b"turnledger erasure keys"
_NONCE: Final = 12


class ErasureKeysError(LedgerError):
    """The erasure key store does not fit its ledger (another's, or missing)."""


class KeyRow(NamedTuple):
    """One data key as listed (never its secret)."""

    key_id: bytes
    kind: KeyKind
    stream_id: str
    agent: str
    subject: str
    session: str


def keys_path(ledger_path: str) -> str:
    """Return the key store file beside a SQLite ledger file."""
    path = Path(ledger_path)
    return str(path.with_name(path.stem + ".erasure-keys.db"))


class SubjectKeyStore:
    """Data keys of erasable subjects, in a SQLite file or a PostgreSQL table.

    Args:
        conn: An autocommit DB-API connection (``sqlite3`` or ``psycopg``).
        dialect: ``sqlite`` or ``postgresql``.
        where: The file or the ``schema.table`` the messages name.
        ledger_id: The ledger's id the store is bound to (``None``: not bound).
        wrap_key: The raw cipher key whose derived key wraps the data keys
            (``None``: stored as they are).
        schema: The PostgreSQL schema of the tables.

    Raises:
        ErasureKeysError: The store records another ledger's id.
    """

    def __init__(
        self,
        conn: Any,
        *,
        dialect: Literal["sqlite", "postgresql"],
        where: str,
        ledger_id: str | None,
        wrap_key: bytes | None,
        schema: str = "",
    ) -> None:
        self._conn = conn
        self.dialect = dialect
        self.where = where
        self._lock = threading.Lock()
        self._secrets: dict[bytes, bytes | None] = {}
        self._sessions: dict[UUID, tuple[bytes, bytes] | None] = {}
        self._version: object = None
        self._generation = 0  # bumped whenever the caches are forgotten
        self._wrap = _wrapper(wrap_key)
        prefix = f'"{schema}".' if schema else ""
        self._keys = prefix + TABLE
        self._tombs = prefix + TOMBSTONES
        self._meta = prefix + META
        blob = "BLOB" if dialect == "sqlite" else "BYTEA"
        self._run(
            f"CREATE TABLE IF NOT EXISTS {self._keys} (key_id {blob} PRIMARY KEY, "
            "kind TEXT NOT NULL, stream_id TEXT NOT NULL, agent TEXT NOT NULL, "
            f"subject TEXT NOT NULL, session TEXT NOT NULL, secret {blob} NOT NULL)"
        )
        self._run(
            f"CREATE INDEX IF NOT EXISTS {TABLE}_stream "
            f"ON {self._keys} (stream_id, kind)"
        )
        self._run(
            f"CREATE TABLE IF NOT EXISTS {self._tombs} "
            "(stream_id TEXT PRIMARY KEY, agent TEXT NOT NULL)"
        )
        self._run(
            f"CREATE TABLE IF NOT EXISTS {self._meta} "
            "(name TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        if ledger_id is not None:
            self._bind(ledger_id)

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def _run(self, sql: str, params: Sequence[object] = ()) -> int:
        with self._lock:
            try:
                cursor = self._conn.execute(self._sql(sql), params)
            except Exception as e:
                raise _unavailable(self.where, e) from e
            return int(cursor.rowcount or 0)

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._conn.execute(self._sql(sql), params).fetchall())
            except Exception as e:
                raise _unavailable(self.where, e) from e

    def _bind(self, ledger_id: str) -> None:
        conflict = "ON CONFLICT (name) DO NOTHING"
        self._run(
            f"INSERT INTO {self._meta} VALUES ('ledger_id', ?) {conflict}", (ledger_id,)
        )
        found = self._rows(f"SELECT value FROM {self._meta} WHERE name = 'ledger_id'")
        recorded = str(found[0][0])
        if recorded != ledger_id:
            msg = (
                f"Expected the erasure key store {self.where!r} of ledger {ledger_id},"
                f" found the key store of ledger {recorded[:64]}: its keys open"
                " another ledger's sealed events; nothing was written"
            )
            raise ErasureKeysError(msg)

    def session_key(self, stream_id: UUID) -> tuple[bytes, bytes] | None:
        """Return the live key ``(id, secret)`` of a session stream, if any.

        A SQLite store remembers the answer while no other connection changed
        the file (see :meth:`reader`); its own keys created and destroyed
        update it.
        """
        generation = -1
        if self.dialect == "sqlite":
            with self._lock:
                self._fresh()
                if stream_id in self._sessions:
                    return self._sessions[stream_id]
                generation = self._generation
        rows = self._rows(
            f"SELECT key_id, secret FROM {self._keys} "
            "WHERE stream_id = ? AND kind = 'session'",
            (str(stream_id),),
        )
        found = None
        if rows:
            key_id = bytes(rows[0][0])
            found = key_id, self._unwrap(key_id, bytes(rows[0][1]))
        with self._lock:
            # Not when the caches were forgotten meanwhile (a key destroyed).
            if generation == self._generation:
                if len(self._sessions) >= CACHED:
                    self._sessions.clear()
                self._sessions[stream_id] = found
        return found

    def tombstone(self, stream_id: UUID) -> str | None:
        """Return the agent of an erased session stream (``None``: not erased)."""
        rows = self._rows(
            f"SELECT agent FROM {self._tombs} WHERE stream_id = ?", (str(stream_id),)
        )
        return str(rows[0][0]) if rows else None

    def agents(self) -> list[str]:
        """Return every agent a key or a tombstone names."""
        rows = self._rows(
            f"SELECT agent FROM {self._keys} UNION SELECT agent FROM {self._tombs}"
        )
        return sorted({str(r[0]) for r in rows if r[0]})

    def create(
        self,
        kind: KeyKind,
        stream_id: UUID,
        *,
        agent: str,
        subject: str,
        session: str = "",
    ) -> tuple[bytes, bytes]:
        """Create and record a new data key; return ``(id, secret)``."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415

        key_id = os.urandom(KEY_ID_BYTES)
        secret = AESGCM.generate_key(bit_length=256)
        self._run(
            f"INSERT INTO {self._keys} VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key_id,
                kind,
                str(stream_id),
                agent,
                subject,
                session,
                self._wrap_secret(key_id, secret),
            ),
        )
        if kind == "session" and self.dialect == "sqlite":
            with self._lock:
                self._sessions[stream_id] = key_id, secret
        return key_id, secret

    def reader(self) -> Callable[[bytes], bytes | None]:
        """Return a lookup of data keys' secrets for one read call.

        The lookup returns a key's secret, or ``None`` once it was destroyed.
        A SQLite store keeps the secrets it read while no other connection
        changed the file: its ``PRAGMA data_version`` is read here, once, not at
        each lookup, so a key another connection destroys after this call reads
        as live through the returned lookup (the read started before the
        erasure committed), and as destroyed through every lookup made after
        the commit; its own destruction forgets them at once. A PostgreSQL
        store has no such cache: each lookup is a SELECT.
        """
        if self.dialect == "sqlite":
            with self._lock:
                self._fresh()
        return self._secret

    def _fresh(self) -> None:
        """Forget the cached keys if another connection changed the file.

        Call with the lock held (SQLite only).
        """
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._forget()
            self._version = version

    def _forget(self) -> None:
        """Forget the cached keys (call with the lock held)."""
        self._secrets.clear()
        self._sessions.clear()
        self._generation += 1

    def _secret(self, key_id: bytes) -> bytes | None:
        generation = -1
        if self.dialect == "sqlite":
            with self._lock:
                if key_id in self._secrets:
                    return self._secrets[key_id]
                generation = self._generation
        rows = self._rows(
            f"SELECT secret FROM {self._keys} WHERE key_id = ?", (key_id,)
        )
        found = self._unwrap(key_id, bytes(rows[0][0])) if rows else None
        with self._lock:
            # Not when the caches were forgotten meanwhile (a key destroyed).
            if generation == self._generation:
                if len(self._secrets) >= CACHED:
                    self._secrets.clear()
                self._secrets[key_id] = found
        return found

    def select(
        self,
        *,
        stream_ids: Sequence[str] = (),
        agent: str | None = None,
        session: str | None = None,
        memory_key: str | None = None,
        key_ids: Sequence[bytes] = (),
    ) -> list[KeyRow]:
        """List the keys of a subject (never their secrets).

        ``stream_ids``: the session keys of those streams and the memory keys
        their sessions wrote (``agent`` and ``session`` name the writer);
        ``agent`` alone: every key of the agent; ``session`` alone (a user
        key): every key of a session under that key, any agent, and the memory
        keys such sessions wrote; ``agent`` and ``memory_key``: that entry's keys;
        ``key_ids``: those keys.
        """
        columns = "key_id, kind, stream_id, agent, subject, session"
        if key_ids:
            marks = ", ".join("?" * len(key_ids))
            rows = self._rows(
                f"SELECT {columns} FROM {self._keys} WHERE key_id IN ({marks})",
                tuple(key_ids),
            )
        elif memory_key is not None:
            rows = self._rows(
                f"SELECT {columns} FROM {self._keys} WHERE kind = 'memory' "
                "AND agent = ? AND subject = ?",
                (agent or "", memory_key),
            )
        elif stream_ids:
            marks = ", ".join("?" * len(stream_ids))
            rows = self._rows(
                f"SELECT {columns} FROM {self._keys} WHERE (kind = 'session' "
                f"AND stream_id IN ({marks})) OR (kind = 'memory' AND agent = ? "
                "AND session = ?)",
                (*stream_ids, agent or "", session or ""),
            )
        elif session is not None:
            rows = self._rows(
                f"SELECT {columns} FROM {self._keys} WHERE (kind = 'session' "
                "AND subject = ?) OR (kind = 'memory' AND session = ?)",
                (session, session),
            )
        else:
            rows = self._rows(
                f"SELECT {columns} FROM {self._keys} WHERE agent = ?", (agent or "",)
            )
        return [
            KeyRow(bytes(r[0]), r[1], str(r[2]), str(r[3]), str(r[4]), str(r[5]))
            for r in rows
        ]

    def destroy(self, rows: Sequence[KeyRow]) -> int:
        """Destroy keys (and tombstone their session streams); return how many.

        The rows are deleted in one transaction, then the store is compacted
        (SQLite: ``VACUUM`` with ``secure_delete`` on; PostgreSQL: ``VACUUM
        FULL`` of the table), so no free page keeps a destroyed key.
        """
        destroyed = 0
        with self._lock:
            try:
                self._conn.execute("BEGIN")
                for row in rows:
                    cursor = self._conn.execute(
                        self._sql(f"DELETE FROM {self._keys} WHERE key_id = ?"),
                        (row.key_id,),
                    )
                    destroyed += int(cursor.rowcount or 0)
                    if row.kind == "session":
                        self._conn.execute(
                            self._sql(
                                f"INSERT INTO {self._tombs} VALUES (?, ?) "
                                "ON CONFLICT (stream_id) DO NOTHING"
                            ),
                            (row.stream_id, row.agent),
                        )
                self._conn.execute("COMMIT")
            except Exception as e:
                self._conn.execute("ROLLBACK")
                raise _unavailable(self.where, e) from e
            finally:
                self._forget()
        self.compact()
        return destroyed

    def compact(self) -> None:
        """Rewrite the store so that no free page keeps a deleted key."""
        if self.dialect == "sqlite":
            self._run("VACUUM")
        else:
            self._run(f"VACUUM FULL {self._keys}")
            self._run(f"VACUUM FULL {self._tombs}")

    def close(self) -> None:
        """Close the store's connection."""
        with self._lock:
            self._conn.close()

    def _wrap_secret(self, key_id: bytes, secret: bytes) -> bytes:
        if self._wrap is None:
            return secret
        nonce = os.urandom(_NONCE)
        return nonce + self._wrap.encrypt(nonce, secret, key_id)

    def _unwrap(self, key_id: bytes, stored: bytes) -> bytes:
        if self._wrap is None:
            return stored
        from cryptography.exceptions import InvalidTag  # noqa: PLC0415

        try:
            return self._wrap.decrypt(stored[:_NONCE], stored[_NONCE:], key_id)
        except InvalidTag:
            msg = (
                f"Expected the erasure key store {self.where!r} wrapped with this"
                " cipher key, found a key it does not unwrap"
            )
            raise ErasureKeysError(msg) from None


def _wrapper(wrap_key: bytes | None) -> AESGCM | None:
    if wrap_key is None:
        return None
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # noqa: PLC0415

    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=_WRAP_LABEL
    ).derive(wrap_key)
    return AESGCM(derived)


def _unavailable(where: str, error: Exception) -> LedgerError:
    detail = " ".join(str(error).split())[:200]
    return StoreUnavailableError(
        f"The erasure key store {where!r} failed: {type(error).__name__}: {detail}"
    )


_CLEAR: Final = (
    "encrypt it in place with turnledger encrypt-files (its keys are nowhere"
    " else: never delete it)"
)


def open_sqlite_keys(
    path: str,
    *,
    ledger_id: str | None,
    wrap_key: bytes | None,
    before_create: Callable[[], bool],
) -> SubjectKeyStore | None:
    """Open the key store file beside a SQLite ledger, creating it if asked.

    ``before_create`` runs when the file is missing: it says whether to create
    it (``None`` is returned otherwise), or raises (a ledger whose events are
    sealed already: their keys are not in a new file).

    Raises:
        ErasureKeysError: The file records another ledger's id.
        StoreUnavailableError: The file cannot be opened.
    """
    if not Path(path).exists() and not before_create():
        return None
    # With a cipher key, a SQLCipher file keyed with its own derived key.
    key = None if wrap_key is None else derive_file_key(wrap_key, "erasure")
    try:
        conn = connect_file(
            path, key=key, what="erasure key store", clear_remedy=_CLEAR, timeout=30.0
        )
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.Error as e:
        raise _unavailable(path, e) from e
    try:
        return SubjectKeyStore(
            conn, dialect="sqlite", where=path, ledger_id=ledger_id, wrap_key=wrap_key
        )
    except BaseException:
        conn.close()
        raise


def open_postgres_keys(
    url: str,
    *,
    ledger_id: str | None,
    wrap_key: bytes | None,
    before_create: Callable[[], bool],
) -> SubjectKeyStore | None:
    """Open the key tables in a PostgreSQL ledger's schema, creating them if asked.

    ``before_create`` runs when they are missing (see :func:`open_sqlite_keys`).

    Raises:
        ErasureKeysError: The tables record another ledger's id.
        StoreUnavailableError: The server cannot be reached.
    """
    import psycopg  # noqa: PLC0415 - optional extra

    from turnledger.ledger.postgres.recorder import PostgresURL  # noqa: PLC0415

    parts = PostgresURL(url)
    where = f"{parts.host}:{parts.port}/{parts.dbname} {parts.schema}.{TABLE}"
    try:
        conn = psycopg.connect(
            dbname=parts.dbname,
            host=parts.host,
            port=parts.port,
            user=parts.user,
            password=parts.password or None,
            autocommit=True,
            connect_timeout=10,
        )
    except psycopg.Error as e:
        raise _unavailable(where, e) from e
    try:
        found = conn.execute(
            "SELECT to_regclass(%s)", (f'"{parts.schema}".{TABLE}',)
        ).fetchone()
        if (found is None or found[0] is None) and not before_create():
            conn.close()
            return None
        return SubjectKeyStore(
            conn,
            dialect="postgresql",
            where=where,
            ledger_id=ledger_id,
            wrap_key=wrap_key,
            schema=parts.schema,
        )
    except psycopg.Error as e:
        conn.close()
        raise _unavailable(where, e) from e
    except BaseException:
        conn.close()
        raise


def raw_cipher_key(cipher_key: str | None) -> bytes | None:
    """Return the raw bytes of a base64 cipher key (``None`` without one)."""
    if not cipher_key:
        return None
    return base64.b64decode(cipher_key)
