"""The PostgreSQL backend, built on eventsourcing's PostgreSQL application recorder.

From the library: the datastore (psycopg pool, timeouts, composite type adapters),
the table layout (``turnledger_events`` with a ``bigserial`` notification id),
notification selection and the LISTEN/NOTIFY subscription. Not taken: the library's
``LOCK TABLE ... IN EXCLUSIVE MODE`` per insert, which serialises every writer
until its commit's fsync; writers here commit in parallel and followers stop at a
high-water mark instead (``ledger.postgres.order``). Added in
``ledger.postgres.recorder``: triggers refusing UPDATE, DELETE and TRUNCATE and
version gaps (a superuser can still disable them; ``verify`` detects what is then
done) and a periodic wake-up of the subscription (library issue #305: a lost
NOTIFY must not stall a follower). Added here: the hash chain, idempotency keys,
group commit in a fixed number of round trips, each append atomic on its own
(``ledger.postgres.write``), typed driver errors, and the followers' wake-up: a
NOTIFY sent after each write has committed, in a transaction of its own
(``ledger.postgres.order.wake_followers``: a NOTIFY inside the write would
serialise the writers' commits). Pipeline mode is not used for writes: large
pipelined transactions can hang (psycopg #685).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

import msgspec
import psycopg
from eventsourcing.persistence import Notification, PersistenceError
from eventsourcing.postgres import (
    PostgresDatastore,
)
from psycopg.sql import SQL, Identifier

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed, StoredRow
from turnledger.ledger.chain import CHAIN_FORMAT, HEADER_SIZE, AppendRecord, Seal
from turnledger.ledger.errors import (
    ConfigurationError,
    LedgerError,
    LedgerFullError,
    LedgerLockedError,
    LedgerReadOnlyError,
    StoreUnavailableError,
)
from turnledger.ledger.frame import FLAG_ENCRYPTED, FRAME_FORMAT
from turnledger.ledger.postgres.order import HighWater, begin_write, wake_followers
from turnledger.ledger.postgres.recorder import (
    TABLE,
    PostgresURL,
    Recorder,
    WakingSubscription,
    sealed_frame,
)
from turnledger.ledger.postgres.write import (
    CIPHER_TABLE,
    KEYS_TABLE,
    SEALED_TABLE,
    SEALS_TABLE,
    HeadCache,
    Statements,
    write_group,
)

_T = TypeVar("_T")


class PostgresBackend:
    """The ledger's PostgreSQL storage.

    Args:
        url: ``postgresql://user[:password]@host[:port]/dbname[?schema=name]``.
        lock_timeout: Seconds a writer waits for a lock (and a follower for the
            writers in flight) before a typed :class:`LedgerLockedError`.

    Attributes:
        ledger_id: The ledger's random id, written when its tables are first
            created (or at the first open of a ledger made before ids existed);
            derived stores record it to tell this ledger from another.
    """

    kind = "postgresql"
    ledger_id: str | None = None

    def __init__(self, url: str, *, lock_timeout: int = 5) -> None:
        self.url = PostgresURL(url)
        try:
            self._datastore = PostgresDatastore(
                dbname=self.url.dbname,
                host=self.url.host,
                port=self.url.port,
                user=self.url.user,
                password=self.url.password,
                pool_size=2,
                max_overflow=8,
                lock_timeout=lock_timeout,
                idle_in_transaction_session_timeout=60,
                schema=self.url.schema,
                connect_timeout=10,
            )
            self._recorder = Recorder(self._datastore)
            self._create_tables()
        except ConfigurationError:
            raise
        except Exception as e:
            where = f"{self.url.host}:{self.url.port}/{self.url.dbname}"
            msg = f"Cannot open the PostgreSQL ledger at {where}: {e}"
            raise StoreUnavailableError(msg) from e
        table = {"schema": Identifier(self.url.schema), "table": Identifier(TABLE)}
        self._high_water = HighWater(
            self._datastore,
            self.url.schema,
            table=f'"{self.url.schema}"."{TABLE}"',
            sequence=f'"{self.url.schema}"."{TABLE}_notification_id_seq"',
            # A writer may itself wait ``lock_timeout`` for a lock: allow more.
            timeout=max(30, 3 * lock_timeout),
        )
        self._recorder.settled = self.max_position
        self._head_sql = SQL(
            "SELECT max(originator_version) AS head FROM {schema}.{table} "
            "WHERE originator_id = %s"
        ).format(**table)
        self._table = table
        self._write_sql = Statements(
            self.url.schema,
            TABLE,
            begin_write(self.url.schema, lock_timeout).as_bytes(None),
            wake_followers(Identifier(self._recorder.channel_name)).as_bytes(None),
        )
        self._heads = HeadCache()
        self._seal_lock = f"turnledger-seal:{self.url.schema}"

    def _create_tables(self) -> None:
        # Processes opening one ledger at once would race on the DDL (deadlocks
        # between CREATE OR REPLACE FUNCTION and CREATE OR REPLACE TRIGGER, unique
        # violations in the catalogs): a session advisory lock, per schema, makes
        # them take turns.
        key = f"turnledger:{self.url.schema}"
        with self._datastore.get_connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
            try:
                conn.execute(
                    SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(
                        Identifier(self.url.schema)
                    )
                )
                self._recorder.create_table()
                self.ledger_id = _identity(conn, self.url.schema)
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def insert_batch(
        self, requests: Sequence[AppendRequest], *, atomic: bool = False
    ) -> list[tuple[int, ...] | Conflict | Replayed]:
        """Write appends in one transaction (writers run in parallel).

        A conflict fails only its own append (``ledger.postgres.write``); with
        ``atomic``, any conflict writes nothing.

        Raises:
            LedgerLockedError: A lock was not granted within the timeout.
            StoreUnavailableError: The server failed or the connection was lost.
        """
        started = time.monotonic()
        try:
            with self._datastore.get_connection() as conn:
                results = write_group(
                    conn, self._write_sql, requests, self._heads, atomic=atomic
                )
                if atomic and any(isinstance(r, Conflict) for r in results):
                    return [r if isinstance(r, Conflict) else () for r in results]
                return results
        except (psycopg.Error, PersistenceError, OSError) as e:
            raise translate(e, time.monotonic() - started) from e

    def _guard(self, action: Callable[[], _T]) -> _T:
        started = time.monotonic()
        try:
            return action()
        except (psycopg.Error, PersistenceError, OSError) as e:
            raise translate(e, time.monotonic() - started) from e

    def _fetch(self, sql: Any, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            with self._datastore.get_connection() as conn, conn.cursor() as cursor:
                cursor.execute(sql, params)
                return list(cursor.fetchall())

        return self._guard(run)

    def first_sealed(self) -> int | None:
        """Return the position of the first sealed row (``None``: none).

        The marker table answers (a trigger writes it with the first sealed
        row); a ledger from before it is searched once, whole, and the answer
        recorded.
        """
        marker = SQL("{schema}.{sealed}").format(
            sealed=Identifier(SEALED_TABLE), **self._table
        )
        select = SQL("SELECT one, position FROM {0}").format(marker)
        marks = {int(r["one"]): int(r["position"]) for r in self._fetch(select)}
        if 1 in marks:
            return marks[1]
        if 0 in marks:
            return None
        mark = SQL(
            "INSERT INTO {0} (one, position) VALUES (%s, %s) ON CONFLICT DO NOTHING"
        ).format(marker)
        search = SQL(
            "SELECT min(notification_id) FILTER (WHERE {sealed}) AS first, "
            "max(notification_id) AS last FROM {schema}.{table}"
        ).format(sealed=sealed_frame("state"), **self._table)

        def run() -> int | None:
            with self._datastore.get_connection() as conn, conn.transaction():
                # One search at a time; the trigger's writers wait for it.
                conn.execute(SQL("LOCK TABLE {0} IN EXCLUSIVE MODE").format(marker))
                found = {
                    int(r["one"]): int(r["position"])
                    for r in conn.execute(select).fetchall()
                }
                if not found:
                    row = conn.execute(search).fetchone() or {}
                    if row.get("first") is not None:
                        found[1] = int(row["first"])
                        conn.execute(mark, (1, found[1]))
                    conn.execute(mark, (0, int(row.get("last") or 0)))
                return found.get(1)

        return self._guard(run)

    def insert_seal(self, body: bytes, mac: str, *, after: int) -> int:
        """Record a seal if the newest seal's id is still ``after``; return its id."""
        seals = SQL("{schema}.{seals}").format(
            seals=Identifier(SEALS_TABLE), **self._table
        )

        def run() -> int:
            with self._datastore.get_connection() as conn, conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (self._seal_lock,)
                )
                newest = conn.execute(
                    SQL("SELECT max(id) AS id FROM {0}").format(seals)
                ).fetchone()
                if int((newest or {}).get("id") or 0) != after:
                    return 0
                row = conn.execute(
                    SQL(
                        "INSERT INTO {0} (body, mac) VALUES (%s, %s) RETURNING id"
                    ).format(seals),
                    (body, mac),
                ).fetchone()
                return int(row["id"]) if row else 0

        return self._guard(run)

    def latest_seal(self) -> Seal | None:
        """Return the newest seal, if any."""
        found = self._seals(SQL(" ORDER BY id DESC LIMIT 1"))
        return found[0] if found else None

    def seals(self) -> list[Seal]:
        """Return every seal, oldest first."""
        return self._seals(SQL(" ORDER BY id"))

    def _seals(self, order: SQL) -> list[Seal]:
        sql = SQL("SELECT id, body, mac FROM {schema}.{seals}").format(
            seals=Identifier(SEALS_TABLE), **self._table
        )
        return [
            Seal(int(r["id"]), bytes(r["body"]), str(r["mac"]))
            for r in self._fetch(sql + order)
        ]

    def seal_sequence(self) -> int:
        """Return the highest seal id the seals' sequence ever issued.

        Read under the sealers' lock (``insert_seal``), so a seal being
        inserted is committed first: every id counted is then visible.
        """
        sql = SQL(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM {0}"
        ).format(Identifier(self.url.schema, f"{SEALS_TABLE}_id_seq"))

        def run() -> int:
            with self._datastore.get_connection() as conn, conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (self._seal_lock,)
                )
                row = conn.execute(sql).fetchone()
                return int(row["n"]) if row else 0

        return self._guard(run)

    def append_records(self) -> list[AppendRecord]:
        """Return every idempotency record."""
        sql = SQL(
            "SELECT key, stream, first_version, last_version, positions "
            "FROM {schema}.{keys}"
        ).format(keys=Identifier(KEYS_TABLE), **self._table)
        return [
            AppendRecord(
                str(r["key"]),
                r["stream"],
                int(r["first_version"]),
                int(r["last_version"]),
                tuple(msgspec.json.decode(r["positions"], type=list[int])),
            )
            for r in self._fetch(sql)
        ]

    def beyond_sequence(self) -> list[StoredRow]:
        """Return rows above the position sequence's last value (none issued them)."""
        sql = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE notification_id > (SELECT CASE WHEN "
            "is_called THEN last_value ELSE 0 END FROM {seq}) "
            "ORDER BY notification_id LIMIT 1000"
        ).format(
            seq=Identifier(self.url.schema, f"{TABLE}_notification_id_seq"),
            **self._table,
        )
        return [
            StoredRow(
                int(r["notification_id"]),
                r["originator_id"],
                int(r["originator_version"]),
                str(r["topic"]),
                bytes(r["state"]),
            )
            for r in self._fetch(sql)
        ]

    def cipher_fingerprint(self, fingerprint: str | None) -> str | None:
        """Return the recorded key fingerprint, recording ``fingerprint`` if none."""
        table = SQL("{schema}.{cipher}").format(
            cipher=Identifier(CIPHER_TABLE), **self._table
        )
        if fingerprint is not None:
            insert = SQL(
                "INSERT INTO {0} (one, fingerprint) VALUES (1, %s) "
                "ON CONFLICT DO NOTHING"
            ).format(table)
            self._fetch_none(insert, (fingerprint,))
        rows = self._fetch(
            SQL("SELECT fingerprint FROM {0} WHERE one = 1").format(table)
        )
        return str(rows[0]["fingerprint"]) if rows else None

    def _fetch_none(self, sql: Any, params: Sequence[object]) -> None:
        def run() -> None:
            with self._datastore.get_connection() as conn:
                conn.execute(sql, params)

        self._guard(run)

    def select_stream(
        self,
        stream_id: UUID,
        *,
        gt: int,
        lte: int | None,
        limit: int | None,
        topics: Sequence[str] = (),
    ) -> list[StoredRow]:
        """Return a stream's rows with versions in ``(gt, lte]`` (of ``topics``)."""
        sql = SQL(
            "SELECT notification_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE originator_id = %s AND originator_version > %s"
        ).format(**self._table)
        params: list[object] = [stream_id, gt]
        if lte is not None:
            sql += SQL(" AND originator_version <= %s")
            params.append(lte)
        if topics:
            sql += SQL(" AND topic = ANY(%s)")
            params.append(list(topics))
        sql += SQL(" ORDER BY originator_version")
        if limit is not None:
            sql += SQL(" LIMIT %s")
            params.append(limit)
        return [
            StoredRow(
                int(r["notification_id"]),
                stream_id,
                int(r["originator_version"]),
                r["topic"],
                bytes(r["state"]),
            )
            for r in self._fetch(sql, params)
        ]

    def select_all(
        self, *, gt: int, limit: int, topics: Sequence[str], lte: int | None
    ) -> list[StoredRow]:
        """Return rows with positions in ``(gt, lte]`` in order."""
        notifications = self._guard(
            lambda: self._recorder.select_notifications(
                start=gt,
                limit=limit,
                stop=lte,
                topics=list(topics),
                inclusive_of_start=False,
            )
        )
        return [_row(n) for n in notifications]

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when empty)."""
        rows = self._fetch(self._head_sql, (stream_id,))
        return _head(rows[0] if rows else None)

    def max_position(self) -> int:
        """Return the settled position: every row at or below it is final.

        Writers commit in parallel, so a higher position may be committed while a
        lower one is still in flight; this is the high-water mark below which
        nothing can appear any more (``ledger.postgres.order``). Positions may
        have gaps (rolled-back appends).
        """
        return self._guard(self._high_water.settled)

    def stream_ids(self) -> list[UUID]:
        """Return every stream id, sorted."""
        sql = SQL("SELECT DISTINCT originator_id FROM {schema}.{table}").format(
            **self._table
        )
        return sorted(r["originator_id"] for r in self._fetch(sql))

    def count_rows(self) -> int:
        """Return the number of rows."""
        sql = SQL("SELECT count(*) AS n FROM {schema}.{table}").format(**self._table)
        rows = self._fetch(sql)
        return int(rows[0]["n"]) if rows else 0

    def first_encrypted(self, scan_rows: int) -> StoredRow | None:
        """Return the first encrypted row among the first ``scan_rows`` settled."""
        sql = SQL(
            "SELECT * FROM (SELECT notification_id, originator_id, "
            "originator_version, topic, state FROM {schema}.{table} "
            "WHERE notification_id <= %s ORDER BY notification_id LIMIT %s) AS f "
            "WHERE length(state) >= {header} AND get_byte(state, 0) IN ({formats}) "
            "AND get_byte(state, 1) & {flag} <> 0 ORDER BY notification_id LIMIT 1"
        ).format(
            header=SQL(str(HEADER_SIZE)),
            formats=SQL(f"{FRAME_FORMAT}, {CHAIN_FORMAT}"),
            flag=SQL(str(FLAG_ENCRYPTED)),
            **self._table,
        )
        rows = self._fetch(sql, (self.max_position(), scan_rows))
        if not rows:
            return None
        found = rows[0]
        return StoredRow(
            int(found["notification_id"]),
            found["originator_id"],
            int(found["originator_version"]),
            str(found["topic"]),
            bytes(found["state"]),
        )

    def subscribe(self, *, gt: int, topics: Sequence[str]) -> WakingSubscription:
        """Subscribe to rows after ``gt`` through LISTEN/NOTIFY."""
        return self._guard(
            lambda: WakingSubscription(self._recorder, gt=gt, topics=list(topics))
        )

    def drop_schema(self) -> None:
        """Drop the backend's schema with everything in it (tests use this)."""
        self._heads = HeadCache()
        with self._datastore.get_connection() as conn:
            conn.execute(
                SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(
                    Identifier(self.url.schema)
                )
            )

    def close(self) -> None:
        """Close the connection pool."""
        self._datastore.close()


