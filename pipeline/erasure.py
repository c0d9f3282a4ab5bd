"""Erasure that proves itself: destroy a subject's data keys, rebuild without it.

:func:`erase` erases one subject of an erasable ledger (``ledger.erasable``):

1. its data keys are listed (a session's key and the memory keys its session
   wrote; every key of an agent; every session key of a user key, any agent,
   and the memory keys those sessions wrote; one memory key's entries);
2. the media files its sessions attached are noted (before their events become
   unreadable);
3. the keys are destroyed: deleted from the erasure key store, which is then
   rewritten (``secure_delete`` and ``VACUUM``; PostgreSQL ``VACUUM FULL``);
4. the receipt (``erasure.recorded``: subject kind, agent, a digest of the id,
   the streams, the count, the command; no content) is appended;
5. every projection's views are rebuilt from the ledger (the erased events read
   as :class:`~turnledger.ledger.events.erasure.Erased` and project nothing),
   and the view file is rewritten (SQLite ``VACUUM`` and a truncated WAL;
   PostgreSQL ``VACUUM FULL`` of the view tables);
6. the SQLite memory databases of the agents concerned are emptied, caught up
   from the ledger and scrubbed (full-text index merged, ``VACUUM``, WAL
   truncated), and the erased entries' vectors leave their embedding cache;
7. the media files no readable event still references are overwritten and
   deleted.

A subject with no data key (recorded before erasure was on, or erased already)
is refused with :class:`NothingToEraseError` and nothing is written.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import msgspec

from turnledger.ledger.erasable import sealed_key_id
from turnledger.ledger.events import (
    AssistantMessage,
    KnowledgeCaptured,
    MediaAttached,
    MemoryStored,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.events.erasure import (
    ERASURE_STREAM,
    ErasureRecorded,
    ErasureSubject,
    subject_digest,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded
    from turnledger.ledger.file_keys import FilePurpose
    from turnledger.ledger.store import EventStore
    from turnledger.ledger.subject_keys import KeyRow, SubjectKeyStore
    from turnledger.pipeline.config import Config


class ErasureError(PipelineError):
    """An erasure cannot be made (erasure off, a subject without its agent)."""


class NothingToEraseError(ErasureError):
    """The subject has no data key: nothing sealed, or erased already."""


class ErasureReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`erase` did (no content, no subject id).

    Attributes:
        subject: The subject's kind.
        agent: Its agent (``""`` for a user key).
        subject_digest: The receipt's digest of its id.
        streams: The streams whose keys were destroyed.
        keys_destroyed: How many data keys were destroyed.
        receipt_position: Where the receipt was appended.
        views_rebuilt: Per projection, the events replayed into its views.
        memory_agents: The agents whose SQLite memory was rebuilt.
        memory_not_rebuilt: ``agent (kind)`` of the agents concerned whose
            memory is of another kind (Markdown, Qdrant, PostgreSQL...): not
            rebuilt here, their copies stay until rebuilt or deleted.
        media_removed: How many attachment files were deleted.
    """

    subject: ErasureSubject
    agent: str
    subject_digest: str
    streams: tuple[str, ...]
    keys_destroyed: int
    receipt_position: int
    views_rebuilt: dict[str, int]
    memory_agents: tuple[str, ...]
    memory_not_rebuilt: tuple[str, ...]
    media_removed: int


def erasure_keys(store: EventStore) -> SubjectKeyStore:
    """Return the ledger's erasure key store.

    Raises:
        ErasureError: The ledger was opened without one (erasure off and
            nothing sealed).
    """
    if store.sealer is None:
        msg = (
            "Expected an erasable ledger ([privacy] erasable = true, or a cipher"
            " key set), found erasure off and no event sealed: nothing can be erased"
        )
        raise ErasureError(msg)
    return store.sealer.keys


