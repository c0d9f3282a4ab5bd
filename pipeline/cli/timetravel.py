"""Time-travel commands: fork, rewind, and sessions (with their fork trees)."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import Command, config, open_ledger, print_json

if TYPE_CHECKING:
    from turnledger.pipeline.timetravel import ForkNode


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork a session as of a point: one session.forked event, nothing copied.

    --at takes a global position, a turn id (the fork keeps that turn) or an
    ISO time. The new session (--as KEY, default KEY-fork-N) starts with the
    source's history up to that point; every reader and the engine follow it.
    With --json: session, agent, stream, source, source_stream, source_version,
    at, position, messages.

    Example: turnledger fork demo-1 --at 12 --as demo-1-alt
    """
    from uuid import UUID

    import msgspec

    from turnledger.pipeline.sessions import resolve_session
    from turnledger.pipeline.timetravel import fork_session
    from turnledger.projections.history.read import provider_messages
    from turnledger.projections.queries import SessionHistories

    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        report = fork_session(store, ref, args.at, new_key=args.as_key)
        state = SessionHistories(store).get(UUID(report.stream))
    messages = len(provider_messages(state))
    if args.json:
        print_json({**msgspec.to_builtins(report), "messages": messages})
    else:
        print(
            f"forked {ref.agent}/{ref.key} at position {report.at} as "
            f"{report.agent}/{report.session} ({messages} messages)"
        )
    return 0


def cmd_rewind(args: argparse.Namespace) -> int:
    """Rewind a session: its history goes back to what it was at --to.

    --to takes a global position, a turn id (the history as that turn ended)
    or an ISO time. One session.rewound event: the rewound turns stay in the
    ledger, leave the provider-visible history and show in history and replay;
    rewinding to a point before a rewind brings them back (redo). Trims
    recorded after the point are undone too (redone alike). --memory
    keep leaves what those turns wrote to long-term memory, supersede records
    a memory.superseded event for each live entry; both report the keys.
    Without --memory the configuration's ``[memory] rewind_memory`` decides
    (default keep). With --json: session, to, to_version, position, turns,
    restored, hidden, memory_rule, memory_keys, superseded, trims_undone,
    trims_redone.

    Example: turnledger rewind demo-1 --to 12 --memory supersede
    """
    from turnledger.pipeline.sessions import resolve_session
    from turnledger.pipeline.timetravel import as_memory_rule, rewind_session

    configured = config(args).memory.rewind_memory  # checked even when overridden
    rule = as_memory_rule(args.memory or configured)
    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        report = rewind_session(store, ref, args.to, memory_rule=rule)
    if args.json:
        print_json(report)
        return 0
    print(
        f"rewound {ref.agent}/{ref.key} to position {report.to}: "
        f"{len(report.turns)} turns hidden ({report.hidden} messages), "
        f"{report.restored} messages restored"
    )
    if report.trims_undone or report.trims_redone:
        print(
            f"  trims undone: {report.trims_undone}, "
            f"trims back in effect: {report.trims_redone}"
        )
    keys = ", ".join(report.memory_keys) or "none"
    print(f"  memory written by the rewound turns ({report.memory_rule}): {keys}")
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    """List sessions with their lineage, or print one session's fork tree.

    Without SESSION: every session (agent, key, channel, forked_from). With
    SESSION: the tree of forks of the session it descends from. --json prints
    the same as objects (a tree: session, agent, stream, source_version, forks).

    Example: turnledger sessions demo-1 --json
    """
    from turnledger.ledger.events import SessionForked
    from turnledger.pipeline.sessions import list_sessions

    with open_ledger(args) as store:
        if args.session is not None:
            from turnledger.pipeline.sessions import resolve_session
            from turnledger.pipeline.timetravel import fork_tree

            ref = resolve_session(store, args.session, agent=args.agent)
            tree = fork_tree(store, ref)
            if args.json:
                print_json(tree)
            else:
                _print_tree(tree, 0)
            return 0
        sources = {
            r.stream_id: r.event.source_stream
            for r in store.iter_all(types=[SessionForked])
            if isinstance(r.event, SessionForked)
        }
        refs = [s for s in list_sessions(store) if args.agent in (None, s.agent)]
    keys = {str(s.stream_id): s.key for s in refs}
    rows = [
        {
            "agent": s.agent,
            "session": s.key,
            "channel": s.channel,
            "stream": str(s.stream_id),
            "forked_from": keys.get(sources[s.stream_id], sources[s.stream_id])
            if s.stream_id in sources
            else None,
        }
        for s in refs
    ]
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        lineage = f" (fork of {row['forked_from']})" if row["forked_from"] else ""
        print(f"{row['agent']}/{row['session']}{lineage}")
    return 0


def _print_tree(node: ForkNode, depth: int) -> None:
    at = f" (at version {node.source_version})" if depth else ""
    print(f"{'  ' * depth}{node.agent}/{node.session}{at}")
    for child in node.forks:
        _print_tree(child, depth + 1)


COMMANDS: Final[dict[str, Command]] = {
    "fork": cmd_fork,
    "rewind": cmd_rewind,
    "sessions": cmd_sessions,
}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add a time-travel command's options."""
    if name == "sessions":
        p.add_argument("session", nargs="?", default=None, help="print its fork tree")
    else:
        p.add_argument("session", help="the session key or stream id")
    p.add_argument("--agent", default=None, help="only sessions of this agent")
    p.add_argument("--json", action="store_true", help="print JSON")
    if name == "fork":
        p.add_argument(
            "--at", required=True, help="a position, a turn id or an ISO time"
        )
        p.add_argument(
            "--as", dest="as_key", default=None, help="the new session's key"
        )
    if name == "rewind":
        from turnledger.pipeline.timetravel import MEMORY_RULES

        p.add_argument(
            "--to", required=True, help="a position, a turn id or an ISO time"
        )
        p.add_argument(
            "--memory",
            choices=MEMORY_RULES,
            default=None,
            help="what to do with the rewound turns' long-term memory writes "
            "(default: [memory] rewind_memory, else keep)",
        )
