"""Where a ledger lives when nothing names one.

Its own module so that what needs only the default (the configuration, the
command line's help) does not load the store and its storage library.
"""

from typing import Final

DEFAULT_PATH: Final = "./turnledger.db"
"""Where the ledger lives when no URL is given."""
