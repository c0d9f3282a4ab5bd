"""The engine's cursors on session streams: opened in O(1), kept current in memory.

A session is opened from its history snapshot plus the events after it
(:class:`turnledger.projections.queries.SessionHistories`), never by folding
from version 1 unless no snapshot exists. While a turn runs the engine is the
session's writer, so the cursor folds each event it appends instead of reading
the stream again. Between turns cursors stay cached (bounded LRU): re-opening a
cached session costs one head-version check, plus the events another writer
appended since, if any; with ``verify=False`` (the engine's turns) it costs
nothing: the turn's first append expects the cached version, and if another
writer moved the stream that append fails with a conflict, writing nothing, and
the cursor is refreshed (the engine then checks it again and retries).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final
from uuid import UUID

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.errors import (
    ConcurrencyError,
    LedgerFullError,
    LedgerLockedError,
    LedgerReadOnlyError,
    StoreUnavailableError,
)
from turnledger.ledger.events import Event, SessionOpened
from turnledger.ledger.frame import datetime_from_us, now_us
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.engine.prompt_cache import PromptCache
from turnledger.policies.paths import sanitize_session_key
from turnledger.projections.history import SESSION_HISTORY, SessionHistoryState
from turnledger.projections.history.fold import fold_stream
from turnledger.projections.queries import SessionHistories

CACHED_SESSIONS: Final = 1024
"""How many session cursors an engine keeps between turns."""

LOST_ACK_RETRIES: Final = 2
"""How often a keyed append is retried after the database failed to answer."""

LOST_ACK_PAUSE: Final = 0.05
"""Seconds before the first such retry (then twice that, and so on)."""

_NOT_WRITTEN: Final = (LedgerLockedError, LedgerFullError, LedgerReadOnlyError)
"""Database failures that say nothing was written: never retried."""


class SessionCursor:
    """The engine's cursor on one session stream.

    Events that need no commit of their own (a recall record, a model call's
    usage) wait in ``pending`` and go out with the next append. ``prompts``
    keeps the session's prompt work between prompts
    (:class:`~turnledger.pipeline.engine.prompt_cache.PromptCache`).

    Attributes:
        stream_id: The session stream.
        version: The stream version the cursor has folded.
        agent: The agent.
        key: The session key.
        state: The session's history as of ``version``.
        pending: Events to prepend to the next append.
        prompts: The session's incremental prompt state.
    """

    def __init__(
        self,
        stream_id: UUID,
        version: int,
        agent: str,
        key: str,
        state: SessionHistoryState,
    ) -> None:
        self.stream_id = stream_id
        self.version = version
        self.agent = agent
        self.key = key
        self.state = state
        self.pending: list[Event] = []
        self.prompts = PromptCache()


class SessionCursors:
    """Opens session cursors and appends through them.

    Args:
        ledger: The async ledger.
        histories: The session-history query API (snapshot + tail).
    """

    def __init__(self, ledger: AsyncLedger, histories: SessionHistories) -> None:
        self.ledger = ledger
        self.histories = histories
        self._cached: OrderedDict[UUID, SessionCursor] = OrderedDict()

    async def open(
        self, agent: str, session_key: str, *, channel: str = "", verify: bool = True
    ) -> SessionCursor:
        """Return a cursor on a session, recording its opening if new.

        A cached cursor is checked against the stream's head (one read) unless
        ``verify`` is false: then it is returned as cached, and a writer that
        moved the stream since is found by the next :meth:`append` (a
        :class:`~turnledger.ledger.errors.ConcurrencyError`, nothing written,
        the cursor refreshed).
        """
        key = sanitize_session_key(session_key)
        stream = session_stream_id(agent, key)
        cursor = self._cached.pop(stream, None)
        if cursor is None:
            state, head = await asyncio.to_thread(self.histories.open, stream)
            cursor = SessionCursor(stream, head, agent, key, state)
        elif verify and await self.ledger.stream_version(stream) != cursor.version:
            await self._refresh(cursor)
        cursor.pending.clear()
        self._remember(cursor)
        if cursor.version == 0:
            opened = SessionOpened(agent=agent, session_key=key, channel=channel)
            await self.append(cursor, [opened], step_key=f"{stream}:opened")
        return cursor

    async def append(
        self,
        cursor: SessionCursor,
        events: Sequence[Event],
        *,
        step_key: str | None = None,
    ) -> None:
        """Append (pending events first) at the cursor's version and fold them in.

        ``step_key`` is the append's idempotency key (the engine passes
        ``f"{turn_id}:{step}"``). With one, an append the database failed to
        acknowledge (a :class:`~turnledger.ledger.errors.StoreUnavailableError`:
        it may or may not have committed) is retried with the same key, up to
        :data:`LOST_ACK_RETRIES` times; a commit that did happen is returned by
        the ledger, which writes nothing twice. A lock timeout, a full disk and
        a read-only ledger say nothing was written and are not retried. A
        retried or replayed append is read back from the stream, never folded
        from what was sent.

        Raises:
            ConcurrencyError: Another writer moved the session; the cursor is
                refreshed to the stream's head before the error propagates.
            StoreUnavailableError: The database still failed after the retries.
        """
        batch = [*cursor.pending, *events]
        cursor.pending.clear()
        try:
            result, retried = await self._write(cursor, batch, step_key)
        except ConcurrencyError:
            await self._refresh(cursor)
            raise
        if retried or result.first_version != cursor.version + 1:
            # Replayed under its key: the ledger's record is the truth.
            await self._refresh(cursor)
            return
        now = datetime_from_us(now_us())
        wanted = SESSION_HISTORY.event_types
        recorded = [
            Recorded(
                stream_id=cursor.stream_id,
                version=result.first_version + i,
                position=position,
                recorded_at=now,
                event=event,  # type: ignore[arg-type]  # the append validated it
            )
            for i, (event, position) in enumerate(
                zip(batch, result.positions, strict=True)
            )
            if isinstance(event, wanted)  # the others leave the history as it is
        ]
        cursor.state = fold_stream(SESSION_HISTORY, cursor.state, recorded)
        cursor.version = result.last_version

    async def _write(
        self, cursor: SessionCursor, batch: list[Event], step_key: str | None
    ) -> tuple[AppendResult, bool]:
        """Append once, or again under the same key after a lost acknowledgement."""
        attempt = 0
        while True:
            try:
                result = await self.ledger.append(
                    cursor.stream_id,
                    batch,
                    expected_version=cursor.version,
                    idempotency_key=step_key,
                )
            except _NOT_WRITTEN:
                raise  # the ledger knows nothing was written: nothing to retry
            except StoreUnavailableError:
                if step_key is None or attempt >= LOST_ACK_RETRIES:
                    raise
                attempt += 1
                await asyncio.sleep(LOST_ACK_PAUSE * attempt)
            else:
                return result, attempt > 0

    async def _refresh(self, cursor: SessionCursor) -> None:
        """Fold what other writers appended after the cursor's version."""
        cursor.state, cursor.version = await asyncio.to_thread(
            self.histories.advance, cursor.stream_id, cursor.state, cursor.version
        )

    def _remember(self, cursor: SessionCursor) -> None:
        self._cached[cursor.stream_id] = cursor
        while len(self._cached) > CACHED_SESSIONS:
            self._cached.popitem(last=False)
