"""The turn engine end to end, over real sockets, in both wire formats.

For each wire format (OpenAI Chat Completions, Anthropic Messages) one session
runs on a real SQLite ledger with the real default tools, memory service and
media store, against the fake LLM server (``tests/pipeline/fake_llm_server.py``):

1. an image attachment; four parallel calls: two ``memory_store``, one
   ``knowledge_capture``, one ``file_read`` that fails;
2. ``memory_recall`` and ``memory_forget`` in parallel, then an oversized
   ``file_read`` (bounded to ``max_tool_result_chars``);
3. the server answers a context overflow; the engine trims 2/3 and retries;
4. a second engine with a tight budget and an iteration limit of 2: a visible
   budget trim, then the turn fails at the limit;
5. the server answers 401, echoing the API key: the turn fails
   (``provider_error``) and the key is redacted;
6. a plain turn, then the default memory strategy consolidates it over the
   same wire: its new core fact supersedes the stored one.

Then every event type of the catalogue is in the ledger, every request the
server received is a valid wire payload (results right after their calls, no
orphan), ``verify``, the pairing audit and replay are clean, and the planted API
key is in no file under the test's folder and in no captured log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    RecordedRequest,
    Reply,
    ToolUse,
    anthropic_error,
    anthropic_prompt_too_long,
    anthropic_text,
    anthropic_tool_use,
    openai_context_overflow,
    openai_error,
    openai_text,
    openai_tool_calls,
)
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import (
    EVENT_TYPES,
    ErasureRecorded,
    HistoryTrimmed,
    ItemRecorded,
    ItemsRemoved,
    KnowledgeCaptured,
    MediaAttached,
    MemoryForgotten,
    MemoryStored,
    MemorySuperseded,
    ModelCalled,
    ToolResultRecorded,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config, parse_config
from turnledger.pipeline.media import MediaRef, MediaStore, attachment_event
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy import DefaultMemoryStrategy
from turnledger.pipeline.memory.strategy.types import StrategySettings
from turnledger.pipeline.providers.anthropic import AnthropicProvider
from turnledger.pipeline.providers.base import Provider
from turnledger.pipeline.providers.openai_compatible import OpenAICompatibleProvider
from turnledger.pipeline.sessions import load_history, resolve_session
from turnledger.pipeline.timetravel import fork_session, rewind_session
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.pipeline.tools.registry import default_tools
from turnledger.policies.messages import BREADCRUMB_TEXT
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.history.read import visible_messages

AGENT = "ops"
SESSION = "e2e"
API_KEY = "sk-e2e-PLANTED-9f3a7c1e5b2d4f6a8c0e"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
BIG_FILE_CHARS = 9_000
MAX_RESULT_CHARS = 1_500
OLD_FACT = "User prefers Rust for systems work"
NEW_FACT = "User now prefers Go for systems work"


# -- the two wire formats ---------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """How to script, reach and check one wire format."""

    name: str
    model: str
    call_prefix: str
    text: Callable[..., Reply]
    tools: Callable[..., Reply]
    overflow: Callable[[], Reply]
    auth_error: Callable[[str], Reply]
    provider: Callable[[FakeLLMServer], Provider]
    check_payload: Callable[[dict[str, Any]], None]
    key_header: tuple[str, str]


def _openai_auth_error(key: str) -> Reply:
    return openai_error(
        401,
        f"Incorrect API key provided: {key}. Find your key in the dashboard.",
        code="invalid_api_key",
    )


def _anthropic_auth_error(key: str) -> Reply:
    return anthropic_error(401, "authentication_error", f"invalid x-api-key: {key}")


def check_openai_payload(body: dict[str, Any]) -> None:
    """A Chat Completions body: each call answered by ``tool`` rows right after it."""
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    seen: set[str] = set()
    waiting: set[str] = set()  # calls of the last assistant message not yet answered
    in_block = False  # inside the run of ``tool`` rows after an assistant with calls
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            assert in_block, f"tool row {index} ({call_id}) follows no call: {messages}"
            assert call_id in waiting, (
                f"tool row {index} answers no open call {call_id}"
            )
            assert isinstance(message["content"], str)
            waiting.discard(call_id)
            continue
        assert not waiting, f"calls {waiting} unanswered before message {index}"
        in_block = False
        if role == "assistant" and message.get("tool_calls"):
            ids = [call["id"] for call in message["tool_calls"]]
            assert len(set(ids)) == len(ids), ids
            assert not seen & set(ids), ids
            for call in message["tool_calls"]:
                assert call["type"] == "function"
                json.loads(call["function"]["arguments"])
            seen.update(ids)
            waiting = set(ids)
            in_block = True
        else:
            assert role in ("user", "assistant", "system"), message
    assert not waiting, f"calls {waiting} unanswered at the end"


def check_anthropic_payload(body: dict[str, Any]) -> None:
    """A Messages body: alternating roles; results in the very next user message."""
    assert isinstance(body.get("system"), str)
    assert body["system"]
    assert isinstance(body["max_tokens"], int)
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    previous_uses: list[str] = []
    seen: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        assert role == ("user" if index % 2 == 0 else "assistant"), messages
        blocks = message["content"]
        assert blocks, f"message {index} is empty"
        kinds = [block["type"] for block in blocks]
        if role == "assistant":
            assert set(kinds) <= {"text", "tool_use"}, kinds
            uses = [block["id"] for block in blocks if block["type"] == "tool_use"]
            assert len(set(uses)) == len(uses), uses
            assert not seen & set(uses), uses
            for block in blocks:
                if block["type"] == "tool_use":
                    assert isinstance(block["input"], dict)
            seen.update(uses)
            previous_uses = uses
            continue
        assert set(kinds) <= {"text", "tool_result"}, kinds
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        # Every tool_use of the previous assistant message is answered here, and
        # only those; the results come before any text.
        assert sorted(results) == sorted(previous_uses), (index, results, previous_uses)
        assert kinds[: len(results)] == ["tool_result"] * len(results), kinds
        previous_uses = []
    assert not previous_uses, f"tool_use {previous_uses} unanswered at the end"


WIRES = {
    "openai": Wire(
        name="openai",
        model="gpt-e2e",
        call_prefix="call_",
        text=openai_text,
        tools=openai_tool_calls,
        overflow=openai_context_overflow,
        auth_error=_openai_auth_error,
        provider=lambda server: OpenAICompatibleProvider(
            server.openai_base_url, "gpt-e2e", api_key=API_KEY, timeout=30.0
        ),
        check_payload=check_openai_payload,
        key_header=("authorization", f"Bearer {API_KEY}"),
    ),
    "anthropic": Wire(
        name="anthropic",
        model="claude-e2e",
        call_prefix="toolu_",
        text=anthropic_text,
        tools=anthropic_tool_use,
        overflow=anthropic_prompt_too_long,
        auth_error=_anthropic_auth_error,
        provider=lambda server: AnthropicProvider(
            server.url, model="claude-e2e", api_key=API_KEY, timeout=30.0
        ),
        check_payload=check_anthropic_payload,
        key_header=("x-api-key", API_KEY),
    ),
}


# -- the world --------------------------------------------------------------------


def config(tmp_path: Path, model: str, **runtime: int) -> Config:
    settings = {
        "max_tool_result_chars": MAX_RESULT_CHARS,
        "max_tool_iterations": 4,
        **runtime,
    }
    lines = "\n".join(f"{key} = {value}" for key, value in settings.items())
    return parse_config(
        f'data_dir = "{tmp_path / "data"}"\n'
        f"[runtime]\n{lines}\n"
        f'[pricing."{model}"]\ninput_per_million = 3\noutput_per_million = 15\n'
    )


@pytest.fixture(name="llm_server")
def _llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


class Calls:
    """Mints unique tool-call ids in a wire format's style."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count = 0

    def __call__(self, name: str, **arguments: Any) -> ToolUse:
        self.count += 1
        return ToolUse(f"{self.prefix}{self.count:04d}", name, arguments)


