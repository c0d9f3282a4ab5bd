"""View stores: where projection states live, with their tracking positions.

Every change a page of events makes to a projection's states is written together
with the projection's new tracking position in ONE transaction, and the tracking
position only moves forward: a page applied twice is refused, so a runner killed at
any point and restarted gives an exactly-once effect (the eventsourcing tracking
pattern). Views are rebuildable from the ledger, so their SQLite file runs with
``synchronous=NORMAL``.

A view store belongs to one ledger: :func:`bind_views` records the ledger's id
in it, and a store found holding another ledger's id (a file copied from
another ledger, or kept beside a ledger deleted and created again), or
tracking a position past the ledger's head, is emptied there, so every
projection catches up from the ledger again instead of serving what it held.

With a cipher key (``TURNLEDGER_CIPHER_KEY``, or the ledger's own key passed
as ``cipher_key``) the SQLite view file is a SQLCipher database, keyed with the
key derived for views (``ledger.file_keys``); one that does not fit the key is
refused at open (``ledger.sqlite.encrypted``).
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol, TypeVar

import msgspec

from turnledger.ledger.driver_errors import typed_driver_errors
from turnledger.ledger.file_keys import file_key
from turnledger.ledger.sqlite.encrypted import connect_file
from turnledger.ledger.sqlite.setup import set_wal
from turnledger.projections.base import LedgerHead, head_position

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore

S = TypeVar("S")

_ENCODER: Final = msgspec.json.Encoder()

CLEAR_VIEWS_REMEDY: Final = (
    "encrypt it in place with turnledger encrypt-files, or move it (and its -wal,"
    " -shm) away and the views are rebuilt from the ledger, encrypted"
)
"""What the refusal of a clear view file with a cipher key set tells the user."""


class TrackingConflictError(RuntimeError):
    """A page was applied at or below the projection's tracking position."""


class ViewStore(Protocol):
    """Where projection states and tracking positions live (SQLite or PostgreSQL)."""

    def tracking(self, projection: str) -> int:
        """Return the last position applied to a projection (0: none)."""
        ...

    def load(
        self, projection: str, keys: Iterable[str], state_type: type[S]
    ) -> dict[str, S]:
        """Return the stored states of some keys."""
        ...

    def all(self, projection: str, state_type: type[S]) -> dict[str, S]:
        """Return every state of a projection."""
        ...

    def commit(self, projection: str, states: Mapping[str, Any], position: int) -> None:
        """Write states and the tracking position in one transaction."""
        ...

    def reset(self, projection: str) -> None:
        """Forget a projection's states and tracking."""
        ...

    def try_lock(self, projection: str) -> bool:
        """Try to become the projection's one active worker."""
        ...

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the store to a ledger; return whether it was emptied (see bind_views)."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


