"""``turnledger memory rebuild``: replay one agent's memory events into a store.

``--out DIR`` builds a fresh store of ``--backend`` inside DIR and keeps it
(SQLite ``DIR/memory.db``, Markdown ``DIR/MEMORY.md`` + ``DIR/memory/``, Qdrant
``DIR/qdrant``; PostgreSQL needs ``--url``, or the configured URL, and DIR is not
used). Only ``--agent``'s events are applied, by the projection runner's one
catch-up loop (the fresh store is served through :class:`MemoryService`, whose
catch-up hands the backend to :func:`turnledger.projections.runner.catch_up`).
Sealed contents are opened with the live key store, so what is still live is
readable and what was shredded reads ``[forgotten]``; forgotten entries stay
forgotten on every backend.

Without ``--out`` the agent's configured store is rebuilt in place, after a
backup beside it (``<file>.bak-<UTC stamp>``): a SQLite file (every agent that
shares it is rebuilt with it) or the agent's Markdown workspace. Another kind,
or a ``--backend`` other than the configured one, is refused with a message
saying to pass ``--out``.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from turnledger.ledger.events import MemoryStored
from turnledger.pipeline.cli.common import UsageError, print_json
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import StorageConfig
from turnledger.pipeline.memory import MemoryService
from turnledger.projections.memory.errors import (
    MemoryStoreError,
    translate_memory_error,
)
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.memory.shred import FORGOTTEN
from turnledger.projections.record import memory_provenance


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


def _postgres_url(service: MemoryService, args: argparse.Namespace) -> str:
    url = args.url or service.config.storage_for("postgres").url
    if not url:
        msg = "Expected --url (or storage.postgres.default.url) to rebuild into"
        raise UsageError(msg)
    if not url.startswith(("postgresql://", "postgres://")):
        msg = f"Expected a postgresql:// URL to rebuild into, found {url!r}"
        raise UsageError(msg)
    return url


def _open(fresh: MemoryService, agent: str, kind: str) -> MemoryBackend:
    """Build the store; one that cannot open or write is a usage error."""
    try:
        return fresh.backend(agent)
    except (MemoryStoreError, OSError) as e:
        detail = " ".join(str(e).split())
        msg = f"Expected a folder to rebuild into, found one that fails: {detail}"
        raise UsageError(msg) from None
    except Exception as e:  # noqa: BLE001 - a driver's error becomes one usage line
        detail = " ".join(str(e).split())  # driver messages span lines
        msg = f"Expected a {kind} store to rebuild into, found none usable: {detail}"
        raise UsageError(msg) from None


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


def _build(
    service: MemoryService,
    args: argparse.Namespace,
    where: Path,
    *,
    one_agent: bool,
    cfg: Config | None = None,
) -> int:
    if cfg is None:
        url = _postgres_url(service, args) if args.backend == "postgres" else None
        cfg = _fresh_config(service.config, args.agent, args.backend, where, url)
    fresh = MemoryService(
        service.store,
        cfg,
        ledger_url=str(where / "rebuild.db"),
        shredding=False,
        keys_path=service.keys_path,
        only_agents=frozenset({args.agent}) if one_agent else None,
    )
    try:
        return _open(fresh, args.agent, args.backend).count(agents=[args.agent])
    finally:
        fresh.close()


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _in_place(service: MemoryService, args: argparse.Namespace) -> tuple[int, str]:
    """Rebuild the configured store after a backup; return (entries, path)."""
    agent, kind = args.agent, args.backend
    configured = service.backend_ref(agent).partition(".")[0]
    if kind != configured or kind not in {"sqlite", "markdown"}:
        msg = (
            f"Expected --out DIR to rebuild {agent!r} into a {kind} store: in place, "
            f"only the configured sqlite or markdown store is rebuilt "
            f"(agents.{agent}.memory is {configured})"
        )
        raise UsageError(msg)
    service.close()
    if kind == "markdown":
        workspace = service.workspace(agent)
        backup = workspace.with_name(f"{workspace.name}.bak-{_stamp()}")
        staging = Path(tempfile.mkdtemp(prefix=".rebuild-", dir=workspace.parent))
        entries = _build(service, args, staging, one_agent=True)
        if workspace.exists():
            workspace.rename(backup)
        staging.rename(workspace)
        return entries, str(workspace)
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
        entries = _build(service, args, staging, one_agent=False, cfg=cfg)
        if live.exists():
            _backup_sqlite(live, live.with_name(f"{live.name}.bak-{_stamp()}"))
        for suffix in ("-wal", "-shm"):
            Path(f"{live}{suffix}").unlink(missing_ok=True)
        (staging / "memory.db").replace(live)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return entries, str(live)


def _backup_sqlite(live: Path, backup: Path) -> None:
    """Copy the live store (a consistent snapshot); a driver error leaves typed."""
    started = time.monotonic()
    try:
        source = sqlite3.connect(live)
        target = sqlite3.connect(backup)
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


def rebuild(service: MemoryService, args: argparse.Namespace) -> int:
    """Run ``memory rebuild`` (see the module docstring); print what it did."""
    started = time.perf_counter()
    if args.out:
        where = Path(args.out)
        if where.exists() and not where.is_dir():
            msg = f"Expected --out to be a folder, found a file: {where}"
            raise UsageError(msg)
        created = not where.exists()
        where.mkdir(parents=True, exist_ok=True)
        try:
            entries = _build(service, args, where, one_agent=True)
        except BaseException:
            if created:
                shutil.rmtree(where, ignore_errors=True)  # nothing half-written
            raise
        path = str(where)
        if args.backend == "postgres":
            path = _postgres_url(service, args).split("@")[-1]
    else:
        entries, path = _in_place(service, args)
    report = {
        "agent": args.agent,
        "backend": args.backend,
        "path": path,
        "entries": entries,
        "forgotten": forgotten_count(service, args.agent),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.json:
        print_json(report)
        return 0
    print(
        f"rebuilt {entries} entries of {args.agent} into a fresh {args.backend} "
        f"store at {path} ({report['forgotten']} forgotten, {report['seconds']} s)"
    )
    return 0