def stored_image(tmp_path: Path) -> MediaRef:
    ref = MediaStore(tmp_path / "data").ingest(
        "diagram.png", PNG, mime_type="image/png"
    )
    assert isinstance(ref, MediaRef), ref
    return ref


def user_texts(request: RecordedRequest) -> list[str]:
    """Every text a request's user messages carry (tool results excluded)."""
    texts = []
    for message in request.body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [b["text"] for b in content if b["type"] == "text"]
    return texts


def tool_result_texts(wire: Wire, request: RecordedRequest) -> list[str]:
    """Every tool result a request carries, in order."""
    out = []
    for message in request.body["messages"]:
        if wire.name == "openai" and message["role"] == "tool":
            out.append(message["content"])
        elif wire.name == "anthropic" and message["role"] == "user":
            out += [
                b["content"] for b in message["content"] if b["type"] == "tool_result"
            ]
    return out


# -- the scenario -----------------------------------------------------------------


@pytest.mark.parametrize("wire_name", ["openai", "anthropic"])
async def test_session_through_the_fake_server(
    wire_name, tmp_path, llm_server, caplog, capfd
):
    """Every event type, valid wire payloads, clean ledger, and the key never leaks."""
    wire = WIRES[wire_name]
    caplog.set_level(logging.DEBUG)
    call = Calls(wire.call_prefix)
    base = config(tmp_path, wire.model)
    tight = config(
        tmp_path, wire.model, context_budget_tokens=150, max_tool_iterations=2
    )
    ledger_path = str(tmp_path / "ledger.db")
    store = open_store(ledger_path)
    ledger = AsyncLedger(store)
    memory = MemoryService(store, base, ledger_url=ledger_path)
    provider = wire.provider(llm_server)
    tools = default_tools()
    # Two runtimes over one writer and one memory service: the tight one has
    # other runtime limits, the same ledger and memory.
    runtimes = [
        bootstrap(
            cfg,
            provider=provider,
            store=store,
            ledger_url=ledger_path,
            tools=tools,
            ledger=ledger,
            memory=memory,
        )
        for cfg in (base, tight)
    ]
    engine, tight_engine = (r.engine for r in runtimes)
    workspace = tmp_path / "data" / "agents" / AGENT / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "big.txt").write_text("x" * BIG_FILE_CHARS, encoding="utf-8")
    image = stored_image(tmp_path)
    queue = getattr(llm_server, f"queue_{wire.name}")
    stream = session_stream_id(AGENT, SESSION)
    outcomes = []
    with capture_logs() as logs:
        # 1. An attachment; four parallel calls, one of which fails.
        queue(
            wire.tools(
                call("memory_store", key="pref", content=OLD_FACT, category="core"),
                call("memory_store", key="scratch", content="scratch note to drop"),
                call(
                    "knowledge_capture",
                    subject="alice",
                    relation="works_at",
                    object="acme",
                ),
                call("file_read", path="missing.txt"),
                usage=(900, 40, 300),
            ),
            wire.text("Noted: Rust, and Alice works at Acme.", usage=(1200, 12)),
        )
        outcomes.append(
            await engine.run_turn(
                AGENT,
                SESSION,
                "Remember my language preference and who Alice works for.",
                attachments=[attachment_event(image, turn_id="pending")],
            )
        )
        # 2. Recall and forget in parallel, then an oversized result.
        queue(
            wire.tools(
                call("memory_recall", query="prefers Rust systems"),
                call("memory_forget", key="scratch"),
            ),
            wire.tools(call("file_read", path="big.txt")),
            wire.text("You prefer Rust; the scratch note is gone."),
        )
        outcomes.append(
            await engine.run_turn(
                AGENT, SESSION, "What do you remember about me? Drop the scratch note."
            )
        )
        # 3. The server says the context overflowed: trim 2/3 and retry once.
        queue(wire.overflow(), wire.text("We stored, recalled and read files."))
        outcomes.append(
            await engine.run_turn(AGENT, SESSION, "Summarise what we did so far.")
        )
        # 4. A tight budget trims visibly; the iteration limit ends the turn.
        queue(
            wire.tools(call("file_read", path="big.txt")),
            wire.tools(call("file_read", path="big.txt")),
        )
        outcomes.append(
            await tight_engine.run_turn(
                AGENT, SESSION, "Keep reading the big file until you are sure."
            )
        )
        # 5. The server refuses the key and echoes it: the turn fails, redacted.
        queue(wire.auth_error(API_KEY))
        outcomes.append(
            await tight_engine.run_turn(AGENT, SESSION, "Are you still there?")
        )
        # 6. A plain turn, consolidated over the same wire: the old fact goes.
        last_question = "Actually I switched: which language do I prefer now?"
        queue(wire.text("Go, from now on."))
        outcomes.append(await engine.run_turn(AGENT, SESSION, last_question))
        queue(
            wire.text(
                json.dumps(
                    {
                        "history_entry": "The user switched from Rust to Go.",
                        "memory_update": NEW_FACT,
                    }
                )
            )
        )
        strategy = DefaultMemoryStrategy(
            memory, provider, settings=StrategySettings(conflict_threshold=0.6)
        )
        report = await strategy.consolidate_turn(
            AGENT, SESSION, last_question, "Go, from now on."
        )
        structlog.get_logger("e2e").info("scenario.done", provider=repr(provider))
    await provider.aclose()
    llm_server.assert_drained()

    # The outcomes the scenario scripted.
    assert [(o.completed, o.failure) for o in outcomes] == [
        (True, None),
        (True, None),
        (True, None),
        (False, "iteration_limit"),
        (False, "provider_error"),
        (True, None),
    ]
    assert report.outcome == "recorded", report
    assert report.superseded == ("pref",)
    assert memory.get(AGENT, "pref") is None
    assert memory.get(AGENT, "scratch") is None

    # Time travel records the last two types: a fork of the session at its third
    # turn, then the fork rewound to the first (the source is left as it is).
    fork = fork_session(
        store,
        resolve_session(store, str(stream)),
        outcomes[2].turn_id,
        new_key="what-if",
    )
    rewind_session(store, resolve_session(store, fork.stream), outcomes[0].turn_id)

    # Every event type of the catalogue was recorded (but the framework adapters'
    # and the erasure receipt, which turnledger erase writes).
    everything = list(store.iter_all())
    events = [r.event for r in everything]
    unrecorded = {ItemRecorded, ItemsRemoved, ErasureRecorded}
    assert {type(e) for e in events} == set(EVENT_TYPES) - unrecorded
    session_events = [r.event for r in store.read_stream(stream)]

    attached = next(e for e in session_events if isinstance(e, MediaAttached))
    started = next(e for e in session_events if isinstance(e, TurnStarted))
    assert (attached.turn_id, attached.sha256) == (started.turn_id, image.sha256)
    assert started.attachments == (image.sha256,)
    results = [e for e in session_events if isinstance(e, ToolResultRecorded)]
    failed_read = next(r for r in results if r.tool == "file_read" and not r.success)
    assert "missing.txt" in (failed_read.error or "")
    big = [r for r in results if r.tool == "file_read" and r.success]
    assert big
    assert all(
        (r.truncated, r.original_chars, r.kept_chars)
        == (True, BIG_FILE_CHARS, MAX_RESULT_CHARS)
        for r in big
    )
    assert {type(e) for e in events if getattr(e, "agent", None) == AGENT} >= {
        MemoryStored,
        MemoryForgotten,
        MemorySuperseded,
        KnowledgeCaptured,
    }
    sources = {e.source for e in events if isinstance(e, MemoryStored)}
    assert sources >= {"tool", "autosave", "consolidation"}
    trims = [e for e in session_events if isinstance(e, HistoryTrimmed)]
    assert {t.reason for t in trims} == {
        "context window exceeded",
        "context token budget exceeded",
    }
    failures = {e.kind: e for e in session_events if isinstance(e, TurnFailed)}
    assert set(failures) == {"iteration_limit", "provider_error"}
    assert "auth" in failures["provider_error"].error
    calls = [e for e in session_events if isinstance(e, ModelCalled)]
    assert [c.error.split(":")[0] for c in calls if not c.success] == [
        "context_overflow",
        "auth",
    ]
    assert all(c.cost_usd > 0 for c in calls if c.success and c.input_tokens)

    # What the server received: valid payloads, the key only in its header.
    requests = llm_server.requests
    assert all(r.route == wire.name for r in requests)
    for request in requests:
        wire.check_payload(request.body)
        assert request.body["model"] == wire.model
        header, value = wire.key_header
        assert request.headers[header] == value
        assert API_KEY.encode() not in request.raw
    first = requests[0]
    assert any(f"[IMAGE:media/{image.sha256}]" in t for t in user_texts(first))
    big_results = [
        t for r in requests for t in tool_result_texts(wire, r) if "xxxx" in t
    ]
    assert big_results
    assert all(len(t) < MAX_RESULT_CHARS + 100 for t in big_results)
    assert all("characters truncated" in t for t in big_results)
    overflowed, retried = requests[5], requests[6]
    assert len(retried.body["messages"]) < len(overflowed.body["messages"])
    assert any(BREADCRUMB_TEXT in t for t in user_texts(retried))
    budget_trimmed = requests[7:9]
    assert all(any(BREADCRUMB_TEXT in t for t in user_texts(r)) for r in budget_trimmed)
    assert not any("Summarise what we did" in t for t in user_texts(budget_trimmed[-1]))

    # The ledger: whole, pairing-clean, replayable.
    history = load_history(store, stream)
    assert history.open_turn is None
    assert audit_pairing(visible_messages(history)).clean
    report_replay = replay_session(store, stream)
    assert report_replay.ok
    assert report_replay.checks
    assert verify(store).ok

    for runtime in runtimes:
        await runtime.aclose()
    memory.close()
    await ledger.aclose()

    # The planted key is in no file and no log; the image bytes are not in the ledger.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path
    ledger_bytes = b"".join(
        p.read_bytes() for p in tmp_path.glob("ledger.db*") if p.is_file()
    )
    assert PNG not in ledger_bytes
    captured = capfd.readouterr()
    assert logs  # the engine logged its steps
    for text in (repr(logs), caplog.text, captured.out, captured.err):
        assert API_KEY not in text
