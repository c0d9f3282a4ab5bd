"""What every command shares: finding the ledger, printing JSON, checking input.

:func:`check_arguments` runs before argparse on the whole argument vector: every
argument must be valid UTF-8 (an undecodable byte reaches Python as a lone
surrogate, which no ledger, database or terminal can hold) and at most
:data:`MAX_ARGUMENT_BYTES` UTF-8 bytes; a refusal names the argument by position
and quotes at most a bounded prefix of it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from turnledger.ledger.errors import quote_value
from turnledger.ledger.location import DEFAULT_PATH
from turnledger.ledger.numbers import MAX_INTEGER, parse_whole
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.config import Config

DB_ENV: Final = "TURNLEDGER_DB"
"""The environment variable naming the ledger when ``--db`` is not given."""

CONFIG_ENV: Final = "TURNLEDGER_CONFIG"
CONFIG_NAME: Final = "turnledger.toml"
"""Where the configuration is looked for (``pipeline.config``'s ``CONFIG_ENV`` and
``CONFIG_NAME``, spelled out so that a command run with no configuration file
does not load the configuration's checks; a test checks they are equal)."""

Command = Callable[[argparse.Namespace], int]
"""A command: parsed arguments in, exit code out."""


class UsageError(PipelineError, ValueError):
    """A command was given arguments it cannot use."""


MAX_ARGUMENT_BYTES: Final = 16_384
"""The longest command-line argument accepted, in UTF-8 bytes (a recall query, a
memory, a turn: longer text goes through a file or standard input). Even with
every character escaped twice it stays under SQLite's 50,000-byte bound of a
``LIKE`` pattern, which a 100,000-character recall query used to exceed."""

SHOWN_CHARS: Final = 40
"""An error quotes at most this many characters of an offending value."""


def shown(value: str) -> str:
    """Return a printable, bounded quote of a value (bad characters escaped)."""
    head = (
        value[:SHOWN_CHARS]
        .encode("utf-8", "backslashreplace")
        .decode("ascii", "backslashreplace")
    )
    more = f"\u2026 ({len(value)} characters)" if len(value) > SHOWN_CHARS else ""
    return f"'{head}'{more}"


def check_arguments(argv: list[str]) -> list[str]:
    """Refuse arguments that are not UTF-8 or are too long, before parsing.

    Args:
        argv: The arguments (without the program name).

    Returns:
        ``argv``, unchanged.

    Raises:
        UsageError: An argument holds an undecodable byte or a lone surrogate,
            or is longer than :data:`MAX_ARGUMENT_BYTES`.
    """
    for number, argument in enumerate(argv, start=1):
        try:
            size = len(argument.encode("utf-8"))
        except UnicodeEncodeError as e:
            bad = ord(argument[e.start])
            found = (
                f"the undecodable byte 0x{bad - 0xDC00:02x}"
                if 0xDC80 <= bad <= 0xDCFF
                else f"the lone surrogate U+{bad:04X}"
            )
            msg = (
                f"Expected UTF-8 command-line arguments, found {found} at"
                f" character {e.start} of argument {number} ({shown(argument)})"
            )
            raise UsageError(msg) from None
        if size > MAX_ARGUMENT_BYTES:
            msg = (
                f"Expected command-line arguments of at most {MAX_ARGUMENT_BYTES}"
                f" UTF-8 bytes, found {size} in argument {number}"
                f" ({shown(argument)})"
            )
            raise UsageError(msg)
    return argv


def count(text: str) -> int:
    """An argparse type: a whole number from 0 to 2**63 - 1.

    Raises:
        argparse.ArgumentTypeError: The text is not such a number.
    """
    negative = text.startswith("-")
    body = text[1:] if negative else text
    if not (body.isascii() and body.isdigit()):  # not int(): '²' and 5,000 digits
        msg = f"expected a whole number, found {quote_value(text)}"
        raise argparse.ArgumentTypeError(msg)
    value = parse_whole(body)
    if value is None or (negative and value):
        msg = f"expected a number from 0 to {MAX_INTEGER}, found {quote_value(text)}"
        raise argparse.ArgumentTypeError(msg)
    return value


def place(text: str) -> str:
    """An argparse type: a path or URL, never empty.

    An empty ``--db``, ``--config`` or ``--views`` was read as not given (the
    default ledger, configuration or view store, silently).

    Raises:
        argparse.ArgumentTypeError: The text is empty.
    """
    if not text:
        msg = "expected a path or URL, found an empty one"
        raise argparse.ArgumentTypeError(msg)
    return text


def config(args: argparse.Namespace) -> Config:
    """Return the configuration: --config, $TURNLEDGER_CONFIG, ./turnledger.toml."""
    from turnledger.pipeline.config import ConfigError, load_config  # noqa: PLC0415

    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as e:
        raise UsageError(str(e)) from None


def target(args: argparse.Namespace) -> str:
    """Return the ledger: --db, $TURNLEDGER_DB, the config's ``ledger``, the default."""
    chosen = args.db or os.environ.get(DB_ENV)
    if chosen:
        return str(chosen)
    named = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    if not named and not os.path.lexists(CONFIG_NAME):
        return DEFAULT_PATH  # no configuration anywhere: its defaults
    return config(args).ledger or DEFAULT_PATH


def open_ledger(args: argparse.Namespace) -> EventStore:
    """Open the ledger a command uses, its cipher key checked (issue #17).

    Raises:
        CipherKeyError: ``TURNLEDGER_CIPHER_KEY`` is wrong for this ledger, or
            missing while its events are encrypted; nothing was written.
        ErasureKeysError: Its events are sealed and its erasure key store is
            missing, or is another ledger's.
    """
    from turnledger.ledger.store import open_store  # noqa: PLC0415

    # open_store runs check_cipher_key; [privacy] erasable seals new events.
    return open_store(target(args), erasable=True if _erasable(args) else None)


def _erasable(args: argparse.Namespace) -> bool:
    """Return the configuration's ``[privacy] erasable`` (False without one)."""
    named = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    if not named and not os.path.lexists(CONFIG_NAME):
        return False  # no configuration anywhere: its defaults
    return config(args).privacy.erasable


def print_json(value: Any) -> None:
    """Write one JSON document (one line) to stdout."""
    import msgspec  # noqa: PLC0415

    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.buffer.flush()
