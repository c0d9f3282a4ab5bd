"""``turnledger serve``: a local web UI over the ledger (see :mod:`.app`).

This module stays light (no web framework import) so the command line can check
its arguments before loading the app.
"""

from __future__ import annotations

import ipaddress
from typing import Final

TOKEN_ENV: Final = "TURNLEDGER_SERVE_TOKEN"  # noqa: S105 - a variable name, not a secret
"""The environment variable holding the access token when ``--token`` is not given."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
