"""An OpenAI Agents SDK run instrumented by Logfire (``logfire.instrument_openai_agents``).

Run as a child process: ``python logfire_agents_child.py OTLP_URL OPENAI_URL``.
Logfire sends nothing to its own service; its spans go to the receiver by the
SDK's OTLP exporter. Under one SDK trace, an agent with one tool answers
"Weather in Paris?" (the model asks for the tool, the SDK runs it, the model
answers), then the conversation goes on with "And Oslo?", where the tool
raises: the SDK sends the model its error message, and the model answers.
The model is the SDK's Chat Completions one, its Responses one with
``WEATHER_API=responses``, through the real ``openai`` client to the fake
server. With ``WEATHER_SENSITIVE=0`` the runs keep their inputs and outputs
out of their traces (``trace_include_sensitive_data=False``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import logfire
from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    trace,
)
from agents.items import TResponseInputItem
from openai import AsyncOpenAI

from tests.pipeline.collect.logfire_client_child import logfire_exporting
from tests.pipeline.collect.openai_client_child import API_ENV

SENSITIVE_ENV = "WEATHER_SENSITIVE"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    if city != "Paris":
        msg = f"no station in {city}"
        raise ValueError(msg)
    return "18C"


async def chat(model: Model) -> list[str]:
    """The two runs under one trace; the tool calls' ids."""
    agent = Agent(
        name="weather",
        instructions="You answer weather questions.",
        model=model,
        tools=[get_weather],
    )
    calls: list[str] = []
    config = RunConfig(
        trace_include_sensitive_data=os.environ.get(SENSITIVE_ENV) != "0"
    )
    with trace("weather chat"):
        first = await Runner.run(agent, "Weather in Paris?", run_config=config)
        calls += [
            item.raw_item.call_id  # type: ignore[union-attr]
            for item in first.new_items
            if item.type == "tool_call_item"
        ]
        more: list[TResponseInputItem] = [{"role": "user", "content": "And Oslo?"}]
        second = await Runner.run(
            agent, first.to_input_list() + more, run_config=config
        )
        calls += [
            item.raw_item.call_id  # type: ignore[union-attr]
            for item in second.new_items
            if item.type == "tool_call_item"
        ]
    return calls


def main(otlp_url: str, openai_url: str) -> None:
    """Run the conversation with the spans exported; print the first call's id."""
    client = AsyncOpenAI(base_url=openai_url, api_key="sk-test", max_retries=0)
    if os.environ.get(API_ENV) == "responses":  # the SDK's default model
        model: Model = OpenAIResponsesModel(model="gpt-4o", openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
    with logfire_exporting(otlp_url, "weather-agent"):
        logfire.instrument_openai_agents()
        calls = asyncio.run(chat(model))
    print(json.dumps({"call": calls[0], "calls": calls}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
