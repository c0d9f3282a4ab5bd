"""A call's whole usage: its cache reads and writes, its reasoning, and their cost.

Each convention names a call's cache reads, cache writes and reasoning tokens
its own way (the GenAI conventions, their older names OpenLLMetry and Strands
still send, OpenInference, the Vercel AI SDK, Pydantic AI's usage details);
each is recorded in the call's ``model.called`` event and priced at its own
rate. An Anthropic client run through Logfire and through OpenInference,
answered whole and streamed, with prompt caching in its usage, shows what
real instrumentations send.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pipeline.collect.anthropic_client_child import SYSTEM
from tests.pipeline.collect.conftest import Ledger, audit_json, run_client, said_in
from tests.pipeline.collect.openai_client_child import STREAM_ENV
from tests.pipeline.collect.receiver import running
from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    Reply,
    ReplySource,
    ToolUse,
    anthropic_stream,
    anthropic_text,
    anthropic_tool_use,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.ledger.numbers import MAX_INTEGER
from turnledger.ledger.store import open_store
from turnledger.pipeline.collect import Recorder, Span
from turnledger.pipeline.sessions import list_sessions
from turnledger.policies.pricing import ModelPrice

HERE = Path(__file__).parent

PRICE = ModelPrice(
    input_per_million=3.0,
    output_per_million=15.0,
    cached_input_per_million=0.3,
    cache_write_per_million=3.75,
    reasoning_per_million=20.0,
)
PRICES = {"claude-test": PRICE, "gpt-4o": PRICE}


def _cost(
    input_tokens: int, output_tokens: int, cached: int, written: int, reasoning: int
) -> float:
    """The cost of a call at :data:`PRICE`, each part at its own rate."""
    return (
        (input_tokens - cached - written) * PRICE.input_per_million
        + cached * PRICE.cached_input_per_million
        + written * (PRICE.cache_write_per_million or 0.0)
        + (output_tokens - reasoning) * PRICE.output_per_million
        + reasoning * (PRICE.reasoning_per_million or 0.0)
    ) / 1e6


def _usage(call: ModelCalled) -> tuple[int, ...]:
    return (
        call.input_tokens,
        call.output_tokens,
        call.cached_input_tokens,
        call.cache_write_tokens,
        call.reasoning_tokens,
    )


_GENAI_CALL = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}

USAGE_NAMES = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
)
"""The conventions' names of the counts :func:`_usage` gives, in its order."""

CONVENTIONS = {
    "genai": {
        **_GENAI_CALL,
        "gen_ai.usage.input_tokens": 170,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 20,
        "gen_ai.usage.reasoning.output_tokens": 4,
    },
    "openllmetry-older": {
        **_GENAI_CALL,
        "gen_ai.usage.prompt_tokens": 170,
        "gen_ai.usage.completion_tokens": 10,
        "gen_ai.usage.cache_read_input_tokens": 100,
        "gen_ai.usage.cache_creation_input_tokens": 20,
        "gen_ai.usage.reasoning_tokens": 4,
    },
    "strands": {
        **_GENAI_CALL,
        "gen_ai.usage.input_tokens": 170,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read_input_tokens": 100,
        "gen_ai.usage.cache_write_input_tokens": 20,
        "gen_ai.usage.reasoning_tokens": 4,
    },
    "pydantic-ai": {
        **_GENAI_CALL,
        "gen_ai.usage.input_tokens": 170,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 20,
        "gen_ai.usage.details.reasoning_tokens": 4,
        "gen_ai.usage.details.cache_read_tokens": 100,
    },
    "openinference": {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.token_count.prompt": 170,
        "llm.token_count.completion": 10,
        "llm.token_count.prompt_details.cache_read": 100,
        "llm.token_count.prompt_details.cache_write": 20,
        "llm.token_count.completion_details.reasoning": 4,
    },
    "ai-sdk": {
        "ai.operationId": "ai.generateText.doGenerate",
        "ai.model.id": "gpt-4o",
        "ai.usage.inputTokens": 170,
        "ai.usage.outputTokens": 10,
        "ai.usage.cachedInputTokens": 100,
        "ai.usage.inputTokenDetails.cacheWriteTokens": 20,
        "ai.usage.outputTokenDetails.reasoningTokens": 4,
    },
    # Anthropic's API counts the cache reads and writes beside the input
    # tokens; a span sending its numbers as they are (a hand-made one).
    "beside-the-input": {
        **_GENAI_CALL,
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 20,
        "gen_ai.usage.reasoning.output_tokens": 4,
    },
}


def _recorded(tmp_path: Path, attributes: dict[str, object]) -> ModelCalled:
    """The ``model.called`` event one span with ``attributes`` records."""
    span = Span(trace_id="a" * 32, span_id="b" * 16, attributes=attributes)
    with open_store(str(tmp_path / "ledger.db")) as store:
        report = Recorder(store, pricing=PRICES).record([span])
        (call,) = [
            r.event
            for r in store.read_all(after=0, limit=100)
            if isinstance(r.event, ModelCalled)
        ]
    assert report.mapped == 1
    return call


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_each_convention_s_cache_and_reasoning_counts_are_recorded_and_priced(
    convention: str, tmp_path: Path
) -> None:
    call = _recorded(tmp_path, CONVENTIONS[convention])
    assert _usage(call) == (170, 10, 100, 20, 4)
    assert call.cost_usd == pytest.approx(_cost(170, 10, 100, 20, 4))