@typed_driver_errors
class SQLiteViewStore:
    """Projection states as msgspec JSON blobs in a SQLite file.

    Args:
        path: The view database file.
        cipher_key: The base64 cipher key (as ``open_store`` takes it); None
            reads ``TURNLEDGER_CIPHER_KEY``, ``""`` means none. With a key the
            file is encrypted (SQLCipher).

    Raises:
        FileKeyError: The file does not fit the key (encrypted with another,
            encrypted without a key given, or in clear with a key given).
        SQLCipherMissingError: A key is given without the ``sqlcipher`` extra.
    """

    def __init__(self, path: str, *, cipher_key: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = connect_file(
            path,
            key=file_key("views", cipher_key),
            what="view store",
            clear_remedy=CLEAR_VIEWS_REMEDY,
        )
        # A busy answer while another process switches a new file is tried again.
        set_wal(self._conn, 30.0)
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS tracking "
            "(projection TEXT PRIMARY KEY, position INTEGER NOT NULL)"
        )
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS view_state (projection TEXT NOT NULL, "
            "key TEXT NOT NULL, state BLOB NOT NULL, PRIMARY KEY (projection, key))"
        )
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS view_meta "
            "(name TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        self._decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}
        self._held: dict[str, IO[str]] = {}

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the store to a ledger; return whether it was emptied.

        In one transaction: a store holding another ledger's id, or tracking
        a position past ``head`` (read after the tracked positions, inside the
        transaction: :data:`~projections.base.LedgerHead`), loses every state
        and tracking position; then ``ledger_id`` is recorded (None, a ledger
        without an id: only the position check applies).
        """
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT value FROM view_meta WHERE name = 'ledger_id'"
                ).fetchone()
                (tracked,) = self._conn.execute(
                    "SELECT coalesce(max(position), 0) FROM tracking"
                ).fetchone()
                stale = int(tracked) > head_position(head) or (
                    row is not None
                    and ledger_id is not None
                    and str(row[0]) != ledger_id
                )
                if stale:
                    self._conn.execute("DELETE FROM view_state")
                    self._conn.execute("DELETE FROM tracking")
                if ledger_id is not None:
                    self._conn.execute(
                        "INSERT INTO view_meta VALUES ('ledger_id', ?) ON CONFLICT "
                        "(name) DO UPDATE SET value = excluded.value",
                        (ledger_id,),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
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
                "SELECT position FROM tracking WHERE projection=?", (projection,)
            ).fetchone()
        return int(row[0]) if row else 0

    def load(
        self, projection: str, keys: Iterable[str], state_type: type[S]
    ) -> dict[str, S]:
        """Return the stored states of some keys (absent keys are left out)."""
        decoder = self._decoder(state_type)
        wanted = list(dict.fromkeys(keys))
        found: dict[str, S] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, state FROM view_state WHERE projection=? "
                    f"AND key IN ({marks})",
                    (projection, *chunk),
                ).fetchall()
                found.update((k, decoder.decode(s)) for k, s in rows)
        return found

    def get(self, projection: str, key: str, state_type: type[S]) -> S | None:
        """Return one key's state, or None."""
        return self.load(projection, [key], state_type).get(key)

    def all(self, projection: str, state_type: type[S]) -> dict[str, S]:
        """Return every state of a projection."""
        decoder = self._decoder(state_type)
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, state FROM view_state WHERE projection=? ORDER BY key",
                (projection,),
            ).fetchall()
        return {k: decoder.decode(s) for k, s in rows}

    def commit(self, projection: str, states: Mapping[str, Any], position: int) -> None:
        """Write changed states and the new tracking position in one transaction.

        Raises:
            TrackingConflictError: ``position`` is not after the current one.
        """
        rows = [(projection, k, _ENCODER.encode(v)) for k, v in states.items()]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._check_forward(projection, position)
                self._conn.executemany(
                    "INSERT INTO view_state VALUES (?,?,?) ON CONFLICT "
                    "(projection, key) DO UPDATE SET state=excluded.state",
                    rows,
                )
                self._conn.execute(
                    "INSERT INTO tracking VALUES (?,?) ON CONFLICT (projection) "
                    "DO UPDATE SET position=excluded.position",
                    (projection, position),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLITE_FULL has rolled back itself
                    self._conn.execute("ROLLBACK")
                raise

    def _check_forward(self, projection: str, position: int) -> None:
        row = self._conn.execute(
            "SELECT position FROM tracking WHERE projection=?", (projection,)
        ).fetchone()
        current = int(row[0]) if row else 0
        if position <= current:
            msg = (
                f"Expected a position after {current} for {projection}, "
                f"found {position}"
            )
            raise TrackingConflictError(msg)

    def try_lock(self, projection: str) -> bool:
        """Try to become the projection's one active worker (held until close).

        A lock file beside the view file, locked with ``flock``: the operating
        system releases it when the process dies, so a killed worker never
        blocks its successor.
        """
        if projection in self._held:
            return True
        handle = Path(f"{self.path}.{projection}.lock").open("a")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._held[projection] = handle
        return True

    def reset(self, projection: str) -> None:
        """Forget a projection's states and tracking (one transaction)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute(
                "DELETE FROM view_state WHERE projection=?", (projection,)
            )
            self._conn.execute("DELETE FROM tracking WHERE projection=?", (projection,))
            self._conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (releasing any worker lock)."""
        with self._lock:
            self._conn.close()
            for handle in self._held.values():
                handle.close()
            self._held.clear()


def bind_views(views: ViewStore, store: EventStore) -> ViewStore:
    """Tie a view store to the ledger it derives from; return it.

    A store that held another ledger's views (another id recorded, or a
    tracking position past this ledger's head) is emptied, so projections
    catch up from this ledger; never used as it was.
    """
    views.bind(store.backend.ledger_id, store.max_position)
    return views
