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
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SESSION = "graph-run-1"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "18C" if city == "Paris" else "unknown"


def main(otlp_url: str, openai_url: str, kind: str) -> None:
    """Run the agent once, then flush the spans."""
    provider = TracerProvider(resource=Resource({"service.name": "graph-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces"))
    )
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
    provider.force_flush()
    provider.shutdown()
    calls = [c["id"] for m in out["messages"] for c in getattr(m, "tool_calls", [])]
    print(json.dumps({"call": calls[0]}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
