"""The ``turnledger`` command line.

Every command's docstring is its help. Library errors become one clean line on
stderr and a non-zero exit: 1 for a failed check, 2 for unusable input.
"""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, MutableMapping, Sequence
from typing import Any, Final

from turnledger.ledger.location import DEFAULT_PATH
from turnledger.pipeline.cli import collect as cli_collect
from turnledger.pipeline.cli import costs as cli_costs
from turnledger.pipeline.cli import encryption as cli_encryption
from turnledger.pipeline.cli import engine as cli_engine
from turnledger.pipeline.cli import erase as cli_erase
from turnledger.pipeline.cli import ledger as cli_ledger
from turnledger.pipeline.cli import mcp as cli_mcp
from turnledger.pipeline.cli import memory as cli_memory
from turnledger.pipeline.cli import projections as cli_projections
from turnledger.pipeline.cli import timetravel as cli_timetravel
from turnledger.pipeline.cli import transcripts as cli_transcripts
from turnledger.pipeline.cli import web as cli_web
from turnledger.pipeline.cli.common import (
    DB_ENV,
    Command,
    UsageError,
    check_arguments,
    place,
)
from turnledger.pipeline.errors import PipelineError

MODULES: Final = (
    cli_ledger,
    cli_engine,
    cli_transcripts,
    cli_timetravel,
    cli_projections,
    cli_encryption,
    cli_memory,
    cli_web,
    cli_costs,
    cli_mcp,
    cli_erase,
    cli_collect,
)

COMMANDS: Final[dict[str, Command]] = {
    name: command for module in MODULES for name, command in module.COMMANDS.items()
}


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """Return the argument parser of every command.

    Args:
        commands: Only these commands get their arguments (a command's options
            may load what they list, e.g. the transcript formats); the others
            get their name and help, all the top-level usage shows. ``None``:
            every command gets its arguments.
    """
    parser = argparse.ArgumentParser(
        prog="turnledger",
        description="Event-sourced memory and payload lifecycle for agent runtimes.",
    )
    parser.add_argument(
        "--db",
        default=None,
        type=place,
        help=f"ledger file or postgresql:// URL (default ${DB_ENV} or {DEFAULT_PATH})",
    )
    parser.add_argument(
        "--config",
        default=None,
        type=place,
        help="configuration file (default $TURNLEDGER_CONFIG or ./turnledger.toml)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log turn steps to stderr (JSON)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in MODULES:
        for name, command in module.COMMANDS.items():
            doc = command.__doc__ or ""
            p = sub.add_parser(
                name,
                help=doc.splitlines()[0],
                description=doc,
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            if commands is None or name in commands:
                module.add_arguments(name, p)
            p.set_defaults(handler=command)
    return parser


def scrub_log_values(
    logger: object, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: every string value scrubbed and bounded.

    The same rule as the observer view (``policies.scrubbing``), so a log line
    never carries a credential or an unbounded payload. Strings inside lists,
    tuples and dicts are scrubbed too (4 levels deep; deeper containers are
    replaced by ``"[nested too deep]"``).
    """
    from turnledger.policies.scrubbing import scrub_text, summarize

    def scrub(value: object, depth: int) -> object:
        if isinstance(value, str):
            return summarize(scrub_text(value))
        if isinstance(value, list | tuple | dict) and depth <= 0:
            return "[nested too deep]"
        if isinstance(value, list | tuple):
            return [scrub(item, depth - 1) for item in value]
        if isinstance(value, dict):
            return {key: scrub(item, depth - 1) for key, item in value.items()}
        return value

    del logger, method
    for key, value in event_dict.items():
        if key != "event":
            event_dict[key] = scrub(value, 4)
    return event_dict


STRUCTLOG_FREE: Final = frozenset(
    {"audit", "costs", "history", "init", "lifecycle", "seal", "sessions", "stats"}
    | {"tail", "verify"}
)
"""Commands that never load structlog (tests/pipeline/test_cli_imports.py checks):
the CLI configures it for every other command, and for these only with -v, so
they start without importing it."""


def _configure_logging(verbose: bool) -> None:
    """Logs go to stderr (stdout is for results); warnings only unless -v."""
    import logging

    import structlog

    level = logging.INFO if verbose else logging.WARNING
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            scrub_log_values,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


MAX_ERROR_CHARS: Final = 1000
"""An error line is cut to this many characters."""


def one_line(message: str) -> str:
    """Return an error message as one bounded line (whitespace runs become one space).

    Driver messages (PostgreSQL's "Is the server running...") span lines; the CLI
    promises one line on stderr.
    """
    line = " ".join(message.split())
    if len(line) <= MAX_ERROR_CHARS:
        return line
    return line[:MAX_ERROR_CHARS] + f"\u2026 ({len(line)} characters)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    try:
        checked = check_arguments(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"turnledger: {e}", file=sys.stderr)
        return 2
    # The command is one of the arguments (argparse takes no abbreviated command):
    # only the commands named among them need their options.
    args = build_parser(set(checked)).parse_args(checked)
    if args.verbose or args.command not in STRUCTLOG_FREE:
        _configure_logging(args.verbose)
    handler: Command = args.handler
    try:
        return handler(args)
    except Exception as e:  # noqa: BLE001 - _failed re-raises what is not ours
        return _failed(e)


def _failed(error: Exception) -> int:
    """Report a command's error as one line on stderr and return the exit code.

    Raises:
        Exception: ``error`` itself when it is none of the errors a command
            reports (a bug, shown with its traceback).
    """
    from turnledger.ledger.errors import LedgerError
    from turnledger.policies.errors import PolicyError

    if isinstance(error, LedgerError | PipelineError | PolicyError):
        print(f"turnledger: {one_line(str(error))}", file=sys.stderr)
        return 2
    if isinstance(error, RecursionError):
        print(
            "turnledger: Expected input nested less deeply, found nesting"
            " deeper than the interpreter's recursion limit",
            file=sys.stderr,
        )
        return 2
    if isinstance(error, BrokenPipeError):
        # A closed pager (``| head``): stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    if isinstance(error, OSError):
        print(
            f"turnledger: {error.strerror or error}: {error.filename or ''}".rstrip(
                ": "
            ),
            file=sys.stderr,
        )
        return 2
    raise error


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
