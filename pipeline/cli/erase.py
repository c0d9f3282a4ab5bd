"""``turnledger erase``: destroy a subject's data keys, rebuild without its content."""

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
    from turnledger.ledger.events.erasure import ErasureSubject


def cmd_erase(args: argparse.Namespace) -> int:
    """Erase a session, an agent, a user key or a memory key (crypto-shredding).

    On an erasable ledger ([privacy] erasable = true, or a cipher key set) every
    event of a session and every memory entry is sealed under a data key of its
    own. erase destroys the subject's keys (the key store is rewritten), appends
    a receipt (erasure.recorded: what, when, by which command; a digest of the
    id, no content), rebuilds the views and the agents' SQLite memory from the
    ledger and rewrites their files, and deletes the media files no other event
    references. The ledger keeps its rows (ciphertext nobody can read any more)
    and its hash chain: verify still passes. --session and --memory need --agent;
    --user erases every agent's sessions under that session key. --yes is
    required. See docs/guides/erasure.md for what this means for GDPR Art. 17.

    Exit codes: 0 erased; 1 nothing to erase (no data key: recorded before
    erasure was on, or erased already); 2 unusable input (no --yes, a missing
    --agent, erasure off).

    Example: turnledger erase --session telegram_42 --agent ops --yes
    """
    from turnledger.pipeline.erasure import NothingToEraseError, erase

    subject, key = _subject(args)
    if not args.yes:
        msg = f"Expected --yes to erase the {subject} (it cannot be undone), found none"
        raise UsageError(msg)
    with open_ledger(args) as store:
        from turnledger.pipeline.cli.projections import views_path

        try:
            report = erase(
                store,
                config(args),
                subject=subject,
                agent=args.agent or "",
                key=key,
                ledger_url=target(args),
                views_at=views_path(args),
                command=f"turnledger erase --{subject}",
            )
        except NothingToEraseError as e:
            print(f"turnledger: {e}", file=sys.stderr)
            return 1
    if args.json:
        print_json(report)
    else:
        print(
            f"erased {subject}: {report.keys_destroyed} keys destroyed,"
            f" {len(report.streams)} streams unreadable, receipt at position"
            f" {report.receipt_position}, views rebuilt, {report.media_removed}"
            " media files deleted"
        )
    for other in report.memory_not_rebuilt:
        print(
            f"turnledger: the memory of {other} was not rebuilt: its copies of the"
            " erased entries stay until it is rebuilt without a backup or deleted",
            file=sys.stderr,
        )
    return 0


def _subject(args: argparse.Namespace) -> tuple[ErasureSubject, str]:
    named: tuple[tuple[ErasureSubject, str | None], ...] = (
        ("session", args.session),
        ("user", args.user),
        ("memory", args.memory),
    )
    chosen = [(name, value) for name, value in named if value is not None]
    if len(chosen) > 1:
        names = ", ".join(f"--{n}" for n, _ in chosen)
        msg = f"Expected one of --session, --user, --memory, found {names}"
        raise UsageError(msg)
    if chosen:
        subject, key = chosen[0]
        if subject != "user" and not args.agent:
            msg = f"Expected --agent with --{subject} (whose {subject}), found none"
            raise UsageError(msg)
        if subject == "user" and args.agent:
            msg = "Expected --user alone (it spans every agent), found --agent too"
            raise UsageError(msg)
        return subject, key
    if args.agent:
        return "agent", ""
    msg = "Expected --session, --agent, --user or --memory, found none"
    raise UsageError(msg)


COMMANDS: Final[dict[str, Command]] = {"erase": cmd_erase}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the erase command's options."""
    del name
    p.add_argument("--session", default=None, help="the session key (with --agent)")
    p.add_argument("--agent", default=None, help="the agent (alone: all of it)")
    p.add_argument("--user", default=None, help="a user's session key, every agent")
    p.add_argument("--memory", default=None, help="a memory key (with --agent)")
    p.add_argument(
        "--views", default=None, type=place, help="where views live (as project)"
    )
    p.add_argument("--yes", action="store_true", help="confirm: it cannot be undone")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
