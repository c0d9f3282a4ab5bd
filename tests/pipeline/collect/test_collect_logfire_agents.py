"""The OpenAI Agents SDK under Logfire (``logfire.instrument_openai_agents``).

Logfire's spans of the SDK's model calls hold the messages in attributes of
its own (Chat Completions messages in ``input`` and ``output``, or the
Responses items sent in ``raw_input`` and the API's ``response``), and its
function spans the tool's arguments and result without the call's id. A real
run (two questions under one SDK trace, the second's tool raising) through
either model of the SDK records the conversation it was, each result from
its tool's span; hand-made spans cover the items that run does not send.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pipeline.collect.conftest import Ledger, audit_json, run_client, said_in
from tests.pipeline.collect.logfire_agents_child import SENSITIVE_ENV
from tests.pipeline.collect.openai_client_child import API_ENV
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import json_request, json_span
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    ToolUse,
    openai_text,
    openai_tool_calls,
    responses_text,
    responses_tool_calls,
)
from turnledger.ledger.errors import InvalidEventError
from turnledger.ledger.events import ModelCalled, SystemPromptSet, ToolResultRecorded
from turnledger.ledger.store import open_store
from turnledger.pipeline.collect import Recorder, Span, decode_json
from turnledger.pipeline.collect.genai.logfire_agents import (
    CHAT_TEMPLATE,
    FUNCTION_TEMPLATE,
)
from turnledger.pipeline.collected import (
    NOT_RECORDED,
    WITHOUT_RESULT,
    part_not_recorded,
)
from turnledger.pipeline.sessions import list_sessions, load_history

CHILD = Path(__file__).with_name("logfire_agents_child.py")

FAILED = "An error occurred while running the tool. Please try again."
"""What the SDK sends the model of a tool that raised."""

CHAT = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
    ("user", "And Oslo?", (), ()),
    ("assistant", "", (("call_w2", "get_weather", {"city": "Oslo"}),), ()),
    ("tool", "", (), (("call_w2", f"Error: {FAILED}", True),)),
    ("assistant", "No data for Oslo.", (), ()),
]


def _run(ledger: Ledger, api: str, *, sensitive: bool = True) -> str:
    """The child's conversation through ``api``'s model; its session's key."""
    first = ToolUse("call_w1", "get_weather", {"city": "Paris"})
    second = ToolUse("call_w2", "get_weather", {"city": "Oslo"})
    env = {API_ENV: api, SENSITIVE_ENV: "1" if sensitive else "0"}
    with FakeLLMServer() as llm, running(ledger.store) as (url, app):
        if api == "responses":
            llm.queue_responses(
                responses_tool_calls(first, usage=(50, 10)),
                responses_text("18C in Paris.", usage=(70, 6)),
                responses_tool_calls(second, usage=(90, 10)),
                responses_text("No data for Oslo.", usage=(110, 5)),
            )
        else:
            llm.queue_openai(
                openai_tool_calls(first, usage=(50, 10)),
                openai_text("18C in Paris.", usage=(70, 6)),
                openai_tool_calls(second, usage=(90, 10)),
                openai_text("No data for Oslo.", usage=(110, 5)),
            )
        run_client(CHILD, llm.openai_base_url, url, env)
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    return session.key


def _usage(ledger: Ledger) -> list[tuple[str, int, int]]:
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    return [
        (e.model, e.input_tokens, e.output_tokens)
        for e in events
        if isinstance(e, ModelCalled)
    ]


USAGE = [("gpt-4o", 50, 10), ("gpt-4o", 70, 6), ("gpt-4o", 90, 10), ("gpt-4o", 110, 5)]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_agents_sdk_run_under_logfire_records_its_conversation(
    ledger: Ledger, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each model call and tool run is recorded: the tool spans' results (the
    failed one a failure, with the text the model was sent) answer their
    calls, the SDK's instructions are the system prompt, and the usage is
    each call's. The SDK's agent, turn, task and trace spans are counted."""
    key = _run(ledger, api)
    assert said_in(ledger, key) == CHAT
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    assert _usage(ledger) == USAGE
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.provenance, r.success) for r in results] == [
        ("call_w1", "executed", True),
        ("call_w2", "executed", False),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"], audit["skipped"]) == (
        0,
        [],
        {},
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_run_keeping_its_data_out_of_its_traces_records_usage_only(
    ledger: Ledger, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``trace_include_sensitive_data`` off, Logfire sends the spans'
    inputs and outputs as ``null``: the calls are recorded with their usage
    only (a Responses call's from the SDK's usage), the tool runs without
    their results, nothing written that was not said, and audit says so."""
    key = _run(ledger, api, sensitive=False)
    assert said_in(ledger, key) == []
    assert _usage(ledger) == USAGE
    skipped = audit_json(ledger, key, capsys)["skipped"]
    assert skipped == {NOT_RECORDED: 4, WITHOUT_RESULT: 2}


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"

