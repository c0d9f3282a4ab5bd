"""``turnledger memory ...``: long-term memory from the command line.

Writes are recorded as events (source ``cli``) and applied to the agent's
backend; reads are scoped to the agent and its configured peers.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Final

from turnledger.pipeline.cli_common import (
    Command,
    UsageError,
    config,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli_memory_at import memory_at
from turnledger.pipeline.cli_memory_rebuild import rebuild
from turnledger.pipeline.memory_service import MemoryAccessError, MemoryService
from turnledger.pipeline.strategy import strategy_for
from turnledger.policies.recall import RecallConfigError
from turnledger.projections.memory.protocol import (
    MemoryEntry,
    Unsupported,
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


def _entry_json(entry: MemoryEntry) -> dict[str, object]:
    return {
        "key": entry.key,
        "content": entry.content,
        "category": entry.category,
        "session": entry.session,
        "agent": entry.agent,
        "score": entry.score,
        "id": entry.id,
        "namespace": entry.namespace,
        "importance": entry.importance,
        "created_at": entry.created_at.isoformat(),
        "updated_at": entry.updated_at.isoformat(),
    }


def _print_entries(entries: list[MemoryEntry], *, as_json: bool) -> None:
    if as_json:
        print_json([_entry_json(e) for e in entries])
        return
    if not entries:
        print("No memories found.")
        return
    print(f"Found {len(entries)} memories:")
    for e in entries:
        score = "" if e.score is None else f"[{round(e.score * 100):d}%] "
        where = f" (session {e.session})" if e.session else ""
        print(f"- {score}{e.key}: {e.content}  <{e.category}, {e.agent}{where}>")


def _unsupported(answer: Unsupported) -> int:
    print(f"Unsupported: {answer.operation} on {answer.backend}: {answer.reason}")
    return 1


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
    reindex --agent A embeds the rows written before embeddings were on (progress
    on stderr); export --agent A [--session S] [--category C] [--since D]
    [--until D] prints the agent's own entries as JSON lines, oldest first.
    list|recall|get --at POSITION|ISO_TIME answer from the ledger as of then:
    stored, superseded and forgotten entries (a shredded one as [forgotten]).

    Example: turnledger memory recall --agent ops "editor" --json
    """
    with open_ledger(args) as store:
        service = MemoryService(
            store,
            config(args),
            ledger_url=target(args),
            shredding=True if args.shred else None,
        )
        try:
            return _dispatch(service, args)
        except (MemoryAccessError, RecallConfigError) as e:
            raise UsageError(str(e)) from None
        finally:
            service.close()


def _store(service: MemoryService, args: argparse.Namespace) -> int:
    result = service.store_entry(
        args.agent, args.key, args.content, category=args.category, session=args.session
    )
    if isinstance(result, Unsupported):
        return _unsupported(result)
    print(f"Stored memory: {result.key}")
    return 0


def _recall(service: MemoryService, args: argparse.Namespace) -> int:
    found = service.recall(
        args.agent,
        args.query,
        session=args.session,
        limit=args.limit,
        since=_moment("--since", args.since),
        until=_moment("--until", args.until),
    )
    _print_entries(found, as_json=args.json)
    return 0


