"""The PostgreSQL pieces the backend builds on: its URL, schema, recorder, subscription.

:class:`PostgresURL` reads the parts of a ``postgresql://`` URL (with its
``schema`` parameter); :func:`trigger_statements` is the DDL added to the
library's table: triggers refusing UPDATE, DELETE, TRUNCATE and version gaps
(one check per INSERT or COPY statement), and the idempotency-key and seal
tables; :class:`Recorder` is the library's application recorder with that DDL,
its notification selection capped at the settled position and its schema's
own LISTEN/NOTIFY channel (:func:`channel_for`);
:class:`WakingSubscription` is the library's LISTEN/NOTIFY subscription, also
woken every second (library issue #305).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from eventsourcing.persistence import Notification
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresSubscription,
)
from psycopg.sql import SQL, Identifier

from turnledger.ledger.chain import CHAIN_FORMAT, HEADER_SIZE, LINK_OFFSET
from turnledger.ledger.errors import ConfigurationError
from turnledger.ledger.frame import FLAG_SEALED
from turnledger.ledger.postgres.write import (
    CIPHER_TABLE,
    KEYS_TABLE,
    SEALED_TABLE,
    SEALS_TABLE,
)

TABLE: Final = "turnledger_events"
"""The events table (the library's layout)."""

MAX_IDENTIFIER: Final = 63
"""PostgreSQL's longest identifier, in bytes (a longer one is cut to it)."""


def channel_for(schema: str) -> str:
    """Return the LISTEN/NOTIFY channel of the ledger in ``schema``.

    A channel belongs to the database, not to a schema: were every schema's
    ledger to use one name, each write would wake the followers of every
    ledger in the database. The ``public`` schema's is the library's
    (``turnledger_events``); another schema's adds the schema's name
    (``turnledger_events_<schema>``), or, when that is longer than PostgreSQL
    keeps an identifier, a CRC-32 of it (``turnledger_events_<8 hex digits>``).
    """
    if schema == "public":
        return TABLE
    channel = f"{TABLE}_{schema}"
    if len(channel.encode()) <= MAX_IDENTIFIER:
        return channel
    return f"{TABLE}_{zlib.crc32(schema.encode()):08x}"


class PostgresURL:
    """The parts of a ``postgresql://`` URL the backend needs.

    A ``schema`` query parameter selects the schema (default ``public``).
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            msg = f"Expected a postgresql:// URL, found scheme {parts.scheme!r}"
            raise ConfigurationError(msg)
        query = parse_qs(parts.query)
        self.dbname = unquote(parts.path.lstrip("/")) or "postgres"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 5432
        self.user = unquote(parts.username or "postgres")
        self.password = unquote(parts.password or "")
        self.schema = query.get("schema", ["public"])[0]
        if not self.schema.replace("_", "").isalnum():
            msg = f"Expected a schema of letters, digits and _, found {self.schema!r}"
            raise ConfigurationError(msg)


def trigger_statements(schema: str, table: str) -> list[Any]:
    """The DDL run after the library's: append-only triggers, keys and seals."""
    ident = {
        "schema": Identifier(schema),
        "table": Identifier(table),
        "keys": Identifier(KEYS_TABLE),
        "seals": Identifier(SEALS_TABLE),
        "cipher": Identifier(CIPHER_TABLE),
        "sealed": Identifier(SEALED_TABLE),
    }
    return [
        SQL(
            "CREATE OR REPLACE FUNCTION {schema}.turnledger_append_only() "
            "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'turnledger: the ledger is append-only' "
            "USING ERRCODE = 'restrict_violation'; END $$"
        ).format(**ident),
        SQL(
            "CREATE OR REPLACE TRIGGER turnledger_no_change "
            "BEFORE UPDATE OR DELETE ON {schema}.{table} "
            "FOR EACH ROW EXECUTE FUNCTION {schema}.turnledger_append_only()"
        ).format(**ident),
        SQL(
            "CREATE OR REPLACE TRIGGER turnledger_no_truncate "
            "BEFORE TRUNCATE ON {schema}.{table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.turnledger_append_only()"
        ).format(**ident),
        # Contiguity, checked once per INSERT or COPY statement (a row-level
        # trigger cost half the server's CPU of an insert): every new row above 1
        # needs its predecessor, visible to this transaction, and when both are
        # chained, its ``prev`` must be that predecessor's link (its first 16
        # bytes). With the primary key (no version twice) a stream's versions
        # are then exactly 1..head, and a writer cannot chain a row to a head it
        # only remembers (``ledger.postgres.write.HeadCache``).
        SQL(
            "CREATE OR REPLACE FUNCTION {schema}.turnledger_contiguous_rows() "
            "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF EXISTS (SELECT FROM turnledger_new n "
            "WHERE n.originator_version <> 1 AND NOT EXISTS (SELECT FROM "
            "{schema}.{table} t WHERE t.originator_id = n.originator_id "
            "AND t.originator_version = n.originator_version - 1 "
            "AND (substring(n.state from 1 for 1) <> {chained} "
            "OR substring(t.state from 1 for 1) <> {chained} "
            "OR substring(t.state from {link} for 16) = "
            "substring(n.state from {prev} for 16)))) THEN "
            "RAISE EXCEPTION 'turnledger: stream versions must be contiguous, "
            "each chained to the one before' "
            "USING ERRCODE = 'unique_violation'; END IF; RETURN NULL; END $$"
        ).format(
            chained=SQL(f"'\\x{CHAIN_FORMAT:02x}'::bytea"),
            link=SQL(str(LINK_OFFSET + 1)),
            prev=SQL(str(HEADER_SIZE + 8 + 1)),
            **ident,
        ),
        SQL(
            "CREATE OR REPLACE TRIGGER turnledger_contiguous_rows "
            "AFTER INSERT ON {schema}.{table} REFERENCING NEW TABLE AS turnledger_new "
            "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.turnledger_contiguous_rows()"
        ).format(**ident),
        # The row-level trigger of ledgers created before it.
        SQL("DROP TRIGGER IF EXISTS turnledger_contiguous ON {schema}.{table}").format(
            **ident
        ),
        SQL("DROP FUNCTION IF EXISTS {schema}.turnledger_contiguous()").format(**ident),
        SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{keys} (key text PRIMARY KEY, "
            "stream uuid NOT NULL, first_version bigint NOT NULL, "
            "last_version bigint NOT NULL, positions text NOT NULL)"
        ).format(**ident),
        SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{seals} (id bigserial PRIMARY KEY, "
            "body bytea NOT NULL, mac text NOT NULL)"
        ).format(**ident),
        SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{cipher} (one integer PRIMARY KEY "
            "CHECK (one = 1), fingerprint text NOT NULL)"
        ).format(**ident),
        SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{sealed} (one integer PRIMARY KEY "
            "CHECK (one IN (0, 1)), position bigint NOT NULL)"
        ).format(**ident),
        *(
            SQL(
                "CREATE OR REPLACE TRIGGER turnledger_no_change "
                "BEFORE UPDATE OR DELETE ON {schema}.{other} "
                "FOR EACH ROW EXECUTE FUNCTION {schema}.turnledger_append_only()"
            ).format(other=Identifier(other), **ident)
            for other in (KEYS_TABLE, SEALS_TABLE, CIPHER_TABLE, SEALED_TABLE)
        ),
        # The first sealed row's position, recorded by the transaction that
        # inserts it (once per INSERT or COPY statement, one probe once marked).
        SQL(
            "CREATE OR REPLACE FUNCTION {schema}.turnledger_mark_sealed() "
            "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NOT EXISTS (SELECT FROM {schema}.{sealed} WHERE one = 1) THEN "
            "INSERT INTO {schema}.{sealed} (one, position) "
            "SELECT 1, min(n.notification_id) FROM turnledger_new_sealed n "
            "WHERE {is_sealed} HAVING count(*) > 0 ON CONFLICT DO NOTHING; "
            "END IF; RETURN NULL; END $$"
        ).format(is_sealed=sealed_frame("n.state"), **ident),
        SQL(
            "CREATE OR REPLACE TRIGGER turnledger_sealed "
            "AFTER INSERT ON {schema}.{table} "
            "REFERENCING NEW TABLE AS turnledger_new_sealed "
            "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.turnledger_mark_sealed()"
        ).format(**ident),
    ]


def sealed_frame(state: str) -> SQL:
    """The SQL condition that the frame ``state`` (a column) is sealed."""
    return SQL(
        f"CASE WHEN length({state}) > 1 "
        f"THEN get_byte({state}, 1) & {FLAG_SEALED} <> 0 ELSE false END"
    )


class Recorder(PostgresApplicationRecorder):
    """The library's application recorder plus the ledger's triggers.

    An unbounded notification selection (what the library's subscription pulls)
    stops at the settled position, so a follower never reads past a row that a
    writer still in flight may commit below it. Its channel is its schema's
    (:func:`channel_for`): a write to another schema's ledger wakes no
    follower of this one.
    """

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__(datastore, events_table_name=TABLE)
        # The schema's own channel (the library names it by the table alone):
        # what a write notifies and what a subscription listens to.
        self.channel_name = channel_for(datastore.schema)
        self.sql_create_statements.extend(trigger_statements(datastore.schema, TABLE))
        self.settled: Callable[[], int] | None = None

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """The library's selection, capped at the settled position."""
        if stop is None and self.settled is not None:
            stop = self.settled()
        selected: Sequence[Notification] = super().select_notifications(
            start, limit, stop, topics, inclusive_of_start=inclusive_of_start
        )
        return selected


class WakingSubscription(PostgresSubscription):
    """The library's LISTEN/NOTIFY subscription, also woken every second."""

    def __init__(
        self, recorder: PostgresApplicationRecorder, *, gt: int, topics: Sequence[str]
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._stopped = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stopped.wait(1.0):
            self._has_been_notified.set()

    def stop(self) -> None:
        """Stop the wake-ups and the library's subscription."""
        self._stopped.set()
        super().stop()
