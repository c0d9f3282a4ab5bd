"""An OpenAI client instrumented by OpenLLMetry (``opentelemetry-instrumentation-openai``).

Run as a child process (the instrumentation patches the ``openai`` module and
reads ``TRACELOOP_TRACE_CONTENT`` from the environment):
``python openllmetry_client_child.py OTLP_URL OPENAI_URL``. It sends a tool
round trip (a call, the tool's result, the answer), then a question holding an
image, through the real ``openai`` client to the fake server, and exports the
spans over OTLP/HTTP.
"""

from __future__ import annotations

import json
import sys

import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.pipeline.collect.openai_client_child import (
    PICTURE,
    asked_round_trip,
)


def main(otlp_url: str, openai_url: str) -> None:
    """Run the round trip and the picture question, then flush the spans."""
    provider = TracerProvider(resource=Resource({"service.name": "weather-app"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces"))
    )
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
    tracer = provider.get_tracer("weather-app")
    with tracer.start_as_current_span("weather request"):
        messages, call = asked_round_trip(client)
        messages.append({"role": "user", "content": PICTURE})
        client.chat.completions.create(model="gpt-4o", messages=messages)
    provider.force_flush()
    provider.shutdown()
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
