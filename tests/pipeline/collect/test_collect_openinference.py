"""An OpenAI client instrumented by OpenInference (Arize's instrumentation).

The real ``openai`` client talks to the local fake OpenAI server;
``openinference-instrumentation-openai`` makes the spans (OpenInference's own
``llm.*`` attributes, ``openinference.span.kind = LLM``, each call a trace of
its own joined by ``session.id``) and the SDK's OTLP exporter sends them to the
receiver. The tool round trip and the question holding an image that follows
are one session; the image is counted, not written as text. With
``OPENINFERENCE_ENABLE_GENAI_SEMCONV`` the instrumentation adds the GenAI
attributes too, and the session is the same. A hidden text
(``OPENINFERENCE_HIDE_INPUT_TEXT``: its ``__REDACTED__`` stand-in) is never
recorded as words; hidden inputs and outputs leave usage only, and audit says
so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.pipeline.collect.conftest import (
    Ledger,
    audit_json,
    queue_round_trip,
    run_client,
    said_in,
    weather_server,
)
from tests.pipeline.collect.langgraph_agent_child import SESSION as GRAPH_SESSION
from tests.pipeline.collect.openai_client_child import API_ENV
from tests.pipeline.collect.openinference_agents_child import (
    SESSION as AGENTS_SESSION,
)
from tests.pipeline.collect.openinference_anthropic_child import (
    SESSION as ANTHROPIC_SESSION,
)
from tests.pipeline.collect.openinference_client_child import SESSION
from tests.pipeline.collect.openinference_smolagents_child import (
    SESSION as SMOLAGENTS_SESSION,
)
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import json_request, json_span
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    ToolUse,
    anthropic_text,
    anthropic_tool_use,
    openai_text,
    openai_tool_calls,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet, ToolResultRecorded
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.collect.genai.openinference import NOT_A_CALL
from turnledger.pipeline.collected import NOT_RECORDED, part_not_recorded
from turnledger.pipeline.sessions import list_sessions, load_history

CHILD = Path(__file__).with_name("openinference_client_child.py")
AGENTS_CHILD = Path(__file__).with_name("openinference_agents_child.py")
GRAPH_CHILD = Path(__file__).with_name("langgraph_agent_child.py")
ANTHROPIC_CHILD = Path(__file__).with_name("openinference_anthropic_child.py")
SMOLAGENTS_CHILD = Path(__file__).with_name("openinference_smolagents_child.py")

CONVERSATION = [
    ("user", "Weather in Paris?"),
    ("assistant", ""),
    ("tool", ""),
    ("assistant", "18C in Paris."),
    ("user", "And what is in this picture?"),
    ("assistant", "A cat."),
]


WEATHER_RUN = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
]
"""A tool round trip's session: what each message says (calls' arguments as
JSON values, each result with its call's id): :func:`said_in`."""


@pytest.fixture(name="llm")
def _llm() -> Iterator[FakeLLMServer]:
    with weather_server(openai_text("A cat.", usage=(90, 3))) as server:
        yield server


def _collect(ledger: Ledger, llm: FakeLLMServer, env: dict[str, str]) -> str:
    """Run the instrumented client into a receiver; the one session's key."""
    with running(ledger.store) as (url, _app):
        run_client(CHILD, llm.openai_base_url, url, env)
    (session,) = list_sessions(ledger.store)
    assert session.key == SESSION  # three traces, one session.id
    return session.key


@pytest.mark.parametrize(
    "env",
    [{}, {"OPENINFERENCE_ENABLE_GENAI_SEMCONV": "true"}],
    ids=["openinference", "with-genai-attributes"],
)
def test_the_conversation_of_three_traces_is_one_session(
    ledger: Ledger,
    llm: FakeLLMServer,
    env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = _collect(ledger, llm, env)
    (session,) = list_sessions(ledger.store)
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [(m.role, m.text) for m in history] == CONVERSATION
    assert history[1].tool_calls[0].id == "call_w1"
    assert json.loads(history[1].tool_calls[0].arguments) == {"city": "Paris"}
    assert history[2].tool_results[0].call_id == "call_w1"
    assert history[2].tool_results[0].content == "18C"
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.provider, c.input_tokens, c.output_tokens) for c in calls] == [
        ("gpt-4o", "openai", 50, 10),
        ("gpt-4o", "openai", 70, 6),
        ("gpt-4o", "openai", 90, 3),
    ]
    audit = audit_json(ledger, key, capsys)
    # Its GenAI attributes, read first, send the image as a blob part.
    picture = "blob" if env else "image"
    assert audit["skipped"] == {part_not_recorded(picture): 1}
    assert (audit["tool_calls"], audit["tool_results"]) == (1, 1)