def translate(error: BaseException, waited: float) -> LedgerError:
    """Return the typed ledger error for a PostgreSQL driver error.

    Args:
        error: What psycopg (or the library around it) raised.
        waited: Seconds the failed call took (the real wait when locked).
    """
    cause: BaseException = error
    while isinstance(cause, PersistenceError) and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, psycopg.errors.LockNotAvailable):
        return LedgerLockedError(
            f"the ledger is locked by another writer (waited {round(waited)} s)"
        )
    if isinstance(cause, psycopg.errors.DiskFull):
        return LedgerFullError(f"The PostgreSQL ledger's disk is full: {cause}")
    if isinstance(cause, psycopg.errors.ReadOnlySqlTransaction):
        return LedgerReadOnlyError(f"The PostgreSQL ledger refuses writes: {cause}")
    if isinstance(
        cause, (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedTable)
    ):
        return StoreUnavailableError(
            f"The PostgreSQL ledger is gone (its schema or table was dropped): {cause}"
        )
    return StoreUnavailableError(f"PostgreSQL ledger: {cause}")


def _head(row: dict[str, Any] | None) -> int:
    return int(row["head"] or 0) if row else 0


def _row(n: Notification) -> StoredRow:
    stream = (
        n.originator_id if isinstance(n.originator_id, UUID) else UUID(n.originator_id)
    )
    return StoredRow(n.id, stream, n.originator_version, n.topic, n.state)


IDENTITY_TABLE = "turnledger_identity"
"""One row: the ledger's random id, written once (derived stores record it)."""


def _identity(conn: Any, schema: str) -> str:
    """Return the ledger's id, writing a new random one if it has none yet.

    Runs under the schema's DDL advisory lock, so one process writes it; the
    ``ON CONFLICT DO NOTHING`` keeps the first id even without the lock.
    """
    table = SQL("{0}.{1}").format(Identifier(schema), Identifier(IDENTITY_TABLE))
    conn.execute(
        SQL(
            "CREATE TABLE IF NOT EXISTS {0} (one integer PRIMARY KEY "
            "CHECK (one = 1), id text NOT NULL)"
        ).format(table)
    )
    conn.execute(
        SQL("INSERT INTO {0} (one, id) VALUES (1, %s) ON CONFLICT DO NOTHING").format(
            table
        ),
        (uuid.uuid4().hex,),
    )
    row = conn.execute(SQL("SELECT id FROM {0} WHERE one = 1").format(table)).fetchone()
    return str(row["id"] if isinstance(row, dict) else row[0])
