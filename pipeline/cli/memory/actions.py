"""The ``turnledger memory`` actions: one handler per subcommand.

:func:`dispatch` runs the action the parsed arguments name against a
:class:`~pipeline.memory.MemoryService`. ``store`` and ``forget``
record memory events (source ``cli``) and apply them to the agent's backend;
``govern`` records retention as events (source ``governance``); ``reindex``
embeds the rows of a sqlite backend still lacking a vector; the reads
(recall, context, list, get, stats, export) are scoped to the agent and its
configured peers and print text or JSON. ``--at`` reads go to
:mod:`pipeline.cli.memory.at`, ``rebuild`` to :mod:`pipeline.cli.memory.rebuild`;
the options live in :mod:`pipeline.cli.memory`.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from turnledger.pipeline.cli.common import UsageError, print_json
from turnledger.pipeline.cli.memory.at import memory_at
from turnledger.pipeline.cli.memory.rebuild import rebuild
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy import strategy_for
from turnledger.projections.memory.protocol import MemoryEntry, Unsupported


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
    """Embed the rows still lacking a vector, with progress on stderr.

    Rows lack one when written before embeddings were on, or when the
    background thread of the process that wrote them had not reached them.
    A terminal gets one bar redrawn; anything else one line per batch.
    """
    backend = service.backend(args.agent)
    reindex = getattr(backend, "reindex", None)
    if not callable(reindex):
        msg = (
            "Expected a sqlite or postgres memory backend to reindex, "
            f"found {backend.name}"
        )
        raise UsageError(msg)

    redraw = sys.stderr.isatty()
    drawn = False

    def bar(at: int, total: int) -> None:
        nonlocal drawn
        width = 30
        done = width * at // max(total, 1)
        line = f"reindex [{'#' * done}{'-' * (width - done)}] {at}/{total}"
        sys.stderr.write(f"\r{line}" if redraw else f"{line}\n")
        sys.stderr.flush()
        drawn = True

    embedded = int(reindex(progress=bar))
    if drawn and redraw:
        sys.stderr.write("\n")
    identity = getattr(backend, "identity", None)
    report = {
        "agent": args.agent,
        "embedded": embedded,
        "pending": int(getattr(backend, "pending_vectors", 0)),
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


def dispatch(service: MemoryService, args: argparse.Namespace) -> int:
    """Run the memory action ``args.action`` names (``--at``: as of then)."""
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
