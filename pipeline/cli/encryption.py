"""``turnledger encrypt-files``: encrypt the clear SQLite files beside a ledger."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    open_ledger,
    place,
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
    memory key store. (The erasure key store is encrypted before the ledger
    can open: see :func:`cmd_encrypt_files`.)
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

    With TURNLEDGER_CIPHER_KEY set, the view store, the SQLite memory databases,
    the memory key store and the erasure key store are SQLCipher files; one
    made before the key was set is refused at open. This encrypts each such
    file in place (its rows, indexes and full-text tables kept) with the key
    derived for it, once the ledger accepts the key; encrypted ones are left
    alone. Stop the processes that use them first: a file another process has
    open is refused (nothing changed). --json prints each file, its kind and
    whether it was encrypted now.

    Example: TURNLEDGER_CIPHER_KEY=... turnledger encrypt-files
    """
    from turnledger.ledger.file_keys import FileKeyError, decode_cipher_key
    from turnledger.ledger.key_check import CIPHER_KEY_ENV
    from turnledger.ledger.location import SQLITE_SCHEME
    from turnledger.ledger.sqlite.encrypted import is_clear_database as clear
    from turnledger.ledger.subject_keys import keys_path

    cipher_key = os.environ.get(CIPHER_KEY_ENV)
    if not cipher_key:
        msg = f"Expected a cipher key ({CIPHER_KEY_ENV}) to encrypt with, found none"
        raise UsageError(msg)
    raw = decode_cipher_key(cipher_key)  # a malformed key: refused here
    report = []
    try:
        store = open_ledger(args)
    except FileKeyError as e:
        # The ledger opens its erasure key store whenever it exists, and a clear
        # one is refused while a key is set; open_store runs the ledger's own
        # key check first and lets that refusal through only when the key fits
        # the ledger (a wrong key is refused as the ledger's). So the key is
        # the ledger's: the erasure key store is encrypted, then the ledger opens.
        erasure = Path(keys_path(target(args).removeprefix(SQLITE_SCHEME)))
        if e.path != str(erasure) or not clear(erasure):
            raise
        report.append(_encrypt(erasure, "erasure", "erasure key store", raw))
        store = open_ledger(args)
    with store:
        report += [_encrypt(*found, raw) for found in side_files(args, store)]
    if args.json:
        print_json(report)
        return 0
    for row in report:
        state = "encrypted" if row["encrypted_now"] else "already encrypted"
        sys.stdout.write(f"{state:<18} {row['kind']:<17} {row['file']}\n")
    return 0


def _encrypt(
    path: Path, purpose: FilePurpose, what: str, raw: bytes
) -> dict[str, object]:
    """Encrypt one file in place with its key derived from the raw cipher key."""
    import sqlite3

    from turnledger.ledger.file_keys import derive_file_key
    from turnledger.ledger.sqlite.encrypted import encrypt_in_place

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
    return {"file": str(path), "kind": what, "encrypted_now": done}


COMMANDS: Final[dict[str, Command]] = {"encrypt-files": cmd_encrypt_files}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the command's options."""
    if name == "encrypt-files":
        p.add_argument("--views", default=None, type=place, help="the view store file")
        p.add_argument("--json", action="store_true", help="print JSON")