def select_keys(
    keys: SubjectKeyStore, subject: ErasureSubject, agent: str, key: str
) -> list[KeyRow]:
    """List the data keys of a subject (see the module)."""
    if subject == "session":
        stream = str(session_stream_id(agent, key))
        return keys.select(stream_ids=[stream], agent=agent, session=key)
    if subject == "agent":
        return keys.select(agent=agent)
    if subject == "user":
        rows = keys.select(session=key)
        # A session continued after an erasure has a key without its session
        # key: its stream (the agent's and the key's) names it.
        streams = [str(session_stream_id(a, key)) for a in keys.agents()]
        known = {r.key_id for r in rows}
        more = keys.select(stream_ids=streams) if streams else []
        return rows + [r for r in more if r.kind == "session" and r.key_id not in known]
    return keys.select(agent=agent, memory_key=key)


def erase(
    store: EventStore,
    config: Config,
    *,
    subject: ErasureSubject,
    agent: str,
    key: str,
    ledger_url: str,
    views_at: str,
    command: str,
) -> ErasureReport:
    """Erase a subject (see the module); return what was done.

    Args:
        store: The ledger (opened with its erasure key store).
        config: The configuration (agents' memory, the data directory).
        subject: What is erased.
        agent: The agent (a session, a memory key, an agent; ``""`` for a user).
        key: The session key, user key or memory key (``""`` for an agent).
        ledger_url: Where the ledger is (its memory files go beside it).
        views_at: Where the views live (a SQLite file or a PostgreSQL URL).
        command: The command recorded in the receipt (no argument values).

    Raises:
        ErasureError: Erasure is off, or ``agent`` is missing where needed.
        NothingToEraseError: The subject has no data key.
    """
    if subject in ("session", "memory", "agent") and not agent:
        msg = f"Expected the agent of the {subject} to erase, found none"
        raise ErasureError(msg)
    keys = erasure_keys(store)
    rows = select_keys(keys, subject, agent, key)
    digest = subject_digest(subject, agent, key or agent)
    if not rows:
        msg = (
            f"Expected data keys of the {subject} to erase, found none: its events"
            " were recorded before erasure was on, or it was erased already"
        )
        raise NothingToEraseError(msg)
    sessions = sorted({r.stream_id for r in rows if r.kind == "session"})
    rows = _with_tool_memories(store, keys, rows, sessions)
    attached = _attachments(store, sessions)
    contents = _erased_contents(store, rows)
    destroyed = keys.destroy(rows)
    streams = tuple(sorted({r.stream_id for r in rows}))
    receipt = ErasureRecorded(
        subject=subject,
        agent=agent,
        subject_digest=digest,
        streams=streams,
        keys_destroyed=destroyed,
        command=command,
    )
    result = store.append(
        ERASURE_STREAM,
        [receipt],
        expected_version=store.stream_version(ERASURE_STREAM),
    )
    rebuilt = _rebuild_views(store, views_at)
    agents = tuple(sorted({r.agent for r in rows if r.agent} | ({agent} - {""})))
    rebuilt_memory, others = _rebuild_memory(
        store, config, ledger_url, agents, contents
    )
    removed = _remove_media(store, config, attached)
    return ErasureReport(
        subject=subject,
        agent=agent,
        subject_digest=digest,
        streams=streams,
        keys_destroyed=destroyed,
        receipt_position=result.positions[0],
        views_rebuilt=rebuilt,
        memory_agents=rebuilt_memory,
        memory_not_rebuilt=others,
        media_removed=removed,
    )


def receipts_for(store: EventStore, stream_id: str) -> list[Recorded]:
    """Return the erasure receipts naming a stream, oldest first."""
    return [
        r
        for r in store.read_stream(ERASURE_STREAM)
        if isinstance(r.event, ErasureRecorded) and stream_id in r.event.streams
    ]


