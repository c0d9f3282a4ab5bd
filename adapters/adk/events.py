"""Google ADK sessions <-> ledger events.

An ADK session is the ledger stream of agent ``app_name`` and session key
``USER/SESSION`` (each part percent-quoted, so the key is unambiguous). Its events:

- ``item.recorded`` ``session.created`` (the creation: ids, session-scoped state
  and time; a session deleted and created again starts over here);
- per ADK event, the typed events of what the providers see (a user message as
  ``turn.started``, model text and function calls as ``assistant.message``,
  function responses as ``tool_result.recorded``, a tool's plain text return,
  which ADK wraps as ``{"result": text}``, as that text; before a model's event, the
  instructions it was sent as ``system_prompt.set`` when they changed, seen by
  :class:`~turnledger.adapters.adk.plugin.InstructionsPlugin`, and its
  ``usage_metadata`` and ``model_version`` as ``model.called``), then
  ``item.recorded`` ``event`` holding the ADK event verbatim (its JSON, as
  ADK's own SQLite service stores it: ``model_dump_json(exclude_none=True)``),
  from which the session is rebuilt;
- ``items.removed`` ``delete_session`` (the session is gone for ADK; the ledger
  keeps it) and ``items.removed`` ``rewind`` (a rewind event's invocations leave the
  provider-visible history; ADK still sees its events and the rewind event, as it
  expects).

App- and user-scoped state (``app:`` / ``user:`` keys) live on streams of their
own, as ``item.recorded`` ``state.delta`` events, appended in the same transaction
as the session event that set them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, unquote
from uuid import UUID, uuid5

from google.adk.events.event import Event as AdkEvent
from pydantic_core import to_jsonable_python

from turnledger.adapters._usage import model_called
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.ids import NAMESPACE
from turnledger.policies.pricing import ModelPrice

FRAMEWORK: Final = "google-adk"
"""The ``framework`` (and session channel) of the ADK adapter's events."""

CREATED: Final = "session.created"
EVENT: Final = "event"
STATE_DELTA: Final = "state.delta"


class StateError(TypeError):
    """A state value is not JSON data (the ledger stores JSON; nothing is coerced)."""


def session_key(user_id: str, session_id: str) -> str:
    """Return the ledger session key of an ADK session."""
    return f"{quote(user_id, safe='')}/{quote(session_id, safe='')}"


def parse_key(key: str) -> tuple[str, str] | None:
    """Return ``(user_id, session_id)`` of a key made by :func:`session_key`."""
    user, sep, session = key.partition("/")
    if not sep or "/" in session:
        return None
    return unquote(user), unquote(session)


def app_state_stream(app_name: str) -> UUID:
    """The stream of an app's ``app:`` state."""
    return uuid5(NAMESPACE, f"adk-app-state\x1f{app_name}")


def user_state_stream(app_name: str, user_id: str) -> UUID:
    """The stream of a user's ``user:`` state in an app."""
    return uuid5(NAMESPACE, f"adk-user-state\x1f{app_name}\x1f{user_id}")


def json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """Return state as JSON data, faithfully (datetimes, models...) or refuse it.

    Raises:
        StateError: A value has no JSON form (a callable, an object...).
    """
    try:
        safe = to_jsonable_python(value)
    except Exception as e:  # pydantic-core raises a bare PydanticSerializationError
        msg = f"Expected JSON-serializable session state, found {e}"
        raise StateError(msg) from e
    return safe  # type: ignore[no-any-return]


def record(kind: str, data: object, turn_id: str = "adk") -> ItemRecorded:
    """An ``item.recorded`` of the ADK adapter."""
    return ItemRecorded(
        turn_id=turn_id,
        framework=FRAMEWORK,
        kind=kind,
        fields=json.dumps(data, ensure_ascii=False, separators=(",", ":")),
        typed=False,
    )


def model_call(
    event: AdkEvent, turn_id: str, pricing: Mapping[str, ModelPrice]
) -> list[Event]:
    """``[model.called]`` of a model's event with ``usage_metadata``, else ``[]``.

    Gemini's counts have the neutral meaning once added up: the prompt is
    ``prompt_token_count`` plus ``tool_use_prompt_token_count``, of which
    ``cached_content_token_count`` were cached; the completion is
    ``candidates_token_count`` plus ``thoughts_token_count`` (the reasoning).
    """
    usage = event.usage_metadata
    if usage is None or event.author == "user":
        return []
    thoughts = usage.thoughts_token_count or 0
    return [
        model_called(
            turn_id=turn_id,
            provider=FRAMEWORK,
            model=event.model_version,
            pricing=pricing,
            input_tokens=(usage.prompt_token_count or 0)
            + (usage.tool_use_prompt_token_count or 0),
            output_tokens=(usage.candidates_token_count or 0) + thoughts,
            cached_input_tokens=usage.cached_content_token_count or 0,
            reasoning_tokens=thoughts,
        )
    ]


