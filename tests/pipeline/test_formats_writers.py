"""Issue #11 item 5: gemini, langchain, pydantic-ai and adk exports.

Each export is checked by the framework's own code (LangChain's
``messages_from_dict``, Pydantic AI's ``ModelMessagesTypeAdapter``, ADK's
``Event`` / ``Session`` and google-genai's ``Content`` models), is pairing-valid
by the format's rule, and reads back through our reader to the same export.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from google.adk.events import Event
from google.adk.sessions import Session
from google.genai import types
from langchain_core.messages import (
    AIMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
)

from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.export import ExportOptions, prepare_history, render
from turnledger.pipeline.formats import count_pairing, parse_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.policies.messages import ToolCall, ToolResult, make_message
from turnledger.projections.history.read import provider_messages

SYSTEM = "Be terse."

HISTORY = [
    make_message("system", SYSTEM),
    make_message("user", "Weather in Paris and Rome?"),
    make_message(
        "assistant",
        "Checking.",
        tool_calls=(
            ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}'),
            ToolCall(id="c2", name="weather", arguments='{"city":"Rome"}'),
        ),
    ),
    make_message(
        "tool",
        tool_results=(ToolResult(call_id="c1", content="Sunny", name="weather"),),
    ),
    make_message(
        "tool",
        tool_results=(
            ToolResult(
                call_id="c2", content="Error: timeout", is_error=True, name="weather"
            ),
        ),
    ),
    make_message("assistant", "Paris is sunny; Rome timed out."),
    make_message("user", "And Oslo?"),
    make_message(
        "assistant",
        tool_calls=(ToolCall(id="c3", name="weather", arguments='{"city":"Oslo"}'),),
    ),
]
"""Parallel calls, a failed result and a dangling call the export must answer."""


def export(fmt: str, messages=HISTORY) -> object:
    prepared = prepare_history(messages, ExportOptions(max_tool_result_chars=0))
    return render(prepared.messages, fmt)


def reexport(fmt: str, payload: object, tmp_path) -> object:
    """Read a payload with our reader, import it into a ledger, export it again."""
    parsed = parse_transcript(msgspec.json.encode(payload), format=fmt)
    with open_store(str(tmp_path / f"{fmt}.db")) as store:
        import_transcript(store, parsed, agent="a", session="s")
        state = load_history(store, session_stream_id("a", "s"))
    return export(fmt, provider_messages(state))


@pytest.mark.parametrize("fmt", ["gemini", "langchain", "pydantic-ai", "adk"])
def test_an_export_is_pairing_valid_and_a_fixed_point(fmt, tmp_path):
    """Every call answered (the dangling one by an interrupted result); stable."""
    payload = export(fmt)
    parsed = parse_transcript(msgspec.json.encode(payload), format=fmt)
    counts = count_pairing(parsed)
    assert (counts.tool_calls, counts.unpaired_calls, counts.unpaired_results) == (
        3,
        0,
        0,
    )
    assert reexport(fmt, payload, tmp_path) == payload
    messages = parsed.conversations[0].messages
    failed = [r for m in messages for r in m.tool_results if r.is_error]
    assert {r.call_id for r in failed} == {"c2", "c3"}
    if fmt != "adk":
        assert messages[0].role == "system"
        assert messages[0].text == SYSTEM


def test_langchain_export_loads_with_messages_from_dict():
    """LangChain's own loader reads the export: AI tool calls, ToolMessage status."""
    messages = messages_from_dict(export("langchain"))
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].content == SYSTEM
    ai = [m for m in messages if isinstance(m, AIMessage)]
    assert [c["id"] for c in ai[0].tool_calls] == ["c1", "c2"]
    assert ai[0].tool_calls[0]["args"] == {"city": "Paris"}
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(t.tool_call_id, t.status) for t in tools] == [
        ("c1", "success"),
        ("c2", "error"),
        ("c3", "error"),
    ]


def test_pydantic_ai_export_validates_with_the_type_adapter():
    """ModelMessagesTypeAdapter reads the export; failed results say `failed`."""
    messages = ModelMessagesTypeAdapter.validate_json(json.dumps(export("pydantic-ai")))
    parts = [part for message in messages for part in message.parts]
    assert isinstance(parts[0], SystemPromptPart)
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_call_id, c.args_as_dict()) for c in calls] == [
        ("c1", {"city": "Paris"}),
        ("c2", {"city": "Rome"}),
        ("c3", {"city": "Oslo"}),
    ]
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.outcome) for p in returns] == [
        ("c1", "success"),
        ("c2", "failed"),
        ("c3", "failed"),
    ]
    assert sum(isinstance(m, ModelResponse) for m in messages) == 3
    dumped = ModelMessagesTypeAdapter.dump_json(messages)
    reread = parse_transcript(dumped, format="pydantic-ai")
    assert count_pairing(reread).tool_calls == 3
    assert reread.conversations[0].messages[0].text == SYSTEM


def test_gemini_export_validates_as_genai_contents():
    """google-genai's Content model reads every content; functionResponse ids match."""
    payload = export("gemini")
    contents = [types.Content.model_validate(c) for c in payload["contents"]]
    assert [c.role for c in contents] == [
        "user",
        "model",
        "user",
        "model",
        "user",
        "model",
        "user",
    ]
    calls = [p.function_call for p in contents[1].parts if p.function_call]
    answers = [p.function_response for p in contents[2].parts if p.function_response]
    assert [c.id for c in calls] == [a.id for a in answers] == ["c1", "c2"]
    assert answers[1].response == {"error": "Error: timeout"}
    instruction = types.Content.model_validate(payload["systemInstruction"])
    assert instruction.parts[0].text == SYSTEM


def test_adk_export_validates_as_adk_events_and_reads_back_from_adk_json():
    """ADK's Event model reads the export; ADK's own JSON reads back the same."""
    payload = export("adk")
    events = [Event.model_validate(e) for e in payload]
    assert [e.author for e in events][:3] == ["user", "turnledger", "turnledger"]
    assert events[1].get_function_calls()[0].id == "c1"
    assert [r.id for r in events[2].get_function_responses()] == ["c1", "c2"]
    session = Session(id="sess-1", app_name="app", user_id="u", events=events)
    dumped = session.model_dump_json(by_alias=True)
    parsed = parse_transcript(dumped.encode(), path="session.json")
    assert parsed.format == "adk"
    assert parsed.conversations[0].id == "sess-1"
    assert count_pairing(parsed).tool_calls == 3
    assert render(parsed.conversations[0].messages, "adk") == payload
