"""``turnledger memory ...``: long-term memory from the command line.

Writes are recorded as events (source ``cli``) and applied to the agent's
backend; reads are scoped to the agent and its configured peers. This module
holds the command, its actions' options and the error mapping; the handlers
of the actions are in :mod:`pipeline.cli.memory.actions`.
"""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    open_ledger,
    target,
)

ACTIONS: Final = (
    "store",
    "recall",
    "context",
    "list",
    "get",
    "forget",
    "stats",
    "rebuild",
    "govern",
    "reindex",
    "export",
)


def cmd_memory(args: argparse.Namespace) -> int:
    """Long-term memory: store, recall, context, list, get, forget, stats, rebuild...

    store --agent A KEY CONTENT [--category core|daily|conversation|NAME]
      [--session S]; recall --agent A QUERY [--session S] [--limit N] [--json];
    context --agent A QUERY [--session S] [--origin ORIGIN] prints exactly the
    [Memory context] block a turn would get (nothing when no entry qualifies);
    list|get|forget|stats --agent A ... [--json]; rebuild --agent A --backend
    sqlite|markdown|postgres|qdrant [--out DIR] replays the agent's memory events
    into a fresh store kept in DIR, or (no --out) rebuilds the configured store
    in place after a backup; --json prints agent, backend, path, entries,
    forgotten, seconds;
    govern --agent A [--dry-run] applies retention as memory events (conversation
    rows expire after 30 days; daily rows are archived after 7, purged after 30).
    reindex --agent A embeds the rows still lacking a vector (progress on
    stderr; --json: embedded, pending); export --agent A [--session S]
    [--category C] [--since D] [--until D] prints the agent's own entries as
    JSON lines, oldest first.
    list|recall|get --at POSITION|ISO_TIME answer from the ledger as of then:
    stored, superseded and forgotten entries (a shredded one as [forgotten]).

    Example: turnledger memory recall --agent ops "editor" --json
    """
    from turnledger.pipeline.cli.memory.actions import dispatch
    from turnledger.pipeline.memory import MemoryAccessError, MemoryService
    from turnledger.policies.recall_scope import RecallConfigError

    with open_ledger(args) as store:
        service = MemoryService(
            store,
            config(args),
            ledger_url=target(args),
            shredding=True if args.shred else None,
        )
        try:
            return dispatch(service, args)
        except (MemoryAccessError, RecallConfigError) as e:
            raise UsageError(str(e)) from None
        finally:
            service.close()


COMMANDS: Final[dict[str, Command]] = {"memory": cmd_memory}


_ORIGINS: Final = (
    "interactive",
    "channel",
    "agent_direct",
    "cron",
    "daemon",
    "sub_turn",
)

_AT: Final[tuple[tuple[str, ...], dict[str, object]]] = (
    ("--at",),
    {"default": None, "help": "as of a position or ISO time"},
)

_ARGUMENTS: Final[dict[str, tuple[tuple[tuple[str, ...], dict[str, object]], ...]]] = {
    "store": (
        (("key",), {}),
        (("content",), {}),
        (("--category",), {"default": "core"}),
        (("--session",), {"default": None}),
    ),
    "recall": (
        (("query",), {}),
        (("--session",), {"default": None}),
        (("--limit",), {"type": int, "default": 5}),
        (("--since",), {"default": None, "help": "created at or after (ISO)"}),
        (("--until",), {"default": None, "help": "created at or before (ISO)"}),
        _AT,
    ),
    "context": (
        (("query",), {}),
        (("--session",), {"default": None}),
        (("--origin",), {"default": "interactive", "choices": _ORIGINS}),
    ),
    "list": (
        (("--session",), {"default": None}),
        (("--category",), {"default": None}),
        _AT,
    ),
    "get": ((("key",), {}), _AT),
    "forget": (
        (("key",), {"nargs": "?", "default": None}),
        (
            ("--subject",),
            {
                "default": None,
                "help": "every entry whose key or "
                "content contains TEXT (case-insensitive)",
            },
        ),
        (("--session",), {"default": None, "help": "every entry of session S"}),
        (("--before",), {"default": None, "help": "every entry created before DATE"}),
    ),
    "stats": (),
    "rebuild": (
        (
            ("--backend",),
            {"required": True, "choices": ("sqlite", "markdown", "postgres", "qdrant")},
        ),
        (
            ("--out",),
            {
                "default": None,
                "help": "folder of the fresh store (kept); "
                "without it the configured store is rebuilt in place after a backup",
            },
        ),
        (("--url",), {"default": None, "help": "postgresql:// URL of the fresh store"}),
    ),
    "govern": (
        (("--dry-run",), {"action": "store_true", "help": "show the plan only"}),
    ),
    "reindex": (),
    "export": (
        (("--session",), {"default": None}),
        (("--category",), {"default": None}),
        (("--since",), {"default": None, "help": "created at or after (ISO)"}),
        (("--until",), {"default": None, "help": "created at or before (ISO)"}),
    ),
}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the memory command's actions and options."""
    del name
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in ACTIONS:
        a = actions.add_parser(action, help=f"memory {action}")
        a.add_argument("--agent", required=True, help="the agent whose memory this is")
        a.add_argument("--json", action="store_true", help="print JSON")
        a.add_argument(
            "--shred",
            action="store_true",
            help="seal contents with per-entry keys (forget destroys them)",
        )
        for flags, options in _ARGUMENTS[action]:
            a.add_argument(*flags, **options)  # type: ignore[arg-type]