_AGENTS = {"logfire.span_type": "span", "gen_ai.system": "openai"}


def _chat_span(inputs: list[object], outputs: list[object]) -> dict[str, object]:
    return {
        **_AGENTS,
        "logfire.msg_template": CHAT_TEMPLATE,
        "gen_ai.request.model": "gpt-4o",
        "input": json.dumps(inputs),
        "output": json.dumps(outputs),
        "request_data": json.dumps({"messages": inputs + outputs}),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 4,
    }


def _responses_span(
    raw_input: object, output: list[object], instructions: str | None
) -> dict[str, object]:
    response = {"id": "resp_1", "instructions": instructions, "output": output}
    return {
        **_AGENTS,
        "logfire.msg_template": "Responses API with {gen_ai.request.model!r}",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "raw_input": json.dumps(raw_input),
        "response": json.dumps(response),
        # Logfire's own rendering of the same items: not read.
        "events": json.dumps(
            [{"event.name": "gen_ai.user.message", "content": "not what was said"}]
        ),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 4,
    }


def _record(ledger: Ledger, *spans: dict[str, object]) -> list[tuple[object, ...]]:
    """Record ``spans`` (in order) in one batch; the session's messages."""
    posted = [
        json_span(TRACE, f"00f067aa0ba902{i:02d}", attrs, start=i + 1)
        for i, attrs in enumerate(spans)
    ]
    decoded = decode_json(json.dumps(json_request(posted)).encode())
    Recorder(ledger.store).record(decoded)
    (session,) = list_sessions(ledger.store)
    return said_in(ledger, session.key)


def test_chat_completions_messages_are_read_as_the_api_has_them(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """System and developer messages are the system prompt; a user message's
    image part is counted, not text; a tool message whose content is parts is
    their text; a second choice of the output is counted."""
    inputs = [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use metric units."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "look", "arguments": "{}"},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "a cat"}],
        },
    ]
    outputs = [
        {"role": "assistant", "content": "A cat."},
        {"role": "assistant", "content": "A kitten."},
    ]
    said = _record(ledger, _chat_span(inputs, outputs))
    assert said == [
        ("user", "What is this?", (), ()),
        ("assistant", "Let me look.", (("call_1", "look", {}),), ()),
        ("tool", "", (), (("call_1", "a cat", False),)),
        ("assistant", "A cat.", (), ()),
    ]
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "Be brief.\nUse metric units."
    ]
    skipped = audit_json(ledger, session.key, capsys)["skipped"]
    assert skipped[part_not_recorded("image_url")] == 1


def test_responses_items_are_read_as_the_api_has_them(ledger: Ledger) -> None:
    """A message's text parts are its text, an image part counted; an
    assistant message with the calls and reasoning after it is one message;
    a function call's output is its result; the instructions and a developer
    message are the system prompt; Logfire's ``events`` rendering is not
    read."""
    raw_input = [
        {"role": "developer", "content": "Use metric units."},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather here?"},
                {"type": "input_image", "image_url": "https://example.com/a.png"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ]
    output = [
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "18C."}],
        },
    ]
    said = _record(ledger, _responses_span(raw_input, output, "Answer briefly."))
    assert said == [
        ("user", "Weather here?", (), ()),
        ("assistant", "Checking.", (("call_1", "weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("call_1", "18C", False),)),
        ("assistant", "18C.", (), ()),
    ]
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "Answer briefly.\nUse metric units."
    ]


@pytest.mark.parametrize("text", ["Hello", "[1, 2]"])
def test_a_text_input_is_the_user_s_message(ledger: Ledger, text: str) -> None:
    """The SDK's input as text: Logfire sends it as it is (not as JSON)."""
    output = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi."}],
        }
    ]
    span = {**_responses_span([], output, None), "raw_input": text}
    said = _record(ledger, span)
    assert said == [("user", text, (), ()), ("assistant", "Hi.", (), ())]


def test_a_function_span_is_a_run_of_the_one_call_it_matches(ledger: Ledger) -> None:
    """Without a call id, a run answers the one unanswered call of its tool
    and arguments; a failed run's result is a failure."""
    outputs = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"at": "sky"}'},
                }
            ],
        }
    ]
    asked = _chat_span([{"role": "user", "content": "Look up."}], outputs)
    run = {
        **_AGENTS,
        "logfire.msg_template": FUNCTION_TEMPLATE,
        "name": "look",
        "input": '{"at": "sky"}',
        "output": "Camera offline.",
        "error": json.dumps({"message": "Error running tool (non-fatal)"}),
    }
    posted = [
        json_span(TRACE, "00f067aa0ba90201", asked, start=1),
        json_span(TRACE, "00f067aa0ba90202", run, start=2, status=2),
    ]
    decoded = decode_json(json.dumps(json_request(posted)).encode())
    Recorder(ledger.store).record(decoded)
    (session,) = list_sessions(ledger.store)
    assert said_in(ledger, session.key)[-1] == (
        "tool",
        "",
        (),
        (("call_1", "Error: Camera offline.", True),),
    )


