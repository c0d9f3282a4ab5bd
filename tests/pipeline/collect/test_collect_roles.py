"""Each message recorded as said by whom it was said: roles, and results without ids.

Hand-made spans in the GenAI current form and in OpenLLMetry's and
OpenInference's indexed attributes: a ``developer`` message is the system
instructions (OpenAI's newer name for them), a ``tool`` or legacy ``function``
message without a call id is a tool's result (never the user's words), and a
result without an id the inputs repeat call after call is recorded once.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pipeline.collect.conftest import Ledger, said_in
from tests.pipeline.collect.spans import chat_attributes, json_request, json_span
from turnledger.ledger.events import SystemPromptSet, ToolResultRecorded
from turnledger.ledger.store import open_store
from turnledger.pipeline.collect import Recorder, decode_json
from turnledger.pipeline.sessions import list_sessions


def text(role: str, words: str) -> dict[str, object]:
    """A message of one text part, in the current form."""
    return {"role": role, "parts": [{"type": "text", "content": words}]}


QUESTION = text("user", "Weather in Paris?")
ANSWER = text("assistant", "18C in Paris.")


def _record(ledger: Ledger, calls: list[Mapping[str, object]]) -> str:
    """Each call a span of one trace, in order, one batch each; the session's key."""
    trace = uuid.uuid4().hex
    recorder = Recorder(ledger.store)
    for n, attrs in enumerate(calls, start=1):
        span = json_span(trace, f"00f067aa0ba902{n:02x}", attrs, start=n)
        recorder.record(decode_json(json.dumps(json_request([span])).encode()))
    return trace


def _system(ledger: Ledger) -> list[str]:
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    return [e.text for e in events if isinstance(e, SystemPromptSet)]


def _results(ledger: Ledger) -> list[tuple[str, str, str]]:
    (session,) = list_sessions(ledger.store)
    events = [r.event for r in ledger.store.read_stream(session.stream_id)]
    return [
        (e.call_id, e.tool, e.output)
        for e in events
        if isinstance(e, ToolResultRecorded)
    ]


def test_a_developer_message_is_the_system_instructions(ledger: Ledger) -> None:
    developer = text("developer", "Be terse.")
    key = _record(
        ledger, [chat_attributes(inputs=[developer, QUESTION], outputs=[ANSWER])]
    )
    assert _system(ledger) == ["Be terse."]
    assert said_in(ledger, key) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "18C in Paris.", (), ()),
    ]


ASKED = {
    "role": "assistant",
    "parts": [
        {
            "type": "tool_call",
            "id": "call_w1",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
    ],
}
"""The model's call, with its id."""

RESULTS = {
    "tool message of text": text("tool", "18C"),
    "function message": text("function", "18C"),
    "response part without an id": {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "", "response": "18C"}],
    },
}
"""A tool's result sent without its call's id, as the instrumentations send it
(openai-v2 writes a ``function`` message as text parts; OpenLLMetry a ``tool``
message without ``tool_call_id`` as a response part of an empty id)."""


@pytest.mark.parametrize("result", sorted(RESULTS))
def test_a_tool_result_without_an_id_is_recorded_once_as_a_result(
    ledger: Ledger, result: str
) -> None:
    """The next calls' inputs repeat it: it is still the one result it was."""
    sent = RESULTS[result]
    then = text("user", "And in Lyon?")
    key = _record(
        ledger,
        [
            chat_attributes(inputs=[QUESTION], outputs=[ASKED]),
            chat_attributes(inputs=[QUESTION, ASKED, sent], outputs=[ANSWER]),
            chat_attributes(
                inputs=[QUESTION, ASKED, sent, ANSWER, then], outputs=[ANSWER]
            ),
        ],
    )
    assert _results(ledger) == [("unknown", "unknown", "18C")]
    assert said_in(ledger, key) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("unknown", "18C", False),)),
        ("assistant", "18C in Paris.", (), ()),
        ("user", "And in Lyon?", (), ()),
        ("assistant", "18C in Paris.", (), ()),
    ]


def test_the_same_result_again_is_recorded_again(ledger: Ledger) -> None:
    """Two calls answered alike: two results, each once."""
    sent = RESULTS["tool message of text"]
    again = {**ASKED, "parts": [{**ASKED["parts"][0], "id": "call_w2"}]}
    history = [QUESTION, ASKED, sent, ANSWER, text("user", "Again?"), again, sent]
    _record(
        ledger,
        [
            chat_attributes(inputs=history[:3], outputs=[ANSWER]),
            chat_attributes(inputs=history, outputs=[ANSWER]),
            chat_attributes(inputs=[*history, ANSWER], outputs=[ANSWER]),
        ],
    )
    assert _results(ledger) == [("unknown", "unknown", "18C")] * 2


