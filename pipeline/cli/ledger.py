"""Ledger commands: init, demo, tail, verify, seal, stats."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING, Final, TypedDict

from turnledger.pipeline.cli.common import (
    Command,
    config,
    count,
    open_ledger,
    print_json,
    target,
)

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded
    from turnledger.ledger.witness import Witness


def cmd_init(args: argparse.Namespace) -> int:
    """Create the ledger (tables, triggers) if it does not exist yet.

    Example: turnledger --db ./turnledger.db init
    """
    with open_ledger(args) as store:
        print(f"ledger ready: {store.kind} {target(args)} ({store.count()} events)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run a scripted multi-turn session through the engine and print what it left.

    Parallel tool calls, a failing tool, memory writes and recall, an image
    attachment, a bounded oversized tool result and a visible trim, on the
    embedded SQLite default; then the history, memory, costs and lifecycle table.

    Example: turnledger demo
    """
    from turnledger.pipeline.demo import (
        record_demo_session,
        render_costs,
        render_history,
    )
    from turnledger.pipeline.lifecycle import lifecycle_markdown
    from turnledger.pipeline.memory import MemoryService

    cfg = config(args)
    with open_ledger(args) as store:
        stream_id = record_demo_session(
            store, data_dir=cfg.data_dir, ledger_url=target(args)
        )
        print("== session history (what the provider sees next) ==")
        for line in render_history(store, stream_id):
            print(line)
        print("\n== memory of agent demo ==")
        memory = MemoryService(store, cfg, ledger_url=target(args))
        try:
            for entry in memory.list("demo"):
                print(f"  {entry.key} [{entry.category}]: {entry.content}")
        finally:
            memory.close()
        print("\n== costs ==")
        for line in render_costs(store, stream_id):
            print(line)
    print("\n== lifecycle ==")
    sys.stdout.write(lifecycle_markdown())
    print(
        f"\nrecorded in {target(args)}; try: turnledger tail --json, turnledger audit"
    )
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    """Print the ledger's events in order; with --follow, keep printing new ones.

    With --json each line is one object: position, stream, version, type,
    recorded_at, event.

    Example: turnledger tail --json --after 100
    """
    with open_ledger(args) as store:
        after = args.after
        if args.last is not None:
            after = max(0, store.max_position() - args.last)
        for recorded in store.iter_all(after=after):
            _print_event(recorded, as_json=args.json)
            after = recorded.position
        if not args.follow:
            return 0
        with store.subscribe(after=after) as subscription:
            try:
                for recorded in subscription:
                    _print_event(recorded, as_json=args.json)
            except KeyboardInterrupt:
                return 0
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check every row's hash chain and decoding, the seals and idempotency records.

    Reports by position every edited payload or envelope, deleted, replaced,
    reordered or forged row, every stream truncated below the newest seal,
    every seal deleted, re-inserted or replaced in the seal chain (each seal's
    HMAC is checked with $TURNLEDGER_SEAL_KEY when set), every idempotency
    record edited or deleted, and (PostgreSQL) rows above the position
    sequence. With --witness TARGET (file:PATH, sqlite:PATH, a postgresql://
    URL, or the path of a saved `seal --witness -` log) every seal witnessed
    there must be in the ledger, unchanged, and the ledger must reach its
    position. Exit 0 when clean, 1 when problems were found (each is listed;
    --json: ``problems`` with ``kind``, ``stream``, ``version``, ``position``,
    ``message``), 2 when the witness cannot be read.

    Example: turnledger verify --json
    """
    from turnledger.ledger.verify import verify

    with open_ledger(args) as store:
        witness = _witness(args, reading=True)
        try:
            report = verify(store, witness=witness)
        finally:
            if witness is not None:
                witness.close()
    if args.json:
        print_json(report)
    else:
        for problem in report.problems:
            print(f"position {problem.position}: {problem.kind}: {problem.message}")
        state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        print(
            f"{state}: {report.events} events in {report.streams} streams, "
            f"last position {report.last_position}"
            + (
                f", sealed to {report.sealed_position}"
                if report.sealed_position
                else ""
            )
            + (f", {report.pre_chain} pre-chain" if report.pre_chain else "")
            + (f", {report.witnessed} witnessed" if report.witnessed else "")
        )
    return 0 if report.ok else 1


def cmd_seal(args: argparse.Namespace) -> int:
    """Verify the ledger, then record a seal of every stream's head.

    The seal is signed (HMAC-SHA256) with $TURNLEDGER_SEAL_KEY when set, and
    chained to the seal before it. With --witness TARGET its digest is also
    recorded outside the ledger's database: file:PATH (append-only JSON lines),
    sqlite:PATH, a postgresql:// URL (its own table; ?schema=name), or - (one
    JSON line on stdout, for the operator's log). A ledger with problems is not
    sealed: they are listed and the exit is 1. On a ledger written before the
    hash chain, the first seal pins the old rows' links.

    Example: turnledger seal --witness file:/var/log/turnledger-seals.jsonl
    """
    from turnledger.ledger.seal import seal
    from turnledger.ledger.witness import entry_line

    with open_ledger(args) as store:
        witness = _witness(args, reading=False)
        try:
            report = seal(store, witness=witness)
        finally:
            if witness is not None:
                witness.close()
    if args.json:
        print_json(report)
        return 0 if report.ok else 1
    for problem in report.problems:
        print(f"position {problem.position}: {problem.kind}: {problem.message}")
    if not report.ok:
        print(f"not sealed: {len(report.problems)} problem(s)")
        return 1
    if args.witness == "-" and report.witness is not None:
        print(entry_line(report.witness))
    signed = "signed" if report.signed else "unsigned (no TURNLEDGER_SEAL_KEY)"
    witnessed = f", witnessed in {args.witness}" if args.witness else ""
    print(
        f"seal {report.seal_id}: {report.streams} streams to position "
        f"{report.position}, {signed}{witnessed}"
    )
    return 0


def _witness(args: argparse.Namespace, *, reading: bool) -> Witness | None:
    """Open --witness (None without one, or for - when sealing)."""
    if not args.witness:
        return None
    from turnledger.ledger.witness import open_witness

    return open_witness(args.witness, ledger=target(args), reading=reading)


class Stats(TypedDict):
    """What ``turnledger stats`` reports (a dict: --help need not load msgspec)."""

    backend: str
    events: int
    streams: int
    last_position: int
    by_type: dict[str, int]


def cmd_stats(args: argparse.Namespace) -> int:
    """Print counts: events, streams, last position, events per type.

    Example: turnledger stats --json
    """
    with open_ledger(args) as store:
        by_type = Counter(row.topic for row in store.iter_rows())
        stats = Stats(
            backend=store.kind,
            events=sum(by_type.values()),
            streams=len(store.stream_ids()),
            last_position=store.max_position(),
            by_type=dict(sorted(by_type.items())),
        )
    if args.json:
        print_json(stats)
        return 0
    print(f"backend        {stats['backend']}")
    print(f"events         {stats['events']}")
    print(f"streams        {stats['streams']}")
    print(f"last position  {stats['last_position']}")
    for tag, number in stats["by_type"].items():
        print(f"  {tag:<24} {number}")
    return 0


COMMANDS: Final[dict[str, Command]] = {
    "init": cmd_init,
    "demo": cmd_demo,
    "tail": cmd_tail,
    "verify": cmd_verify,
    "seal": cmd_seal,
    "stats": cmd_stats,
}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add a ledger command's options."""
    if name in ("tail", "verify", "seal", "stats"):
        p.add_argument("--json", action="store_true", help="print JSON")
    if name in ("verify", "seal"):
        p.add_argument(
            "--witness",
            metavar="TARGET",
            default=None,
            help=(
                "file:PATH, sqlite:PATH, a postgresql:// URL, or - (stdout; "
                "verify: the saved log's path)"
            ),
        )
    if name == "tail":
        p.add_argument("--follow", "-f", action="store_true", help="keep following")
        p.add_argument("--after", type=count, default=0, help="start after POSITION")
        p.add_argument(
            "--last", type=count, default=None, help="only the last N events"
        )


def _print_event(recorded: Recorded, *, as_json: bool) -> None:
    tag = recorded.event.__struct_config__.tag
    if as_json:
        print_json(
            {
                "position": recorded.position,
                "stream": str(recorded.stream_id),
                "version": recorded.version,
                "type": tag,
                "recorded_at": recorded.recorded_at.isoformat(),
                "event": recorded.event,
            }
        )
        return
    print(
        f"{recorded.position:>8} {recorded.recorded_at:%Y-%m-%d %H:%M:%S} "
        f"{str(recorded.stream_id)[:8]} v{recorded.version:<4} {tag}",
        flush=True,
    )
