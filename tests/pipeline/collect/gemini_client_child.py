"""A Google GenAI (Gemini) client instrumented by the contrib's instrumentation.

Or by OpenInference's. Run as a child process (the instrumentation reads its
settings from the environment when it is imported): ``python
gemini_client_child.py OTLP_URL GEMINI_URL [openinference]``. A function-calling round trip through the real ``google-genai``
client to the fake server's ``generateContent`` (automatic function calling
off: the application sends the function's response back), both calls under
one span of the application's (one trace); the spans are exported over
OTLP/HTTP. ``OTEL_SEMCONV_STABILITY_OPT_IN`` and
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` come from the parent.
"""

from __future__ import annotations

import json
import sys

from google import genai
from google.genai import types
from openinference.instrumentation.google_genai import GoogleGenAIInstrumentor
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

from tests.pipeline.collect.spans import exporter_provider

WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
    ),
)


def main(otlp_url: str, gemini_url: str, instrumentation: str = "") -> None:
    """Run the round trip with the spans exported to ``otlp_url``; print the call's id."""
    with exporter_provider(otlp_url, "gemini-app") as provider:
        if instrumentation == "openinference":
            GoogleGenAIInstrumentor().instrument(tracer_provider=provider)
        else:
            GoogleGenAiSdkInstrumentor().instrument(tracer_provider=provider)
        client = genai.Client(
            api_key="k", http_options=types.HttpOptions(base_url=gemini_url)
        )
        config = types.GenerateContentConfig(
            system_instruction="You answer weather questions.",
            tools=[types.Tool(function_declarations=[WEATHER])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(
                disable=True
            ),
        )
        contents = [
            types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
        ]
        with provider.get_tracer("weather-app").start_as_current_span("weather chat"):
            first = client.models.generate_content(
                model="gemini-test", contents=contents, config=config
            )
            answer = first.candidates[0].content
            call = answer.parts[0].function_call
            response = types.FunctionResponse(
                id=call.id, name=call.name, response={"result": "18C"}
            )
            contents += [
                answer,
                types.Content(
                    role="user", parts=[types.Part(function_response=response)]
                ),
            ]
            client.models.generate_content(
                model="gemini-test", contents=contents, config=config
            )
    print(json.dumps({"call": call.id or ""}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