def _indexed(prefix: str, rows: list[Mapping[str, str]]) -> dict[str, object]:
    """Indexed message attributes (``prefix.N.field``), OpenLLMetry's or
    OpenInference's."""
    return {
        f"{prefix}.{n}.{field}": value
        for n, row in enumerate(rows)
        for field, value in row.items()
    }


LEGACY_ROWS = [
    {"role": "developer", "content": "Be terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "function", "name": "get_weather", "content": "18C"},
]
"""A legacy function calling conversation's input, flattened."""


FORMS = {
    "openllmetry": {
        "gen_ai.operation.name": "chat",
        **_indexed("gen_ai.prompt", LEGACY_ROWS),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "18C in Paris.",
    },
    "openinference": {
        "openinference.span.kind": "LLM",
        **_indexed(
            "llm.input_messages",
            [{f"message.{k}": v for k, v in row.items()} for row in LEGACY_ROWS],
        ),
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "18C in Paris.",
    },
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_indexed_forms_read_developer_and_function_messages(
    ledger: Ledger, form: str
) -> None:
    """The function's result names its function; the developer's words are the
    system instructions."""
    key = _record(ledger, [FORMS[form]])
    assert _system(ledger) == ["Be terse."]
    assert _results(ledger) == [("unknown", "get_weather", "18C")]
    assert said_in(ledger, key) == [
        ("user", "Weather in Paris?", (), ()),
        ("tool", "", (), (("unknown", "18C", False),)),
        ("assistant", "18C in Paris.", (), ()),
    ]


PARTLESS = {"role": "assistant", "parts": []}
"""An assistant message its instrumentation wrote without parts (a legacy
function call, a call LiteLLM cannot write)."""


def test_an_assistant_message_without_parts_stands_for_the_one_held(
    ledger: Ledger,
) -> None:
    """The session holds the call the first answer made; the next input sends
    that message without parts: no empty message is added after it. One the
    session does not hold is recorded (empty, and counted)."""
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_w1", "response": "18C"}],
    }
    then = text("user", "And in Lyon?")
    key = _record(
        ledger,
        [
            chat_attributes(inputs=[QUESTION], outputs=[ASKED]),
            chat_attributes(inputs=[QUESTION, PARTLESS, result], outputs=[ANSWER]),
            chat_attributes(
                inputs=[QUESTION, PARTLESS, result, ANSWER, then, PARTLESS],
                outputs=[ANSWER],
            ),
        ],
    )
    assert said_in(ledger, key) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("call_w1", "18C", False),)),
        ("assistant", "18C in Paris.", (), ()),
        ("user", "And in Lyon?", (), ()),
        ("assistant", "", (), ()),
        ("assistant", "18C in Paris.", (), ()),
    ]


def _tool_run(arguments: str, result: str) -> dict[str, object]:
    """A tool span without the call's id (its name, arguments and result)."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": arguments,
        "gen_ai.tool.call.result": result,
    }


def _asked(*calls: tuple[str, str]) -> dict[str, object]:
    """The model's message asking for ``get_weather`` (id, city) calls."""
    return {
        "role": "assistant",
        "parts": [
            {
                "type": "tool_call",
                "id": call_id,
                "name": "get_weather",
                "arguments": {"city": city},
            }
            for call_id, city in calls
        ],
    }


def _tool_said(call_id: str, content: str) -> dict[str, object]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": content}],
    }


@pytest.mark.parametrize("restart", [False, True], ids=["one-recorder", "restarted"])
@pytest.mark.parametrize("batches", [1, 3])
def test_a_run_before_its_call_is_known_is_that_calls_result(
    ledger: Ledger, batches: int, *, restart: bool
) -> None:
    """The model's call span holds no answer, so the tool's span (without the
    call's id) finds no call: its result is recorded under the span's id. The
    next call's input brings the model's message: the one run of its tool and
    arguments is its result, placed after it (the input's copy of the result
    is not recorded again)."""
    trace = uuid.uuid4().hex
    asked = _asked(("call_w1", "Paris"))
    spans = [
        json_span(
            trace, "00f067aa0ba90201", chat_attributes(inputs=[QUESTION]), start=1
        ),
        json_span(
            trace, "00f067aa0ba90202", _tool_run('{"city": "Paris"}', "18C"), start=2
        ),
        json_span(
            trace,
            "00f067aa0ba90203",
            chat_attributes(
                inputs=[QUESTION, asked, _tool_said("call_w1", "18C")],
                outputs=[ANSWER],
            ),
            start=3,
        ),
    ]
    recorder = Recorder(ledger.store)
    for batch in [spans] if batches == 1 else [[s] for s in spans]:
        if restart:
            recorder = Recorder(ledger.store)
        recorder.record(decode_json(json.dumps(json_request(batch)).encode()))
    assert said_in(ledger, trace) == [
        ("user", "Weather in Paris?", (), ()),
        ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
        ("tool", "", (), (("call_w1", "18C", False),)),
        ("assistant", "18C in Paris.", (), ()),
    ]
    assert [r[0] for r in _results(ledger)] == ["otlp-00f067aa0ba90202", "call_w1"]


