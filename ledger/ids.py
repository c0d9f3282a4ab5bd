"""Deterministic stream ids: one agent and session key always name one stream."""

from __future__ import annotations

from uuid import UUID, uuid5

NAMESPACE = UUID("6f1c1a8e-6b0e-5b6e-9a43-7475726e6c64")
"""The uuid5 namespace of turnledger stream ids. Never change it."""


def session_stream_id(agent: str, session_key: str) -> UUID:
    """Return the id of an agent's session stream.

    Args:
        agent: The agent alias.
        session_key: The (sanitized) session key.

    Returns:
        The uuid5, in :data:`NAMESPACE`, of ``session``, agent and key joined by
        the unit separator.
    """
    return uuid5(NAMESPACE, f"session\x1f{agent}\x1f{session_key}")


def memory_stream_id(agent: str) -> UUID:
    """Return the id of an agent's long-term memory stream."""
    return uuid5(NAMESPACE, f"memory\x1f{agent}")