@pytest.mark.parametrize("genai", [False, True], ids=["openinference", "genai"])
def test_a_hidden_text_is_counted_never_recorded_as_words(
    ledger: Ledger, llm: FakeLLMServer, genai: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"OPENINFERENCE_HIDE_INPUT_TEXT": "true"}
    if genai:  # its GenAI conversion carries the stand-in as text: hidden too
        env["OPENINFERENCE_ENABLE_GENAI_SEMCONV"] = "true"
    key = _collect(ledger, llm, env)
    (session,) = list_sessions(ledger.store)
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [(m.role, m.text) for m in history] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "18C in Paris."),  # outputs were shown
        ("user", ""),
        ("assistant", "A cat."),
    ]
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.output for e in events if isinstance(e, ToolResultRecorded)] == [""]
    assert not any(isinstance(e, SystemPromptSet) for e in events)
    ledger_text = b"".join(row.state for row in ledger.store.iter_rows())
    assert b"__REDACTED__" not in ledger_text
    audit = audit_json(ledger, key, capsys)
    # Once per message: the system prompt (at the session's first call), the
    # question, the tool's result, the text of the picture question. The
    # answer held as input is the session's already, from the output.
    assert audit["skipped"] == {
        part_not_recorded("redacted"): 4,
        part_not_recorded("blob" if genai else "image"): 1,
    }


def test_hidden_inputs_and_outputs_leave_usage_and_audit_says_so(
    ledger: Ledger, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}
    key = _collect(ledger, llm, env)
    (session,) = list_sessions(ledger.store)
    assert load_history(ledger.store, session.stream_id).entries == ()
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.input_tokens for e in events if isinstance(e, ModelCalled)] == [
        50,
        70,
        90,
    ]
    assert audit_json(ledger, key, capsys)["skipped"] == {NOT_RECORDED: 3}


def _oi_llm(session: str, **attrs: object) -> dict[str, object]:
    return {
        "openinference.span.kind": "LLM",
        "session.id": session,
        "llm.model_name": "gpt-4o-mini",
        "llm.provider": "openai",
        "llm.token_count.prompt": 20,
        "llm.token_count.completion": 5,
        **attrs,
    }