def erased_session(store: EventStore, target: str, agent: str | None) -> str | None:
    """Say how a session a command names was erased (``None``: it was not).

    ``target`` is a stream id or a session key (of ``agent``, or of the agent a
    receipt names); the newest receipt naming it is described: when, by which
    command, how many keys. Nothing of the session is left to say more.
    """
    from turnledger.ledger.errors import LedgerError, quote_value  # noqa: PLC0415

    for recorded in reversed(store.read_stream(ERASURE_STREAM)):
        receipt = recorded.event
        if not isinstance(receipt, ErasureRecorded):
            continue
        streams = set(receipt.streams)
        named = target in streams
        for candidate in {a for a in (agent, receipt.agent) if a}:
            try:
                named = named or str(session_stream_id(candidate, target)) in streams
            except LedgerError:  # a control character: no such session
                return None
        if receipt.subject == "user":
            named = named or receipt.subject_digest == subject_digest(
                "user", "", target
            )
        if named:
            return (
                f"session {quote_value(target)} erased: its events can no longer be"
                f" read (erasure receipt at position {recorded.position},"
                f" {recorded.recorded_at.isoformat(timespec='seconds')}, by"
                f" {receipt.command or 'an erasure'}, {receipt.keys_destroyed} data"
                " keys destroyed)"
            )
    return None


def _with_tool_memories(
    store: EventStore, keys: SubjectKeyStore, rows: list[KeyRow], sessions: list[str]
) -> list[KeyRow]:
    """Add the keys of the memory entries and triples the sessions' turns wrote.

    A durable entry (category ``core``...) is stored without its session; it
    is found among the agent's memory events (read while the keys live) by its
    key and its content, or by its key and its place between the call's
    ``assistant.message`` and its ``tool_result.recorded`` (a content sealed
    by ``[memory] shredding`` differs from the call's). A knowledge triple is
    found by its provenance, the turn it was captured in.
    """
    # Per agent: (memory key, content, positions the call's write lies between),
    # and the sessions' turn ids (a knowledge capture's provenance).
    wanted: dict[str, list[tuple[str, str, int, int]]] = {}
    turns: dict[str, set[str]] = {}
    agents = {r.stream_id: r.agent for r in rows if r.kind == "session"}
    for stream in sessions:
        agent = agents.get(stream)
        if agent:
            calls, turn_ids = _memory_calls(store, UUID(stream))
            wanted.setdefault(agent, []).extend(calls)
            turns.setdefault(agent, set()).update(turn_ids)
    found: list[bytes] = []
    for agent, calls in wanted.items():
        for row in store.backend.select_stream(
            memory_stream_id(agent),
            gt=0,
            lte=None,
            limit=None,
            topics=["memory.stored", "knowledge.captured"],
        ):
            event = store.decode(row).event
            if isinstance(event, KnowledgeCaptured):
                hit = event.provenance in turns[agent]
            else:
                hit = isinstance(event, MemoryStored) and any(
                    event.key == key
                    and (event.content == content or after < row.position < until)
                    for key, content, after, until in calls
                )
            key_id = sealed_key_id(store.mapper, row) if hit else None
            if key_id is not None:
                found.append(key_id)
    known = {r.key_id for r in rows}
    extra = [r for r in keys.select(key_ids=found) if r.key_id not in known]
    return rows + extra


def _memory_calls(
    store: EventStore, stream: UUID
) -> tuple[list[tuple[str, str, int, int]], set[str]]:
    """Return a session's ``memory_store`` calls, and its turn ids.

    Each call as its key, its content, and the positions of its
    ``assistant.message`` and of its result.
    """
    recorded = store.read_stream(stream)
    turn_ids = {r.event.turn_id for r in recorded if isinstance(r.event, TurnStarted)}
    results = {
        r.event.call_id: r.position
        for r in recorded
        if isinstance(r.event, ToolResultRecorded)
    }
    calls = []
    for r in recorded:
        if isinstance(r.event, AssistantMessage):
            for call in r.event.tool_calls:
                stored = _stored_by(call.name, call.arguments)
                if stored is not None:
                    until = results.get(call.id, r.position)
                    calls.append((*stored, r.position, until))
    return calls, turn_ids