def typed_events(
    event: AdkEvent,
    version: int,
    turn_id: str,
    pricing: Mapping[str, ModelPrice],
) -> tuple[list[Event], str]:
    """The typed events of what an ADK event shows the model; and the turn after it."""
    content = event.content
    if content is None or not content.parts:
        return model_call(event, turn_id, pricing), turn_id
    texts = [p.text for p in content.parts if p.text and not p.thought]
    calls = [p.function_call for p in content.parts if p.function_call]
    responses = [p.function_response for p in content.parts if p.function_response]
    out: list[Event] = model_call(event, turn_id, pricing)
    if responses:
        outputs = [_result_text(r.response) for r in responses]
        out.extend(
            ToolResultRecorded(
                turn_id=turn_id,
                call_id=r.id or "?",
                tool=r.name or "",
                output=output,
                original_chars=len(output),
                kept_chars=len(output),
            )
            for r, output in zip(responses, outputs, strict=True)
        )
    elif event.author == "user" and content.role == "user":
        turn_id = f"t{version}"
        out.append(
            TurnStarted(turn_id=turn_id, origin="channel", user_input="\n".join(texts))
        )
    elif texts or calls:
        out.append(
            AssistantMessage(
                turn_id=turn_id,
                text="\n".join(texts),
                tool_calls=tuple(
                    ToolCallRecord(
                        id=c.id or "?",
                        name=c.name or "?",
                        arguments=_text(c.args or {}),
                    )
                    for c in calls
                ),
            )
        )
    return out, turn_id


def _result_text(response: object) -> str:
    """A function response's text: a tool's plain value as the tool returned it.

    ADK wraps a tool's return that is not a dict as ``{"result": value}``; that
    text is the tool's result. Any other response is its JSON.
    """
    if isinstance(response, dict) and len(response) == 1:
        value = response.get("result")
        if isinstance(value, str):
            return value
    return _text(response)


def _text(value: object) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


@dataclass
class SessionFold:
    """One ADK session as its stream tells it.

    Attributes:
        live: Created and not deleted since.
        user_id: Its user.
        session_id: Its id.
        state: Its session-scoped state.
        events: Its ADK events' JSON, in order.
        last_update_time: When it last changed (ADK's clock).
        version: The last stream version folded.
        turn: The turn the next typed events belong to.
        invocations: The first version of each invocation's events (typed
            events included).
        boundary: The version of the last ``item.recorded`` folded.
        instructions: The digest of the system prompt in effect (``None``: none).
    """

    live: bool = False
    user_id: str = ""
    session_id: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    last_update_time: float = 0.0
    version: int = 0
    turn: str = "t0"
    invocations: dict[str, int] = field(default_factory=dict)
    boundary: int = 0
    instructions: str | None = None

    def apply(self, recorded: Recorded) -> None:
        """Fold one event of the session stream."""
        self.version = recorded.version
        event = recorded.event
        if isinstance(event, TurnStarted):
            self.turn = event.turn_id
        if isinstance(event, SystemPromptSet):
            self.instructions = event.digest
        if isinstance(event, ItemsRemoved) and event.reason == "delete_session":
            self.live = False
        if not isinstance(event, ItemRecorded) or event.framework != FRAMEWORK:
            return
        data = json.loads(event.fields)
        start, self.boundary = self.boundary + 1, recorded.version
        if event.kind == CREATED:
            self.live = True
            self.user_id, self.session_id = data["user_id"], data["session_id"]
            self.state = data["state"]
            self.events = []
            self.invocations = {}
            self.last_update_time = data["time"]
        elif event.kind == EVENT:
            self.events.append(event.fields)
            self.last_update_time = data.get("timestamp", self.last_update_time)
            delta = data.get("actions", {}).get("state_delta") or {}
            self.state.update({k: v for k, v in delta.items() if not _scoped(k)})
            invocation = data.get("invocation_id")
            if invocation and invocation not in self.invocations:
                self.invocations[invocation] = start


def _scoped(key: str) -> bool:
    return key.startswith(("app:", "user:", "temp:"))


def fold_state(state: dict[str, Any], recorded: list[Recorded]) -> int:
    """Fold ``state.delta`` events into ``state``; return the last version."""
    last = 0
    for r in recorded:
        last = r.version
        if isinstance(r.event, ItemRecorded) and r.event.kind == STATE_DELTA:
            state.update(json.loads(r.event.fields))
    return last
