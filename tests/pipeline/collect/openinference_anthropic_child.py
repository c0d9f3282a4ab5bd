"""An Anthropic client instrumented by OpenInference (``openinference-instrumentation-anthropic``).

Run as a child process: ``python openinference_anthropic_child.py OTLP_URL
ANTHROPIC_URL``. A tool round trip through the real ``anthropic`` client
against the fake server (the model says a text and asks for the tool in one
message, the tool's result goes back as a ``tool_result`` block, the model
answers), one ``session.id``; the spans are exported over OTLP/HTTP.
OpenInference sends the ``tool_use`` block both as the message's tool call
and as one of its content parts.
"""

from __future__ import annotations

import json
import sys

import anthropic
from openinference.instrumentation import using_session
from openinference.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.pipeline.collect.spans import exporter_provider

SESSION = "claude-chat-1"
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def run(provider: TracerProvider, anthropic_url: str) -> str:
    """Run the tool round trip; return the call's id."""
    AnthropicInstrumentor().instrument(tracer_provider=provider)
    client = anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)
    system = "You answer weather questions."
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "Weather in Paris?"}
    ]
    with using_session(SESSION):
        first = client.messages.create(
            model="claude-test",
            max_tokens=100,
            system=system,
            messages=messages,
            tools=TOOLS,
        )
        calls = [block.id for block in first.content if block.type == "tool_use"]
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": calls[0], "content": "18C"}
                ],
            }
        )
        client.messages.create(
            model="claude-test",
            max_tokens=100,
            system=system,
            messages=messages,
            tools=TOOLS,
        )
    return calls[0]


def main(otlp_url: str, anthropic_url: str) -> None:
    """Run it with the spans exported to ``otlp_url``; print the call's id."""
    with exporter_provider(otlp_url, "claude-app") as provider:
        call = run(provider, anthropic_url)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
