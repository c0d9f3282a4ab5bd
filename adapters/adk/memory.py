"""Google ADK's memory service on turnledger's memory: ``TurnledgerMemoryService``.

One line::

    memory = TurnledgerMemoryService("turnledger.db")
    runner = Runner(agent=agent, app_name="ops", memory_service=memory, ...)

Memories are ``memory.stored`` events on the memory stream of agent ``APP/USER``
(each part percent-quoted), one per event text of an added session, keyed
``SESSION/EVENT_ID`` (adding a session again writes only what changed);
``delete_memory`` appends ``memory.forgotten``. ``search_memory`` asks the memory
projection (a :class:`~turnledger.projections.memory.sqlite.SQLiteMemory`: FTS5
keyword recall, in memory and rebuilt from the ledger unless a backend is given),
caught up with the ledger before each search; ``turnledger memory ... --agent
APP/USER`` reads the same memories. An entry carries its text, id and time: the
ADK event's author is not part of a memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

from google.adk.memory.base_memory_service import (
    BaseMemoryService,
    SearchMemoryResponse,
)
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from turnledger.adapters._ledger import LedgerHandle, LedgerTarget
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event, MemoryForgotten, MemoryStored
from turnledger.ledger.ids import memory_stream_id
from turnledger.projections.memory.apply import BackendTarget
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.runner import catch_up

if TYPE_CHECKING:
    from google.adk.events.event import Event as AdkEvent
    from google.adk.sessions.session import Session

SEARCH_LIMIT: Final = 10
"""How many memories a search returns at most."""

_RETRIES: Final = 16


def memory_agent(app_name: str, user_id: str) -> str:
    """Return the turnledger memory agent of an ADK app's user."""
    if not app_name or not user_id:
        msg = (
            "Expected a non-empty app name and user id, "
            f"found {app_name!r} and {user_id!r}"
        )
        raise ValueError(msg)
    return f"{quote(app_name, safe='')}/{quote(user_id, safe='')}"


class TurnledgerMemoryService(BaseMemoryService):
    """An ADK ``BaseMemoryService`` over turnledger's long-term memory.

    Args:
        ledger: The ledger (see :data:`LedgerTarget`).
        memory: The memory projection to search (default: an in-memory SQLite
            memory rebuilt from the ledger).
    """

    def __init__(
        self, ledger: LedgerTarget = None, *, memory: MemoryBackend | None = None
    ) -> None:
        self._handle = LedgerHandle(ledger)
        self._memory = memory if memory is not None else SQLiteMemory(":memory:")
        self._owns_memory = memory is None

    async def add_session_to_memory(self, session: Session) -> None:
        """Remember each text of the session's events (unchanged ones are skipped)."""
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[AdkEvent],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,  # noqa: ARG002 - none supported
    ) -> None:
        """Remember each text of ``events``; durable when this returns."""
        agent = memory_agent(app_name, user_id)
        scope = quote(session_id or "-", safe="")
        wanted = []
        for event in events:
            text = _text(event)
            if text and event.id:
                key = f"{scope}/{quote(event.id, safe='')}"
                wanted.append((key, text))
        if wanted:
            await asyncio.to_thread(self._store, agent, session_id, wanted)

    def _store(
        self, agent: str, session_id: str | None, wanted: list[tuple[str, str]]
    ) -> None:
        self._catch_up()
        new: list[Event] = []
        for key, text in wanted:
            known = self._memory.get(key, agents=[agent])
            if known is None or known.content != text:
                new.append(
                    MemoryStored(
                        agent=agent,
                        key=key,
                        content=text,
                        category="conversation",
                        session=session_id,
                        source="import",
                    )
                )
        self._append(agent, new)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """Return the user's best matching memories (keyword recall), best first."""
        agent = memory_agent(app_name, user_id)
        found = await asyncio.to_thread(self._search, agent, query)
        return SearchMemoryResponse(memories=found)

    def _search(self, agent: str, query: str) -> list[MemoryEntry]:
        self._catch_up()
        entries = self._memory.recall(query, agents=[agent], limit=SEARCH_LIMIT)
        return [
            MemoryEntry(
                id=e.key,
                content=types.Content(role="user", parts=[types.Part(text=e.content)]),
                timestamp=e.updated_at.astimezone(UTC).isoformat(),
            )
            for e in entries
        ]

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget one memory (a ``memory.forgotten`` event); unknown ids are no-ops."""
        if not memory_id:
            return
        agent = memory_agent(app_name, user_id)
        await asyncio.to_thread(self._forget, agent, memory_id)

    def _forget(self, agent: str, memory_id: str) -> None:
        self._catch_up()
        if self._memory.get(memory_id, agents=[agent]) is None:
            return
        self._append(
            agent, [MemoryForgotten(agent=agent, key=memory_id, source="tool")]
        )

    def _append(self, agent: str, events: list[Event]) -> None:
        if not events:
            return
        store = self._handle.store
        stream = memory_stream_id(agent)
        for _ in range(_RETRIES):
            version = store.stream_version(stream)
            try:
                store.append(stream, events, expected_version=version)
            except ConcurrencyError:
                continue
            self._catch_up()
            return
        raise ConcurrencyError(stream, version, store.stream_version(stream))

    def _catch_up(self) -> None:
        """Apply the memory events the projection has not seen (the runner's loop)."""
        catch_up(self._handle.store, BackendTarget(self._memory, name="adk memory"))

    def close(self) -> None:
        """Stop using the ledger (and close the default memory projection)."""
        if self._owns_memory:
            self._memory.close()
        self._handle.release()


def _text(event: AdkEvent) -> str:
    content = event.content
    if content is None or not content.parts:
        return ""
    return " ".join(p.text for p in content.parts if p.text and not p.thought)
