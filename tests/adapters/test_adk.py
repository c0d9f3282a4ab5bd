"""TurnledgerSessionService: a real ADK Runner, rewinds, compaction, staleness, deletes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.events.event_actions import EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from turnledger.adapters.adk import TurnledgerSessionService
from turnledger.adapters.adk.events import StateError
from turnledger.ledger.events import ItemRecorded, ItemsRemoved
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.cli import main

APP = "ops-app"


class ScriptedLlm(BaseLlm):
    """Calls the weather tool for a question, answers once it has the result."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        if any(p.function_response for p in last.parts or ()):
            text = "It is sunny in Paris."
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=text)])
            )
            return
        call = types.FunctionCall(name="weather", args={"city": "Paris"})
        parts = [types.Part(text="Checking."), types.Part(function_call=call)]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def weather(city: str) -> dict[str, str]:
    """Return the weather of a city."""
    return {"report": f"sunny in {city}"}


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def run_turns(
    service: TurnledgerSessionService, texts: list[str]
) -> tuple[str, list[Event]]:
    agent = LlmAgent(
        name="ops", model=ScriptedLlm(), tools=[weather], instruction="help"
    )
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    session = await service.create_session(
        app_name=APP, user_id="u1", state={"user:lang": "fr"}
    )
    seen: list[Event] = []
    for text in texts:
        seen.extend(
            [
                event
                async for event in runner.run_async(
                    user_id="u1", session_id=session.id, new_message=user_says(text)
                )
            ]
        )
    await runner.rewind_async(
        user_id="u1",
        session_id=session.id,
        rewind_before_invocation_id=seen[-1].invocation_id,
    )
    return session.id, seen


def test_runner_session_round_trips_and_the_cli_reads_it(sqlite_path, capsys):
    """A real ADK Runner with a tool; events come back equal; CLI audit/history/export."""
    service = TurnledgerSessionService(sqlite_path)
    session_id, seen = asyncio.run(
        run_turns(service, ["Weather in Paris?", "And now?"])
    )
    stored = asyncio.run(
        service.get_session(app_name=APP, user_id="u1", session_id=session_id)
    )
    assert stored is not None
    # Every event the runner produced is stored exactly (the user messages too).
    dumped = [e.model_dump(exclude_none=True) for e in stored.events]
    for event in seen:
        assert event.model_dump(exclude_none=True) in dumped
    assert (
        stored.events[-1].actions.rewind_before_invocation_id == seen[-1].invocation_id
    )
    assert stored.state == {"user:lang": "fr"}
    service.close()

    key = f"u1/{session_id}"
    assert main(["--db", sqlite_path, "audit", key, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unpaired_calls"] == report["unpaired_results"] == 0
    assert main(["--db", sqlite_path, "history", key]) == 0
    shown = capsys.readouterr().out
    assert "Weather in Paris?" in shown
    assert "And now?" not in shown  # rewound: out of the provider-visible history
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        assert main(["--db", sqlite_path, "export", key, "--format", fmt]) == 0
        assert "sunny in Paris" in capsys.readouterr().out
    assert main(["--db", sqlite_path, "replay", key, "--json"]) == 0
    capsys.readouterr()
    with open_store(sqlite_path) as store:
        assert verify(store).ok
        events = [r.event for r in store.iter_all()]
    assert [e.reason for e in events if isinstance(e, ItemsRemoved)] == ["rewind"]
    assert sum("And now?" in getattr(e, "user_input", "") for e in events) == 1


def test_compaction_events_are_kept_as_events(sqlite_path):
    """A compaction event is appended and read back like any other."""

    async def scenario() -> None:
        service = TurnledgerSessionService(sqlite_path)
        session = await service.create_session(
            app_name=APP, user_id="u", session_id="s"
        )
        summary = types.Content(role="model", parts=[types.Part(text="summary")])
        compaction = EventCompaction(
            start_timestamp=1.0, end_timestamp=2.0, compacted_content=summary
        )
        event = Event(author="user", actions=EventActions(compaction=compaction))
        await service.append_event(session, event)
        stored = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert stored is not None
        assert stored.events == [event]
        service.close()

    asyncio.run(scenario())


def test_a_stale_session_is_refused(sqlite_path):
    """Appending through a copy read before another write raises StaleSessionError."""

    async def scenario() -> None:
        service = TurnledgerSessionService(sqlite_path)
        session = await service.create_session(
            app_name=APP, user_id="u", session_id="s"
        )
        stale = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert stale is not None
        await service.append_event(
            session, Event(author="user", timestamp=session.last_update_time + 5)
        )
        with pytest.raises(StaleSessionError):
            await service.append_event(stale, Event(author="user"))
        service.close()

    asyncio.run(scenario())


def test_delete_keeps_the_record_and_the_id_can_be_reused(sqlite_path):
    """delete_session appends items.removed; a new session may take the id."""

    async def scenario() -> None:
        service = TurnledgerSessionService(sqlite_path)
        session = await service.create_session(
            app_name=APP, user_id="u", session_id="s", state={"k": 1}
        )
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="u", session_id="s")
        await service.append_event(
            session, Event(author="user", content=user_says("hello"))
        )
        await service.delete_session(app_name=APP, user_id="u", session_id="s")
        assert (
            await service.get_session(app_name=APP, user_id="u", session_id="s") is None
        )
        assert (await service.list_sessions(app_name=APP)).sessions == []
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, Event(author="user"))
        again = await service.create_session(app_name=APP, user_id="u", session_id="s")
        assert again.state == {}
        assert again.events == []
        listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        assert [s.id for s in listed] == ["s"]
        service.close()

    asyncio.run(scenario())
    with open_store(sqlite_path) as store:
        events = [r.event for r in store.iter_all()]
    assert any(getattr(e, "user_input", "") == "hello" for e in events)
    assert [e.reason for e in events if isinstance(e, ItemsRemoved)] == [
        "delete_session"
    ]