@pytest.mark.parametrize(
    ("runs", "calls"),
    [
        ((("Paris", "18C"), ("Paris", "19C")), (("call_w1", "Paris"),)),
        ((("Paris", "18C"),), (("call_w1", "Paris"), ("call_w2", "Paris"))),
        ((("Rome", "9C"),), (("call_w1", "Paris"),)),
    ],
    ids=["two-runs-alike", "two-calls-alike", "other-arguments"],
)
def test_a_run_is_not_guessed_to_be_a_calls(
    ledger: Ledger,
    runs: tuple[tuple[str, str], ...],
    calls: tuple[tuple[str, str], ...],
) -> None:
    """Two runs alike, two calls alike, or none alike: the runs keep their
    spans' ids, and the calls' results are those the input brings."""
    trace = uuid.uuid4().hex
    spans = [
        json_span(
            trace, "00f067aa0ba90201", chat_attributes(inputs=[QUESTION]), start=1
        ),
        *(
            json_span(
                trace,
                f"00f067aa0ba9021{n}",
                _tool_run(json.dumps({"city": city}), result),
                start=2 + n,
            )
            for n, (city, result) in enumerate(runs)
        ),
    ]
    sent = [_tool_said(call_id, "sent") for call_id, _city in calls]
    then = chat_attributes(inputs=[QUESTION, _asked(*calls), *sent], outputs=[ANSWER])
    spans.append(json_span(trace, "00f067aa0ba90209", then, start=9))
    Recorder(ledger.store).record(decode_json(json.dumps(json_request(spans)).encode()))
    recorded = _results(ledger)
    assert [r[0] for r in recorded] == [
        *(f"otlp-00f067aa0ba9021{n}" for n in range(len(runs))),
        *(call_id for call_id, _city in calls),
    ]
    assert [r[2] for r in recorded[len(runs) :]] == ["sent"] * len(calls)


_ROLES = ("system", "developer", "user", "assistant", "model", "tool", "function")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_ROLES), st.booleans()), min_size=1, max_size=8)
)
def test_every_message_is_recorded_as_said_by_its_role(
    sent: list[tuple[str, bool]],
) -> None:
    """Whatever the roles, in whatever order, a message is the system prompt,
    the user's, the model's or a tool's result by its role alone: each text
    recorded once, where its role says (a tool's text sent as a response
    part without an id, or as a text part)."""
    messages: list[dict[str, object]] = []
    for n, (role, as_response) in enumerate(sent):
        words = f"{role} {n}"
        if role in ("tool", "function") and as_response:
            part = {"type": "tool_call_response", "id": "", "response": words}
            messages.append({"role": role, "parts": [part]})
        else:
            messages.append(text(role, words))
    expected = {
        "system": [w for r, w in _words(sent) if r in ("system", "developer")],
        "user": [w for r, w in _words(sent) if r == "user"],
        "assistant": [w for r, w in _words(sent) if r in ("assistant", "model")],
        "tool": [w for r, w in _words(sent) if r in ("tool", "function")],
    }
    with tempfile.TemporaryDirectory() as folder:
        url = str(Path(folder) / "ledger.db")
        with open_store(url) as store:
            ledger = Ledger(store, url)
            key = _record(ledger, [chat_attributes(inputs=messages)])
            system = _system(ledger)
            said = said_in(ledger, key)
    assert system == (["\n".join(expected["system"])] if expected["system"] else [])
    found = {
        "user": [m[1] for m in said if m[0] == "user"],
        "assistant": [m[1] for m in said if m[0] == "assistant"],
        "tool": [r[1] for m in said for r in m[3]],
    }
    assert found == {k: v for k, v in expected.items() if k != "system"}


def _words(sent: list[tuple[str, bool]]) -> list[tuple[str, str]]:
    return [(role, f"{role} {n}") for n, (role, _) in enumerate(sent)]
