"""A Pydantic AI agent traced by its own OpenTelemetry instrumentation.

Pydantic AI's instrumentation (the one Logfire shows; the GenAI conventions'
current form) makes the spans and the SDK's OTLP exporter sends them to the
receiver, one request per span. The same run's messages, as Pydantic AI
serialises them (``all_messages_json``), are imported into the same ledger:
two readers of two representations Pydantic AI made of one run must give the
same history. The run has what agents do: a user prompt of two texts and an
image, two tool calls in one response, a tool asking for a retry, and a
second run continuing the conversation. The image is not text: neither reader
records it as text, and each counts it once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent, BinaryContent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect.coverage import (
    NOT_RECORDED,
    PART_NOT_RECORDED,
    WITHOUT_RESULT,
)
from turnledger.pipeline.sessions import list_sessions

AGENT = "weather-agent"
IMAGE = BinaryContent(
    data=b"\x89PNG\r\n\x1a\n not really a picture", media_type="image/png"
)


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Two calls at once, then a tool that asks for a retry, then the answer."""
    del info
    calls = sum(1 for m in messages for p in m.parts if isinstance(p, ToolCallPart))
    prompt = messages[-1].parts[-1]
    if prompt.part_kind == "user-prompt":  # a new run: Rome, or Paris and Oslo
        if prompt.content == "And in Rome?":
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Rome"}, "c5")]
            )
        return ModelResponse(
            parts=[
                TextPart("Let me check both."),
                ToolCallPart("weather", {"city": "Paris"}, "c1"),
                ToolCallPart("weather", {"city": "Oslo"}, "c2"),
            ]
        )
    if calls == 2:
        return ModelResponse(parts=[ToolCallPart("station", {}, "c3")])
    if calls == 3:
        return ModelResponse(parts=[ToolCallPart("station", {}, "c4")])
    return ModelResponse(parts=[TextPart(f"Done after {calls} calls.")])


def _agent(provider: TracerProvider, *, content: bool) -> Agent[None, str]:
    agent = Agent(FunctionModel(_model), instructions="Answer in one line.")
    agent.instrument = InstrumentationSettings(
        tracer_provider=provider, include_content=content
    )
    asked: list[str] = []

    # Async: Pydantic AI runs a response's calls as tasks, in the model's
    # order. A sync tool runs in a thread pool, where two parallel calls may
    # start and end in either order (their results then arrive so).
    @agent.tool_plain
    async def weather(city: str) -> str:
        """The weather of a city."""
        return {"Paris": "18C", "Oslo": "3C", "Rome": "24C"}[city]

    @agent.tool_plain
    def station() -> str:
        """The nearest station (busy the first time)."""
        asked.append("station")
        if len(asked) == 1:
            raise ModelRetry("the station is busy")
        return "Montsouris"

    return agent


def _run(url: str, *, content: bool, openinference: bool) -> list[ModelMessage]:
    """Both runs of the conversation, their spans sent; its messages.

    With ``openinference``, OpenInference's span processor first adds its own
    attributes to each span (``openinference.span.kind``, ``llm.*``...), as
    Arize Phoenix users run Pydantic AI.
    """
    provider = TracerProvider(resource=Resource({"service.name": AGENT}))
    if openinference:
        provider.add_span_processor(OpenInferenceSpanProcessor())
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces"))
    )
    agent = _agent(provider, content=content)

    async def both() -> list[ModelMessage]:
        first = await agent.run(["Weather in Paris and Oslo?", "Metric units.", IMAGE])
        history = first.all_messages()
        second = await agent.run("And in Rome?", message_history=history)
        return second.all_messages()

    messages = asyncio.run(both())
    provider.shutdown()
    return messages


_OPENINFERENCE = pytest.mark.parametrize(
    "openinference", [False, True], ids=["pydantic-ai", "with-openinference"]
)


@_OPENINFERENCE
def test_the_spans_hold_what_the_messages_hold(
    ledger: Ledger,
    tmp_path: Path,
    openinference: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The session collected from the spans is the run's messages, imported.

    OpenInference's attributes beside Pydantic AI's change nothing: its
    conversion leaves the image out, and the GenAI messages it converted from
    are read.
    """
    with running(ledger.store) as (url, app):
        messages = _run(url, content=True, openinference=openinference)
    assert app.refused == 0
    conversation = messages[0].conversation_id
    assert conversation is not None
    collected = said_in(ledger, conversation)

    run = tmp_path / "run.json"
    run.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    assert main(["--db", ledger.url, "import", str(run), "--agent", AGENT]) == 0
    imported = said_in(
        ledger,
        next(s.key for s in list_sessions(ledger.store) if s.key != conversation),
    )

    assert collected == imported
    assert collected[0] == ("user", "Weather in Paris and Oslo?\nMetric units.", (), ())
    assert [r for m in collected for r in m[3]] == [
        ("c1", "18C", False),
        ("c2", "3C", False),
        ("c3", "Error: the station is busy", True),
        ("c4", "Montsouris", False),
        ("c5", "24C", False),
    ]
    assert collected[-1] == ("assistant", "Done after 5 calls.", (), ())
    audit = audit_json(ledger, conversation, capsys)
    # The image, sent again in every model call's input, is counted once.
    assert audit["skipped"] == {PART_NOT_RECORDED.format("blob"): 1}
    assert (audit["tool_calls"], audit["tool_results"], audit["unpaired_calls"]) == (
        5,
        5,
        0,
    )


@_OPENINFERENCE
def test_without_content_the_spans_record_usage_and_audit_says_so(
    ledger: Ledger, openinference: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """``include_content=False``: model calls with usage, no conversation."""
    with running(ledger.store) as (url, _app):
        messages = _run(url, content=False, openinference=openinference)
    conversation = messages[0].conversation_id
    assert conversation is not None
    assert said_in(ledger, conversation) == []
    calls = sum(1 for m in messages if isinstance(m, ModelResponse))
    tools = sum(1 for m in messages for p in m.parts if isinstance(p, ToolCallPart))
    audit = audit_json(ledger, conversation, capsys)
    assert audit["skipped"] == {NOT_RECORDED: calls, WITHOUT_RESULT: tools}
