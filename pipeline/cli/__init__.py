"""The ``turnledger`` command line.

Every command's docstring is its help. Library errors become one clean line on
stderr and a non-zero exit: 1 for a failed check, 2 for unusable input.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any, Final

import structlog

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.store import DEFAULT_PATH
from turnledger.pipeline.cli import costs as cli_costs
from turnledger.pipeline.cli import engine as cli_engine
from turnledger.pipeline.cli import ledger as cli_ledger
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
)
from turnledger.pipeline.errors import PipelineError
from turnledger.policies.errors import PolicyError
from turnledger.policies.scrubbing import scrub_text, summarize

MODULES: Final = (
    cli_ledger,
    cli_engine,
    cli_transcripts,
    cli_timetravel,
    cli_projections,
    cli_memory,
    cli_web,
    cli_costs,
)

COMMANDS: Final[dict[str, Command]] = {
    name: command for module in MODULES for name, command in module.COMMANDS.items()
}


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="turnledger",
        description="Event-sourced memory and payload lifecycle for agent runtimes.",
    )
    parser.add_argument(
        "--db",
        default=None,
        help=f"ledger file or postgresql:// URL (default ${DB_ENV} or {DEFAULT_PATH})",
    )
    parser.add_argument(
        "--config",
        default=None,
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
            module.add_arguments(name, p)
            p.set_defaults(handler=command)
    return parser


def scrub_log_values(
    logger: object, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: every string value scrubbed and bounded.

    The same rule as the observer view (``policies.scrubbing``), so a log line
    never carries a credential or an unbounded payload.
    """
    del logger, method
    for key, value in event_dict.items():
        if isinstance(value, str) and key != "event":
            event_dict[key] = summarize(scrub_text(value))
    return event_dict


def _configure_logging(verbose: bool) -> None:
    """Logs go to stderr (stdout is for results); warnings only unless -v."""
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
    args = build_parser().parse_args(checked)
    _configure_logging(args.verbose)
    handler: Command = args.handler
    try:
        return handler(args)
    except (LedgerError, PipelineError, PolicyError) as e:
        print(f"turnledger: {one_line(str(e))}", file=sys.stderr)
        return 2
    except RecursionError:
        print(
            "turnledger: Expected input nested less deeply, found nesting"
            " deeper than the interpreter's recursion limit",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        # A closed pager (``| head``): stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    except OSError as e:
        print(
            f"turnledger: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
