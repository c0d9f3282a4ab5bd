"""The one bound the observer's items and states share: ids, names and labels.

An id, name, label, session key or channel shown by the observer is scrubbed and
cut to :data:`ID_LIMIT` characters (plus an ellipsis) by :func:`short`; an empty
value stays empty. :mod:`projections.observer.items` bounds item fields with it
and :mod:`projections.observer` the session key and channel of a stream's state.
"""

from __future__ import annotations

from typing import Final

from turnledger.policies.scrubbing import summarize

ID_LIMIT: Final = 64
"""The character bound of an id, name or label (before the ellipsis)."""


def short(text: str) -> str:
    """Return ``text`` scrubbed and cut to :data:`ID_LIMIT`; ``""`` stays ``""``."""
    return summarize(text, ID_LIMIT) if text else ""
