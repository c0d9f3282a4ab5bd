"""A smolagents agent instrumented by OpenInference (``openinference-instrumentation-smolagents``).

Run as a child process: ``python openinference_smolagents_child.py OTLP_URL
OPENAI_URL``. A ``ToolCallingAgent`` with one tool, its model smolagents'
``OpenAIServerModel`` (the real ``openai`` client) against the fake server,
answers "Weather in Paris?": the model calls ``get_weather``, smolagents runs it
and sends its result back as text, and the model calls ``final_answer``. Each
of OpenInference's TOOL spans records the tool's Python call (``{"args": [],
"kwargs": {...}}``), not the model's call id. The spans are exported over
OTLP/HTTP.
"""

from __future__ import annotations

import json
import sys

from openinference.instrumentation import using_session
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

from tests.pipeline.collect.spans import exporter_provider

SESSION = "smolagents-run-1"


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return "18C" if city == "Paris" else "unknown"


def run(provider: TracerProvider, openai_url: str) -> str:
    """Run the agent once; return its answer."""
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    model = OpenAIServerModel(
        model_id="gpt-4o",
        api_base=openai_url,
        api_key="sk-test",
        client_kwargs={"max_retries": 0},
    )
    agent = ToolCallingAgent(
        tools=[get_weather],
        model=model,
        max_steps=3,
        verbosity_level=LogLevel.OFF,  # its console log would go to stdout
    )
    with using_session(SESSION):
        return str(agent.run("Weather in Paris?"))


def main(otlp_url: str, openai_url: str) -> None:
    """Run it with the spans exported to ``otlp_url``; print the first call's id."""
    with exporter_provider(otlp_url, "weather-agent") as provider:
        answer = run(provider, openai_url)
    assert answer == "18C in Paris.", answer
    print(json.dumps({"call": "call_w1"}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
