"""Finding sessions in the ledger and loading their history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from uuid import UUID

import msgspec

from turnledger.ledger.events import SessionForked, SessionOpened
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded
    from turnledger.ledger.store import EventStore
    from turnledger.projections.history import SessionHistoryState


class SessionNotFoundError(PipelineError, LookupError):
    """No session matches what was asked for (or more than one does)."""


class SessionRef(msgspec.Struct, frozen=True, kw_only=True):
    """Where a session lives.

    Attributes:
        stream_id: Its stream.
        agent: Its agent.
        key: Its session key.
        channel: Its channel.
    """

    stream_id: UUID
    agent: str
    key: str
    channel: str = ""


SESSION_STARTS: Final = (SessionOpened, SessionForked)
"""The events a session's stream begins with (a fork begins with its fork)."""


def session_ref_of(recorded: Recorded) -> SessionRef | None:
    """Return the session an event starts, if it starts one."""
    event = recorded.event
    if not isinstance(event, SessionOpened | SessionForked):
        return None
    return SessionRef(
        stream_id=recorded.stream_id,
        agent=event.agent,
        key=event.session_key,
        channel=event.channel,
    )


def list_sessions(store: EventStore) -> list[SessionRef]:
    """Return every session in the ledger (forks included), in the order opened."""
    found = (session_ref_of(r) for r in store.iter_all(types=SESSION_STARTS))
    return [ref for ref in found if ref is not None]


def resolve_session(
    store: EventStore, target: str, *, agent: str | None = None
) -> SessionRef:
    """Find the session a command names.

    Args:
        store: The ledger.
        target: A stream id, or a session key (unique, or narrowed by ``agent``).
        agent: Only sessions of this agent.

    Raises:
        SessionNotFoundError: Nothing matches, or the key is ambiguous.
    """
    sessions = list_sessions(store)
    if agent is not None:
        sessions = [s for s in sessions if s.agent == agent]
    matches = [s for s in sessions if target in (str(s.stream_id), s.key)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        from turnledger.pipeline.erasure import erased_session  # noqa: PLC0415

        scope = f" of agent {agent!r}" if agent else ""
        erased = erased_session(store, target, agent)
        if erased is not None:
            msg = f"Expected a session id or key{scope}, found {erased}"
            raise SessionNotFoundError(msg)
        msg = f"Expected a session id or key{scope}, found no session {target!r}"
        raise SessionNotFoundError(msg)
    agents = sorted({s.agent for s in matches})
    msg = (
        f"Expected one session named {target!r}, found {len(matches)} "
        f"(agents {', '.join(agents)}); add --agent"
    )
    raise SessionNotFoundError(msg)


def load_history(
    store: EventStore, stream_id: UUID, *, at: int | None = None
) -> SessionHistoryState:
    """Return a session's whole record (up to global position ``at``).

    Every recorded message is kept, trimmed ones included (audits and exports of
    the record read this), a fork's source prefix included; the provider-visible
    part is
    :func:`turnledger.projections.history.read.visible_messages` of it.
    """
    # Loaded here: listing and resolving sessions (``turnledger sessions``) need
    # no projection, and the projections package loads every view store.
    from turnledger.projections.queries import SessionHistories  # noqa: PLC0415

    return SessionHistories(store).transcript(stream_id, at=at)
