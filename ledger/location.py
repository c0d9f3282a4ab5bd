"""Where a ledger lives when nothing names one, and what a ledger URL names.

Its own module so that what needs only the default (the configuration, the
command line's help) does not load the store and its storage library.
"""

from typing import Final

DEFAULT_PATH: Final = "./turnledger.db"
"""Where the ledger lives when no URL is given."""

SQLITE_SCHEME: Final = "sqlite:///"
"""The prefix a SQLite file's URL may carry (``sqlite:///path``)."""


def sqlite_path(url: str) -> str | None:
    """Return the file path a ledger URL names, or ``None`` for a server's URL.

    A plain path and ``sqlite:///path`` name a SQLite file (the path is
    returned as written, perhaps empty); anything else holding ``://``
    (``postgresql://...``) is a server's.
    """
    path = url.removeprefix(SQLITE_SCHEME)
    return None if "://" in path else path
