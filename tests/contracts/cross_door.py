"""The cross-door contract: one scripted conversation, the same facts by every door.

Every way into the ledger (the turn engine, an export then import in each
format, each framework adapter) records the conversation of :data:`SCRIPT`:
the system prompt, a user question, one model call answering with two tool
calls (``get_weather`` and ``get_time``), their results, and a second model
call giving the final answer, each model call with the usage in
:data:`USAGE` on model :data:`MODEL`, priced with :data:`PRICING`.

A door's test drives that conversation through its door, then asserts
``projected_facts(store, stream_id) == EXPECTED`` (or compares two doors'
projected facts). The projection is what ``turnledger history``, ``costs`` and
``audit`` show of a session: the system prompt in effect, each message's role
and text (a tool result as a ``tool`` message of its content, one per result,
whatever message carried it), the tool calls (arguments compared as JSON
values, so spacing and key order do not matter), the results, the model calls
(model, input and output tokens, cost) and the audit verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from turnledger.ledger.events import ModelCalled
from turnledger.ledger.store import EventStore
from turnledger.pipeline.audit import audit_conversations
from turnledger.pipeline.sessions import load_history
from turnledger.policies.pricing import ModelPrice, TokenUsage, price_usage
from turnledger.projections.history.read import current_instructions
from turnledger.projections.lineage import lineage

SYSTEM_PROMPT: Final = "You are a terse assistant."
USER_TEXT: Final = "What is the weather and the time in Paris?"
MODEL: Final = "terse-1"
FINAL_TEXT: Final = "Paris: sunny, 21 C, 14:05."


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call of the script and its result."""

    id: str
    name: str
    arguments: dict[str, str]
    result: str


CALLS: Final = (
    ScriptedCall(
        id="call_weather",
        name="get_weather",
        arguments={"city": "Paris"},
        result="sunny, 21 C",
    ),
    ScriptedCall(
        id="call_time", name="get_time", arguments={"city": "Paris"}, result="14:05"
    ),
)
"""The two tool calls, both in the first model response, in this order."""

USAGE: Final = ((42, 17), (88, 9))
"""(input tokens, output tokens) of the first and the second model call."""

PRICING: Final = {MODEL: ModelPrice(input_per_million=3.0, output_per_million=15.0)}
"""The ``[pricing]`` table every door prices with."""

SCRIPT: Final = (SYSTEM_PROMPT, USER_TEXT, CALLS, FINAL_TEXT, USAGE)
"""The whole script, for a door that wants it as one value."""


def _cost(input_tokens: int, output_tokens: int) -> float:
    usage = TokenUsage(
        model=MODEL, input_tokens=input_tokens, output_tokens=output_tokens
    )
    return price_usage(usage, PRICING).cost_usd


def _arguments(text: str) -> str:
    """A call's arguments as canonical JSON (its text when not JSON)."""
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text


@dataclass(frozen=True)
class DoorFacts:
    """What a session shows by ``history``, ``costs`` and ``audit``.

    Attributes:
        system_prompt: The system prompt in effect (``None``: none recorded).
        history: ``(role, text)`` of each message, oldest first, system prompts
            excepted; a tool result is a ``("tool", content)`` of its own.
        tool_calls: ``(name, arguments as canonical JSON)`` of each call.
        tool_results: ``(tool name, content, is_error)`` of each result.
        model_calls: ``(model, input tokens, output tokens, cost in USD rounded
            to 12 places)`` of each model call, in order.
        audit: ``(clean, tool calls, tool results)`` of the ledger audit.
    """

    system_prompt: str | None
    history: tuple[tuple[str, str], ...]
    tool_calls: tuple[tuple[str, str], ...]
    tool_results: tuple[tuple[str, str, bool], ...]
    model_calls: tuple[tuple[str, int, int, float], ...]
    audit: tuple[bool, int, int]


EXPECTED: Final = DoorFacts(
    system_prompt=SYSTEM_PROMPT,
    history=(
        ("user", USER_TEXT),
        ("assistant", ""),
        *(("tool", c.result) for c in CALLS),
        ("assistant", FINAL_TEXT),
    ),
    tool_calls=tuple((c.name, _arguments(json.dumps(c.arguments))) for c in CALLS),
    tool_results=tuple((c.name, c.result, False) for c in CALLS),
    model_calls=tuple((MODEL, i, o, round(_cost(i, o), 12)) for i, o in USAGE),
    audit=(True, len(CALLS), len(CALLS)),
)
"""The facts every door must show of the scripted conversation."""


def projected_facts(store: EventStore, stream_id: UUID) -> DoorFacts:
    """Project a session of ``store`` to the facts the doors are compared on."""
    state = load_history(store, stream_id)
    messages = [e.message for e in state.entries]
    history: list[tuple[str, str]] = []
    calls: list[tuple[str, str]] = []
    results: list[tuple[str, str, bool]] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "system":
            continue
        if m.tool_results:
            for r in m.tool_results:
                history.append(("tool", r.content))
                name = r.name or names.get(r.call_id, "?")
                results.append((name, r.content, r.is_error))
            continue
        history.append((m.role, m.text))
        for c in m.tool_calls:
            names[c.id] = c.name
            calls.append((c.name, _arguments(c.arguments)))
    report = audit_conversations("ledger", [("session", messages)])
    model_calls = tuple(
        (
            r.event.model,
            r.event.input_tokens,
            r.event.output_tokens,
            round(r.event.cost_usd, 12),
        )
        for r in lineage(store, stream_id)
        if isinstance(r.event, ModelCalled)
    )
    return DoorFacts(
        system_prompt=current_instructions(state),
        history=tuple(history),
        tool_calls=tuple(calls),
        tool_results=tuple(results),
        model_calls=model_calls,
        audit=(report.clean, report.tool_calls, report.tool_results),
    )
