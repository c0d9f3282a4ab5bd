"""An OpenAI client instrumented by opentelemetry-instrumentation-openai-v2.

Run as a child process (the instrumentation reads its content-capture settings
from the environment once):
``python openai_client_child.py OTLP_URL OPENAI_URL [logs-first|spans-first|-]
[picture]``. It sends a tool round trip (a call, the tool's result, the answer)
through the real ``openai`` client to the fake server and exports the spans over
OTLP/HTTP. With a third argument (other than ``-``) its log events (the
conventions' previous form of the messages) are exported too, over ``/v1/logs``,
flushed before or after the spans. With ``picture``, a question holding an image
follows the round trip (:data:`PICTURE`). With ``WEATHER_STREAM=1`` in its
environment, the round trip's answers are streamed (:data:`STREAM_ENV`); with
``WEATHER_API=responses``, the round trip goes through the Responses API
(:data:`API_ENV`; the other children read both).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
            },
        },
    }
]


STREAM_ENV = "WEATHER_STREAM"
"""With this set to ``1``, the children stream their round trip's answers."""


API_ENV = "WEATHER_API"
"""With this set to ``responses``, the children's round trip goes through the
Responses API (:func:`responses_round_trip`); with ``legacy``, OpenAI's legacy
function calling and a developer message (:func:`legacy_round_trip`)."""


def streaming() -> bool:
    """Whether this child streams (:data:`STREAM_ENV`)."""
    return os.environ.get(STREAM_ENV) == "1"


def asked_round_trip(client: openai.OpenAI) -> tuple[list[dict[str, object]], str]:
    """The round trip this child's environment asks for (:data:`STREAM_ENV`, :data:`API_ENV`)."""
    if os.environ.get(API_ENV) == "responses":
        return responses_round_trip(client)
    if os.environ.get(API_ENV) == "legacy":
        return legacy_round_trip(client)
    return round_trip(client, stream=streaming())


def legacy_round_trip(
    client: openai.OpenAI,
) -> tuple[list[dict[str, object]], str]:
    """:func:`round_trip` as an application of the legacy API writes it.

    The instructions are a ``developer`` message; the function is offered in
    ``functions``, the model answers with a ``function_call`` (no id), and its
    result goes back as a ``function`` message naming it. Returns the
    conversation and an empty call id (the legacy API has none).
    """
    functions: list[Any] = [TOOLS[0]["function"]]
    messages: list[dict[str, object]] = [
        {"role": "developer", "content": "You answer weather questions."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    first = client.chat.completions.create(
        model="gpt-4o", messages=messages, functions=functions
    )
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "function", "name": "get_weather", "content": "18C"})
    second = client.chat.completions.create(
        model="gpt-4o", messages=messages, functions=functions
    )
    messages.append({"role": "assistant", "content": second.choices[0].message.content})
    return messages, ""


RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def responses_round_trip(
    client: openai.OpenAI,
) -> tuple[list[dict[str, object]], str]:
    """:func:`round_trip` through the Responses API.

    The system prompt is its ``instructions``; the first answer's output items
    are sent back as input, then the tool's ``function_call_output``, as the
    API's documentation shows. Returns the same conversation as
    :func:`round_trip`, in the Chat Completions form (to continue it there).
    """
    instructions = "You answer weather questions."
    inputs: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.responses.create(
        model="gpt-4o", instructions=instructions, input=inputs, tools=RESPONSES_TOOLS
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    inputs += [item.model_dump(exclude_none=True) for item in first.output]
    inputs.append(
        {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}
    )
    second = client.responses.create(
        model="gpt-4o", instructions=instructions, input=inputs, tools=RESPONSES_TOOLS
    )
    function = {"name": call.name, "arguments": call.arguments}
    messages: list[dict[str, object]] = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": call.call_id, "type": "function", "function": function}
            ],
        },
        {"role": "tool", "tool_call_id": call.call_id, "content": "18C"},
        {"role": "assistant", "content": second.output_text},
    ]
    return messages, call.call_id


def round_trip(
    client: openai.OpenAI, *, stream: bool = False
) -> tuple[list[dict[str, object]], str]:
    """A tool round trip: the model's call, the tool's result, the model's answer.

    Streamed (with the usage asked for) when ``stream``. Returns the
    conversation (the answer included) and the call's id.
    """
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    first = _answer(client, messages, stream=stream)
    call = first["tool_calls"][0]
    messages.append(first)
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "18C"})
    second = _answer(client, messages, stream=stream)
    messages.append({"role": "assistant", "content": second.get("content")})
    return messages, call["id"]


def _answer(
    client: openai.OpenAI, messages: list[dict[str, object]], *, stream: bool
) -> dict[str, Any]:
    """The assistant message the model answers with (its stream read whole)."""
    if not stream:
        reply = client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=TOOLS
        )
        return reply.choices[0].message.model_dump(exclude_none=True)
    chunks = client.chat.completions.create(
        model="gpt-4o",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for part in choice.delta.tool_calls or ():
                function = part.function
                call = calls.setdefault(
                    part.index,
                    {
                        "id": "",
                        "type": "function",
                        "function": {"name": "", "arguments": ""},
                    },
                )
                call["id"] = part.id or call["id"]
                if function is not None:
                    call["function"]["name"] += function.name or ""
                    call["function"]["arguments"] += function.arguments or ""
    message: dict[str, Any] = {"role": "assistant"}
    if text:
        message["content"] = text
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


PICTURE: list[dict[str, object]] = [
    {"type": "text", "text": "And what is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
]
"""A user message's content: a text and an image."""


def main(otlp_url: str, openai_url: str, logs: str = "", picture: str = "") -> None:
    """Run the round trip, then flush the spans (and the logs, in that order)."""
    logs = "" if logs == "-" else logs
    resource = Resource({"service.name": "weather-app"})
    provider = TracerProvider(resource=resource)
    # Nothing is exported before the flushes below (whose order is the test's).
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces"),
            schedule_delay_millis=600_000,
        )
    )
    trace.set_tracer_provider(provider)
    loggers = LoggerProvider(resource=resource)
    if logs:
        loggers.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{otlp_url}/v1/logs"),
                schedule_delay_millis=600_000,
            )
        )
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=loggers)
    client = openai.OpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
    tracer = provider.get_tracer("weather-app")
    with tracer.start_as_current_span("weather request"):
        messages, call = asked_round_trip(client)
        if picture:
            messages.append({"role": "user", "content": PICTURE})
            client.chat.completions.create(model="gpt-4o", messages=messages)
    flushes = [provider, loggers] if logs == "spans-first" else [loggers, provider]
    for flushed in flushes:
        flushed.force_flush()
    for flushed in flushes:
        flushed.shutdown()
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
