"""The turn engine against a real ledger, with fake providers and tools (our Protocols)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from turnledger.ledger.events import (
    AssistantMessage,
    HistoryTrimmed,
    MemoryRecalled,
    ModelCalled,
    PromptAssembled,
    ToolCallRecord,
    ToolResultRecorded,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.engine import DEFAULT_SYSTEM_PROMPT, TurnEngine
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.sessions import load_history
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.history.read import visible_messages

Step = ChatResponse | ProviderError | Callable[[ChatRequest], ChatResponse]


class FakeProvider:
    """Plays steps in order and keeps every request (implements the Provider Protocol)."""

    name = "fake"
    model = "fake-1"

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        if callable(step):
            return step(request)
        return step

    async def aclose(self) -> None:
        pass


class EchoTool:
    """Returns its argument; fails when asked to."""

    spec = ToolSpec(name="echo", description="echo text", parameters={"type": "object"})

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        self.seen.append(arguments)
        if arguments.get("fail"):
            return ToolOutcome(success=False, error="it failed")
        return ToolOutcome(
            output=str(arguments.get("text", "")) * int(arguments.get("times", 1))
        )


def call(i: int, **args: Any) -> ToolCall:
    return ToolCall(id=f"c{i}", name="echo", arguments=json.dumps(args))


def answer(text: str = "done") -> ChatResponse:
    return ChatResponse(
        text=text,
        usage=Usage(input_tokens=100, output_tokens=10, cached_input_tokens=40),
    )


@pytest.fixture(name="world")
async def _world(tmp_path):
    config = parse_config(
        f'data_dir = "{tmp_path / "data"}"\n'
        "[runtime]\nmax_tool_iterations = 3\ncontext_budget_tokens = 0\n"
        "[pricing.fake-1]\ninput_per_million = 1000\noutput_per_million = 2000\n"
    )
    path = str(tmp_path / "l.db")
    store = open_store(path)
    memory = MemoryService(store, config, ledger_url=path)
    runtimes = []

    def engine(
        steps, *, tools=None, cfg=None, system_prompt=DEFAULT_SYSTEM_PROMPT
    ) -> tuple[TurnEngine, FakeProvider]:
        provider = FakeProvider(steps)
        runtime = bootstrap(
            cfg or config,
            provider=provider,
            store=store,
            ledger_url=path,
            tools=tools if tools is not None else {"echo": EchoTool()},
            system_prompt=system_prompt,
        )
        runtimes.append(runtime)
        return runtime.engine, provider

    yield engine, store, memory
    for runtime in runtimes:
        await runtime.aclose()
    memory.close()
    store.close()


def events_of(store, agent="ops", key="s1"):
    return [r.event for r in store.read_stream(session_stream_id(agent, key))]


async def test_simple_turn_records_every_step(world):
    """A turn without tools: started, recalled, prompt, model, answer, completed."""
    engine_for, store, _ = world
    engine, provider = engine_for([answer("hello there")])
    outcome = await engine.run_turn("ops", "s1", "hi, who are you?")
    assert outcome.completed
    assert outcome.answer == "hello there"
    kinds = [type(e).__name__ for e in events_of(store)]
    assert kinds == [
        "SessionOpened",
        "TurnStarted",
        "MemoryRecalled",
        "SystemPromptSet",
        "PromptAssembled",
        "ModelCalled",
        "AssistantMessage",
        "TurnCompleted",
    ]
    model = next(e for e in events_of(store) if isinstance(e, ModelCalled))
    assert model.cost_usd == pytest.approx(100 * 1000 / 1e6 + 10 * 2000 / 1e6)
    assert provider.requests[0].messages[0].role == "system"
    assert provider.requests[0].messages[-1].text == "hi, who are you?"
    assert verify(store).ok


async def test_assistant_message_is_committed_before_tools_run(world):
    """Parallel calls: the assistant message is durable before the tool ran."""
    engine_for, store, _ = world
    seen_versions = []

    class Probe(EchoTool):
        async def run(self, arguments, context):
            seen_versions.append(
                context.store.stream_version(session_stream_id("ops", "s1"))
            )
            return await super().run(arguments, context)

    engine, provider = engine_for(
        [
            ChatResponse(tool_calls=(call(1, text="a"), call(2, text="b", fail=True))),
            answer(),
        ],
        tools={"echo": Probe()},
    )
    outcome = await engine.run_turn("ops", "s1", "do two things")
    assert outcome.completed
    events = events_of(store)
    assistant_index = next(
        i for i, e in enumerate(events) if isinstance(e, AssistantMessage)
    )
    assert all(v >= assistant_index + 1 for v in seen_versions)
    results = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.call_id, r.success) for r in results] == [("c1", True), ("c2", False)]
    assert results[1].error == "it failed"
    second = provider.requests[1].messages
    assert [m.role for m in second[-3:]] == ["assistant", "tool", "tool"]
    assert audit_pairing(
        visible_messages(load_history(store, session_stream_id("ops", "s1")))
    ).clean


async def test_tool_results_are_bounded_and_recorded_with_sizes(world, tmp_path):
    """A huge tool output is bounded before it reaches the ledger or the model."""
    engine_for, store, _ = world
    cfg = parse_config(
        f'data_dir = "{tmp_path}"\n[runtime]\nmax_tool_result_chars = 100\n'
    )
    engine, provider = engine_for(
        [ChatResponse(tool_calls=(call(1, text="x", times=5000),)), answer()], cfg=cfg
    )
    await engine.run_turn("ops", "s1", "make a big output")
    result = next(e for e in events_of(store) if isinstance(e, ToolResultRecorded))
    assert (result.original_chars, result.kept_chars, result.truncated) == (
        5000,
        100,
        True,
    )
    assert "[... 4900 characters truncated ...]" in result.output
    assert len(provider.requests[1].messages[-1].tool_results[0].content) < 200


async def test_context_overflow_trims_two_thirds_and_retries_once(world):
    """An overflow error triggers the reactive trim, recorded, then one retry."""
    engine_for, store, _ = world
    engine, _ = engine_for([answer("a1"), answer("a2"), answer("a3")])
    for i in range(3):
        await engine.run_turn("ops", "s1", f"question number {i} " * 20)
    engine, provider = engine_for(
        [
            ProviderError(
                "context_overflow", "maximum context length exceeded", status=400
            ),
            answer("ok"),
        ]
    )
    outcome = await engine.run_turn("ops", "s1", "one more")
    assert outcome.completed
    trims = [e for e in events_of(store) if isinstance(e, HistoryTrimmed)]
    assert [t.reason for t in trims] == ["context window exceeded"]
    assert trims[0].dropped_turns >= 1
    assert len(provider.requests[1].messages) < len(provider.requests[0].messages)
    failed_calls = [
        e for e in events_of(store) if isinstance(e, ModelCalled) and not e.success
    ]
    assert len(failed_calls) == 1
    assert "context_overflow" in failed_calls[0].error
    history = visible_messages(load_history(store, session_stream_id("ops", "s1")))
    assert history[0].kind == "breadcrumb"


async def test_provider_error_fails_the_turn_cleanly(world):
    """A non-overflow provider error is recorded and fails the turn; the key never shows."""
    engine_for, store, _ = world
    engine, _ = engine_for(
        [
            ProviderError(
                "rate_limit", "429 slow down sk-abcdefghijklmnopqrstuvwx", status=429
            )
        ]
    )
    outcome = await engine.run_turn("ops", "s1", "hello")
    assert (outcome.completed, outcome.failure) == (False, "provider_error")
    failed = next(e for e in events_of(store) if isinstance(e, TurnFailed))
    assert "abcdefghijklmnop" not in failed.error
    assert verify(store).ok


async def test_iteration_limit_leaves_no_dangling_call(world):
    """At the iteration limit every call has its result and the turn is failed."""
    engine_for, store, _ = world
    engine, _ = engine_for(
        [ChatResponse(tool_calls=(call(i, text="x"),)) for i in range(3)]
    )
    outcome = await engine.run_turn("ops", "s1", "loop forever please")
    assert (outcome.completed, outcome.failure, outcome.iterations) == (
        False,
        "iteration_limit",
        3,
    )
    messages = visible_messages(load_history(store, session_stream_id("ops", "s1")))
    assert audit_pairing(messages).clean
    assert isinstance(events_of(store)[-1], TurnFailed)


async def test_crash_mid_turn_is_repaired_by_the_next_turn(world):
    """A turn interrupted after its tool call is failed and repaired next time."""
    engine_for, store, _ = world
    engine, _ = engine_for([answer("first")])
    await engine.run_turn("ops", "s1", "first question")
    stream = session_stream_id("ops", "s1")
    store.append(
        stream,
        [
            TurnStarted(turn_id="dead", origin="interactive", user_input="crash now"),
            AssistantMessage(
                turn_id="dead", tool_calls=(ToolCallRecord(id="lost", name="echo"),)
            ),
        ],
        expected_version=store.stream_version(stream),
    )
    engine, provider = engine_for([answer("recovered")])
    outcome = await engine.run_turn("ops", "s1", "are you there?")
    assert outcome.completed
    events = events_of(store)
    synthesized = [
        e
        for e in events
        if isinstance(e, ToolResultRecorded) and e.provenance == "synthesized"
    ]
    assert [s.call_id for s in synthesized] == ["lost"]
    assert any(
        isinstance(e, TurnFailed) and e.turn_id == "dead" and e.kind == "interrupted"
        for e in events
    )
    assert audit_pairing(list(provider.requests[0].messages)).clean
    assert verify(store).ok


async def test_budget_trim_is_recorded_and_replay_checks_out(world, tmp_path):
    """A small context budget trims whole turns, records it, and replay re-derives digests."""
    engine_for, store, _ = world
    cfg = parse_config(
        f'data_dir = "{tmp_path}"\n[runtime]\ncontext_budget_tokens = 120\n'
    )
    engine, provider = engine_for(
        [answer(f"answer {i} " * 10) for i in range(4)], cfg=cfg
    )
    for i in range(4):
        await engine.run_turn("ops", "s1", f"question {i} " * 10)
    trims = [e for e in events_of(store) if isinstance(e, HistoryTrimmed)]
    assert trims
    assert all(t.reason == "context token budget exceeded" for t in trims)
    last = provider.requests[-1].messages
    assert sum(m.kind == "breadcrumb" for m in last) == 1
    report = replay_session(store, session_stream_id("ops", "s1"))
    assert report.ok
    assert report.checks


async def test_recall_is_injected_once_per_origin_rules(world, tmp_path):
    """Conversation memory reaches interactive turns only; cron never; sub_turn nothing."""
    engine_for, store, memory = world
    # Autosave off: an autosaved copy of the same question would otherwise take the
    # batch-max keyword score and push the fact under the 0.4 floor (reference
    # behaviour, noted in the closing note).
    cfg = parse_config(f'data_dir = "{tmp_path}"\n[memory]\nautosave = false\n')
    memory.store_entry(
        "ops", "deploy_fact", "deploys happen on fridays", category="core"
    )
    memory.store_entry(
        "ops",
        "chat_note",
        "when deploys happen was discussed here",
        category="conversation",
        session="s1",
    )
    for origin, expect_core, expect_chat in (
        ("interactive", True, True),
        ("cron", True, False),
        ("sub_turn", False, False),
    ):
        engine, provider = engine_for([answer()], cfg=cfg)
        await engine.run_turn("ops", "s1", "when do deploys happen?", origin=origin)
        prompt_user = provider.requests[0].messages[-1].text
        assert ("deploy_fact" in prompt_user) is expect_core, origin
        assert ("chat_note" in prompt_user) is expect_chat, origin
        assert prompt_user.count("[Memory context]") <= 1
    recalls = [e for e in events_of(store) if isinstance(e, MemoryRecalled)]
    assert len(recalls) == 3  # exactly one per turn
    assert all("deploys happen on fridays" not in str(r) for r in recalls)


async def test_autosave_keeps_user_messages_from_user_facing_turns(world):
    """Interactive user messages of 20+ chars are autosaved; cron ones never."""
    engine_for, _store, memory = world
    engine, _ = engine_for([answer(), answer()])
    await engine.run_turn("ops", "s1", "please remember that the build uses ninja")
    await engine.run_turn(
        "ops", "s1", "nightly job: compile everything now", origin="cron"
    )
    rows = memory.list("ops", category="conversation")
    assert [r.content for r in rows] == ["please remember that the build uses ninja"]


async def test_prompt_is_never_stored(world):
    """The ledger keeps prompt digests, never the prompt; the system prompt is data.

    Issue #11: the system prompt is recorded once, as ``system_prompt.set``;
    no other event carries its text.
    """
    engine_for, store, _ = world
    engine, _ = engine_for([answer()], system_prompt="SECRET SYSTEM PROMPT 1234")
    await engine.run_turn("ops", "s1", "hello there")
    carrying = [e for e in events_of(store) if "SECRET SYSTEM PROMPT" in str(e)]
    assert [type(e).__name__ for e in carrying] == ["SystemPromptSet"]
    prompt = next(e for e in events_of(store) if isinstance(e, PromptAssembled))
    assert [s.name for s in prompt.sections] == ["system", "history"]
