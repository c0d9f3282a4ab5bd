"""PostgreSQL writers in parallel, followers that never skip: the high-water mark.

Writers no longer hold the table lock until their commit's fsync. Each write
transaction first takes a *shared* transaction-level advisory lock (the writers'
key of the schema), then reserves its positions from the table's sequence, writes
and commits; any number of writers do this at once, so their commits (and fsyncs)
overlap. Positions are therefore no longer in commit order, and a rolled-back
transaction leaves a gap that is never filled.

A follower must not read past a position that a transaction still in flight may
yet commit. :meth:`HighWater.settled` returns a position below which every row
is final:

1. read ``M``, the sequence's last value (every position up to ``M`` has been
   handed out, each to a writer that took the writers' lock before asking);
2. list the transactions holding the writers' lock now (``pg_locks``);
3. wait until none of them holds it any more (committed or rolled back);
4. return the highest committed position at or below ``M``.

Every row at or below ``M`` is then committed or will never exist. Only ledger
writers are waited for, never unrelated transactions. The wait is one writer
transaction at most (milliseconds); past ``timeout`` it is a typed error.
"""

from __future__ import annotations

import time
import zlib
from typing import Any, Final

from psycopg.sql import SQL, Composed

from turnledger.ledger.errors import LedgerLockedError

_IN_FLIGHT: Final = SQL(
    "SELECT virtualtransaction FROM pg_locks WHERE locktype = 'advisory' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid = 0 AND objid = %s AND objsubid = 1 AND granted"
)


def writers_key(schema: str) -> int:
    """Return the advisory lock key every writer of ``schema`` holds shared."""
    return zlib.crc32(f"turnledger-writers:{schema}".encode()) & 0x7FFFFFFF


def begin_write(schema: str, lock_timeout: int) -> Composed:
    """Return the statements that open a write transaction (timeout, lock)."""
    return SQL(
        "SET LOCAL lock_timeout = '{timeout}s'; "
        "SELECT pg_advisory_xact_lock_shared({key})"
    ).format(timeout=SQL(str(int(lock_timeout))), key=SQL(str(writers_key(schema))))


def wake_followers(channel: Any) -> Composed:
    """Return the transaction that wakes listening followers after a write commits.

    Not part of the write transaction: PostgreSQL serialises every transaction
    that sent a NOTIFY on one cluster-wide lock held until its commit has been
    flushed (``PreCommit_Notify`` in ``async.c``), so a NOTIFY inside the write
    transaction made the writers' commits, fsyncs included, take turns. This
    one writes nothing and commits without waiting for the flush
    (``synchronous_commit`` off for it alone), so the lock is held for
    microseconds. It runs once the write has committed durably; a follower it
    wakes reads that write. If it is lost (the process dies in between),
    followers still wake every second (``WakingSubscription``).
    """
    return SQL(
        "BEGIN; SET LOCAL synchronous_commit TO off; NOTIFY {channel}; COMMIT"
    ).format(channel=channel)


class HighWater:
    """Computes the settled position of one schema's ledger.

    Args:
        datastore: The library's PostgreSQL datastore (its pool).
        schema: The ledger's schema.
        table: The quoted, schema-qualified events table.
        sequence: The quoted name of the table's position sequence.
        timeout: Seconds to wait for writers in flight before failing.
    """

    def __init__(
        self, datastore: Any, schema: str, *, table: str, sequence: str, timeout: float
    ) -> None:
        self._datastore = datastore
        self._key = writers_key(schema)
        self._sequence = sequence
        self._timeout = timeout
        self._last_row = SQL(
            "SELECT max(notification_id) AS p FROM {table} WHERE notification_id <= %s"
        ).format(table=SQL(table))

    def settled(self) -> int:
        """Return the highest position below which every row is final.

        Raises:
            LedgerLockedError: A writer stayed in flight past the timeout.
        """
        started = time.monotonic()
        with self._datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(pg_sequence_last_value(%s::regclass), 0) AS m",
                (self._sequence,),
            )
            row = cursor.fetchone()
            mark = int(row["m"]) if row else 0
            cursor.execute(_IN_FLIGHT, (self._key,))
            waiting = {r["virtualtransaction"] for r in cursor.fetchall()}
            pause = 0.0005
            while waiting:
                if time.monotonic() - started > self._timeout:
                    waited = round(time.monotonic() - started)
                    msg = f"the ledger is locked by another writer (waited {waited} s)"
                    raise LedgerLockedError(msg)
                time.sleep(pause)
                pause = min(pause * 2, 0.01)
                cursor.execute(_IN_FLIGHT, (self._key,))
                waiting &= {r["virtualtransaction"] for r in cursor.fetchall()}
            # The last row actually committed at or below the mark (handed-out
            # positions of rolled-back appends are gaps, not rows).
            cursor.execute(self._last_row, (mark,))
            row = cursor.fetchone()
        return int(row["p"] or 0) if row else 0
