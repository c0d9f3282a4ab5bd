"""What every command shares: finding the ledger, printing JSON."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, Final

import msgspec

from turnledger.ledger.store import DEFAULT_PATH, EventStore, open_store
from turnledger.pipeline.config import Config, ConfigError, load_config
from turnledger.pipeline.errors import PipelineError

DB_ENV: Final = "TURNLEDGER_DB"
"""The environment variable naming the ledger when ``--db`` is not given."""

Command = Callable[[argparse.Namespace], int]
"""A command: parsed arguments in, exit code out."""

_JSON: Final = msgspec.json.Encoder()


class UsageError(PipelineError, ValueError):
    """A command was given arguments it cannot use."""


MAX_COUNT: Final = 2**63 - 1
"""The largest position or count a command accepts (a 64-bit database integer)."""


def count(text: str) -> int:
    """An argparse type: a whole number from 0 to 2**63 - 1.

    Raises:
        argparse.ArgumentTypeError: The text is not such a number.
    """
    try:
        value = int(text)
    except ValueError:
        msg = f"expected a whole number, found {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not 0 <= value <= MAX_COUNT:
        msg = f"expected a number from 0 to {MAX_COUNT}, found {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def config(args: argparse.Namespace) -> Config:
    """Return the configuration: --config, $TURNLEDGER_CONFIG, ./turnledger.toml."""
    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as e:
        raise UsageError(str(e)) from None


def target(args: argparse.Namespace) -> str:
    """Return the ledger: --db, $TURNLEDGER_DB, the config's ``ledger``, the default."""
    chosen = args.db or os.environ.get(DB_ENV)
    if chosen:
        return str(chosen)
    return config(args).ledger or DEFAULT_PATH


def open_ledger(args: argparse.Namespace) -> EventStore:
    """Open the ledger a command uses."""
    return open_store(target(args))


def print_json(value: Any) -> None:
    """Write one JSON document (one line) to stdout."""
    sys.stdout.buffer.write(_JSON.encode(value) + b"\n")
    sys.stdout.buffer.flush()
