"""Whole numbers as a ledger's databases hold them, read from text.

SQLite's and PostgreSQL's integers are 64-bit signed: a position, a version or
a count is at most :data:`MAX_INTEGER`. :func:`parse_whole` reads such a number
from text a user or a sender wrote without calling ``int`` on what is not one:
``int`` reads ``'٣'`` as 3 and ``'1_000'`` as 1000, refuses ``'²'`` (a digit to
``str.isdigit``) and more than 4,300 digits with a ``ValueError``.
"""

from __future__ import annotations

from typing import Final

MAX_INTEGER: Final = 2**63 - 1
"""The largest integer SQLite and PostgreSQL store (a position, a version, a count)."""


def parse_whole(text: str, maximum: int = MAX_INTEGER) -> int | None:
    """Return the number ``text`` writes in ASCII digits, if at most ``maximum``.

    Leading zeros are read; anything else (a sign, a space, ``_``, a non-ASCII
    digit, a number above ``maximum``) gives ``None``. Never raises.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None
