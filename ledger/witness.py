"""Witnesses: where ``seal --witness`` records each seal, outside the ledger's database.

A seal pins the ledger (``ledger.seal``), but it lives in the ledger's own
database: its owner can delete the newest seals together with the rows after the
one left, or drop them all. A witness keeps, for every seal, one
:class:`WitnessEntry` (the ledger's id, the seal's index, id, position and
digest) somewhere that owner cannot rewrite; ``verify --witness`` then checks
that every witnessed seal is still in the ledger, unchanged, and that the ledger
still reaches its position.

Targets (:func:`open_witness`):

- ``file:PATH``: an append-only file of JSON lines, each written with one
  ``write`` in append mode and ``fsync``-ed; read strictly (every line an entry);
- ``sqlite:PATH``: a SQLite database of its own (table ``turnledger_witness``,
  UPDATE and DELETE refused by triggers);
- ``postgresql://...[?schema=name]``: a PostgreSQL database or schema (table
  ``turnledger_witness``); it must not be the ledger's own schema;
- ``-``: standard output (the operator's log), written by the command line; to
  verify, give the saved log's path: its entry lines are read, other lines
  skipped.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from turnledger.ledger.errors import LedgerError, quote_value
from turnledger.ledger.location import sqlite_path

WITNESS_TAG: Final = "turnledger-seal-v1"
"""The ``witness`` field of every entry (how a log line is told from others)."""

WITNESS_TABLE: Final = "turnledger_witness"
MAX_WITNESS_BYTES: Final = 256 * 1024 * 1024
"""A witness file larger than this is refused (never half-read)."""

STDOUT: Final = "-"


class WitnessError(LedgerError):
    """A witness target cannot be opened, written or read in full."""


class WitnessEntry(msgspec.Struct, frozen=True, kw_only=True):
    """What a witness records of one seal.

    Attributes:
        witness: :data:`WITNESS_TAG`.
        ledger: The ledger's random id (``""``: an old ledger without one).
        index: The seal's place in the ledger's seal chain.
        seal: The seal's id in the ledger.
        position: The last position it covers.
        digest: The SHA-256 (hex) of the seal as stored.
    """

    witness: str = WITNESS_TAG  # first: a log line is told by its start
    ledger: str
    index: int
    seal: int
    position: int
    digest: str


class Witness(Protocol):
    """A place seals are witnessed in."""

    target: str

    def record(self, entry: WitnessEntry) -> None:
        """Append one entry (durably)."""
        ...

    def entries(self) -> list[WitnessEntry]:
        """Return every entry, in the order recorded."""
        ...

    def close(self) -> None:
        """Release what the witness holds."""
        ...


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(WitnessEntry)
_EXPECTED: Final = "file:PATH, sqlite:PATH, a postgresql:// URL or - (stdout)"


def entry_line(entry: WitnessEntry) -> str:
    """Return an entry as the one JSON line a file or log holds."""
    return _ENCODER.encode(entry).decode()


def open_witness(target: str, *, ledger: str, reading: bool) -> Witness | None:
    """Open a witness target (``None`` for ``-``: the caller prints the entry).

    Args:
        target: ``file:PATH``, ``sqlite:PATH``, a ``postgresql://`` URL or
            ``-``; when ``reading``, a plain path too (a saved log).
        ledger: The ledger's own file path or URL (a witness must be elsewhere).
        reading: For ``verify`` (the target must exist) rather than ``seal``.

    Raises:
        WitnessError: The target is of no known form, is the ledger's own
            database, or cannot be opened.
    """
    if target == STDOUT:
        if reading:
            msg = (
                "Expected a witness to read (file:PATH, sqlite:PATH, a postgresql:// "
                "URL or the path of a saved log), found - (stdout cannot be read back)"
            )
            raise WitnessError(msg)
        return None
    if target.startswith("file:"):
        path = _path(target, "file:")
        _not_the_ledger(path, ledger)
        return FileWitness(path, strict=True, reading=reading)
    if target.startswith("sqlite:"):
        path = _path(target.removeprefix("sqlite://"), "sqlite:")
        _not_the_ledger(path, ledger)
        return SQLiteWitness(path, reading=reading)
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresWitness(target, ledger=ledger)
    if reading and target:
        _not_the_ledger(target, ledger)
        return FileWitness(target, strict=False, reading=True)
    msg = f"Expected a witness target ({_EXPECTED}), found {quote_value(target)}"
    raise WitnessError(msg)


def _path(target: str, prefix: str) -> str:
    path = target.removeprefix(prefix)
    if not path:
        msg = f"Expected a path after {prefix}, found {quote_value(target)}"
        raise WitnessError(msg)
    return path


def _not_the_ledger(path: str, ledger: str) -> None:
    own = sqlite_path(ledger)
    if own is not None and Path(path).resolve() == Path(own).resolve():
        msg = (
            "Expected a witness outside the ledger's database, found the ledger "
            f"itself: {quote_value(path)}"
        )
        raise WitnessError(msg)


class FileWitness:
    """An append-only file of JSON lines (``file:PATH``), or a saved log."""

    def __init__(self, path: str, *, strict: bool, reading: bool) -> None:
        self.target = path
        self.path = Path(path)
        self.strict = strict
        if reading and not self.path.exists():
            msg = f"Expected a witness file at {quote_value(path)}, found none"
            raise WitnessError(msg)
        if not reading and not self.path.parent.is_dir():
            msg = (
                f"Expected the witness file's folder to exist, found none for "
                f"{quote_value(path)}"
            )
            raise WitnessError(msg)

    def record(self, entry: WitnessEntry) -> None:
        """Append the entry's line with one write, then fsync the file."""
        data = (entry_line(entry) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    msg = f"Expected a regular file, found another kind at {self.path}"
                    raise WitnessError(msg)
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            msg = f"Cannot write the witness file {quote_value(self.target)}: {e}"
            raise WitnessError(msg) from e

    def entries(self) -> list[WitnessEntry]:
        """Read every entry (a saved log: its entry lines; others skipped)."""
        text = self._read()
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            entry = self._entry(line, number)
            if entry is not None:
                found.append(entry)
        return found

    def _read(self) -> str:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            msg = f"Cannot read the witness file {quote_value(self.target)}: {e}"
            raise WitnessError(msg) from e
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_WITNESS_BYTES:
                msg = (
                    f"Expected a regular witness file of at most {MAX_WITNESS_BYTES} "
                    f"bytes, found {quote_value(self.target)} is not one"
                )
                raise WitnessError(msg)
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = stream.read(info.st_size + 1)
        finally:
            os.close(fd)
        try:
            return data.decode()
        except UnicodeDecodeError as e:
            msg = f"Expected UTF-8 in the witness file {quote_value(self.target)}: {e}"
            raise WitnessError(msg) from e

    def _entry(self, line: str, number: int) -> WitnessEntry | None:
        if not self.strict and '"witness"' not in line:
            return None  # a saved log: another line of the operator's output
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError:
            value = None  # a torn line: refused below
        if not self.strict and isinstance(value, dict):
            found = value.get("witness")
            if isinstance(found, dict):
                value = found  # ``seal --json``'s report holds the entry
            elif found != WITNESS_TAG:
                return None  # a refused seal's report (no entry), or another line
        try:
            return msgspec.convert(value, WitnessEntry)
        except msgspec.ValidationError as e:
            msg = (
                f"Expected a witness entry on line {number} of "
                f"{quote_value(self.target)}, found {quote_value(line)} ({e})"
            )
            raise WitnessError(msg) from e

    def close(self) -> None:
        """Nothing is held open between calls."""


_CREATE: Final = (
    (
        f"CREATE TABLE IF NOT EXISTS {WITNESS_TABLE} (id INTEGER PRIMARY KEY "
        "AUTOINCREMENT, ledger TEXT NOT NULL, seal_index INTEGER NOT NULL, "
        "seal_id INTEGER NOT NULL, position INTEGER NOT NULL, digest TEXT NOT NULL)"
    ),
    *(
        f"CREATE TRIGGER IF NOT EXISTS {WITNESS_TABLE}_no_{op.lower()} BEFORE {op} "
        f"ON {WITNESS_TABLE} BEGIN SELECT RAISE(ABORT, "
        "'turnledger: the witness is append-only'); END"
        for op in ("UPDATE", "DELETE")
    ),
)
_SELECT: Final = (
    f"SELECT ledger, seal_index, seal_id, position, digest FROM {WITNESS_TABLE} "
    "ORDER BY id"
)


class SQLiteWitness:
    """A SQLite database of its own holding the entries (``sqlite:PATH``)."""

    def __init__(self, path: str, *, reading: bool) -> None:
        self.target = f"sqlite:{path}"
        try:
            if reading:
                uri = Path(path).resolve().as_uri() + "?mode=ro"
                self._raw = sqlite3.connect(uri, uri=True, isolation_level=None)
                self._raw.execute(f"SELECT 1 FROM {WITNESS_TABLE} LIMIT 1")
            else:
                self._raw = sqlite3.connect(path, isolation_level=None)
                for statement in _CREATE:
                    self._raw.execute(statement)
        except sqlite3.Error as e:
            msg = f"Cannot open the witness database {quote_value(path)}: {e}"
            raise WitnessError(msg) from e

    def record(self, entry: WitnessEntry) -> None:
        """Insert the entry (one committed transaction)."""
        try:
            self._raw.execute(
                f"INSERT INTO {WITNESS_TABLE} (ledger, seal_index, seal_id, position,"
                " digest) VALUES (?,?,?,?,?)",
                (entry.ledger, entry.index, entry.seal, entry.position, entry.digest),
            )
        except sqlite3.Error as e:
            msg = f"Cannot write the witness {quote_value(self.target)}: {e}"
            raise WitnessError(msg) from e

    def entries(self) -> list[WitnessEntry]:
        """Every entry, oldest first."""
        try:
            rows = self._raw.execute(_SELECT).fetchall()
        except sqlite3.Error as e:
            msg = f"Cannot read the witness {quote_value(self.target)}: {e}"
            raise WitnessError(msg) from e
        return [_from_row(row) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        self._raw.close()


class PostgresWitness:
    """A PostgreSQL table of entries (another database or schema)."""

    def __init__(self, url: str, *, ledger: str) -> None:
        import psycopg  # noqa: PLC0415 - the postgres extra, only when asked for
        from psycopg.sql import SQL, Identifier  # noqa: PLC0415

        from turnledger.ledger.postgres.recorder import PostgresURL  # noqa: PLC0415

        self.target = url.split("?", 1)[0].rsplit("@", 1)[-1]
        self._errors = psycopg.Error
        parts = PostgresURL(url)
        if ledger.startswith(("postgresql://", "postgres://")):
            own = PostgresURL(ledger)
            same = (own.host, own.port, own.dbname, own.schema)
            if same == (parts.host, parts.port, parts.dbname, parts.schema):
                msg = (
                    "Expected a witness outside the ledger's database, found the "
                    f"ledger's own schema {parts.schema!r}"
                )
                raise WitnessError(msg)
        table = SQL("{0}.{1}").format(
            Identifier(parts.schema), Identifier(WITNESS_TABLE)
        )
        self._insert = SQL(
            "INSERT INTO {0} (ledger, seal_index, seal_id, position, digest) "
            "VALUES (%s, %s, %s, %s, %s)"
        ).format(table)
        self._select = SQL(
            "SELECT ledger, seal_index, seal_id, position, digest FROM {0} ORDER BY id"
        ).format(table)
        try:
            self._conn: Any = psycopg.connect(
                dbname=parts.dbname,
                host=parts.host,
                port=parts.port,
                user=parts.user,
                password=parts.password,
                autocommit=True,
                connect_timeout=10,
            )
            self._conn.execute(
                SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(Identifier(parts.schema))
            )
            self._conn.execute(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {0} (id bigserial PRIMARY KEY, "
                    "ledger text NOT NULL, seal_index bigint NOT NULL, seal_id bigint "
                    "NOT NULL, position bigint NOT NULL, digest text NOT NULL)"
                ).format(table)
            )
        except psycopg.Error as e:
            msg = f"Cannot open the witness at {self.target}: {e}"
            raise WitnessError(msg) from e

    def record(self, entry: WitnessEntry) -> None:
        """Insert the entry (autocommit)."""
        try:
            self._conn.execute(
                self._insert,
                (entry.ledger, entry.index, entry.seal, entry.position, entry.digest),
            )
        except self._errors as e:
            msg = f"Cannot write the witness at {self.target}: {e}"
            raise WitnessError(msg) from e

    def entries(self) -> list[WitnessEntry]:
        """Every entry, oldest first."""
        try:
            rows = self._conn.execute(self._select).fetchall()
        except self._errors as e:
            msg = f"Cannot read the witness at {self.target}: {e}"
            raise WitnessError(msg) from e
        return [_from_row(row) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        with contextlib.suppress(self._errors):
            self._conn.close()


def _from_row(row: Any) -> WitnessEntry:
    return WitnessEntry(
        ledger=str(row[0]),
        index=int(row[1]),
        seal=int(row[2]),
        position=int(row[3]),
        digest=str(row[4]),
    )
