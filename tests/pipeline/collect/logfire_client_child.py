"""An OpenAI client instrumented by Logfire (``logfire.instrument_openai``).

Run as a child process: ``python logfire_client_child.py OTLP_URL OPENAI_URL``.
Logfire is configured to send nothing to its own service; its spans go to the
receiver by the SDK's OTLP exporter, added as one of Logfire's span
processors. It sends a tool round trip (a call, the tool's result, the
answer), streamed with ``WEATHER_STREAM=1``, then a question holding an image,
through the real ``openai`` client to the fake server, inside a span of the
application's own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import logfire
import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.pipeline.collect.openai_client_child import (
    PICTURE,
    asked_round_trip,
)


@contextmanager
def logfire_exporting(otlp_url: str, service: str) -> Iterator[None]:
    """Logfire configured to send nothing to its own service and its spans to
    ``otlp_url`` by the SDK's OTLP exporter; flushed and shut down after."""
    exporter = OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces")
    logfire.configure(
        send_to_logfire=False,
        service_name=service,
        console=False,
        additional_span_processors=[BatchSpanProcessor(exporter)],
    )
    try:
        yield
    finally:
        logfire.force_flush()
        logfire.shutdown()


def main(otlp_url: str, openai_url: str) -> None:
    """Run the round trip and the picture question, then flush the spans."""
    with logfire_exporting(otlp_url, "weather-app"):
        client = openai.OpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
        logfire.instrument_openai(client)
        with logfire.span("weather request"):
            messages, call = asked_round_trip(client)
            messages.append({"role": "user", "content": PICTURE})
            client.chat.completions.create(model="gpt-4o", messages=messages)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
