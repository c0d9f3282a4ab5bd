"""Projection commands: lifecycle, project (status, catch-up, rebuild)."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
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
    from turnledger.ledger.store import EventStore
    from turnledger.projections.runner import ProjectionRunner
    from turnledger.projections.views import ViewStore


def views_path(args: argparse.Namespace) -> str:
    """Where views live.

    --views, else $TURNLEDGER_VIEWS, else the configuration's ``views``, else the
    PostgreSQL ledger itself, else a file beside a SQLite ledger.
    """
    from turnledger.pipeline.bootstrap import views_location

    return views_location(config(args), target(args), getattr(args, "views", None))


def open_views(args: argparse.Namespace, store: EventStore) -> ViewStore:
    """Open the view store a command uses, tied to ``store`` (``bind_views``)."""
    import sqlite3

    from turnledger.ledger.file_keys import cipher_key_of
    from turnledger.pipeline.bootstrap import open_view_store
    from turnledger.projections.views import bind_views

    where = views_path(args)
    if where.startswith(("postgresql://", "postgres://")):
        # PostgreSQL support is an optional extra: import it only when used.
        import psycopg

        try:
            return bind_views(open_view_store(where), store)
        except psycopg.Error as e:
            raise UsageError(_unusable_views(where, e)) from None
    try:
        return bind_views(
            open_view_store(where, cipher_key=cipher_key_of(store)), store
        )
    except sqlite3.Error as e:  # not a database, a folder, no such folder
        raise UsageError(_unusable_views(where, e)) from None


def _unusable_views(where: str, error: Exception) -> str:
    detail = " ".join(str(error).split())  # one line, whatever the driver wrote
    return f"Expected a view store at {where!r}, found one that cannot open: {detail}"


def cmd_lifecycle(args: argparse.Namespace) -> int:
    """Print the payload lifecycle table (owner, durability, scope, review checks).

    Generated from the declarations in the code; docs/lifecycle.md is its copy.
    With --json: surfaces (surface, owner, durability, scope, reviewers_check)
    and at_rest (surface, files, encrypted, why).

    Example: turnledger lifecycle --json
    """
    from turnledger.pipeline.lifecycle import (
        AT_REST,
        all_declarations,
        lifecycle_markdown,
    )

    if not args.json:
        sys.stdout.write(lifecycle_markdown())
        return 0
    print_json(
        {
            "surfaces": all_declarations(),
            "at_rest": [
                {"surface": name, "files": files, "encrypted": encrypted, "why": why}
                for name, files, encrypted, why in AT_REST
            ],
        }
    )
    return 0


class _Bar:
    """A one-line progress bar on stderr."""

    def __init__(self) -> None:
        self.shown = False
        self.name = ""

    def __call__(self, name: str, at: int, total: int) -> None:
        if self.shown and name != self.name:
            sys.stderr.write("\n")
        self.name = name
        width = 30
        done = width if total <= 0 else min(width, width * at // max(total, 1))
        percent = 100 if total <= 0 else min(100, 100 * at // max(total, 1))
        bar = "#" * done + "-" * (width - done)
        sys.stderr.write(f"\r{name:<16} [{bar}] {percent:3d}% {at}/{total}")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def cmd_project(args: argparse.Namespace) -> int:
    """Show, catch up, rebuild or run the projections' views.

    status: each projection's tracking position against the ledger's last one.
    catch-up: apply what is new. rebuild: drop the views and replay the ledger
    (a progress bar shows on stderr; a killed rebuild resumes with catch-up).
    run: a worker process that follows the ledger until stopped (SIGTERM); one
    active worker per projection (advisory lock on PostgreSQL, a file lock on
    SQLite), others stand by.

    Example: turnledger project rebuild --projection session_history
    """
    from turnledger.projections.catalog import PROJECTIONS, projection_named
    from turnledger.projections.runner import ProjectionRunner

    try:
        chosen = (
            [projection_named(args.projection)]
            if args.projection
            else list(PROJECTIONS)
        )
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    with open_ledger(args) as store:
        views = open_views(args, store)
        try:
            runner = ProjectionRunner(store, views, chosen)
            names = [p.name for p in chosen]
            if args.action == "run":
                return _work(runner)
            if args.action == "status":
                last = store.max_position()
                rows = [(n, views.tracking(n)) for n in names]
                if args.json:
                    print_json(
                        [
                            {"projection": n, "position": p, "ledger": last}
                            for n, p in rows
                        ]
                    )
                else:
                    for n, p in rows:
                        print(f"{n:<16} at {p} (behind {last - p})")
                return 0
            bar = _Bar()
            if args.action == "rebuild":
                applied = runner.rebuild(names=names, progress=bar)
            else:
                applied = runner.catch_up(names=names, progress=bar)
            bar.end()
        finally:
            views.close()
    if args.json:
        print_json(applied)
    else:
        for name, count in applied.items():
            print(f"{name}: {count} events applied")
    return 0


def _work(runner: ProjectionRunner) -> int:
    import os
    import signal
    import threading

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"worker {os.getpid()} started", flush=True)
    runner.work(stop, on_lock=lambda name: print(f"worker holds {name}", flush=True))
    print(f"worker {os.getpid()} stopped", flush=True)
    return 0


COMMANDS: Final[dict[str, Command]] = {
    "lifecycle": cmd_lifecycle,
    "project": cmd_project,
}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add a projection command's options."""
    if name == "lifecycle":
        p.add_argument("--json", action="store_true", help="print JSON")
    if name == "project":
        p.add_argument("action", choices=["status", "catch-up", "rebuild", "run"])
        p.add_argument("--projection", default=None, help="one projection by name")
        p.add_argument("--views", default=None, type=place, help="the view store file")
        p.add_argument("--json", action="store_true", help="print JSON")
