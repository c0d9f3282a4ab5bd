"""The saver's threads: one agent's ``langgraph`` sessions, their folds cached.

A LangGraph thread is the session of the saver's agent whose session key is the
thread id, on the channel :data:`CHANNEL`. :class:`Threads` names those sessions
(their streams, their ``session.opened`` event, the list of them) and keeps the
most recently used threads' folds in memory, catching each up with the ledger
before it is handed out, so another process's writes are always seen.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.adapters.langgraph.state import ThreadState
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore

CHANNEL: Final = "langgraph"
"""The ``channel`` of the sessions the saver opens."""


class Threads:
    """One agent's LangGraph threads on the ledger, and a cache of their folds.

    Args:
        store: The ledger the threads' streams are read from.
        agent: The agent the threads' sessions belong to.
        serde: LangGraph's serializer, which the folds load values with.
        max_cached: Threads whose fold is kept in memory (older ones are folded
            again from the ledger when next used).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        agent: str,
        serde: SerializerProtocol,
        max_cached: int,
    ) -> None:
        self.store = store
        self.agent = agent
        self.serde = serde
        self.max_cached = max_cached
        self.channel = CHANNEL
        self._folds: OrderedDict[str, ThreadState] = OrderedDict()

    def state(self, thread_id: str, *, catch_up: bool = True) -> ThreadState:
        """The thread's fold, caught up with the ledger (call under the lock).

        Without ``catch_up`` a cached fold is returned as it is (an append made
        on it fails if another writer has moved the stream on).

        Raises:
            ValueError: ``thread_id`` is empty.
        """
        state = self._folds.get(thread_id)
        if state is None:
            if not thread_id:
                msg = "Expected a non-empty thread_id, found ''"
                raise ValueError(msg)
            state = ThreadState(thread_id, session_stream_id(self.agent, thread_id))
            self._folds[thread_id] = state
            while len(self._folds) > self.max_cached:
                self._folds.popitem(last=False)
        else:
            self._folds.move_to_end(thread_id)
            if not catch_up:
                return state
        for recorded in self.store.read_stream(state.stream, after=state.head):
            state.apply(recorded.version, recorded.event, self.serde)
        return state

    def forget(self, thread_id: str) -> None:
        """Drop a thread's cached fold (the next use folds it from the ledger)."""
        self._folds.pop(thread_id, None)

    def clear(self) -> None:
        """Drop every cached fold."""
        self._folds.clear()

    def opened(self, thread_id: str) -> SessionOpened:
        """The event that opens a thread's session (its stream's first event)."""
        return SessionOpened(
            agent=self.agent, session_key=thread_id, channel=self.channel
        )

    def ids(self) -> list[str]:
        """Every thread id the agent has a session for (deleted ones too)."""
        return [
            r.event.session_key
            for r in self.store.iter_all(types=[SessionOpened])
            if isinstance(r.event, SessionOpened)
            and r.event.agent == self.agent
            and r.event.channel == self.channel
        ]
