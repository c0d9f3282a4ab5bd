"""A turn is validated whole before any of it is committed (issue #26, item 5).

A model response the ledger cannot store or a reader cannot parse (50,000-deep
JSON in a call's arguments, a lone surrogate, a control character in a call id,
more than ``[runtime] max_response_chars``) fails its turn with ``turn.failed``
(``unrecordable_response``, a bounded reason) and nothing of the response is
appended; the session stays exportable to every format and re-runnable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pipeline.fake_llm_server import FakeLLMServer, Reply, openai_text
from turnledger.ledger.events import (
    AssistantMessage,
    ModelCalled,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.anthropic import AnthropicProvider
from turnledger.pipeline.providers.base import ChatResponse, ToolSpec, Usage
from turnledger.pipeline.providers.openai_compatible import OpenAICompatibleProvider
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import load_history
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall
from turnledger.policies.recordable import (
    MAX_ARGUMENT_DEPTH,
    json_depth,
    response_problem,
)
from turnledger.projections.history.read import provider_messages

DEEP = "[" * 50_000 + "]" * 50_000
"""The issue's 50,000-deep JSON."""

AGENT, KEY = "ops", "s1"


class EchoTool:
    """Returns its ``text`` argument (a fake implementing the Tool Protocol)."""

    spec = ToolSpec(name="echo", description="echo", parameters={"type": "object"})

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        del context
        return ToolOutcome(output=str(arguments.get("text", "")))


def events(store) -> list[Any]:
    return [r.event for r in store.read_stream(session_stream_id(AGENT, KEY))]


def assert_whole_turns(store) -> None:
    """Every turn ended once; a failed unrecordable turn holds no response."""
    recorded = events(store)
    started = [e.turn_id for e in recorded if isinstance(e, TurnStarted)]
    ends = [e for e in recorded if isinstance(e, TurnCompleted | TurnFailed)]
    assert sorted(e.turn_id for e in ends) == sorted(started)
    for end in ends:
        # Each model call's response is recorded, except the one that failed
        # its turn as unrecordable: nothing of that one is.
        turn = [e for e in recorded if getattr(e, "turn_id", None) == end.turn_id]
        answered = sum(isinstance(e, AssistantMessage) for e in turn)
        called = sum(isinstance(e, ModelCalled) and e.success for e in turn)
        unrecordable = isinstance(end, TurnFailed) and (
            end.kind == "unrecordable_response"
        )
        assert called == answered + unrecordable, turn
    calls = {
        c.id for e in recorded if isinstance(e, AssistantMessage) for c in e.tool_calls
    }
    results = {e.call_id for e in recorded if isinstance(e, ToolResultRecorded)}
    assert calls == results


def assert_exportable(store) -> None:
    state = load_history(store, session_stream_id(AGENT, KEY))
    prepared = prepare_history(provider_messages(state), ExportOptions())
    for fmt in EXPORT_FORMATS:
        json.dumps(render(prepared.messages, fmt))


