"""An OpenAI client instrumented by OpenInference (``openinference-instrumentation-openai``).

Run as a child process (OpenInference reads its ``OPENINFERENCE_*`` settings
from the environment): ``python openinference_client_child.py OTLP_URL
OPENAI_URL``. Each call is a trace of its own, as this instrumentation makes
it; ``using_session`` gives them one ``session.id``. It sends a tool round
trip (a call, the tool's result, the answer), then a question holding an
image, through the real ``openai`` client to the fake server, and exports the
spans over OTLP/HTTP.
"""

from __future__ import annotations

import json
import sys

import openai
from openinference.instrumentation import using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.pipeline.collect.openai_client_child import (
    PICTURE,
    asked_round_trip,
)
from tests.pipeline.collect.spans import exporter_provider

SESSION = "weather-chat-1"


def run(provider: TracerProvider, openai_url: str) -> str:
    """Run the round trip and the picture question; return the call's id."""
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
    with using_session(SESSION):
        messages, call = asked_round_trip(client)
        messages.append({"role": "user", "content": PICTURE})
        client.chat.completions.create(model="gpt-4o", messages=messages)
    return call


def main(otlp_url: str, openai_url: str) -> None:
    """Run it with the spans exported to ``otlp_url``; print the call's id."""
    with exporter_provider(otlp_url, "weather-app") as provider:
        call = run(provider, openai_url)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
