"""Session databases: the SQLite files agent frameworks keep their sessions in.

The OpenAI Agents SDK's ``SQLiteSession`` stores each session item (an OpenAI
Responses input item, as ``get_items`` returns it) as JSON in
``agent_messages.message_data``, keyed by ``session_id`` and ordered by ``id``;
Google ADK's ``SqliteSessionService`` stores each event as
``Event.model_dump_json()`` in ``events.event_data``, keyed by ``app_name``,
``user_id`` and ``session_id``, ordered by ``timestamp``. Each session is one
conversation, read by that format's reader of the JSON form.

The file is opened in memory from its bytes (already bounded by the input
reader), read only, with untrusted schema features off and a bound on the
work a query may do: a table that is in fact a view, or a file that is no
usable database, is refused with a :class:`TranscriptError`. A database in
WAL mode (``SQLiteSession`` uses it) whose ``-wal`` file still holds writes is
refused by :func:`pipeline.formats.read.read_transcript`: its own bytes would
be a partial read.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    Items,
    Sink,
    conversation,
    decode_json,
)
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.pipeline.formats.openai_responses import responses_messages

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import Conversation, ParsedTranscript

SQLITE_MAGIC = b"SQLite format 3\x00"
"""How an SQLite database file begins."""

_FAILURES = (sqlite3.Error, UnicodeDecodeError)
"""What a damaged file raises (SQLite's messages may quote undecodable bytes)."""
WAL_MODE = b"\x02\x02"
"""Header bytes 18-19 of a database in write-ahead-log mode."""
AGENTS_TABLE = "agent_messages"
ADK_TABLE = "events"
_STEPS_PER_CHECK = 1_000
_MAX_CHECKS = 200_000
"""Progress-handler calls before a query is interrupted (about 2e8 VM steps)."""


def session_tables(data: bytes) -> set[str]:
    """The names of the tables (not views) of an SQLite file, or an empty set."""
    try:
        with closing(_open(data)) as connection:
            return _tables(connection)
    except TranscriptError:
        return set()


def read_rows(
    data: bytes, sql: str, *, table: str, expected: str
) -> list[tuple[str, bytes]]:
    """Run one ``SELECT`` of ``(key, json text)`` rows on a table of the file.

    Raises:
        TranscriptError: Not a database, no such table, or the query failed.
    """
    connection = _open(data, expected)
    with closing(connection):
        if table not in _tables(connection):
            msg = f"Expected {expected}, found a database without a `{table}` table"
            raise TranscriptError(msg)
        checks = [0]

        def progress() -> int:
            checks[0] += 1
            return int(checks[0] > _MAX_CHECKS)

        connection.set_progress_handler(progress, _STEPS_PER_CHECK)
        try:
            rows = connection.execute(sql).fetchall()
        except _FAILURES as error:
            msg = f"Expected {expected}, found a database that cannot be read: {error}"
            raise TranscriptError(msg) from error
    return [
        (_text(key), text if isinstance(text, bytes) else _text(text).encode())
        for key, text in rows
    ]


def _open(data: bytes, expected: str = "an SQLite database") -> sqlite3.Connection:
    if data[18:20] == WAL_MODE:
        # An in-memory copy cannot use WAL; the file's own pages are complete
        # when its `-wal` holds nothing (read_transcript checks that).
        data = data[:18] + b"\x01\x01" + data[20:]
    connection = sqlite3.connect(":memory:")
    connection.text_factory = bytes  # decoded here, never by the driver
    try:
        connection.deserialize(data)
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("PRAGMA query_only = ON")
    except _FAILURES as error:
        connection.close()
        msg = f"Expected {expected}, found a file that is no usable database: {error}"
        raise TranscriptError(msg) from error
    return connection


def _tables(connection: sqlite3.Connection) -> set[str]:
    try:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        ).fetchall()
    except _FAILURES as error:
        msg = f"Expected an SQLite database, found one that cannot be read: {error}"
        raise TranscriptError(msg) from error
    return {_text(name) for (name,) in rows}


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def grouped(rows: list[tuple[str, bytes]], sink: Sink) -> dict[str, list[object]]:
    """Decode each row's JSON, grouped by key in row order; bad rows are problems."""
    sessions: dict[str, list[object]] = {}
    for number, (key, text) in enumerate(rows, 1):
        try:
            value = decode_json(text)
        except TranscriptError as error:
            sink.begin("row", f"row {number}", None)  # the readers count rows
            sink.unread += 1
            sink.problem(0, f"row {number} of session {key!r}: {error}")
            continue
        sessions.setdefault(key, []).append(value)
    return sessions


AGENTS_EXPECTED = "an OpenAI Agents SDK SQLiteSession database (`agent_messages`)"


def parse_agents_database(data: bytes, *, name: str) -> ParsedTranscript:
    """Read every session of an Agents SDK ``SQLiteSession`` database.

    Returns:
        One conversation per ``session_id``, its items in insertion order.

    Raises:
        TranscriptError: Not such a database, or it cannot be read.
    """
    rows = read_rows(
        data,
        f"SELECT session_id, message_data FROM {AGENTS_TABLE} ORDER BY id",
        table=AGENTS_TABLE,
        expected=AGENTS_EXPECTED,
    )
    sink = Sink()
    found: list[Conversation] = []
    for session_id, values in grouped(rows, sink).items():
        items = Items.of(values, f"{AGENTS_TABLE}[{session_id}]")
        found.append(
            conversation(
                conversation_id=session_id,
                indexed=responses_messages(items, sink),
                origins=items.origins,
                source=f"{name} session {session_id}",
            )
        )
    return sink.transcript("openai-agents", found)
