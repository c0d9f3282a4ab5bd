"""Which session a conversation id or a trace continues: the recorder's links.

Some instrumentations name a call's ``gen_ai.conversation.id`` by the response
it continues: Microsoft's Agent Framework does with OpenAI's Responses API,
where each call sends only what is new and names the previous response. Such
an id is no conversation's: it is that response's, and the call continues
the session the response was recorded in. :class:`SessionLinks` remembers the
session each call's response (``gen_ai.response.id``) went to, and the
session each trace's spans went to when it was not the trace's own (a
conversation's, or one continued), so that the log records of a trace (which
name no conversation) follow its spans; and the session holding a span's log
records that came before it (parked in the session of their trace), so that
the span's own session takes them when the span comes.

The links are the ledger's: each batch's ``item.recorded`` of its spans in a
session lists their traces and their responses' ids (``responses``), and the
recorder reads them back (:meth:`SessionLinks.follow`) from the sessions other
writers, and its own runs before, recorded: a continuation whose response was
recorded before a restart, by another receiver or in another imported file
continues that response's session. A trace whose spans come in several
batches follows a link from the batch the link is seen in. The ``log_events``
items say which spans' events a session parked, and which it handed over. A
receiver learns its own batches' links from what each wrote, as it would read
them back: a span sent again, or a batch refused, changes none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeVar
from uuid import UUID

from turnledger.ledger.events import ItemRecorded, SessionOpened
from turnledger.ledger.store import EventStore
from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai import SpanReading
from turnledger.pipeline.collected import (
    FRAMEWORK,
    LISTED,
    LOGS_KIND,
    LOGS_LISTED,
    SPANS_KIND,
)

Session = tuple[str, str]
"""A session's agent and key."""

_Key = TypeVar("_Key", str, UUID)

MAX_LINKS: Final = 65_536
"""Links of each kind kept (the oldest beyond it are forgotten)."""


class SessionLinks:
    """The sessions responses and traces went to (see the module doc)."""

    def __init__(self, size: int = MAX_LINKS) -> None:
        self.size = size
        self.position = 0  # the ledger's position the links were read up to
        self._responses: dict[str, Session] = {}
        self._traces: dict[str, Session] = {}
        self._opened: dict[UUID, Session] = {}  # the sessions of streams read
        self._parked: dict[str, Session] = {}  # where a span's early logs wait
        # What the batch being mapped noted (its own spans' responses and
        # traces, for its later spans): kept only as far as it is written.
        self._noted: dict[str, Session] = {}
        self._noted_traces: dict[str, Session] = {}

    def continued(self, conversation: str | None) -> Session | None:
        """The session of the response a conversation id names, if recorded."""
        if conversation is None:
            return None
        return self._noted.get(conversation) or self._responses.get(conversation)

    def of_trace(self, trace_id: str) -> Session | None:
        """The session a trace's spans went to, when not the trace's own."""
        return self._noted_traces.get(trace_id) or self._traces.get(trace_id)

    def note(self, span: Span, reading: SpanReading, session: Session) -> None:
        """Note where a span of the batch being mapped goes, for its later spans.

        Kept for that batch only: what it writes is learned once written
        (:meth:`written`), as from the ledger; a span sent again, or a batch
        refused, leaves the links as they were.
        """
        if reading.response:
            self._noted[reading.response] = session
        if session[1] != span.trace_id:
            self._noted_traces[span.trace_id] = session

    def forget_noted(self) -> None:
        """Drop what the batch being mapped noted (its end, written or not)."""
        self._noted.clear()
        self._noted_traces.clear()

    def written(
        self,
        session: Session,
        spans: Iterable[tuple[str, str, str]],
        responses: Iterable[str],
    ) -> None:
        """Learn what a batch wrote of a session, as from its item in the ledger.

        ``spans``: its spans (trace id, span id, label); ``responses``: their
        responses' ids.
        """
        for response in responses:
            _put(self._responses, response, session, self.size)
        for trace_id, span_id, _label in spans:
            self._parked.pop(span_id, None)  # the span read its parked events
            if session[1] != trace_id:
                _put(self._traces, trace_id, session, self.size)

    def parked_in(self, span_id: str) -> Session | None:
        """The session holding a span's log events parked (not read yet), if any."""
        return self._parked.get(span_id)

    def park(self, span_id: str, session: Session) -> None:
        """Remember that a session parked a span's log events."""
        _put(self._parked, span_id, session, self.size)

    def unpark(self, span_ids: Iterable[str]) -> None:
        """Forget spans' parked events: each span read them, or took them."""
        for span_id in span_ids:
            self._parked.pop(span_id, None)

    def opened(self, stream: UUID, session: Session) -> None:
        """Remember whose a session's stream is (one the recorder wrote to)."""
        _put(self._opened, stream, session, self.size)

    def follow(self, store: EventStore, last: int) -> None:
        """Read the links the ledger's batches recorded up to position ``last``.

        Those after :attr:`position` (the recorder moves it past its own
        writes, whose links it noted): each ``item.recorded`` of a batch's
        spans or log events in a session, by whichever writer. The first call
        reads the whole ledger's.
        """
        if last <= self.position:
            return
        kinds = (SessionOpened, ItemRecorded)
        for recorded in store.iter_all(after=self.position, until=last, types=kinds):
            match recorded.event:
                case SessionOpened(agent=agent, session_key=key):
                    _put(self._opened, recorded.stream_id, (agent, key), self.size)
                case ItemRecorded(framework=framework, kind=kind, fields=fields) if (
                    framework == FRAMEWORK and kind == SPANS_KIND
                ):
                    session = self._session(store, recorded.stream_id)
                    if session is not None:
                        self._learn(session, fields)
                case ItemRecorded(framework=framework, kind=kind, fields=fields) if (
                    framework == FRAMEWORK and kind == LOGS_KIND
                ):
                    session = self._session(store, recorded.stream_id)
                    if session is not None:
                        self._learn_logs(session, fields)
        self.position = last

    def _session(self, store: EventStore, stream: UUID) -> Session | None:
        found = self._opened.get(stream)
        if found is None:
            opened = store.read_stream(stream, limit=1, types=(SessionOpened,))
            if opened and isinstance(event := opened[0].event, SessionOpened):
                found = (event.agent, event.session_key)
                _put(self._opened, stream, found, self.size)
        return found

    def _learn(self, session: Session, fields: str) -> None:
        """Remember where a batch's spans recorded in ``session`` went."""
        listed = LISTED.decode(fields)
        self.written(session, listed.spans, listed.responses)

    def _learn_logs(self, session: Session, fields: str) -> None:
        """Remember the spans whose log events a batch parked in ``session``.

        An item written before it listed them (``parked`` absent) names the
        spans of its events not applied: those of spans the session already
        recorded are noted too, and a session finds its parked events by its
        state (:meth:`parked_in` may name one holding none, which hands over
        nothing; or name it in place of the session that does hold them).
        """
        listed = LOGS_LISTED.decode(fields)
        parked = listed.parked
        if parked is None:
            parked = [
                e.span_id for e in listed.events if e.span_id not in listed.applied
            ]
        for span_id in parked:
            _put(self._parked, span_id, session, self.size)
        for span_id in listed.joined:
            self._parked.pop(span_id, None)


def _put(links: dict[_Key, Session], key: _Key, session: Session, size: int) -> None:
    links.pop(key, None)
    links[key] = session  # the most recent last
    if len(links) > size:
        del links[next(iter(links))]
