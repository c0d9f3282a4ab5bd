"""Opening a turn: the session, a crashed turn's repair, and the start's retries.

:class:`TurnOpener` opens or resumes a session through its cursor; a turn a
crash left open is closed first by the pure policy
:func:`turnledger.policies.repair.repair_interrupted_turn` (a synthesized
failed result per unanswered call, then ``turn.failed`` of kind
``interrupted``, appended as ``{turn}:repaired``). A turn then records
its start on a cached cursor without reading the stream's head: when another
writer moved the session, the append conflicts and writes nothing, and the
open (with its repair check) runs again, up to :data:`START_ATTEMPTS` times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event
from turnledger.pipeline.engine.logger import engine_logger as _logger
from turnledger.pipeline.engine.session_cursor import SessionCursor, SessionCursors
from turnledger.policies.repair import repair_interrupted_turn

START_ATTEMPTS: Final = 3
"""How often a turn opens its session and records its start when another writer
keeps moving the session in between (each conflict writes nothing)."""


class TurnOpener:
    """Opens sessions (repairing a crashed turn) and records a turn's start.

    Args:
        sessions: The session cursors it opens and appends through.
    """

    def __init__(self, sessions: SessionCursors) -> None:
        self._sessions = sessions

    async def open(
        self, agent: str, session_key: str, *, channel: str = "", verify: bool = True
    ) -> SessionCursor:
        """Open (or resume) a session; a turn a crash interrupted is closed first.

        ``verify=False`` trusts a cached cursor without reading the stream's
        head (see :meth:`SessionCursors.open`); :meth:`start` does that and
        retries when its first append finds another writer moved the session.
        """
        session = await self._sessions.open(
            agent, session_key, channel=channel, verify=verify
        )
        turn = session.state.open_turn
        if turn is None:
            return session
        calls = [
            call
            for e in session.state.entries
            if e.turn_id == turn
            for call in e.message.tool_calls
        ]
        answered = {
            r.call_id for e in session.state.entries for r in e.message.tool_results
        }
        repair = repair_interrupted_turn(turn, calls, answered)
        await self._sessions.append(session, repair, step_key=f"{turn}:repaired")
        _logger().warning("turn.repaired", turn_id=turn, synthesized=len(repair) - 1)
        return session

    async def start(
        self,
        agent: str,
        session_key: str,
        *,
        channel: str,
        turn_id: str,
        first: Sequence[Event],
    ) -> SessionCursor:
        """Open the session (repairing a crashed turn) and record the turn's start.

        The cached cursor is trusted (no head read): if another writer moved
        the session, the repair or the start append conflicts, writing nothing,
        the cursor is refreshed, and the open (with its repair check) runs again.

        Raises:
            ConcurrencyError: Another writer moved the session at each of the
                :data:`START_ATTEMPTS` attempts.
        """
        attempt = 0
        while True:
            try:
                session = await self.open(
                    agent, session_key, channel=channel, verify=False
                )
                await self._sessions.append(
                    session, first, step_key=f"{turn_id}:started"
                )
            except ConcurrencyError:
                attempt += 1
                if attempt >= START_ATTEMPTS:
                    raise
            else:
                return session
