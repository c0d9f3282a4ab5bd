"""Issue #11 item 4 (one format of it): OpenAI Agents SDK run state and session items.

Public files: the SDK's own run-state fixtures (``tests/fixtures/openai_agents``,
MIT, with ``PROVENANCE.md``). Real framework code: a run of the SDK's ``Runner``
(its model is a scripted implementation of the SDK's ``Model`` interface), saved
with ``RunState.to_json()`` and ``to_input_list()``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from turnledger.pipeline.formats import count_pairing, parse_transcript, read_transcript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai_agents"


def _counts(parsed) -> tuple[int, int, int, int, int]:
    c = count_pairing(parsed)
    return (
        c.conversations,
        c.tool_calls,
        c.tool_results,
        c.unpaired_calls,
        c.unpaired_results,
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("v1_9_custom_tool_call_and_tool_origin.json", (1, 1, 1, 0, 0)),
        ("v1_11_tool_output_custom_data.json", (1, 0, 1, 0, 1)),
    ],
)
def test_the_sdks_public_run_state_fixtures_are_counted_by_the_rule(name, expected):
    """Detected as openai-agents; counts as PROVENANCE.md states them."""
    parsed = read_transcript(FIXTURES / name)
    assert parsed.format == "openai-agents"
    assert _counts(parsed) == expected
    assert parsed.conversations[0].messages[0].text == "historical input"


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class ScriptedModel(Model):
    """The SDK's Model interface: a call to `add`, then the answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, *args, **kwargs) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id="fc_1",
                    call_id="call_1",
                    name="add",
                    arguments='{"a":1,"b":2}',
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text="3", annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message",
                    id="msg_1",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=f"r{self.calls}")

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def test_a_real_sdk_run_reads_back_from_its_state_and_its_items(tmp_path):
    """RunState.to_json() and to_input_list() both read as one paired exchange."""
    agent = Agent(name="calc", instructions="Add.", model=ScriptedModel(), tools=[add])
    result = await Runner.run(agent, "What is 1+2?")
    assert result.final_output == "3"
    state = tmp_path / "state.json"
    state.write_text(json.dumps(result.to_state().to_json()))
    items = tmp_path / "items.json"
    items.write_text(json.dumps(result.to_input_list()))
    from_state = read_transcript(state)
    from_items = read_transcript(items)
    assert (from_state.format, from_items.format) == (
        "openai-agents",
        "openai-responses",
    )
    assert _counts(from_state) == _counts(from_items) == (1, 1, 1, 0, 0)
    texts = [m.text for m in from_state.conversations[0].messages if m.text]
    assert texts == ["What is 1+2?", "3"]
    assert from_state.conversations[0].messages == from_items.conversations[0].messages


def test_a_run_state_missing_its_items_is_not_a_run_state():
    """Forced on another document, the reader names what it expected."""
    with pytest.raises(ValueError, match="Expected an OpenAI Agents SDK run state"):
        parse_transcript(b'{"messages": []}', format="openai-agents")
