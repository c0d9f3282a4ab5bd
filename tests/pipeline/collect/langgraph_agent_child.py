"""A LangGraph ReAct agent instrumented by OpenInference's or OpenLLMetry's
LangChain instrumentation.

Run as a child process (each instrumentation patches LangChain for the
process): ``python langgraph_agent_child.py OTLP_URL OPENAI_URL KIND`` with
``KIND`` ``openinference`` or ``openllmetry``. The agent, with one tool,
answers "Weather in Paris?" through ``langchain-openai``'s chat model and the
real ``openai`` client against the fake server (the model asks for the tool,
the graph runs it, the model answers); the spans are exported over OTLP/HTTP.
Both instrumentations send the tool's span without the call's id, its result
the ``ToolMessage`` as LangChain serializes it.
"""

from __future__ import annotations

import json
import sys
import warnings

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation import using_session
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.pipeline.collect.spans import exporter_provider

SESSION = "graph-run-1"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "18C" if city == "Paris" else "unknown"


def run(provider: TracerProvider, openai_url: str, kind: str) -> str:
    """Run the agent once; return its tool call's id."""
    if kind == "openinference":
        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        LangchainInstrumentor().instrument(tracer_provider=provider)
    model = ChatOpenAI(
        model="gpt-4o", base_url=openai_url, api_key="sk-test", max_retries=0
    )
    with warnings.catch_warnings():  # the prebuilt agent's move is announced
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model, [get_weather], prompt="You answer weather questions."
        )
    with using_session(SESSION):
        out = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    calls = [c["id"] for m in out["messages"] for c in getattr(m, "tool_calls", [])]
    return calls[0]


def main(otlp_url: str, openai_url: str, kind: str) -> None:
    """Run it with the spans exported to ``otlp_url``; print the call's id."""
    with exporter_provider(otlp_url, "graph-agent") as provider:
        call = run(provider, openai_url, kind)
    print(json.dumps({"call": call}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
