"""LiteLLM's OpenTelemetry callback: OpenAI's fields beside the messages' parts.

The fixture is a real LiteLLM run's spans (see the fixtures' PROVENANCE.md):
LiteLLM writes a message's tool calls (an assistant's ``tool_calls``) and the
call a tool message answers (``tool_call_id``) as OpenAI's fields beside the
current form's parts. Read as parts alone, the calls were lost and each tool
result was recorded as the user's words. Each ``litellm.completion`` is a
trace, so a session of its own, holding the conversation it was sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.spans import json_request, json_span, text
from turnledger.ledger.events import ModelCalled
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.collected import MESSAGE_NOT_RECORDED
from turnledger.pipeline.sessions import list_sessions

FIXTURE = Path(__file__).parents[2] / "fixtures" / "otlp" / "litellm-1.110.json"

ROUND_TRIP = [
    ("user", "Weather in Paris?", (), ()),
    ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
    ("tool", "", (), (("call_w1", "18C", False),)),
    ("assistant", "18C in Paris.", (), ()),
]


def test_a_litellm_run_records_each_call_s_conversation(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second call's session is the round trip, its result the tool's.
    The first call's answer asked for the tool, but LiteLLM sent that message
    without parts (the call only in ``gen_ai.completion.0.function_call.*``,
    without its id): it is not recorded as an empty message, and audit says
    its content is not there."""
    assert main(["--db", ledger.url, "import", str(FIXTURE), "--json"]) == 0
    capsys.readouterr()
    histories = {s.key: said_in(ledger, s.key) for s in list_sessions(ledger.store)}
    first, second = sorted(histories, key=lambda key: len(histories[key]))
    assert histories[first] == [("user", "Weather in Paris?", (), ())]
    assert histories[second] == ROUND_TRIP
    assert audit_json(ledger, first, capsys)["skipped"] == {MESSAGE_NOT_RECORDED: 1}
    assert audit_json(ledger, second, capsys)["skipped"] == {}
    calls = [
        r.event for r in ledger.store.iter_all() if isinstance(r.event, ModelCalled)
    ]
    assert sorted((c.input_tokens, c.output_tokens) for c in calls) == [
        (50, 10),
        (70, 6),
    ]


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "look", "arguments": "{}"},
}


def _said(ledger: Ledger, inputs: list[object]) -> list[tuple[object, ...]]:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [text("Done.")]}]
        ),
    }
    span = json_span(
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba90201", attrs, start=1
    )
    Recorder(ledger.store).record(
        decode_json(json.dumps(json_request([span])).encode())
    )
    (session,) = list_sessions(ledger.store)
    return said_in(ledger, session.key)


def test_parts_say_first_and_the_openai_fields_only_what_they_do_not(
    ledger: Ledger,
) -> None:
    """A tool call part and a result part are the message's; the OpenAI fields
    beside them add nothing (no call twice); a text-only tool message with
    no ``tool_call_id`` stays as before."""
    part = {"type": "tool_call", "id": "call_1", "name": "look", "arguments": {}}
    response = {"type": "tool_call_response", "id": "call_1", "response": "sky"}
    said = _said(
        ledger,
        [
            {"role": "user", "parts": [text("Look.")]},
            {"role": "assistant", "parts": [part], "tool_calls": [CALL]},
            {"role": "tool", "parts": [response], "tool_call_id": "call_1"},
        ],
    )
    assert said == [
        ("user", "Look.", (), ()),
        ("assistant", "", (("call_1", "look", {}),), ()),
        ("tool", "", (), (("call_1", "sky", False),)),
        ("assistant", "Done.", (), ()),
    ]


@pytest.mark.parametrize("batches", [1, 2])
def test_an_answer_without_parts_leaves_its_message_to_the_next_input(
    ledger: Ledger, batches: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """In one trace, the answer sent without parts is counted, and the next
    call's input records the message with its calls, once."""
    user = {"role": "user", "parts": [text("Weather in Paris?")]}
    asked = {"role": "assistant", "parts": [], "tool_calls": [CALL]}
    result = {"role": "tool", "parts": [text("18C")], "tool_call_id": "call_1"}
    first = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([user]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [], "finish_reason": "tool_calls"}]
        ),
    }
    second = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([user, asked, result]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [text("18C in Paris.")]}]
        ),
    }
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    spans = [
        json_span(trace, "00f067aa0ba90201", first, start=1),
        json_span(trace, "00f067aa0ba90202", second, start=2),
    ]
    recorder = Recorder(ledger.store)
    for part in [spans] if batches == 1 else [[spans[0]], [spans[1]]]:
        recorder.record(decode_json(json.dumps(json_request(part)).encode()))
    assert said_in(ledger, trace) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "", (("call_1", "look", {}),), ()),
        ("tool", "", (), (("call_1", "18C", False),)),
        ("assistant", "18C in Paris.", (), ()),
    ]
    assert audit_json(ledger, trace, capsys)["skipped"] == {MESSAGE_NOT_RECORDED: 1}
