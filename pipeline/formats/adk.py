"""Google ADK session events (JSON as ADK's session services store them).

A session is ``{id, appName, userId, state, events: [...]}``; each event has an
``author`` (``"user"`` or an agent's name) and a Gemini ``content`` (``role``,
``parts``) whose ``functionCall`` / ``functionResponse`` parts are the tool
items, paired as in Gemini (see :mod:`pipeline.formats.gemini`): a response
answers a call of the content right before it, by id, else by name. Events
without content (state changes, transfers) and ``partial`` streaming chunks
carry no message and are skipped and counted.

Accepted documents: a session object with ``events``, a JSON array of events,
or a ``SqliteSessionService`` database file (one conversation per session; see
:mod:`pipeline.formats.openai_agents_items`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    Items,
    JSONObject,
    Sink,
    as_object,
    conversation,
    get_object,
    get_str,
)
from turnledger.pipeline.formats._documents import item_list, load_json
from turnledger.pipeline.formats.gemini import gemini_messages
from turnledger.pipeline.formats.openai_agents_items import (
    ADK_TABLE,
    SQLITE_MAGIC,
    grouped,
    read_rows,
)
from turnledger.pipeline.formats.usage import adk_usage, attach_usage

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import (
        Conversation,
        ModelUsage,
        ParsedTranscript,
    )

EXPECTED = "an ADK session (an object with `events`) or a JSON array of ADK events"


def parse_adk(data: bytes, *, name: str) -> ParsedTranscript:
    """Read ADK session events.

    Args:
        data: The file's bytes.
        name: The file name, the conversation id when the session has no ``id``.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not JSON or has neither accepted shape.
    """
    if data.startswith(SQLITE_MAGIC):
        return _parse_database(data, name=name)
    items, envelope = item_list(
        load_json(data, expected=EXPECTED), key="events", expected=EXPECTED
    )
    sink = Sink()
    session_id = get_str(envelope, "id") if envelope is not None else None
    found = _conversation(items, session_id or name, name, sink)
    return sink.transcript("adk", [found])


_DATABASE = "a google-adk SqliteSessionService database (`events.event_data`)"


def _parse_database(data: bytes, *, name: str) -> ParsedTranscript:
    """One conversation per session of a ``SqliteSessionService`` database."""
    rows = read_rows(
        data,
        "SELECT app_name || '/' || user_id || '/' || session_id, event_data "
        f"FROM {ADK_TABLE} ORDER BY timestamp",
        table=ADK_TABLE,
        expected=_DATABASE,
    )
    sink = Sink()
    found = []
    for session, values in grouped(rows, sink).items():
        items = Items.of(values, f"{ADK_TABLE}[{session}]")
        found.append(_conversation(items, session, f"{name} session {session}", sink))
    return sink.transcript("adk", found)


def _conversation(
    items: Items, conversation_id: str, source: str, sink: Sink
) -> Conversation:
    contents: list[object] = []
    origins: list[str] = []
    usage_at: dict[int, ModelUsage] = {}
    for index, event in items.objects(sink):
        content = _content(event, sink)
        if content is not None:
            usage = adk_usage(event, sink)
            if usage is not None:
                usage_at[len(contents)] = usage
            contents.append(content)
            origins.append(items.origins[index])
    indexed = gemini_messages(Items(contents, origins), sink)
    found = conversation(
        conversation_id=conversation_id,
        indexed=indexed,
        origins=origins,
        source=source,
    )
    return attach_usage(found, indexed, usage_at)


def _content(event: JSONObject, sink: Sink) -> JSONObject | None:
    if event.get("partial") is True:
        sink.skip("partial event")
        return None
    content = get_object(event, "content")
    if content is None:
        if "author" in event:
            sink.skip("event without content")
        else:
            sink.unknown("not an ADK event")
        return None
    if get_str(content, "role") is None:
        role = "user" if get_str(event, "author") == "user" else "model"
        return {**content, "role": role}
    return content


def is_adk_event(item: JSONObject) -> bool:
    """Whether an object looks like an ADK event (``author`` and a ``content``)."""
    return "author" in item and (
        as_object(item.get("content")) is not None or "invocationId" in item
    )