@pytest.fixture(name="world")
def _world(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    path = str(tmp_path / "l.db")
    store = open_store(path)
    yield store, path
    store.close()


async def run_turns(store, path, tmp_path, provider, inputs, **runtime: int):
    lines = "".join(f"{k} = {v}\n" for k, v in runtime.items())
    config = parse_config(
        f'data_dir = "{tmp_path / "data"}"\n[runtime]\nmax_tool_iterations = 3\n'
        + lines
    )
    runtime_ = bootstrap(
        config,
        provider=provider,
        store=store,
        ledger_url=path,
        tools={"echo": EchoTool()},
    )
    try:
        return [await runtime_.engine.run_turn(AGENT, KEY, text) for text in inputs]
    finally:
        await runtime_.aclose()


# -- the policy -----------------------------------------------------------------


def test_the_issue_response_is_named_without_its_payload():
    """The reason names the field and the depth, never the text."""
    problem = response_problem("", [ToolCall(id="c1", name="echo", arguments=DEEP)])
    assert problem == (
        f"tool_calls[0].arguments: expected JSON nested at most {MAX_ARGUMENT_DEPTH}"
        " levels deep, found 50000 levels"
    )
    assert response_problem("ok", [ToolCall(id="c1", name="e", arguments="{}")]) is None


@pytest.mark.parametrize(
    ("text", "call", "max_chars", "expected"),
    [
        (
            "a\ud800b",
            None,
            0,
            (
                "text: expected text encodable as UTF-8, found the lone"
                " surrogate U+D800 at character 1"
            ),
        ),
        (
            "",
            ToolCall(id="c\n1", name="e", arguments="{}"),
            0,
            "tool_calls[0].id: expected no control characters, found U+000A at character 1",
        ),
        (
            "",
            ToolCall(id="c1", name="e\udfff", arguments="{}"),
            0,
            (
                "tool_calls[0].name: expected text encodable as UTF-8, found the lone"
                " surrogate U+DFFF at character 1"
            ),
        ),
        (
            "",
            ToolCall(id="c1", name="e", arguments='{"a": "\ud83d"}'),
            0,
            (
                "tool_calls[0].arguments: expected text encodable as UTF-8, found the lone"
                " surrogate U+D83D at character 7"
            ),
        ),
        (
            "x" * 11,
            None,
            10,
            "response: expected at most 10 characters (text and tool calls), found 11",
        ),
    ],
)
def test_each_problem_is_named(text, call, max_chars, expected):
    calls = [call] if call is not None else []
    assert response_problem(text, calls, max_chars=max_chars) == expected


def test_depth_is_counted_outside_strings():
    """Brackets inside JSON strings do not count; invalid JSON as a parser sees it."""
    inside = json.dumps({"a": "[" * 5000})
    assert json_depth(inside) == 1
    assert response_problem("", [ToolCall(id="c", name="e", arguments=inside)]) is None
    assert json_depth('{"a": [[1], {"b": [2]}]}') == 4
    assert json_depth("[" * 300) == 300  # never closed: still that deep to a parser
    # An open string runs to the end: a parser never nests into its brackets.
    assert json_depth('"unterminated [[[') == 0
    assert (
        json_depth('["a\\\\", [1]]') == 2
    )  # an escaped backslash, then the closing quote
    assert (
        json_depth('"' + '\\"' * 100_000 + "[" * 300) == 0
    )  # escaped quotes: one string left open


nested = st.recursive(
    st.none() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=30,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(value=nested, wrap=st.integers(0, 3))
def test_json_depth_is_the_nesting_depth_of_valid_json(value, wrap):
    """Property: for valid JSON the counted depth is the exact nesting depth."""
    for _ in range(wrap):
        value = [value]
    assert json_depth(json.dumps(value)) == _depth(value)


text_parts = st.sampled_from(["a", "\ud800", "\udc00", "\n", "{", "é", '"', "\\"])
texts = st.lists(text_parts, max_size=8).map("".join)


@given(text=texts, ids=st.lists(texts, max_size=3), args=st.lists(texts, max_size=3))
def test_a_response_passing_the_check_is_stored_and_parsed(text, ids, args):
    """Property: no problem named => the codec stores it and a parser reads it."""
    calls = [
        ToolCall(id=f"c{i}{call_id}", name="echo", arguments=arguments)
        for i, (call_id, arguments) in enumerate(zip(ids, args, strict=False))
    ]
    if response_problem(text, calls) is not None:
        return
    message = AssistantMessage(
        turn_id="t1",
        text=text,
        tool_calls=tuple(
            ToolCallRecord(id=c.id, name=c.name, arguments=c.arguments) for c in calls
        ),
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "l.db"))
        try:
            store.encode(session_stream_id("a", "b"), [message], 1, 0)
        finally:
            store.close()
    for call in calls:
        # Invalid JSON is recorded as it came (a failed tool result); never
        # a RecursionError.
        with contextlib.suppress(ValueError):
            json.loads(call.arguments)


# -- the engine -----------------------------------------------------------------


def unrecordable_responses() -> st.SearchStrategy[ChatResponse]:
    deep = st.integers(MAX_ARGUMENT_DEPTH + 1, 3_000).map(lambda n: "[" * n + "]" * n)
    bad_text = st.sampled_from(["\ud800", "a\udfffb"])
    call = st.builds(
        ToolCall,
        id=st.sampled_from(["c1", "c\x00", "c\x1b[0m"]),
        name=st.sampled_from(["echo", "ech\ud800"]),
        arguments=st.one_of(deep, bad_text, st.just('{"text": "x"}')),
    )
    return st.builds(
        ChatResponse,
        text=st.one_of(bad_text, st.just("fine"), st.just("y" * 300)),
        tool_calls=st.lists(call, max_size=2).map(tuple),
        usage=st.just(Usage(input_tokens=10, output_tokens=5)),
    )


def recordable_responses() -> st.SearchStrategy[ChatResponse]:
    return st.sampled_from(
        [
            ChatResponse(text="done"),
            ChatResponse(
                tool_calls=(ToolCall(id="ok1", name="echo", arguments='{"text": "a"}'),)
            ),
        ]
    )


@settings(max_examples=25, deadline=None)
@given(
    script=st.lists(
        st.one_of(unrecordable_responses(), recordable_responses()),
        min_size=1,
        max_size=6,
    )
)
def test_the_ledger_never_holds_half_a_turn(script):
    """Property: whatever the model answers, each turn is recorded whole or failed."""
    with tempfile.TemporaryDirectory() as tmp:
        _check_turns(Path(tmp), script)


def _check_turns(tmp_path: Path, script: list[ChatResponse]) -> None:
    path = str(tmp_path / "l.db")
    store = open_store(path)
    try:
        # Enough steps for every turn: each turn ends at the first answer
        # without calls, a failure, or the iteration limit.
        provider = ScriptedProvider([*script, *[ChatResponse(text="end")] * 20])
        outcomes = asyncio.run(
            run_turns(
                store,
                path,
                tmp_path,
                provider,
                ["one", "two", "three"],
                max_response_chars=200,
            )
        )
        assert_whole_turns(store)
        assert_exportable(store)
        failed = [e for e in events(store) if isinstance(e, TurnFailed)]
        assert [o.failure for o in outcomes if not o.completed] == [
            e.kind for e in failed
        ]
        for event in failed:
            assert len(event.error) <= 200
            assert "\ud800" not in event.error
            assert "[[[[" not in event.error
    finally:
        store.close()


async def test_the_model_call_is_recorded_with_the_failure(world, tmp_path):
    """The call happened (usage, cost): its model.called goes out with turn.failed."""
    store, path = world
    provider = ScriptedProvider(
        [
            ChatResponse(
                text="calling",
                tool_calls=(ToolCall(id="c1", name="echo", arguments=DEEP),),
                usage=Usage(input_tokens=10, output_tokens=5),
            )
        ]
    )
    [outcome] = await run_turns(store, path, tmp_path, provider, ["hi"])
    assert (outcome.completed, outcome.failure) == (False, "unrecordable_response")
    tail = [type(e).__name__ for e in events(store)][-3:]
    assert tail == ["PromptAssembled", "ModelCalled", "TurnFailed"]
    failed = events(store)[-1]
    assert failed.kind == "unrecordable_response"
    assert failed.error.startswith("tool_calls[0].arguments: expected JSON nested")
    called = events(store)[-2]
    assert isinstance(called, ModelCalled)
    assert (called.input_tokens, called.output_tokens, called.success) == (10, 5, True)
    assert_whole_turns(store)
    assert_exportable(store)


async def test_a_model_name_that_cannot_be_recorded_is_the_configured_one(
    world, tmp_path
):
    store, path = world
    provider = ScriptedProvider([ChatResponse(text="ok", model="m\ud800\n")])
    [outcome] = await run_turns(store, path, tmp_path, provider, ["hi"])
    assert outcome.completed
    called = next(e for e in events(store) if isinstance(e, ModelCalled))
    assert called.model == provider.model


async def test_unrecordable_tool_output_is_a_failed_result(world, tmp_path):
    """A tool returning a lone surrogate: a failed result naming it, a whole turn."""

    class Surrogate(EchoTool):
        async def run(self, arguments, context):
            del arguments, context
            return ToolOutcome(output="bad \ud800 text")

    config = parse_config(f'data_dir = "{tmp_path / "data"}"\n')
    store, path = world
    memory = MemoryService(store, config, ledger_url=path)
    provider = ScriptedProvider(
        [
            ChatResponse(tool_calls=(ToolCall(id="c1", name="echo", arguments="{}"),)),
            ChatResponse(text="done"),
        ]
    )
    runtime = bootstrap(
        config,
        provider=provider,
        store=store,
        ledger_url=path,
        tools={"echo": Surrogate()},
    )
    try:
        outcome = await runtime.engine.run_turn(AGENT, KEY, "go")
    finally:
        await runtime.aclose()
        memory.close()
    assert outcome.completed
    result = next(e for e in events(store) if isinstance(e, ToolResultRecorded))
    assert not result.success
    assert result.error == (
        "Tool echo returned unrecordable text: output: expected text encodable as"
        " UTF-8, found the lone surrogate U+D800 at character 4"
    )
    assert_whole_turns(store)


# -- the issue's case, end to end -----------------------------------------------


def test_run_of_a_deep_json_turn_then_export_and_rerun(tmp_path, capsys, monkeypatch):
    """`run` exits 1 (a turn failed), every export works, the re-run is identical."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "deep.json"
    steps = [
        {
            "text": "calling",
            "tool_calls": [{"name": "memory_recall", "arguments": DEEP}],
        },
        {"text": "never reached"},
    ]
    script.write_text(json.dumps({"steps": steps}))
    db = str(tmp_path / "l.db")
    code = main(["--db", db, "run", str(script), "--turn", "hi", "--session", KEY])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "failed: unrecordable_response]" in out
    assert "Traceback" not in err
    store = open_store(db)
    try:
        kinds = [
            type(r.event).__name__
            for r in store.read_stream(session_stream_id("default", KEY))
        ]
    finally:
        store.close()
    assert "AssistantMessage" not in kinds
    assert kinds[-1] == "TurnFailed"
    for fmt in EXPORT_FORMATS:
        code = main(["--db", db, "export", KEY, "--format", fmt])
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), fmt
        json.loads(out)
    code = main(["--db", db, "replay", KEY, "--rerun", "--check"])
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert "identical to the recorded session" in out


def _anthropic_deep_body() -> bytes:
    deep = b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    return (
        b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-t",'
        b' "content": [{"type": "tool_use", "id": "toolu_1", "name": "echo",'
        b' "input": ' + deep + b'}], "stop_reason": "tool_use",'
        b' "usage": {"input_tokens": 5, "output_tokens": 5}}'
    )


def _openai_deep_reply() -> Reply:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-t",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "echo", "arguments": DEEP},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }
    return Reply(body=body)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_provider_answering_50000_deep_json(world, tmp_path, wire):
    """Over real HTTP: the turn fails whole, the next turn runs, every export works."""
    store, path = world
    with FakeLLMServer() as server:
        if wire == "openai":
            server.queue_openai(_openai_deep_reply(), openai_text("fine"))
            provider: Any = OpenAICompatibleProvider(
                server.openai_base_url, "gpt-t", api_key="k", timeout=30.0
            )
            expected = "unrecordable_response"
        else:
            server.queue_anthropic(
                Reply(body=_anthropic_deep_body()),
                Reply(
                    body={
                        "id": "msg_2",
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "text", "text": "fine"}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 5, "output_tokens": 5},
                    }
                ),
            )
            provider = AnthropicProvider(
                server.url, model="claude-t", api_key="k", timeout=30.0
            )
            expected = "provider_error"  # the body itself does not decode
        try:
            outcomes = await run_turns(store, path, tmp_path, provider, ["one", "two"])
        finally:
            await provider.aclose()  # its HTTP connections, not left to the collector
        server.assert_drained()
    assert [(o.completed, o.failure) for o in outcomes] == [
        (False, expected),
        (True, None),
    ]
    failed = next(e for e in events(store) if isinstance(e, TurnFailed))
    assert len(failed.error) <= 200
    if wire == "anthropic":
        assert "nested deeper than the interpreter's recursion limit" in failed.error
    assert_whole_turns(store)
    assert_exportable(store)
    assert msgspec.json.encode(list(events(store)))


def test_a_later_iteration_fails_whole_and_reruns_identical(
    tmp_path, capsys, monkeypatch
):
    """The first call's step stays recorded; the deep one fails; the next turn runs."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "later.json"
    steps = [
        {"text": "first", "tool_calls": [{"name": "memory_recall", "arguments": {}}]},
        {"text": "then", "tool_calls": [{"name": "memory_recall", "arguments": DEEP}]},
        {"text": "the next turn's answer"},
    ]
    script.write_text(json.dumps({"steps": steps}))
    db = str(tmp_path / "l.db")
    argv = ["--db", db, "run", str(script), "--turn", "one", "--turn", "two"]
    code = main([*argv, "--session", KEY])
    out, _ = capsys.readouterr()
    assert code == 1
    assert out.splitlines()[1] == "the next turn's answer"
    store = open_store(db)
    try:
        recorded = [
            r.event for r in store.read_stream(session_stream_id("default", KEY))
        ]
    finally:
        store.close()
    answers = [e for e in recorded if isinstance(e, AssistantMessage)]
    assert [a.text for a in answers] == ["first", "the next turn's answer"]
    code = main(["--db", db, "replay", KEY, "--rerun", "--check"])
    out, _ = capsys.readouterr()
    assert code == 0, out
