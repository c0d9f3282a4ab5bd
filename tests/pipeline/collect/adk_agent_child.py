"""A Google ADK agent under ADK's own telemetry (no instrumentation package).

Run as a child process: ``python adk_agent_child.py OTLP_URL GEMINI_URL
[logs-first | span-by-span]``. An ``LlmAgent`` with one function tool, on the ``Gemini``
model through the real ``google-genai`` client to the fake server's
``generateContent``, answers "Weather in Paris?" (the model calls the tool,
ADK runs it, the model answers), then "And now?" in the same ADK session (the
model calls the tool again, with the same arguments). ADK sends its spans,
and its log records, to the tracer and logger providers set globally; both
go to the receiver by the SDK's OTLP exporters, the spans first (the logs
first with ``logs-first``), in one request each at the end, or, with
``span-by-span``, each span in a request of its own as it ends (a simple span
processor's export). The telemetry's form and content capture come
from the parent's environment (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN``,
``OTEL_SEMCONV_STABILITY_OPT_IN``,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``,
``ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS``). With ``ADK_SPANS_FILE`` set, the
spans are also written there, as one OTLP/JSON trace request.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.pipeline.collect.spans import otlp_json

QUESTIONS = ("Weather in Paris?", "And now?")
NEVER = 600_000  # ms: nothing is exported before the flushes below


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"result": "18C" if city == "Paris" else "12C"}


async def chat(gemini_url: str) -> None:
    """The two questions, in one ADK session."""
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = LlmAgent(
        name="weather",
        model=Gemini(model="gemini-test", base_url=gemini_url),
        instruction="You answer weather questions.",
        tools=[get_weather],
    )
    runner = InMemoryRunner(agent=agent, app_name="weather-app")
    session = await runner.session_service.create_session(
        app_name="weather-app", user_id="u1"
    )
    for question in QUESTIONS:
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for _event in runner.run_async(
            user_id="u1", session_id=session.id, new_message=message
        ):
            pass


def main(otlp_url: str, gemini_url: str, order: str = "spans-first") -> None:
    """Run the chat with ADK's telemetry exported to ``otlp_url``."""
    resource = Resource({"service.name": "adk-app"})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces")
    provider.add_span_processor(
        SimpleSpanProcessor(exporter)  # each span sent alone, as it ends
        if order == "span-by-span"
        else BatchSpanProcessor(exporter, schedule_delay_millis=NEVER)
    )
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    trace.set_tracer_provider(provider)
    loggers = LoggerProvider(resource=resource)
    loggers.add_log_record_processor(
        BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{otlp_url}/v1/logs"),
            schedule_delay_millis=NEVER,
        )
    )
    _logs.set_logger_provider(loggers)
    asyncio.run(chat(gemini_url))
    flushes = [loggers, provider] if order == "logs-first" else [provider, loggers]
    for flushed in flushes:
        flushed.force_flush()
    for flushed in flushes:
        flushed.shutdown()
    if file := os.environ.get("ADK_SPANS_FILE"):
        document = otlp_json(kept.get_finished_spans())
        Path(file).write_text(json.dumps(document), encoding="utf-8")
    print(json.dumps({"call": ""}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
