"""Which session a conversation id or a trace continues: the recorder's links.

Some instrumentations name a call's ``gen_ai.conversation.id`` by the response
it continues: Microsoft's Agent Framework does with OpenAI's Responses API,
where each call sends only what is new and names the previous response. Such
an id is no conversation's: it is that response's, and the call continues
the session the response was recorded in. :class:`SessionLinks` remembers the
session each call's response (``gen_ai.response.id``) went to, and the
session each trace's spans went to when it was not the trace's own (a
conversation's, or one continued), so that the log records of a trace (which
name no conversation) follow its spans.

The links live as long as the recorder (one receiver's run, one import): a
continuation whose response was recorded before a restart opens a session of
its own, named by that response's id. A trace whose spans come in several
batches follows a link from the batch the link is seen in.
"""

from __future__ import annotations

from typing import Final

from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai import SpanReading
from turnledger.pipeline.collect.genai.values import string

Session = tuple[str, str]
"""A session's agent and key."""

MAX_LINKS: Final = 65_536
"""Links of each kind kept (the oldest beyond it are forgotten)."""

RESPONSE_ID: Final = "gen_ai.response.id"


class SessionLinks:
    """The sessions responses and traces went to (see the module doc)."""

    def __init__(self, size: int = MAX_LINKS) -> None:
        self.size = size
        self._responses: dict[str, Session] = {}
        self._traces: dict[str, Session] = {}

    def continued(self, conversation: str | None) -> Session | None:
        """The session of the response a conversation id names, if recorded."""
        return None if conversation is None else self._responses.get(conversation)

    def of_trace(self, trace_id: str) -> Session | None:
        """The session a trace's spans went to, when not the trace's own."""
        return self._traces.get(trace_id)

    def note(self, span: Span, reading: SpanReading, session: Session) -> None:
        """Remember where a span went: its response's session, its trace's."""
        if reading.kind == "chat" and (
            found := string(span.attributes.get(RESPONSE_ID))
        ):
            _put(self._responses, found, session, self.size)
        if session[1] != span.trace_id:
            _put(self._traces, span.trace_id, session, self.size)


def _put(links: dict[str, Session], key: str, session: Session, size: int) -> None:
    links.pop(key, None)
    links[key] = session  # the most recent last
    if len(links) > size:
        del links[next(iter(links))]