@pytest.mark.parametrize(
    ("sent", "recorded"),
    [
        # Parts within their whole are kept as sent.
        ((100, 10, 100, 0, 10), (100, 10, 100, 0, 10)),
        ((100, 10, 60, 40, 0), (100, 10, 60, 40, 0)),
        # Parts over their whole were counted beside it.
        ((100, 10, 60, 41, 0), (201, 10, 60, 41, 0)),
        ((100, 2, 0, 0, 5), (100, 7, 0, 0, 5)),
        ((0, 0, 5, 0, 3), (5, 3, 5, 0, 3)),
        # A count that is not one reads as not reported, and adds nothing.
        ((100, 10, -1, "x", True), (100, 10, 0, 0, 0)),
    ],
)
def test_parts_are_read_within_their_whole_or_beside_it(
    sent: tuple[object, ...], recorded: tuple[int, ...], tmp_path: Path
) -> None:
    call = _recorded(
        tmp_path, {**_GENAI_CALL, **dict(zip(USAGE_NAMES, sent, strict=True))}
    )
    assert _usage(call) == recorded


WEATHER = [
    ("user", "Weather in Paris?", (), ()),
    (
        "assistant",
        "Let me check.",
        (("call_w1", "get_weather", {"city": "Paris"}),),
        (),
    ),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
]


@pytest.mark.parametrize("mode", ["whole", "streamed"])
@pytest.mark.parametrize("instrumentation", ["logfire", "openinference", "openllmetry"])
def test_an_anthropic_client_s_prompt_caching_is_recorded_and_priced(
    ledger: Ledger,
    instrumentation: str,
    mode: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The instrumentations add Anthropic's cache reads and writes to its
    input tokens and send them apart too: the calls record both, priced.
    OpenLLMetry 0.62.4 adds a stream's first output count (``message_start``'s
    1, as the API sends it) to its last, which is the whole: its streamed
    calls say one output token more than the API counted (recorded as said)."""
    answers: list[ReplySource] = [
        anthropic_tool_use(
            ToolUse("call_w1", "get_weather", {"city": "Paris"}),
            text="Let me check.",
            usage=(50, 10, 100, 20),
        ),
        anthropic_text("18C in Paris.", usage=(70, 6, 120)),
    ]
    if mode == "streamed":
        answers = [anthropic_stream(a) for a in answers if isinstance(a, Reply)]
    env = {STREAM_ENV: "1" if mode == "streamed" else "0"}
    with FakeLLMServer() as llm, running(ledger.store, pricing=PRICES) as (url, app):
        llm.queue_anthropic(*answers)
        run_client(
            HERE / "anthropic_client_child.py", llm.url, url, env, instrumentation
        )
        llm.assert_drained()
        assert app.refused == 0
    (session,) = list_sessions(ledger.store)
    assert said_in(ledger, session.key) == WEATHER
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    assert [e.text for e in events if isinstance(e, SystemPromptSet)] == [SYSTEM]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert [(c.model, c.provider) for c in calls] == [("claude-test", "anthropic")] * 2
    extra = 1 if (instrumentation, mode) == ("openllmetry", "streamed") else 0
    usage = [(170, 10 + extra, 100, 20, 0), (190, 6 + extra, 120, 0, 0)]
    assert [_usage(c) for c in calls] == usage
    assert [c.cost_usd for c in calls] == [pytest.approx(_cost(*u)) for u in usage]
    assert audit_json(ledger, session.key, capsys)["skipped"] == {}


_COUNTS = st.one_of(
    st.integers(min_value=-5, max_value=MAX_INTEGER + 5),
    st.integers(min_value=0, max_value=1_000),
    st.sampled_from([None, True, "12", "x", 1.5, float("nan")]),
)


@settings(max_examples=200, deadline=None)
@given(sent=st.tuples(*[_COUNTS] * 5))
def test_recorded_parts_stay_within_their_whole(sent: tuple[object, ...]) -> None:
    attributes = {k: v for k, v in zip(USAGE_NAMES, sent, strict=True) if v is not None}
    with tempfile.TemporaryDirectory() as folder:
        call = _recorded(Path(folder), {**_GENAI_CALL, **attributes})
    input_tokens, output_tokens, cached, written, reasoning = _usage(call)
    assert cached + written <= input_tokens <= MAX_INTEGER
    assert reasoning <= output_tokens <= MAX_INTEGER
    assert call.cost_usd >= 0


@pytest.mark.parametrize(
    ("raw", "reasoning"),
    [
        ('{"completion_tokens_details": {"reasoning_tokens": 4}}', 4),
        ('{"output_tokens_details": {"reasoning_tokens": 4}}', 4),
        ('{"completion_tokens_details": {"reasoning_tokens": "x"}}', 0),
        ('{"completion_tokens_details": {}}', 0),
        ("[4]", 0),
        ("not json", 0),
    ],
)
def test_logfire_s_raw_usage_gives_the_reasoning_count_it_alone_holds(
    raw: str, reasoning: int, tmp_path: Path
) -> None:
    usage = {
        "gen_ai.usage.input_tokens": 170,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.raw": raw,
    }
    call = _recorded(tmp_path, {**_GENAI_CALL, **usage})
    assert _usage(call) == (170, 10, 0, 0, reasoning)


def test_a_reasoning_count_sent_is_not_replaced_by_the_raw_one(tmp_path: Path) -> None:
    usage = {
        "gen_ai.usage.input_tokens": 170,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.reasoning.output_tokens": 3,
        "gen_ai.usage.raw": '{"completion_tokens_details": {"reasoning_tokens": 4}}',
    }
    call = _recorded(tmp_path, {**_GENAI_CALL, **usage})
    assert call.reasoning_tokens == 3
