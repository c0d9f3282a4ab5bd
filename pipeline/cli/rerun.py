"""``replay SESSION --rerun``: the offline re-run's arguments and its printout."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from turnledger.pipeline.cli.common import (
    UsageError,
    config,
    count,
    open_ledger,
    print_json,
)

if TYPE_CHECKING:
    from turnledger.pipeline.timetravel.rerun.diff import RerunReport


def add_rerun_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--rerun`` and its options to the replay command."""
    p.add_argument(
        "--rerun",
        action="store_true",
        help="re-run the session offline through the engine and diff each turn",
    )
    p.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help="the configuration (as the global --config): with --rerun, the "
        "policies to re-run under",
    )
    p.add_argument(
        "--budget-tokens",
        type=count,
        default=None,
        help="with --rerun: the context budget (default: the configuration's)",
    )
    p.add_argument(
        "--max-tool-result-chars",
        type=count,
        default=None,
        help="with --rerun: the result bound (default: the configuration's)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --rerun: exit 1 when any turn differs",
    )


def refuse_rerun_options(args: argparse.Namespace) -> None:
    """Refuse the re-run's options on a replay without ``--rerun``.

    Raises:
        UsageError: ``--budget-tokens``, ``--max-tool-result-chars`` or
            ``--check`` was given without ``--rerun``.
    """
    given = [
        flag
        for flag, value in (
            ("--budget-tokens", args.budget_tokens),
            ("--max-tool-result-chars", args.max_tool_result_chars),
            ("--check", args.check or None),
        )
        if value is not None
    ]
    if given:
        msg = f"expected --rerun with {', '.join(given)}, found a replay without it"
        raise UsageError(msg)


def cmd_rerun(args: argparse.Namespace) -> int:
    """Re-run a session offline and print the per-turn diff.

    Returns:
        1 with ``--check`` when a turn differs, else 0.

    Raises:
        UsageError: ``--at`` was given too (a re-run covers the whole session),
            or the session cannot be re-run (outputs without recorded model
            calls: imported, or written by an adapter).
    """
    if args.at is not None:
        msg = "expected --rerun or --at, found both (a re-run covers the whole session)"
        raise UsageError(msg)
    import msgspec

    from turnledger.pipeline.sessions import resolve_session
    from turnledger.pipeline.timetravel.rerun import (
        NotRerunnableError,
        rerun_session,
    )

    cfg = config(args)
    runtime = cfg.runtime
    if args.budget_tokens is not None:
        runtime = msgspec.structs.replace(
            runtime, context_budget_tokens=args.budget_tokens
        )
    if args.max_tool_result_chars is not None:
        runtime = msgspec.structs.replace(
            runtime, max_tool_result_chars=args.max_tool_result_chars
        )
    cfg = msgspec.structs.replace(cfg, runtime=runtime)
    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        try:
            report = rerun_session(store, ref, cfg)
        except NotRerunnableError as e:
            raise UsageError(str(e)) from None
    if args.json:
        print_json(msgspec.to_builtins(report))
    else:
        _print(report)
    return 1 if args.check and not report.identical else 0


def _print(report: RerunReport) -> None:
    print(
        f"rerun of {report.agent}/{report.session}: {report.turns} turns, budget "
        f"{report.budget_tokens} tokens, results bounded at "
        f"{report.max_tool_result_chars} chars"
    )
    for turn in report.diff:
        state = "identical" if turn.identical else "DIFFERS"
        print(f"  turn {turn.turn} {turn.turn_id}: {state}")
        for line in turn.differences:
            print(f"    {line}")
    if report.identical:
        print("identical to the recorded session")
    else:
        print(f"{report.differing_turns} of {report.turns} turns differ")