def test_state_that_is_not_json_is_refused_and_nothing_is_written(sqlite_path):
    """A callable in the state is a typed error, not a stringified value."""

    async def scenario() -> None:
        service = TurnledgerSessionService(sqlite_path)
        with pytest.raises(StateError, match="JSON-serializable"):
            await service.create_session(app_name=APP, user_id="u", state={"f": print})
        session = await service.create_session(
            app_name=APP, user_id="u", session_id="s"
        )
        bad = Event(author="user", actions=EventActions(state_delta={"f": object()}))
        with pytest.raises(StateError):
            await service.append_event(session, bad)
        with pytest.raises(ValueError, match="non-empty app name"):
            await service.get_session(app_name="", user_id="u", session_id="s")
        service.close()

    asyncio.run(scenario())
    with open_store(sqlite_path) as store:
        kinds = [
            r.event.kind for r in store.iter_all() if isinstance(r.event, ItemRecorded)
        ]
    assert kinds == ["session.created"]


def test_app_and_user_state_are_shared_and_durable(sqlite_path):
    """app: and user: keys reach other sessions and other service instances."""

    async def scenario() -> dict[str, Any]:
        service = TurnledgerSessionService(sqlite_path)
        one = await service.create_session(app_name=APP, user_id="u", session_id="a")
        delta = {"app:tier": "gold", "user:name": "Ada", "mine": 1, "temp:x": 2}
        await service.append_event(
            one, Event(author="user", actions=EventActions(state_delta=delta))
        )
        service.close()
        other = TurnledgerSessionService(sqlite_path)
        two = await other.create_session(app_name=APP, user_id="u", session_id="b")
        assert await other.get_user_state(app_name=APP, user_id="u") == {"name": "Ada"}
        first = await other.get_session(app_name=APP, user_id="u", session_id="a")
        other.close()
        assert first is not None
        assert first.state == {"app:tier": "gold", "user:name": "Ada", "mine": 1}
        return two.state

    assert asyncio.run(scenario()) == {"app:tier": "gold", "user:name": "Ada"}


@pytest.mark.postgres
def test_service_on_postgres(postgres_url):
    """The same service on the PostgreSQL ledger."""

    async def scenario() -> None:
        service = TurnledgerSessionService(postgres_url)
        session = await service.create_session(
            app_name=APP, user_id="u", session_id="s"
        )
        event = Event(
            author="user",
            content=user_says("hi"),
            actions=EventActions(state_delta={"k": 1}),
        )
        await service.append_event(session, event)
        stored = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert stored is not None
        assert stored.events == [event]
        assert stored.state == {"k": 1}
        service.close()

    asyncio.run(scenario())
