"""``turnledger encrypt-files``: encrypt the clear SQLite files beside a ledger."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    open_ledger,
    print_json,
    target,
)

if TYPE_CHECKING:
    from turnledger.ledger.file_keys import FilePurpose
    from turnledger.ledger.store import EventStore


def side_files(
    args: argparse.Namespace, store: EventStore
) -> list[tuple[Path, FilePurpose, str]]:
    """The SQLite files beside the ledger: path, key purpose, kind (existing only).

    The view file, every ``sqlite`` memory database the configuration names
    (the default one included), the Lucid backend's local database and the
    key store.
    """
    from turnledger.pipeline.cli.projections import views_path
    from turnledger.pipeline.memory.wiring import MemoryWiring

    cfg = config(args)
    wiring = MemoryWiring(cfg, ledger_url=target(args), store=store)
    found: list[tuple[Path, FilePurpose, str]] = []
    views = views_path(args)
    if "://" not in views:
        found.append((Path(views), "views", "view store"))
    aliases = {"default", *cfg.storage.get("sqlite", {})}
    found += [
        (wiring.sqlite_path(f"sqlite.{alias}"), "memory", "memory database")
        for alias in sorted(aliases)
    ]
    lucid = wiring.base / f"{wiring.stem}.lucid.db"
    found.append((lucid, "memory", "memory database"))
    found.append((wiring.keys_path, "keys", "memory key store"))
    unique = {path.resolve(): (path, purpose, what) for path, purpose, what in found}
    return [entry for entry in unique.values() if entry[0].exists()]


def cmd_encrypt_files(args: argparse.Namespace) -> int:
    """Encrypt the clear SQLite files beside the ledger with the cipher key.

    With TURNLEDGER_CIPHER_KEY set, the view store, the SQLite memory databases
    and the key store are SQLCipher files; one made before the key was set is
    refused at open. This encrypts each such file in place (its rows, indexes
    and full-text tables kept) with the key derived for it; encrypted ones are
    left alone. Stop the processes that use them first: a file another process
    has open is refused (nothing changed). --json prints each file, its kind
    and whether it was encrypted now.

    Example: TURNLEDGER_CIPHER_KEY=... turnledger encrypt-files
    """
    import base64
    import sqlite3

    from turnledger.ledger.file_keys import cipher_key_of, derive_file_key
    from turnledger.ledger.sqlite.encrypted import encrypt_in_place

    report: list[dict[str, object]] = []
    with open_ledger(args) as store:
        cipher_key = cipher_key_of(store)
        if not cipher_key:
            msg = (
                "Expected a cipher key (TURNLEDGER_CIPHER_KEY) to encrypt with,"
                " found none"
            )
            raise UsageError(msg)
        raw = base64.b64decode(cipher_key)
        for path, purpose, what in side_files(args, store):
            key = derive_file_key(raw, purpose)
            try:
                done = encrypt_in_place(path, key=key, what=what)
            except sqlite3.Error as e:
                detail = " ".join(str(e).split())
                msg = (
                    f"Expected the {what} at {str(path)!r} free to encrypt, found"
                    f" it cannot be ({detail}): stop the processes using it and"
                    " run again; it was left as it was"
                )
                raise UsageError(msg) from None
            report.append({"file": str(path), "kind": what, "encrypted_now": done})
    if args.json:
        print_json(report)
        return 0
    for row in report:
        state = "encrypted" if row["encrypted_now"] else "already encrypted"
        sys.stdout.write(f"{state:<18} {row['kind']:<17} {row['file']}\n")
    return 0


COMMANDS: Final[dict[str, Command]] = {"encrypt-files": cmd_encrypt_files}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the command's options."""
    if name == "encrypt-files":
        p.add_argument("--views", default=None, help="the view store file")
        p.add_argument("--json", action="store_true", help="print JSON")
