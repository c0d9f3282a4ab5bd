"""The ``turnledger`` command line.

Every command's docstring is its help. Library errors become one clean line on
stderr and a non-zero exit: 1 for a failed check, 2 for unusable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from ledger.errors import LedgerError
from ledger.store import DEFAULT_PATH
from pipeline import cli_ledger, cli_memory, cli_projections, cli_transcripts
from pipeline.cli_common import DB_ENV, Command, UsageError
from pipeline.formats import TranscriptError

MODULES: Final = (cli_ledger, cli_transcripts, cli_projections, cli_memory)

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    handler: Command = args.handler
    try:
        return handler(args)
    except (LedgerError, TranscriptError, UsageError) as e:
        print(f"turnledger: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"turnledger: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:  # pragma: no cover - a closed pager
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
