"""An Anthropic client instrumented by Logfire, OpenInference or OpenLLMetry.

Run as a child process: ``python anthropic_client_child.py OTLP_URL
ANTHROPIC_URL INSTRUMENTATION``, ``INSTRUMENTATION`` one of ``logfire``
(``logfire.instrument_anthropic``), ``openinference``
(``openinference-instrumentation-anthropic``) and ``openllmetry``
(``opentelemetry-instrumentation-anthropic``, content on). A tool round trip through the
real ``anthropic`` client to the fake server: the model says a text and asks
for the tool in one message, the tool's result goes back as a
``tool_result`` block, the model answers. Each call is streamed
(``client.messages.stream``) with ``WEATHER_STREAM=1``, else answered whole.
The spans go to the receiver by the SDK's OTLP/HTTP exporter.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anthropic
import logfire
from anthropic.types import Message
from openinference.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.instrumentation.anthropic import (
    AnthropicInstrumentor as OpenLLMetryInstrumentor,
)

from tests.pipeline.collect.logfire_client_child import logfire_exporting
from tests.pipeline.collect.openai_client_child import STREAM_ENV
from tests.pipeline.collect.spans import exporter_provider

SYSTEM = "You answer weather questions."
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def round_trip(client: anthropic.Anthropic, *, streamed: bool) -> str:
    """Ask, send the tool's result back, get the answer; return the call's id."""
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]

    def ask() -> Message:
        kwargs: dict[str, Any] = {
            "model": "claude-test",
            "max_tokens": 100,
            "system": SYSTEM,
            "messages": messages,
            "tools": TOOLS,
        }
        if not streamed:
            return client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as stream:
            for _ in stream.text_stream:
                pass
            return stream.get_final_message()

    first = ask()
    (call,) = [block.id for block in first.content if block.type == "tool_use"]
    messages.append(
        {
            "role": "assistant",
            "content": [b.model_dump(exclude_none=True) for b in first.content],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call, "content": "18C"}],
        }
    )
    ask()
    return call


def _client(anthropic_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)


def _logfire(otlp_url: str, anthropic_url: str, *, streamed: bool) -> str:
    with logfire_exporting(otlp_url, "claude-app"):
        client = _client(anthropic_url)
        logfire.instrument_anthropic(client)
        with logfire.span("weather request"):
            return round_trip(client, streamed=streamed)


def _openinference(otlp_url: str, anthropic_url: str, *, streamed: bool) -> str:
    with exporter_provider(otlp_url, "claude-app") as provider:
        AnthropicInstrumentor().instrument(tracer_provider=provider)
        tracer = provider.get_tracer("weather-app")
        with tracer.start_as_current_span("weather request"):
            return round_trip(_client(anthropic_url), streamed=streamed)


def _openllmetry(otlp_url: str, anthropic_url: str, *, streamed: bool) -> str:
    os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
    with exporter_provider(otlp_url, "claude-app") as provider:
        OpenLLMetryInstrumentor().instrument(tracer_provider=provider)
        tracer = provider.get_tracer("weather-app")
        with tracer.start_as_current_span("weather request"):
            return round_trip(_client(anthropic_url), streamed=streamed)


def main(otlp_url: str, anthropic_url: str, instrumentation: str) -> None:
    """Run the round trip under ``instrumentation``; print the call's id."""
    instrument = {
        "logfire": _logfire,
        "openinference": _openinference,
        "openllmetry": _openllmetry,
    }
    streamed = os.environ.get(STREAM_ENV) == "1"
    call = instrument[instrumentation](otlp_url, anthropic_url, streamed=streamed)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