def test_a_framework_run_by_openinference_spans(ledger: Ledger) -> None:
    """An agent's spans as OpenInference's framework instrumentations send them.

    Its AGENT and CHAIN spans are counted by kind; the TOOL span's arguments
    and result are ``input.value`` and ``output.value``, its call's id
    ``tool_call.id``; a failed TOOL span records an error; the completion form
    (``llm.prompts``, ``llm.choices``) is read too.
    """
    trace = "5b8efff798038103d269b633813fc60c"
    asks = _oi_llm(
        "run-7",
        **{
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Stock of SKU 12?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": (
                "stock"
            ),
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                '{"sku": 12}'
            ),
        },
    )
    tool = {
        "openinference.span.kind": "TOOL",
        "session.id": "run-7",
        "tool.name": "stock",
        "tool_call.id": "c1",
        "input.value": '{"sku": 12}',
        "output.value": "4 left",
    }
    failed = {**tool, "tool_call.id": "c2", "output.value": "timeout"}
    hidden = {**tool, "tool_call.id": "c3", "output.value": "__REDACTED__"}
    completion = _oi_llm(
        "run-7",
        **{
            "llm.prompts.0.prompt.text": "Say it short: 4 left.",
            "llm.choices.0.completion.text": "Four left.",
        },
    )
    spans = [
        json_span(
            trace, "00f067aa0ba902b1", {"openinference.span.kind": "AGENT"}, start=9
        ),
        json_span(
            trace, "00f067aa0ba902b2", {"openinference.span.kind": "CHAIN"}, start=1
        ),
        json_span(trace, "00f067aa0ba902b3", asks, start=2),
        json_span(trace, "00f067aa0ba902b4", tool, start=3),
        json_span(trace, "00f067aa0ba902b5", failed, start=4, status=2),
        json_span(trace, "00f067aa0ba902b6", hidden, start=5),
        json_span(trace, "00f067aa0ba902b7", completion, start=6),
    ]
    report = Recorder(ledger.store).record(
        decode_json(json.dumps(json_request(spans)).encode())
    )
    assert report.known == {"openinference AGENT": 1, "openinference CHAIN": 1}
    # The hidden result: a tool span without its result.
    assert (report.mapped, report.without_content, report.without_result) == (5, 0, 1)
    assert report.unknown == {}
    (session,) = list_sessions(ledger.store)
    assert session.key == "run-7"
    history = [e.message for e in load_history(ledger.store, session.stream_id).entries]
    assert [(m.role, m.text) for m in history] == [
        ("user", "Stock of SKU 12?"),
        ("assistant", ""),
        ("tool", ""),
        # Only the TOOL spans say these calls were made: a message carries each.
        ("assistant", ""),
        ("tool", ""),
        ("assistant", ""),  # its result hidden: not recorded
        ("user", "Say it short: 4 left."),
        ("assistant", "Four left."),
    ]
    assert history[1].tool_calls[0].arguments == '{"sku": 12}'
    assert history[2].tool_results[0].content == "4 left"
    assert [c.id for c in history[5].tool_calls] == ["c3"]
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.success, r.error) for r in results] == [
        ("c1", True, None),
        ("c2", False, "timeout"),
    ]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("gpt-4o-mini", 20, 5),
        ("gpt-4o-mini", 20, 5),
    ]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_agents_sdk_run_pairs_its_tool_spans_with_their_calls(
    ledger: Ledger, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The OpenAI Agents SDK under OpenInference: TOOL spans without a call id.

    Each is the one unanswered call of its name and arguments: its result is
    recorded for that call, and the next model call's input (which holds it)
    records nothing again. The SDK's AGENT and CHAIN spans are counted. The
    same with its Responses model (the SDK's default), its instructions the
    system prompt.
    """
    with FakeLLMServer() as llm, running(ledger.store) as (url, _app):
        queue_round_trip(llm, api)
        run_client(AGENTS_CHILD, llm.openai_base_url, url, {API_ENV: api})
        llm.assert_drained()
    (session,) = list_sessions(ledger.store)
    assert session.key == AGENTS_SESSION
    assert said_in(ledger, session.key) == WEATHER_RUN
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [
        "You answer weather questions."
    ]
    usage = [
        (e.input_tokens, e.output_tokens) for e in events if isinstance(e, ModelCalled)
    ]
    assert usage == [(50, 10), (70, 6)]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.provenance) for r in results] == [("call_w1", "executed")]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"], audit["skipped"]) == (
        0,
        [],
        {},
    )


def test_a_smolagents_run_pairs_tool_spans_recording_the_python_call(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """smolagents under OpenInference: each TOOL span records the tool's Python
    call (``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``)
    and no call id. Its keyword arguments are the model's call's: each result is
    recorded for its call, nothing is left unpaired. smolagents sends the
    results back to the model as text (a user message), recorded as sent."""
    with FakeLLMServer() as llm, running(ledger.store) as (url, _app):
        llm.queue_openai(
            openai_tool_calls(
                ToolUse("call_w1", "get_weather", {"city": "Paris"}), usage=(50, 10)
            ),
            openai_tool_calls(
                ToolUse("call_w2", "final_answer", {"answer": "18C in Paris."}),
                usage=(70, 6),
            ),
        )
        run_client(SMOLAGENTS_CHILD, llm.openai_base_url, url, {})
        llm.assert_drained()
    (session,) = list_sessions(ledger.store)
    assert session.key == SMOLAGENTS_SESSION
    said = said_in(ledger, session.key)
    assert [(m[0], m[2], m[3]) for m in said] == [
        ("user", (), ()),
        ("assistant", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
        ("tool", (), (("call_w1", "18C", False),)),
        ("user", (), ()),  # "Calling tools: ..." as smolagents writes it
        ("user", (), ()),
        ("assistant", (("call_w2", "final_answer", {"answer": "18C in Paris."}),), ()),
        ("tool", (), (("call_w2", "18C in Paris.", False),)),
    ]
    assert (said[0][1], said[4][1]) == (
        "New task:\nWeather in Paris?",
        "Observation:\n18C",
    )
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.provenance) for r in results] == [
        ("call_w1", "executed"),
        ("call_w2", "executed"),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_calls"], audit["unpaired_results"], audit["skipped"]) == (
        0,
        0,
        {},
    )


@pytest.mark.parametrize("kind", ["openinference", "openllmetry"])
def test_a_langgraph_agents_tool_results_are_their_calls(
    ledger: Ledger,
    llm: FakeLLMServer,
    kind: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LangGraph's ReAct agent under either LangChain instrumentation.

    Its tool span carries no call id and, as its result, the ``ToolMessage``
    as LangChain serializes it: that message's ``tool_call_id`` and
    ``content`` are the call's id and result, so the session holds each
    result once, paired (the next model call's input holds it again).
    """
    with running(ledger.store) as (url, _app):
        run_client(GRAPH_CHILD, llm.openai_base_url, url, {}, kind)
    (session,) = list_sessions(ledger.store)
    if kind == "openinference":
        assert session.key == GRAPH_SESSION  # OpenLLMetry's: the trace
    assert said_in(ledger, session.key) == WEATHER_RUN
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_results"], audit["violations"]) == (0, [])


def test_an_anthropic_tool_use_block_is_the_messages_call(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenInference's Anthropic instrumentation sends a ``tool_use`` block as
    the message's tool call and as a content part: the call is recorded once,
    beside the message's text, and the part is not counted as left out."""
    with FakeLLMServer() as llm:
        llm.queue_anthropic(
            anthropic_tool_use(
                ToolUse("call_w1", "get_weather", {"city": "Paris"}),
                text="Let me check.",
                usage=(50, 10),
            ),
            anthropic_text("18C in Paris.", usage=(70, 6)),
        )
        with running(ledger.store) as (url, _app):
            run_client(ANTHROPIC_CHILD, llm.url, url, {})
    (session,) = list_sessions(ledger.store)
    assert session.key == ANTHROPIC_SESSION
    said = said_in(ledger, session.key)
    assert said == [
        WEATHER_RUN[0],
        ("assistant", "Let me check.", *WEATHER_RUN[1][2:]),
        *WEATHER_RUN[2:],
    ]
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.provider, c.input_tokens) for c in calls] == [
        ("anthropic", 50),
        ("anthropic", 70),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["violations"], audit["skipped"]) == ([], {})


LLAMA_INDEX_RUN = (
    Path(__file__).parents[2]
    / "fixtures"
    / "otlp"
    / "llama-index-0.14-openinference.json"
)


@pytest.mark.parametrize("via", ["import", "collect"])
def test_a_llama_index_agent_run_records_its_conversation(
    ledger: Ledger, via: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LlamaIndex ``FunctionAgent`` under OpenInference (a real run's spans;
    see the fixture's PROVENANCE.md). Its ``LLM`` spans of
    ``_prepare_chat_with_tools`` (neither messages nor usage) are counted, not
    calls; its TOOL spans carry no call id, the tool's Python call and
    LlamaIndex's ``ToolOutput``: each is paired with its call, its result the
    output's text; the failed run sent no output, and the result the next call's
    input holds for it is recorded as the failure."""
    body = LLAMA_INDEX_RUN.read_bytes()
    if via == "import":
        assert main(["--db", ledger.url, "import", str(LLAMA_INDEX_RUN), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["skipped"] == {
            "span of operation openinference CHAIN": 20,
            f"span of operation {NOT_A_CALL}": 4,
            "tool span without its result": 1,  # the failed run's
        }
    else:
        with running(ledger.store) as (url, _app):
            for _ in range(2):  # sent again: nothing is written twice
                answer = httpx.post(
                    f"{url}/v1/traces",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                assert answer.status_code == 200
    (session,) = list_sessions(ledger.store)
    assert session.key == "llama-chat-1"
    assert said_in(ledger, session.key) == [
        *WEATHER_RUN,
        ("user", "And in Rome?", (), ()),
        ("assistant", "", (("call_w2", "get_weather", {"city": "Rome"}),), ()),
        ("tool", "", (), (("call_w2", "Error: no data for Rome", True),)),
        ("assistant", "I have no data for Rome.", (), ()),
    ]
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [
        (50, 10),
        (70, 6),
        (80, 10),
        (95, 8),
    ]
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.provenance, r.error) for r in results] == [
        ("call_w1", "executed", None),
        ("call_w2", "imported", "no data for Rome"),
    ]
    audit = audit_json(ledger, session.key, capsys)
    assert (audit["unpaired_calls"], audit["unpaired_results"], audit["skipped"]) == (
        0,
        0,
        {},
    )