_FIELDS = [
    *("role", "content", "type", "text", "call_id", "name", "arguments", "output"),
    *("tool_calls", "tool_call_id", "instructions", "id", "function", "data"),
    *("error", "message"),
]

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.sampled_from(["user", "assistant", "tool", "system", "developer"])
    | st.sampled_from(["message", "function_call", "function_call_output"])
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(_FIELDS),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)

_attribute = _json_values.map(json.dumps) | st.text(max_size=6) | st.integers()

_TEMPLATES = [CHAT_TEMPLATE, FUNCTION_TEMPLATE, "Responses API with x"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(_TEMPLATES),
    st.dictionaries(
        st.sampled_from(["input", "output", "raw_input", "response", "name", "error"]),
        _attribute,
        max_size=6,
    ),
)
def test_any_agents_span_values_record_or_are_refused_typed(
    template: str, values: dict[str, object]
) -> None:
    """Whatever an Agents SDK span's attributes hold, recording it succeeds or
    raises the ledger's typed refusal; never another exception."""
    attributes = {**_AGENTS, "logfire.msg_template": template, **values}
    if template.startswith("Responses"):
        attributes["gen_ai.operation.name"] = "chat"
    span = Span(trace_id="a" * 32, span_id="b" * 16, attributes=attributes)
    with (
        tempfile.TemporaryDirectory() as folder,
        open_store(f"{folder}/l.db") as store,
        contextlib.suppress(InvalidEventError),
    ):
        Recorder(store).record([span])


def test_the_sdk_s_usage_gives_the_counts_the_span_does_not_name(
    ledger: Ledger,
) -> None:
    """A Chat Completions call's span names its input and output tokens only:
    the cache and reasoning counts come from the SDK's ``usage``; a count
    the span names is kept."""
    usage = {
        "requests": 1,
        "input_tokens": 999,
        "output_tokens": 999,
        "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 5},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    span = {
        **_chat_span([{"role": "user", "content": "Hi"}], []),
        "usage": json.dumps(usage),
    }
    _record(ledger, span)
    (call,) = [
        r.event for r in ledger.store.iter_all() if isinstance(r.event, ModelCalled)
    ]
    assert (
        call.input_tokens,
        call.output_tokens,
        call.cached_input_tokens,
        call.cache_write_tokens,
        call.reasoning_tokens,
    ) == (30, 4, 10, 5, 2)


def test_hosted_tools_and_custom_tools_items(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """A custom tool's call and output are a call and its result; a hosted
    tool's call is counted in the model's message, its output and an item
    reference on the message before them: none invents a message."""
    raw_input = [
        {"type": "message", "role": "user", "content": "Search and run."},
        {"type": "item_reference", "id": "msg_0"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {
            "type": "custom_tool_call",
            "call_id": "call_c",
            "name": "shell",
            "input": "ls",
        },
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": "a.txt"},
        {"type": "computer_call_output", "call_id": "call_x", "output": {}},
    ]
    output = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done."}],
        }
    ]
    posted = [
        json_span(
            TRACE, "00f067aa0ba90201", _responses_span(raw_input, output, None), start=1
        )
    ]
    Recorder(ledger.store).record(
        decode_json(json.dumps(json_request(posted)).encode())
    )
    (session,) = list_sessions(ledger.store)
    messages = [
        e.message for e in load_history(ledger.store, session.stream_id).entries
    ]
    assert [
        (
            m.role,
            m.text,
            [(c.id, c.name, c.arguments) for c in m.tool_calls],
            [(r.call_id, r.content) for r in m.tool_results],
        )
        for m in messages
    ] == [
        ("user", "Search and run.", [], []),
        ("assistant", "", [("call_c", "shell", "ls")], []),
        ("tool", "", [], [("call_c", "a.txt")]),
        ("assistant", "Done.", [], []),
    ]
    skipped = audit_json(ledger, session.key, capsys)["skipped"]
    assert {k: v for k, v in skipped.items() if "part" in k} == {
        part_not_recorded("item_reference"): 1,
        part_not_recorded("web_search_call"): 1,
        part_not_recorded("computer_call_output"): 1,
    }
