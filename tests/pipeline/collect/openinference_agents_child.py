"""An OpenAI Agents SDK run instrumented by OpenInference (or OpenLLMetry).

Run as a child process (the instrumentation takes the SDK's trace processors
over): ``python openinference_agents_child.py OTLP_URL OPENAI_URL
[openllmetry]``; with ``openllmetry``, OpenLLMetry's
``opentelemetry-instrumentation-openai-agents`` instruments it instead (content
on). An agent
with one tool answers "Weather in Paris?" through the SDK's chat completions
model (its Responses model, the SDK's default, with ``WEATHER_API=responses``)
and the real ``openai`` client against the fake server (the model asks
for the tool, the SDK runs it, the model answers), and the spans are exported
over OTLP/HTTP. OpenInference's TOOL spans carry the tool's name, arguments
and result, not the call's id.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI
from openinference.instrumentation import using_session
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.instrumentation.openai_agents import (
    OpenAIAgentsInstrumentor as OpenLLMetryInstrumentor,
)
from opentelemetry.sdk.trace import TracerProvider

from tests.pipeline.collect.openai_client_child import API_ENV
from tests.pipeline.collect.spans import exporter_provider

SESSION = "agents-run-1"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "18C" if city == "Paris" else "unknown"


def run(provider: TracerProvider, openai_url: str, instrumentation: str = "") -> str:
    """Run the agent once; return its tool call's id."""
    if instrumentation == "openllmetry":
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
        OpenLLMetryInstrumentor().instrument(tracer_provider=provider)
    else:
        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    client = AsyncOpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
    if os.environ.get(API_ENV) == "responses":  # the SDK's default model
        model: Model = OpenAIResponsesModel(model="gpt-4o", openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    agent = Agent(
        name="weather",
        instructions="You answer weather questions.",
        model=model,
        tools=[get_weather],
    )
    with using_session(SESSION):
        result = asyncio.run(Runner.run(agent, "Weather in Paris?"))
    calls = [
        item.raw_item.call_id  # type: ignore[union-attr]
        for item in result.new_items
        if item.type == "tool_call_item"
    ]
    return calls[0]


def main(otlp_url: str, openai_url: str, instrumentation: str = "") -> None:
    """Run it with the spans exported to ``otlp_url``; print the call's id."""
    with exporter_provider(otlp_url, "weather-agent") as provider:
        call = run(provider, openai_url, instrumentation)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
