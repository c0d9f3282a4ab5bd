"""Rebuilding one agent's memory from the ledger into a store.

:func:`rebuild_into` builds a fresh store of a backend kind inside a folder and
keeps it (SQLite ``DIR/memory.db``, Markdown ``DIR/MEMORY.md`` + ``DIR/memory/``,
Qdrant ``DIR/qdrant``; PostgreSQL is built in the database a URL names and the
folder is not used). Only that agent's events are applied, by the projection
runner's one catch-up loop (the fresh store is served through a
:class:`~turnledger.pipeline.memory.service.MemoryService`, whose catch-up hands
the backend to :func:`turnledger.projections.runner.catch_up`). Sealed contents
are opened with the live key store, so what is still live is readable and what
was shredded reads ``[forgotten]``; forgotten entries stay forgotten on every
backend.

A rebuilt SQLite store has every vector computed before the rebuild returns
(where the embedder answers).

:func:`rebuild_in_place` rebuilds the agent's configured store after a backup
beside it (``<file>.bak-<UTC stamp>``): a SQLite file (every agent that shares
it is rebuilt with it) or the agent's Markdown workspace; another kind, or a
kind other than the configured one, is refused
(:class:`InPlaceRefusedError`).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from turnledger.ledger.events import MemoryStored
from turnledger.ledger.file_keys import cipher_key_of, file_key
from turnledger.ledger.sqlite.encrypted import connect_file
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import StorageConfig
from turnledger.pipeline.memory.service import MemoryService
from turnledger.pipeline.memory.wiring import MemoryAccessError
from turnledger.projections.memory.errors import (
    MemoryStoreError,
    translate_memory_error,
)
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.memory.shred import FORGOTTEN
from turnledger.projections.memory.sqlite._schema import CLEAR_MEMORY_REMEDY
from turnledger.projections.record import memory_provenance

IN_PLACE_KINDS = frozenset({"sqlite", "markdown"})
"""The backend kinds a rebuild in place replaces (a file or a workspace)."""


class RebuildError(MemoryAccessError):
    """A rebuild cannot be made: its target store cannot be built or used."""


class InPlaceRefusedError(RebuildError):
    """A rebuild in place was asked of a kind that is not the configured one.

    Attributes:
        agent: The agent whose memory was to be rebuilt.
        kind: The backend kind asked for.
        configured: The kind ``agents.<agent>.memory`` names.
    """

    def __init__(self, agent: str, kind: str, configured: str) -> None:
        self.agent = agent
        self.kind = kind
        self.configured = configured
        super().__init__(
            f"Expected the configured sqlite or markdown store of {agent!r} to "
            f"rebuild in place, found a {kind} store asked for "
            f"(agents.{agent}.memory is {configured}): rebuild it into a folder"
        )


def rebuild_into(
    service: MemoryService,
    agent: str,
    kind: str,
    where: Path,
    *,
    url: str | None = None,
) -> int:
    """Build a fresh ``kind`` store of the agent's memory inside ``where``; keep it.

    The folder is created when missing, and removed again when the build
    fails (nothing half-written is left).

    Args:
        service: The live memory service (its ledger, configuration and key store).
        agent: Whose events are applied.
        kind: The backend kind built (``sqlite``, ``markdown``, ``qdrant``,
            ``postgres``...).
        where: The folder the store is built in.
        url: The PostgreSQL database a ``postgres`` store is built in.

    Returns:
        The agent's entries in the fresh store.

    Raises:
        RebuildError: ``postgres`` without a URL, or a store that cannot be
            opened or written.
    """
    if kind == "postgres" and not url:
        msg = "Expected a PostgreSQL URL to rebuild into, found none"
        raise RebuildError(msg)
    created = not where.exists()
    where.mkdir(parents=True, exist_ok=True)
    try:
        cfg = _fresh_config(service.config, agent, kind, where, url)
        return _build(service, agent, kind, where, cfg, one_agent=True)
    except BaseException:
        if created:
            shutil.rmtree(where, ignore_errors=True)  # nothing half-written
        raise


def rebuild_in_place(service: MemoryService, agent: str, kind: str) -> tuple[int, Path]:
    """Rebuild the agent's configured store after a backup beside it.

    The service's backends are closed first (the live store is replaced).

    Returns:
        The agent's entries and the rebuilt store (a SQLite file or a workspace).

    Raises:
        InPlaceRefusedError: ``kind`` is not the agent's configured kind, or is
            neither ``sqlite`` nor ``markdown``.
        RebuildError: The staging store cannot be opened or written.
    """
    configured = service.backend_ref(agent).partition(".")[0]
    if kind != configured or kind not in IN_PLACE_KINDS:
        raise InPlaceRefusedError(agent, kind, configured)
    service.close()
    if kind == "markdown":
        workspace = service.workspace(agent)
        backup = workspace.with_name(f"{workspace.name}.bak-{_stamp()}")
        staging = Path(tempfile.mkdtemp(prefix=".rebuild-", dir=workspace.parent))
        cfg = _fresh_config(service.config, agent, kind, staging, None)
        entries = _build(service, agent, kind, staging, cfg, one_agent=True)
        if workspace.exists():
            workspace.rename(backup)
        staging.rename(workspace)
        return entries, workspace
    ref = service.backend_ref(agent)
    live = service.sqlite_path(ref)
    alias = ref.partition(".")[2]
    staging = Path(tempfile.mkdtemp(prefix=".rebuild-", dir=live.parent))
    storage = {
        **service.config.storage,
        "sqlite": {
            **service.config.storage.get("sqlite", {}),
            alias: StorageConfig(path=str(staging / "memory.db")),
        },
    }
    # Every agent mapped to this file is rebuilt with it, as configured.
    cfg = msgspec.structs.replace(service.config, storage=storage)
    try:
        entries = _build(service, agent, kind, staging, cfg, one_agent=False)
        if live.exists():
            _backup_sqlite(
                live,
                live.with_name(f"{live.name}.bak-{_stamp()}"),
                cipher_key_of(service.store),
            )
        for suffix in ("-wal", "-shm"):
            Path(f"{live}{suffix}").unlink(missing_ok=True)
        (staging / "memory.db").replace(live)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return entries, live


def forgotten_count(service: MemoryService, agent: str) -> int:
    """Count the agent's keys that read as forgotten after a rebuild.

    A key whose last event is ``memory.forgotten``, or whose stored content was
    sealed under a key since destroyed.
    """
    count = 0
    for key in memory_provenance(service.store, agent):
        stored = [r.event for r in key.events if isinstance(r.event, MemoryStored)]
        if key.forgotten or (
            stored
            and service.keys_path.exists()
            and service.keys().open(stored[-1].content) == FORGOTTEN
        ):
            count += 1
    return count


def _fresh_config(
    config: Config, agent: str, kind: str, where: Path, url: str | None
) -> Config:
    storage: dict[str, dict[str, StorageConfig]] = {}
    if kind == "sqlite":
        storage["sqlite"] = {"default": StorageConfig(path=str(where / "memory.db"))}
    elif kind == "qdrant":
        storage["qdrant"] = {"default": StorageConfig(path=str(where / "qdrant"))}
    elif kind == "postgres":
        storage["postgres"] = {"default": StorageConfig(url=url)}
    own = msgspec.structs.replace(
        config.agent(agent),
        memory=kind,
        read_memory_from=(),
        workspace=str(where) if kind == "markdown" else None,
    )
    return msgspec.structs.replace(
        config, storage=storage, agents={agent: own}, data_dir=str(where)
    )


def _build(
    service: MemoryService,
    agent: str,
    kind: str,
    where: Path,
    cfg: Config,
    *,
    one_agent: bool,
) -> int:
    fresh = MemoryService(
        service.store,
        cfg,
        ledger_url=str(where / "rebuild.db"),
        shredding=False,
        keys_path=service.keys_path,
        only_agents=frozenset({agent}) if one_agent else None,
    )
    try:
        backend = _open(fresh, agent, kind)
        # SQLite and PostgreSQL stores compute vectors off the write path: a
        # rebuild waits for all of them (one that fails leaves its row to
        # ``reindex``).
        drain = getattr(backend, "embed_pending", None)
        while callable(drain) and drain():  # until a pass embeds nothing more
            pass
        return backend.count(agents=[agent])
    finally:
        fresh.close()


def _open(fresh: MemoryService, agent: str, kind: str) -> MemoryBackend:
    """Build the store; one that cannot open or write is a rebuild error."""
    try:
        return fresh.backend(agent)
    except (MemoryStoreError, OSError) as e:
        detail = " ".join(str(e).split())
        msg = f"Expected a folder to rebuild into, found one that fails: {detail}"
        raise RebuildError(msg) from None
    except Exception as e:  # noqa: BLE001 - a driver's error becomes one typed error
        detail = " ".join(str(e).split())  # driver messages span lines
        msg = f"Expected a {kind} store to rebuild into, found none usable: {detail}"
        raise RebuildError(msg) from None


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _backup_sqlite(live: Path, backup: Path, cipher_key: str) -> None:
    """Copy the live store (a consistent snapshot); a driver error leaves typed.

    With a cipher key both are encrypted with the memory key (SQLCipher).
    """
    started = time.monotonic()
    key = file_key("memory", cipher_key)
    try:
        source = connect_file(
            live, key=key, what="memory database", clear_remedy=CLEAR_MEMORY_REMEDY
        )
        target = connect_file(
            backup, key=key, what="memory backup", clear_remedy=CLEAR_MEMORY_REMEDY
        )
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    except sqlite3.Error as e:
        store = f"sqlite memory store at {str(live)!r} (backup to {str(backup)!r})"
        typed = translate_memory_error(
            e, store=store, waited=time.monotonic() - started
        )
        raise typed or MemoryStoreError(str(e), store=store) from e
