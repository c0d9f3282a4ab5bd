"""Sessions written through every adapter, on one ledger, are listed by ``turnledger sessions``."""

from __future__ import annotations

import asyncio
import json

import pytest
from google.adk.events import Event as AdkEvent
from google.genai import types
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from turnledger.adapters.adk import TurnledgerSessionService
from turnledger.adapters.langgraph import TurnledgerSaver
from turnledger.adapters.openai_agents import TurnledgerSession
from turnledger.adapters.pydantic_ai import TurnledgerConversationStore
from turnledger.pipeline.cli import main


def write_langgraph(path: str) -> None:
    """One graph turn on thread ``lg-thread``."""

    def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    with TurnledgerSaver.from_url(path) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(
            {"messages": [HumanMessage("hello graph")]},
            {"configurable": {"thread_id": "lg-thread"}},
        )


async def write_openai(path: str) -> None:
    """Two items in session ``oa-session``."""
    session = TurnledgerSession("oa-session", path)
    await session.add_items(
        [
            {"role": "user", "content": "hello sdk"},
            {"role": "assistant", "content": "hi"},
        ]
    )
    session.close()


async def write_pydantic_ai(path: str) -> None:
    """One agent run saved as conversation ``pa-conversation``."""

    def answer(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("hi from pydantic ai")])

    store = TurnledgerConversationStore(path)
    result = await Agent(FunctionModel(answer)).run(
        "hello pydantic", conversation=Conversation(conversation_id="pa-conversation")
    )
    await store.save(result)
    store.close()


async def write_adk(path: str) -> None:
    """Session ``adk-session`` of user ``u1`` in app ``ops-app``, one event."""
    service = TurnledgerSessionService(path)
    session = await service.create_session(
        app_name="ops-app", user_id="u1", session_id="adk-session"
    )
    part = types.Part(text="hello adk")
    await service.append_event(
        session,
        AdkEvent(author="user", content=types.Content(role="user", parts=[part])),
    )
    service.close()


def test_every_adapter_session_is_listed(
    sqlite_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """LangGraph, OpenAI Agents SDK, Pydantic AI and ADK sessions, one ledger."""
    write_langgraph(sqlite_path)
    asyncio.run(write_openai(sqlite_path))
    asyncio.run(write_pydantic_ai(sqlite_path))
    asyncio.run(write_adk(sqlite_path))
    capsys.readouterr()
    assert main(["--db", sqlite_path, "sessions", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    listed = {(r["agent"], r["session"], r["channel"]) for r in rows}
    assert listed == {
        ("langgraph", "lg-thread", "langgraph"),
        ("openai-agents", "oa-session", "openai-agents"),
        ("pydantic-ai", "pa-conversation", "pydantic-ai"),
        ("ops-app", "u1/adk-session", "google-adk"),
    }
