"""``turnledger serve``: a local web UI over the ledger (see :mod:`.app`).

This module stays light (no web framework import) so the command line can check
its arguments before loading the app.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

TOKEN_ENV: Final = "TURNLEDGER_SERVE_TOKEN"  # noqa: S105 - a variable name, not a secret
"""The environment variable holding the access token when ``--token`` is not given."""


TOKEN_PATTERN: Final = re.compile(r"[!#-+\--:<-~]{8,512}")
"""What an access token may be: 8 to 512 printable ASCII characters without
spaces, quotes, commas or semicolons (it travels in a header and a cookie)."""


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be an access token, or ``None`` when it can."""
    if TOKEN_PATTERN.fullmatch(token):
        return None
    return (
        "Expected a token of 8 to 512 printable ASCII characters without spaces, "
        f"quotes, commas or semicolons, found {len(token)} character(s) that are not"
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
