"""Google ADK's session service on the ledger: ``TurnledgerSessionService``.

One line::

    service = TurnledgerSessionService("turnledger.db")
    runner = Runner(agent=agent, app_name="ops", session_service=service)

Sessions, their events (with ``state_delta``), rewinds and compactions are ledger
events (:mod:`turnledger.adapters.adk.events`); ``delete_session`` appends an
``items.removed`` event, so the ledger keeps the deleted session's record. Every
call is async (ledger work runs in a worker thread) and durable when it returns;
an ``append_event`` on a session another writer has moved on raises ADK's
``StaleSessionError``, as ADK's SQLite service does.

A model's event with ``usage_metadata`` records a ``model.called`` (its
``model_version`` and token counts, priced with ``pricing=``). The instructions
a model is sent are not in any event: give the app the service's plugin
(``App(name=..., root_agent=..., plugins=[service.plugin()])``) and they are recorded as
``system_prompt.set`` before the model's event, once per change; without it
they are not recorded.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event as AdkEvent
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

if TYPE_CHECKING:
    from turnledger.adapters.adk.plugin import InstructionsPlugin

from turnledger.adapters._ledger import LedgerHandle, LedgerTarget
from turnledger.adapters._usage import Instructions
from turnledger.adapters.adk.events import (
    CREATED,
    EVENT,
    FRAMEWORK,
    STATE_DELTA,
    SessionFold,
    app_state_stream,
    fold_state,
    json_safe,
    parse_key,
    record,
    session_key,
    typed_events,
    user_state_stream,
)
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event, ItemsRemoved, SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore
from turnledger.policies.pricing import ModelPrice

_RETRIES: Final = 16


CACHED_SESSIONS: Final = 1024
"""Sessions whose fold a service keeps in memory (others are read again in full)."""


class TurnledgerSessionService(BaseSessionService):
    """An ADK ``BaseSessionService`` storing sessions in the turnledger ledger.

    Args:
        ledger: The ledger: a path or URL (default ``./turnledger.db``), an
            ``EventStore`` or an ``AsyncLedger``.
        pricing: The rate sheet model calls are priced with (the ``[pricing]``
            table, e.g. ``load_config().pricing``; a model it does not name
            costs 0).
    """

    def __init__(
        self,
        ledger: LedgerTarget = None,
        *,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.pricing = dict(pricing or {})
        self._instructions: dict[UUID, str] = {}
        self._handle = LedgerHandle(ledger)
        self._folds: OrderedDict[UUID, SessionFold] = OrderedDict()
        self._folds_lock = threading.Lock()

    @property
    def store(self) -> EventStore:
        """The ledger's store."""
        return self._handle.store

    def plugin(self) -> InstructionsPlugin:
        """The runner plugin through which the instructions sent are recorded."""
        from turnledger.adapters.adk.plugin import InstructionsPlugin  # noqa: PLC0415

        return InstructionsPlugin(self._note_instructions)

    def _note_instructions(self, session: Session, text: str) -> None:
        stream = self._stream(session.app_name, session.user_id, session.id)
        with self._folds_lock:
            self._instructions[stream] = text

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (``AlreadyExistsError`` when the id is live)."""
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        return await asyncio.to_thread(
            self._create, app_name, user_id, json_safe(state or {}), session_id
        )

    def _create(
        self, app: str, user: str, state: dict[str, Any], session_id: str
    ) -> Session:
        stream = self._stream(app, user, session_id)
        deltas = _session_util.extract_state_delta(state)
        now = time.time()
        for _ in range(_RETRIES):
            fold = self._fold(stream)
            if fold.live:
                msg = f"Session with id {session_id} already exists."
                raise AlreadyExistsError(msg)
            events: list[Event] = []
            if fold.version == 0:
                key = session_key(user, session_id)
                events.append(
                    SessionOpened(agent=app, session_key=key, channel=FRAMEWORK)
                )
            data = {"user_id": user, "session_id": session_id}
            events.append(
                record(CREATED, {**data, "state": deltas["session"], "time": now})
            )
            appends = [
                Append(stream, events, fold.version),
                *self._scoped(app, user, deltas),
            ]
            try:
                self.store.append_atomic(appends)
            except ConcurrencyError:
                continue
            return self._session(app, stream, None)  # type: ignore[return-value]
        raise ConcurrencyError(stream, fold.version, self.store.stream_version(stream))

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """Return the session with its events (filtered by ``config``), or ``None``."""
        stream = self._stream(app_name, user_id, session_id.strip())
        return await asyncio.to_thread(self._session, app_name, stream, config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Return the live sessions (without events), oldest update first."""
        return await asyncio.to_thread(self._list, app_name, user_id)

    def _list(self, app: str, user: str | None) -> ListSessionsResponse:
        found: list[Session] = []
        for r in self.store.iter_all(types=[SessionOpened]):
            opened = r.event
            if not isinstance(opened, SessionOpened) or opened.agent != app:
                continue
            if opened.channel != FRAMEWORK:
                continue
            ids = parse_key(opened.session_key)
            if ids is None or (user is not None and ids[0] != user):
                continue
            session = self._session(app, r.stream_id, None, with_events=False)
            if session is not None:
                found.append(session)
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    async def delete_session(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> None:
        """Delete a session: an ``items.removed`` event; the ledger keeps it."""
        stream = self._stream(app_name, user_id, session_id.strip())
        await asyncio.to_thread(self._delete, stream)

    def _delete(self, stream: UUID) -> None:
        for _ in range(_RETRIES):
            fold = self._fold(stream)
            if not fold.live:
                return
            removal = ItemsRemoved(
                first_version=1,
                last_version=fold.version,
                framework=FRAMEWORK,
                reason="delete_session",
            )
            try:
                self.store.append(stream, [removal], expected_version=fold.version)
            except ConcurrencyError:
                continue
            return

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """Return the user-scoped state (keys without the ``user:`` prefix)."""
        return await asyncio.to_thread(
            self._state, user_state_stream(app_name, user_id)
        )

    async def append_event(self, session: Session, event: AdkEvent) -> AdkEvent:
        """Record an event (and its ``state_delta``); durable when this returns.

        Raises:
            SessionNotFoundError: The session does not exist.
            StaleSessionError: The session changed since ``session`` was read.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        if event.actions and event.actions.state_delta:
            event.actions.state_delta = json_safe(event.actions.state_delta)
        recorded = await asyncio.to_thread(self._append, session, event)
        if recorded:
            session.last_update_time = event.timestamp
            self._commit_event_to_session(session, event)
        return event

    def _append(self, session: Session, event: AdkEvent) -> bool:
        from google.adk.errors._stale_session_error import (  # noqa: PLC0415
            StaleSessionError,
        )

        app, user = session.app_name, session.user_id
        stream = self._stream(app, user, session.id)
        data = event.model_dump_json(exclude_none=True)
        for _ in range(_RETRIES):
            fold = self._fold(stream)
            if not fold.live:
                msg = f"Session {session.id} not found."
                raise SessionNotFoundError(msg)
            if data in fold.events:
                return False  # the same event again: already recorded
            if fold.last_update_time > session.last_update_time:
                msg = (
                    "The last_update_time provided in the session object is earlier"
                    " than the update_time in storage. Please check if it is a"
                    " stale session."
                )
                raise StaleSessionError(msg)
            events: list[Event] = []
            text = None
            if event.author != "user":
                with self._folds_lock:
                    text = self._instructions.get(stream)
                noted = Instructions(fold.instructions)
                events += noted.change(text, turn_id=fold.turn)
            typed, _ = typed_events(
                event, fold.version + 1 + len(events), fold.turn, self.pricing
            )
            events += [*typed, *self._rewind(fold, event)]
            events.append(record(EVENT, json.loads(data), fold.turn))
            delta = event.actions.state_delta if event.actions else {}
            deltas = _session_util.extract_state_delta(delta or {})
            appends = [
                Append(stream, events, fold.version),
                *self._scoped(app, user, deltas),
            ]
            try:
                self.store.append_atomic(appends)
            except ConcurrencyError:
                continue
            if text is not None:
                with self._folds_lock:
                    if self._instructions.get(stream) == text:
                        del self._instructions[stream]
            return True
        raise ConcurrencyError(stream, fold.version, self.store.stream_version(stream))

    @staticmethod
    def _rewind(fold: SessionFold, event: AdkEvent) -> list[Event]:
        target = event.actions.rewind_before_invocation_id if event.actions else None
        first = fold.invocations.get(target or "")
        if first is None:
            return []
        return [
            ItemsRemoved(
                first_version=first,
                last_version=fold.version,
                framework=FRAMEWORK,
                reason="rewind",
            )
        ]

    def _scoped(
        self, app: str, user: str, deltas: dict[str, dict[str, Any]]
    ) -> list[Append]:
        out = []
        for stream, delta in (
            (app_state_stream(app), deltas["app"]),
            (user_state_stream(app, user), deltas["user"]),
        ):
            if delta:
                version = self.store.stream_version(stream)
                out.append(Append(stream, [record(STATE_DELTA, delta)], version))
        return out

    def _stream(self, app: str, user: str, session_id: str) -> UUID:
        if not app or not user or not session_id:
            msg = (
                "Expected a non-empty app name, user id and session id, found "
                f"{app!r}, {user!r} and {session_id!r}"
            )
            raise ValueError(msg)
        return session_stream_id(app, session_key(user, session_id))

    def _fold(self, stream: UUID) -> SessionFold:
        """The session's fold, caught up with the ledger (a copy of its own).

        The folds of the last :data:`CACHED_SESSIONS` sessions used are kept:
        each call reads only the events after the last one folded (another
        process's too), not the whole stream.
        """
        with self._folds_lock:
            fold = _copy(self._folds.get(stream) or SessionFold())
        for r in self.store.read_stream(stream, after=fold.version):
            fold.apply(r)
        with self._folds_lock:
            known = self._folds.get(stream)
            if known is None or known.version < fold.version:
                self._folds[stream] = _copy(fold)
            self._folds.move_to_end(stream)
            while len(self._folds) > CACHED_SESSIONS:
                self._folds.popitem(last=False)
        return fold

    def _state(self, stream: UUID) -> dict[str, Any]:
        state: dict[str, Any] = {}
        fold_state(state, self.store.read_stream(stream))
        return state

    def _session(
        self,
        app: str,
        stream: UUID,
        config: GetSessionConfig | None,
        *,
        with_events: bool = True,
    ) -> Session | None:
        fold = self._fold(stream)
        if not fold.live:
            return None
        state = dict(fold.state)
        for key, value in self._state(app_state_stream(app)).items():
            state[State.APP_PREFIX + key] = value
        for key, value in self._state(user_state_stream(app, fold.user_id)).items():
            state[State.USER_PREFIX + key] = value
        events = (
            [AdkEvent.model_validate_json(e) for e in fold.events]
            if with_events
            else []
        )
        if config is not None:
            events = _filtered(events, config)
        return Session(
            app_name=app,
            user_id=fold.user_id,
            id=fold.session_id,
            state=state,
            events=events,
            last_update_time=fold.last_update_time,
        )

    def close(self) -> None:
        """Stop using the ledger (the last user of a shared ledger closes it)."""
        self._handle.release()


def _filtered(events: list[AdkEvent], config: GetSessionConfig) -> list[AdkEvent]:
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    if config.after_timestamp is not None:
        events = [e for e in events if e.timestamp >= config.after_timestamp]
    return events


def _copy(fold: SessionFold) -> SessionFold:
    """A fold that folding more events into leaves ``fold`` as it was."""
    return dataclasses.replace(
        fold,
        state=copy.deepcopy(fold.state),
        events=list(fold.events),
        invocations=dict(fold.invocations),
    )