def _moment(flag: str, text: str | None) -> datetime | None:
    """Parse an ISO date or date-time (UTC when no zone is given)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = f"{flag}: expected an ISO date or date-time, found {text!r}"
        raise UsageError(msg) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _context(service: MemoryService, args: argparse.Namespace) -> int:
    block = service.context_block(
        args.agent, args.query, session=args.session, origin=args.origin
    )
    print(block, end="")
    return 0


def _list(service: MemoryService, args: argparse.Namespace) -> int:
    found = service.list(args.agent, category=args.category, session=args.session)
    _print_entries(found, as_json=args.json)
    return 0


def _get(service: MemoryService, args: argparse.Namespace) -> int:
    entry = service.get(args.agent, args.key)
    if entry is None:
        print(f"No memory found with key: {args.key}")
        return 1
    _print_entries([entry], as_json=args.json)
    return 0


def _forget(service: MemoryService, args: argparse.Namespace) -> int:
    filters = (args.subject, args.session, args.before)
    if (args.key is None) == all(f is None for f in filters):
        msg = "Expected a KEY or --subject/--session/--before (not both), found " + (
            "both" if args.key is not None else "neither"
        )
        raise UsageError(msg)
    if args.key is None:
        return _forget_matching(service, args)
    outcome = service.forget(args.agent, args.key)
    if isinstance(outcome, Unsupported):
        return _unsupported(outcome)
    if not outcome:
        print(f"No memory found with key: {args.key}")
        return 1
    print(f"Forgot memory: {args.key}")
    return 0


def _forget_matching(service: MemoryService, args: argparse.Namespace) -> int:
    """Forget every own entry matching all the given filters (erasure requests)."""
    if args.subject is not None and not args.subject.strip():
        msg = "--subject: expected a non-empty text, found an empty one"
        raise UsageError(msg)
    outcome = service.forget_matching(
        args.agent,
        subject=args.subject,
        session=args.session,
        before=_moment("--before", args.before),
    )
    if isinstance(outcome, Unsupported):
        return _unsupported(outcome)
    if args.json:
        print_json({"agent": args.agent, "forgotten": outcome})
        return 0
    print(
        f"Forgot {len(outcome)} memories"
        + (f": {', '.join(outcome)}" if outcome else "")
    )
    return 0


def _stats(service: MemoryService, args: argparse.Namespace) -> int:
    stats = service.stats(args.agent)
    if args.json:
        print_json(stats)
    else:
        for name, value in stats.items():
            print(f"{name:<18} {value}")
    return 0


def _govern(service: MemoryService, args: argparse.Namespace) -> int:
    """Apply retention now (recorded as events), or only show the plan."""
    strategy = strategy_for(args.agent, service, None)
    report = strategy.govern(args.agent, datetime.now(UTC), dry_run=args.dry_run)
    if args.json:
        print_json(report)
        return 0
    verb = "would" if args.dry_run else "did"
    for step in (*report.plan.expire, *report.plan.archive, *report.plan.purge):
        print(f"{verb} {step.action} {step.key}: {step.reason}")
    print(
        f"{report.recorded} memory event(s) recorded; refused: {list(report.refused)}"
    )
    return 0


def _reindex(service: MemoryService, args: argparse.Namespace) -> int:
    """Embed the rows written before embeddings were on, with a progress bar."""
    backend = service.backend(args.agent)
    reindex = getattr(backend, "reindex", None)
    if not callable(reindex):
        msg = f"Expected a sqlite memory backend to reindex, found {backend.name}"
        raise UsageError(msg)

    def bar(at: int, total: int) -> None:
        width = 30
        done = width * at // max(total, 1)
        sys.stderr.write(f"\rreindex [{'#' * done}{'-' * (width - done)}] {at}/{total}")
        sys.stderr.flush()

    embedded = int(reindex(progress=bar))
    if embedded:
        sys.stderr.write("\n")
    identity = getattr(backend, "identity", None)
    report = {
        "agent": args.agent,
        "embedded": embedded,
        "model": getattr(identity, "model", ""),
        "dims": getattr(identity, "dims", 0),
    }
    if args.json:
        print_json(report)
    else:
        print(f"embedded {embedded} rows with {report['model'] or 'no embedder'}")
    return 0


def _export(service: MemoryService, args: argparse.Namespace) -> int:
    """Print the agent's own live entries as JSON lines, oldest first."""
    for entry in service.export(
        args.agent,
        session=args.session,
        category=args.category,
        since=_moment("--since", args.since),
        until=_moment("--until", args.until),
    ):
        print_json(_entry_json(entry))
    return 0


def _dispatch(service: MemoryService, args: argparse.Namespace) -> int:
    if getattr(args, "at", None) is not None:
        return memory_at(service, args)
    handlers = {
        "store": _store,
        "recall": _recall,
        "context": _context,
        "list": _list,
        "get": _get,
        "forget": _forget,
        "stats": _stats,
        "rebuild": rebuild,
        "govern": _govern,
        "reindex": _reindex,
        "export": _export,
    }
    return handlers[args.action](service, args)


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
