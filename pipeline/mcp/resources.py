"""The MCP resources: a session's history and transcript, the lifecycle table.

``turnledger://lifecycle`` is the payload lifecycle table (Markdown, as
``turnledger lifecycle`` prints it). For each session of the agent and its
peers, ``turnledger://sessions/<stream id>/history`` is its provider-visible
history (the messages a provider is sent next) and
``turnledger://sessions/<stream id>/transcript`` its whole record: every
recorded message, trimmed and rewound ones included, with its version and turn
id. Both are JSON, every message scrubbed of credentials
(:func:`policies.structured_scrubbing.scrub_message`); a session may also be
named by its key (URL-encoded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import quote, unquote

import msgspec

from turnledger.ledger.errors import quote_value
from turnledger.pipeline.mcp.tools import RefusedCallError

if TYPE_CHECKING:
    from turnledger.pipeline.mcp.tools import ToolServices

LIFECYCLE_URI: Final = "turnledger://lifecycle"
"""The lifecycle table's resource."""

SESSION_PREFIX: Final = "turnledger://sessions/"
"""Where the sessions' resources are."""

VIEWS: Final = ("history", "transcript")
"""What each session offers."""

_DESCRIPTIONS: Final = {
    "history": "The provider-visible history.",
    "transcript": "Every recorded message, trimmed and rewound ones too.",
}

PAGE_SESSIONS: Final = 100
"""Sessions per page of the resource list."""

MAX_URI_CHARS: Final = 1_024
"""The longest resource URI accepted."""


class ResourceInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A listed resource: its URI, name, description and MIME type."""

    uri: str
    name: str
    description: str
    mime: str


_LIFECYCLE: Final = ResourceInfo(
    uri=LIFECYCLE_URI,
    name="lifecycle",
    description="The payload lifecycle table: who owns each surface, how long it lives",
    mime="text/markdown",
)


def list_resources(
    services: ToolServices, cursor: str | None = None
) -> tuple[list[ResourceInfo], str | None]:
    """One page: the lifecycle table first, then each session's two views.

    A page holds :data:`PAGE_SESSIONS` sessions; the cursor of the next page
    (``None`` after the last) is the number of sessions listed before it.

    Raises:
        RefusedCallError: The cursor is not one this server gave.
    """
    first = 0
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdecimal() and len(cursor) <= 12):
            msg = f"Expected a cursor this server gave, found {quote_value(cursor)}"
            raise RefusedCallError(msg)
        first = int(cursor)
    sessions = services.sessions()
    page = sessions[first : first + PAGE_SESSIONS]
    found = [] if first else [_LIFECYCLE]
    found.extend(
        ResourceInfo(
            uri=session_uri(str(ref.stream_id), view),
            name=f"{ref.agent}/{ref.key} {view}",
            description=_DESCRIPTIONS[view],
            mime="application/json",
        )
        for ref in page
        for view in VIEWS
    )
    following = first + PAGE_SESSIONS
    return found, str(following) if following < len(sessions) else None


def parse_uri(uri: str) -> tuple[str, str] | None:
    """Return ``(session, view)`` of a session resource, ``None`` for the lifecycle.

    Raises:
        RefusedCallError: The URI names no resource of this server.
    """
    if len(uri) > MAX_URI_CHARS:
        msg = (
            f"Expected a resource URI of at most {MAX_URI_CHARS} characters, "
            f"found {len(uri)}"
        )
        raise RefusedCallError(msg)
    if uri == LIFECYCLE_URI:
        return None
    session, _, view = uri.removeprefix(SESSION_PREFIX).rpartition("/")
    if not uri.startswith(SESSION_PREFIX) or view not in VIEWS or not session:
        msg = (
            f"Expected {LIFECYCLE_URI} or "
            f"{SESSION_PREFIX}<session>/history|transcript, "
            f"found {quote_value(uri)}"
        )
        raise RefusedCallError(msg)
    return unquote(session), view


def session_uri(session: str, view: str) -> str:
    """The URI of a session's view (the session key or stream id URL-encoded)."""
    return f"{SESSION_PREFIX}{quote(session, safe='')}/{view}"


def read_resource(services: ToolServices, target: tuple[str, str] | None) -> str:
    """Return a resource's text (``target`` from :func:`parse_uri`).

    Raises:
        ToolFailedError: The session is not one of the agent's or its peers'.
    """
    if target is None:
        from turnledger.pipeline.lifecycle import lifecycle_markdown  # noqa: PLC0415

        return lifecycle_markdown()
    from turnledger.pipeline.sessions import load_history  # noqa: PLC0415
    from turnledger.policies.structured_scrubbing import scrub_message  # noqa: PLC0415
    from turnledger.projections.history.read import provider_messages  # noqa: PLC0415

    session, view = target
    ref = services.session(session)
    state = load_history(services.store, ref.stream_id)
    head = {"agent": ref.agent, "session": ref.key, "stream": str(ref.stream_id)}
    if view == "history":
        messages = [scrub_message(m) for m in provider_messages(state)]
        body: dict[str, object] = {**head, "messages": messages}
    else:
        body = {
            **head,
            "entries": [
                {
                    "version": e.version,
                    "turn_id": e.turn_id,
                    "message": scrub_message(e.message),
                }
                for e in state.entries
            ],
        }
    return msgspec.json.encode(body).decode()