def _stored_by(tool: str, arguments: str) -> tuple[str, str] | None:
    """The (key, content) a ``memory_store`` call's arguments name, if any."""
    if tool != "memory_store":
        return None
    try:
        args = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return None
    if not isinstance(args, dict):
        return None
    key, content = args.get("key"), args.get("content")
    if isinstance(key, str) and isinstance(content, str):
        return key, content
    return None


def _attachments(store: EventStore, sessions: list[str]) -> set[str]:
    """The digests of the media the sessions attached (read while keys live)."""
    found: set[str] = set()
    for stream in sessions:
        for recorded in store.read_stream(UUID(stream), types=[MediaAttached]):
            if isinstance(recorded.event, MediaAttached):
                found.add(recorded.event.sha256)
    return found


def _rebuild_views(store: EventStore, views_at: str) -> dict[str, int]:
    """Rebuild every projection from the ledger; rewrite the view store."""
    from turnledger.ledger.file_keys import cipher_key_of  # noqa: PLC0415
    from turnledger.pipeline.bootstrap import open_view_store  # noqa: PLC0415
    from turnledger.projections.catalog import PROJECTIONS  # noqa: PLC0415
    from turnledger.projections.runner import ProjectionRunner  # noqa: PLC0415
    from turnledger.projections.views import bind_views  # noqa: PLC0415

    postgres = views_at.startswith(("postgresql://", "postgres://"))
    key = cipher_key_of(store)
    views = bind_views(
        open_view_store(views_at, cipher_key=None if postgres else key), store
    )
    try:
        rebuilt = ProjectionRunner(store, views, list(PROJECTIONS)).rebuild()
    finally:
        views.close()
    if postgres:
        _vacuum_postgres(views_at, ("turnledger_view_state", "turnledger_tracking"))
    else:
        _vacuum_sqlite(views_at, "views", key)
    return rebuilt


def _connect(path: str, purpose: FilePurpose, cipher_key: str) -> sqlite3.Connection:
    """Open a side file as its store does (SQLCipher with a cipher key)."""
    from turnledger.ledger.file_keys import file_key  # noqa: PLC0415
    from turnledger.ledger.sqlite.encrypted import connect_file  # noqa: PLC0415

    return connect_file(
        path,
        key=file_key(purpose, cipher_key),
        what=f"{purpose} file",
        clear_remedy="",
    )


def _rewrite(conn: sqlite3.Connection, path: str) -> None:
    """Rewrite a SQLite file with ``secure_delete`` on and truncate its WAL."""
    try:
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as e:
        msg = f"Expected to rewrite {path!r} after the erasure, found: {e}"
        raise ErasureError(msg) from e


def _vacuum_sqlite(path: str, purpose: FilePurpose, cipher_key: str) -> None:
    """Rewrite a SQLite side file with ``secure_delete`` on; truncate its WAL."""
    conn = _connect(path, purpose, cipher_key)
    try:
        _rewrite(conn, path)
    finally:
        conn.close()


def _vacuum_postgres(url: str, tables: tuple[str, ...]) -> None:
    """``VACUUM FULL`` the named tables of the URL's schema."""
    import psycopg  # noqa: PLC0415 - optional extra
    from psycopg import sql  # noqa: PLC0415

    from turnledger.ledger.postgres.recorder import PostgresURL  # noqa: PLC0415

    parts = PostgresURL(url)
    with psycopg.connect(
        dbname=parts.dbname,
        host=parts.host,
        port=parts.port,
        user=parts.user,
        password=parts.password or None,
        autocommit=True,
    ) as conn:
        for table in tables:
            conn.execute(
                sql.SQL("VACUUM FULL {}.{}").format(
                    sql.Identifier(parts.schema), sql.Identifier(table)
                )
            )


