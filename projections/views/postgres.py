"""Projection views on PostgreSQL, for workers on many hosts.

The same contract as :class:`projections.views.SQLiteViewStore`: a page's state
changes and the projection's new tracking position are written in ONE
transaction, and the position only moves forward (exactly-once effect). One
worker per projection is active at a time: :meth:`PostgresViewStore.try_lock`
takes a session-level advisory lock held for the worker's lifetime.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, urlsplit, urlunsplit

import msgspec
import psycopg
from psycopg import sql

from turnledger.ledger.driver_errors import typed_driver_errors
from turnledger.projections.base import LedgerHead, head_position
from turnledger.projections.views import TrackingConflictError

S = TypeVar("S")

_ENCODER: Final = msgspec.json.Encoder()


def _split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    schema = parse_qs(parts.query).get("schema", ["public"])[0]
    if not schema.replace("_", "").isalnum():
        msg = f"Expected a schema of letters, digits and _, found {schema!r}"
        raise ValueError(msg)
    return urlunsplit(parts._replace(query="")), schema


def lock_key(projection: str) -> int:
    """The advisory-lock key of a projection (stable across processes)."""
    return zlib.crc32(f"turnledger:projection:{projection}".encode())


@typed_driver_errors
class PostgresViewStore:
    """Projection states and tracking positions in PostgreSQL.

    Args:
        url: ``postgresql://...[?schema=NAME]`` (the ledger's URL works).
    """

    def __init__(self, url: str) -> None:
        self._conninfo, self.schema = _split(url)
        self._lock = threading.Lock()
        self._conn = psycopg.connect(self._conninfo, autocommit=True)
        self._locks: psycopg.Connection[Any] | None = None
        self._decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}
        ident = sql.Identifier(self.schema)
        self._state = sql.SQL("{}.turnledger_view_state").format(ident)
        self._tracking = sql.SQL("{}.turnledger_tracking").format(ident)
        self._meta = sql.SQL("{}.turnledger_view_meta").format(ident)
        with self._conn.transaction():
            self._conn.execute(
                sql.SQL("SELECT pg_advisory_xact_lock({})").format(
                    sql.Literal(lock_key("__ddl__"))
                )
            )
            self._conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (projection text PRIMARY KEY, "
                    "position bigint NOT NULL)"
                ).format(self._tracking)
            )
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (projection text NOT NULL, "
                    "key text NOT NULL, state bytea NOT NULL, "
                    "PRIMARY KEY (projection, key))"
                ).format(self._state)
            )
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, "
                    "value text NOT NULL)"
                ).format(self._meta)
            )

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the store to a ledger; return whether it was emptied.

        In one transaction (under the schema's DDL advisory lock): a store
        holding another ledger's id, or tracking a position past ``head``,
        loses every state and tracking position (``head`` read after the
        tracked positions: :data:`~projections.base.LedgerHead`); then
        ``ledger_id`` is recorded (None: only the position check applies).
        """
        with self._lock, self._conn.transaction():
            self._conn.execute(
                sql.SQL("SELECT pg_advisory_xact_lock({})").format(
                    sql.Literal(lock_key("__ddl__"))
                )
            )
            row = self._conn.execute(
                sql.SQL("SELECT value FROM {} WHERE name = 'ledger_id'").format(
                    self._meta
                )
            ).fetchone()
            tracked = self._conn.execute(
                sql.SQL("SELECT coalesce(max(position), 0) FROM {}").format(
                    self._tracking
                )
            ).fetchone()
            done = int(tracked[0]) if tracked is not None else 0
            stale = done > head_position(head) or (
                row is not None and ledger_id is not None and str(row[0]) != ledger_id
            )
            if stale:
                self._conn.execute(sql.SQL("DELETE FROM {}").format(self._state))
                self._conn.execute(sql.SQL("DELETE FROM {}").format(self._tracking))
            if ledger_id is not None:
                self._conn.execute(
                    sql.SQL(
                        "INSERT INTO {} VALUES ('ledger_id', %s) ON CONFLICT (name) "
                        "DO UPDATE SET value = excluded.value"
                    ).format(self._meta),
                    (ledger_id,),
                )
        return stale

    def _decoder(self, state_type: type[S]) -> msgspec.json.Decoder[S]:
        decoder = self._decoders.get(state_type)
        if decoder is None:
            decoder = msgspec.json.Decoder(state_type)
            self._decoders[state_type] = decoder
        return decoder

    def tracking(self, projection: str) -> int:
        """Return the last position applied to a projection (0: none)."""
        with self._lock:
            row = self._conn.execute(
                sql.SQL("SELECT position FROM {} WHERE projection = %s").format(
                    self._tracking
                ),
                (projection,),
            ).fetchone()
        return int(row[0]) if row else 0

    def load(
        self, projection: str, keys: Iterable[str], state_type: type[S]
    ) -> dict[str, S]:
        """Return the stored states of some keys (absent keys are left out)."""
        decoder = self._decoder(state_type)
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        with self._lock:
            rows = self._conn.execute(
                sql.SQL(
                    "SELECT key, state FROM {} WHERE projection = %s AND key = ANY(%s)"
                ).format(self._state),
                (projection, wanted),
            ).fetchall()
        return {k: decoder.decode(bytes(s)) for k, s in rows}

    def get(self, projection: str, key: str, state_type: type[S]) -> S | None:
        """Return one key's state, or None."""
        return self.load(projection, [key], state_type).get(key)

    def all(self, projection: str, state_type: type[S]) -> dict[str, S]:
        """Return every state of a projection."""
        decoder = self._decoder(state_type)
        with self._lock:
            rows = self._conn.execute(
                sql.SQL(
                    "SELECT key, state FROM {} WHERE projection = %s ORDER BY key"
                ).format(self._state),
                (projection,),
            ).fetchall()
        return {k: decoder.decode(bytes(s)) for k, s in rows}

    def commit(self, projection: str, states: Mapping[str, Any], position: int) -> None:
        """Write changed states and the new tracking position in one transaction.

        Raises:
            TrackingConflictError: ``position`` is not after the current one.
        """
        rows = [(projection, k, _ENCODER.encode(v)) for k, v in states.items()]
        with self._lock, self._conn.transaction(), self._conn.cursor() as cursor:
            cursor.execute(
                sql.SQL(
                    "INSERT INTO {} VALUES (%s, 0) ON CONFLICT (projection) DO NOTHING"
                ).format(self._tracking),
                (projection,),
            )
            cursor.execute(
                sql.SQL(
                    "SELECT position FROM {} WHERE projection = %s FOR UPDATE"
                ).format(self._tracking),
                (projection,),
            )
            row = cursor.fetchone()
            current = int(row[0]) if row else 0
            if position <= current:
                msg = (
                    f"Expected a position after {current} for {projection}, "
                    f"found {position}"
                )
                raise TrackingConflictError(msg)
            cursor.executemany(
                sql.SQL(
                    "INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT (projection, key) "
                    "DO UPDATE SET state = excluded.state"
                ).format(self._state),
                rows,
            )
            cursor.execute(
                sql.SQL("UPDATE {} SET position = %s WHERE projection = %s").format(
                    self._tracking
                ),
                (position, projection),
            )

    def reset(self, projection: str) -> None:
        """Forget a projection's states and tracking (one transaction)."""
        with self._lock, self._conn.transaction():
            self._conn.execute(
                sql.SQL("DELETE FROM {} WHERE projection = %s").format(self._state),
                (projection,),
            )
            self._conn.execute(
                sql.SQL("DELETE FROM {} WHERE projection = %s").format(self._tracking),
                (projection,),
            )

    def try_lock(self, projection: str) -> bool:
        """Try to become the projection's one active worker (held until close)."""
        with self._lock:
            if self._locks is None:
                self._locks = psycopg.connect(self._conninfo, autocommit=True)
            row = self._locks.execute(
                "SELECT pg_try_advisory_lock(%s)", (lock_key(projection),)
            ).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        """Close the connections (releasing any worker lock)."""
        with self._lock:
            self._conn.close()
            if self._locks is not None:
                # Unlock explicitly: the server may notice the closed session late.
                self._locks.execute("SELECT pg_advisory_unlock_all()")
                self._locks.close()
