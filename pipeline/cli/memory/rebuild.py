"""``turnledger memory rebuild``: replay one agent's memory events into a store.

``--out DIR`` builds a fresh store of ``--backend`` inside DIR and keeps it
(SQLite ``DIR/memory.db``, Markdown ``DIR/MEMORY.md`` + ``DIR/memory/``, Qdrant
``DIR/qdrant``; PostgreSQL needs ``--url``, or the configured URL, and DIR is not
used). Only ``--agent``'s events are applied, with sealed contents opened by the
live key store (:func:`turnledger.pipeline.memory.rebuild_into`).

Without ``--out`` the agent's configured store is rebuilt in place, after a
backup beside it (:func:`turnledger.pipeline.memory.rebuild_in_place`): a SQLite
file (every agent that shares it is rebuilt with it) or the agent's Markdown
workspace. Another kind, or a ``--backend`` other than the configured one, is
refused with a message saying to pass ``--out``. This module reads the arguments
and prints what the rebuild did.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from turnledger.pipeline.cli.common import UsageError, print_json
from turnledger.pipeline.memory import (
    InPlaceRefusedError,
    MemoryService,
    forgotten_count,
    rebuild_in_place,
    rebuild_into,
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


def _in_place(service: MemoryService, args: argparse.Namespace) -> tuple[int, str]:
    """Rebuild the configured store after a backup; return (entries, path)."""
    try:
        entries, path = rebuild_in_place(service, args.agent, args.backend)
    except InPlaceRefusedError as e:
        msg = (
            f"Expected --out DIR to rebuild {e.agent!r} into a {e.kind} store: in "
            f"place, only the configured sqlite or markdown store is rebuilt "
            f"(agents.{e.agent}.memory is {e.configured})"
        )
        raise UsageError(msg) from None
    return entries, str(path)


def rebuild(service: MemoryService, args: argparse.Namespace) -> int:
    """Run ``memory rebuild`` (see the module docstring); print what it did."""
    started = time.perf_counter()
    if args.out:
        where = Path(args.out)
        if where.exists() and not where.is_dir():
            msg = f"Expected --out to be a folder, found a file: {where}"
            raise UsageError(msg)
        url = _postgres_url(service, args) if args.backend == "postgres" else None
        entries = rebuild_into(service, args.agent, args.backend, where, url=url)
        path = url.split("@")[-1] if url else str(where)
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