def _erased_contents(store: EventStore, rows: list[KeyRow]) -> set[str]:
    """The contents of the memory entries about to be erased (keys still live)."""
    ids = {r.key_id for r in rows if r.kind == "memory"}
    found: set[str] = set()
    for agent in sorted({r.agent for r in rows if r.kind == "memory"}):
        for row in store.backend.select_stream(
            memory_stream_id(agent),
            gt=0,
            lte=None,
            limit=None,
            topics=["memory.stored"],
        ):
            if sealed_key_id(store.mapper, row) in ids:
                event = store.decode(row).event
                if isinstance(event, MemoryStored):
                    found.add(event.content)
    return found


def _drop_cached_vectors(path: Path, cipher_key: str, contents: set[str]) -> None:
    """Delete the erased contents' vectors from a memory file's embedding cache."""
    from turnledger.projections.memory.sqlite.cache import (  # noqa: PLC0415
        content_hash,
    )

    hashes = [content_hash(text) for text in sorted(contents)]
    if not hashes or not path.exists():
        return
    conn = _connect(str(path), "memory", cipher_key)
    try:
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            conn.execute(f"DELETE FROM embedding_cache WHERE hash IN ({marks})", chunk)
        _rewrite(conn, str(path))
    finally:
        conn.close()


def _rebuild_memory(
    store: EventStore,
    config: Config,
    ledger_url: str,
    agents: tuple[str, ...],
    contents: set[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Empty, catch up and scrub the SQLite memory of each agent concerned.

    The erased entries' vectors leave the embedding cache too. Returns the
    agents rebuilt, and ``agent (kind)`` of those of another kind.
    """
    from turnledger.ledger.file_keys import cipher_key_of  # noqa: PLC0415
    from turnledger.pipeline.memory import MemoryService  # noqa: PLC0415
    from turnledger.projections.memory.shred import is_sealed  # noqa: PLC0415
    from turnledger.projections.memory.sqlite import SQLiteMemory  # noqa: PLC0415

    service = MemoryService(store, config, ledger_url=ledger_url)
    rebuilt: list[str] = []
    others: list[str] = []
    files: set[Path] = set()
    try:
        for agent in agents:
            kind = service.backend_ref(agent).partition(".")[0]
            if kind == "none":
                continue
            backend = service.backend(agent) if kind == "sqlite" else None
            if not isinstance(backend, SQLiteMemory):  # never opened here
                others.append(f"{agent} ({kind})")
                continue
            backend.bind(store.backend.ledger_id, -1)  # -1: every row is stale
            backend = service.backend(agent)  # caught up from the ledger again
            if isinstance(backend, SQLiteMemory):
                backend.scrub()
            rebuilt.append(agent)
            files.add(service.sqlite_path(service.backend_ref(agent)))
        # A content sealed by [memory] shredding was embedded opened.
        keys = service.keys() if any(map(is_sealed, contents)) else None
        opened = {keys.open(c) if keys is not None else c for c in contents}
    finally:
        service.close()
    for path in sorted(files):
        _drop_cached_vectors(path, cipher_key_of(store), opened)
    return tuple(rebuilt), tuple(others)


def _remove_media(store: EventStore, config: Config, attached: set[str]) -> int:
    """Overwrite and delete the attachments no readable event references."""
    from turnledger.pipeline.media import MEDIA_DIR  # noqa: PLC0415

    if not attached:
        return 0
    for recorded in store.iter_all(types=[MediaAttached]):
        if isinstance(recorded.event, MediaAttached):
            attached.discard(recorded.event.sha256)
    removed = 0
    for digest in sorted(attached):
        path = Path(config.data_dir) / MEDIA_DIR / digest
        if not path.is_file():
            continue
        size = path.stat().st_size
        with path.open("r+b") as handle:
            handle.write(b"\0" * size)
            handle.flush()
            os.fsync(handle.fileno())
        path.unlink()
        removed += 1
    return removed
