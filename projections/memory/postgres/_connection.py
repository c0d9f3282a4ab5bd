"""The PostgreSQL memory backend's connection, transactions and schema migration.

:class:`PostgresConnection` is the part of
:class:`~turnledger.projections.memory.postgres.PostgresMemory` that talks to the
server: one autocommit connection in UTC with a lock timeout (the busy timeout,
:data:`LOCK_TIMEOUT_MS`) and ``synchronous_commit`` off, reopened when it broke,
used under a re-entrant lock, reading ``float4[]`` vectors sent in binary as
numpy arrays (:class:`Float32Vectors`); schema-qualified SQL templates; and the
migration that creates the schema, picks the vector column (pgvector when the
extension can be created, ``float4[]`` otherwise) and clears vectors another
embedder made.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeAlias

import numpy as np
import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format

from turnledger.projections.memory.embedding import Embedder
from turnledger.projections.memory.postgres._sql import (
    CREATE,
    META_TABLE,
    TABLE,
    VectorKind,
    column_type,
)
from turnledger.projections.memory.protocol import Capabilities

Connection: TypeAlias = "psycopg.Connection[tuple[Any, ...]]"
"""A connection whose rows are tuples."""

LOCK_TIMEOUT_MS = 5000
"""How long a statement waits for a row or table lock (the busy timeout)."""

_FLOAT4_ARRAY_OID: Final = 1021
_ELEMENTS: Final = np.dtype([("length", ">i4"), ("value", ">f4")])


class Float32Vectors(Loader):
    """Reads a ``float4[]`` sent in binary as a float32 numpy array.

    psycopg's own loader builds a Python float per element (a recall reads a
    few hundred 384-float vectors: most of its time). PostgreSQL's binary
    array is a header (dimensions, a null flag, the element type, each
    dimension's size and lower bound), then each element's length and its
    big-endian bytes, read here as one numpy view. An array of another shape
    than one dimension, or holding a ``NULL``, is no vector of ours: it reads
    as an empty array (no similarity).
    """

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Return the elements of one array."""
        dimensions, has_null = struct.unpack_from(">ii", data)
        if dimensions != 1 or has_null:
            return np.empty(0, dtype=np.float32)
        elements = np.frombuffer(data, dtype=_ELEMENTS, offset=20)
        return elements["value"].astype(np.float32)


class PostgresConnection:
    """The server side of the PostgreSQL store (its subclass opens it)."""

    schema: str
    capabilities: Capabilities
    _conninfo: str
    _embedder: Embedder | None
    _lock: threading.RLock
    _conn: Connection

    def _connect(self) -> Connection:
        conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10)
        conn.execute("SET TIME ZONE 'UTC'")
        # The busy timeout: a lock held longer fails typed (MemoryLockedError).
        conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        # A view is rebuilt from the ledger, and its effects commit together with
        # its position, so a lost tail after a server crash is replayed, never torn.
        conn.execute("SET synchronous_commit = off")
        conn.adapters.register_loader(_FLOAT4_ARRAY_OID, Float32Vectors)
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """Hold the lock and a transaction (a savepoint when nested)."""
        with self._lock:
            if self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            with self._conn.transaction():
                yield self._conn

    def _sql(self, template: str, **parts: sql.Composable | str) -> sql.Composed:
        """Fill a template: schema-qualified names, and SQL text for str parts."""
        text = {k: sql.SQL(v) if isinstance(v, str) else v for k, v in parts.items()}
        return sql.SQL(template).format(
            schema=sql.Identifier(self.schema),
            table=sql.Identifier(self.schema, TABLE),
            meta=sql.Identifier(self.schema, META_TABLE),
            **text,
        )

    def _migrate(self, wanted: str) -> VectorKind:
        with self._transaction() as conn:
            conn.execute(self._sql(CREATE[0]))
            kind = self._vector_kind(conn, wanted)
            column = sql.SQL(column_type(kind))
            for statement in CREATE[1:]:
                conn.execute(self._sql(statement, column=column))
            self._adopt_identity(conn)
        return kind

    def _vector_kind(self, conn: Connection, wanted: str) -> VectorKind:
        found = conn.execute(
            "SELECT atttypid::regtype::text FROM pg_attribute"
            " WHERE attname = 'embedding'"
            " AND attrelid = to_regclass(format('%%I.%%I', %s::text, %s::text))",
            (self.schema, TABLE),
        ).fetchone()
        if found is not None:
            return "pgvector" if found[0] == "vector" else "array"
        if wanted == "array":
            return "array"
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error:
            if wanted == "pgvector":
                raise
            return "array"
        return "pgvector"

    def _adopt_identity(self, conn: Connection) -> None:
        """Clear vectors made by another embedder (content is kept)."""
        if not self.capabilities.vectors or self._embedder is None:
            return
        identity = "|".join(map(str, self._embedder.identity))
        found = conn.execute(
            self._sql("SELECT value FROM {meta} WHERE name = 'embedder'")
        ).fetchone()
        if found is not None and found[0] != identity:
            conn.execute(self._sql("UPDATE {table} SET embedding = NULL"))
        conn.execute(
            self._sql(
                "INSERT INTO {meta} VALUES ('embedder', %s)"
                " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
            ),
            (identity,),
        )
