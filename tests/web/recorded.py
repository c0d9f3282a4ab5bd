"""Ledgers for the web UI's tests, recorded by the real turn engine.

The demo session (``record_demo_session``, what ``turnledger demo`` records), a
long session of scripted turns, a session whose texts are XSS payloads, a session
the engine repaired after a crash, and an imported-style session with an orphan
tool result (a pairing violation a transcript import can carry).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.demo import record_demo_session
from turnledger.pipeline.providers.base import ChatResponse, Usage
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.messages import ToolCall
from turnledger.policies.pricing import ModelPrice

AGENT = "web"
XSS = {
    "script": "<script>window.__xss = 'script'; alert('script')</script>",
    "onerror": "<img src=x onerror=\"window.__xss='onerror'; alert('onerror')\">",
    "javascript": "<a id=\"evil\" href=\"javascript:window.__xss='js';alert('js')\">click me</a>",
}
PAYLOAD = " ".join(XSS.values())


def config_for(data_dir: Path) -> Config:
    """Small limits so long sessions trim and big results are bounded."""
    cfg = Config(data_dir=str(data_dir))
    runtime = msgspec.structs.replace(
        cfg.runtime, max_tool_result_chars=400, context_budget_tokens=2_000
    )
    pricing = {"scripted-1": ModelPrice(input_per_million=3.0, output_per_million=15.0)}
    return msgspec.structs.replace(cfg, runtime=runtime, pricing=pricing)


def _call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


async def _engine_turns(
    store: EventStore,
    config: Config,
    *,
    ledger_url: str,
    session: str,
    turns: list[str],
    script: list[ChatResponse],
) -> None:
    provider = ScriptedProvider(script, model="scripted-1")
    runtime = bootstrap(config, provider=provider, store=store, ledger_url=ledger_url)
    async with runtime:
        for text in turns:
            await runtime.engine.run_turn(AGENT, session, text, channel="web-test")


def workspace(config: Config) -> Path:
    """The test agent's workspace (file tools read from it)."""
    path = Path(config.data_dir) / "agents" / AGENT / "workspace"
    path.mkdir(parents=True, exist_ok=True)
    return path


def record_long_session(
    store: EventStore, config: Config, ledger_url: str, *, turns: int
) -> uuid.UUID:
    """``turns`` scripted turns, each reading a file then answering (~10 events)."""
    (workspace(config) / "notes.txt").write_text("line of notes\n" * 3)
    script: list[ChatResponse] = []
    for i in range(turns):
        script.append(
            ChatResponse(
                tool_calls=(_call(f"c{i}", "file_read", path="notes.txt"),),
                usage=Usage(input_tokens=200, output_tokens=10),
            )
        )
        script.append(
            ChatResponse(
                text=f"answer {i}", usage=Usage(input_tokens=220, output_tokens=5)
            )
        )
    asyncio.run(
        _engine_turns(
            store,
            config,
            ledger_url=ledger_url,
            session="long",
            turns=[f"question {i}" for i in range(turns)],
            script=script,
        )
    )
    return session_stream_id(AGENT, "long")


def record_xss_session(store: EventStore, config: Config, ledger_url: str) -> uuid.UUID:
    """Payloads in user input, tool arguments, tool output, memory and answers."""
    (workspace(config) / "evil.txt").write_text(PAYLOAD)
    script = [
        ChatResponse(
            text=PAYLOAD,
            tool_calls=(
                _call("x1", "memory_store", key="xss_note", content=PAYLOAD),
                _call("x2", "file_read", path="evil.txt", note=PAYLOAD),
            ),
        ),
        ChatResponse(text=f"done {PAYLOAD}"),
    ]
    asyncio.run(
        _engine_turns(
            store,
            config,
            ledger_url=ledger_url,
            session="xss",
            turns=[PAYLOAD],
            script=script,
        )
    )
    return session_stream_id(AGENT, "xss")


def record_repaired_session(
    store: EventStore, config: Config, ledger_url: str
) -> uuid.UUID:
    """A turn cut off after its tool call (a crash), then the engine's next turn.

    The cut-off turn is written as the engine writes one before it runs a tool;
    the next ``run_turn`` repairs it (a synthesized result and an interrupted
    failure), as it does after a real crash.
    """
    stream = session_stream_id(AGENT, "crashed")
    store.append(
        stream,
        [
            SessionOpened(agent=AGENT, session_key="crashed", channel="web-test"),
            TurnStarted(turn_id="cut-off", origin="interactive", user_input="read it"),
            AssistantMessage(
                turn_id="cut-off",
                tool_calls=(
                    ToolCallRecord(id="lost", name="file_read", arguments="{}"),
                ),
            ),
        ],
        expected_version=0,
    )
    script = [ChatResponse(text="back again")]
    asyncio.run(
        _engine_turns(
            store,
            config,
            ledger_url=ledger_url,
            session="crashed",
            turns=["hello?"],
            script=script,
        )
    )
    return stream


def record_orphan_session(store: EventStore) -> uuid.UUID:
    """A session holding a tool result no call asked for (a pairing violation)."""
    stream = session_stream_id(AGENT, "orphan")
    store.append(
        stream,
        [
            SessionOpened(agent=AGENT, session_key="orphan", channel="import"),
            TurnStarted(turn_id="o1", origin="interactive", user_input="hi"),
            ToolResultRecorded(
                turn_id="o1",
                call_id="ghost",
                tool="file_read",
                output="??",
                provenance="imported",
            ),
            AssistantMessage(turn_id="o1", text="hello"),
            TurnCompleted(turn_id="o1"),
        ],
        expected_version=0,
    )
    return stream


def record_everything(
    store: EventStore, root: Path, ledger_url: str, *, turns: int
) -> dict[str, uuid.UUID]:
    """The demo plus every session above; returns their stream ids by name."""
    demo = record_demo_session(
        store, data_dir=str(root / "demo-data"), ledger_url=ledger_url
    )
    config = config_for(root / "data")
    return {
        "demo": demo,
        "long": record_long_session(store, config, ledger_url, turns=turns),
        "xss": record_xss_session(store, config, ledger_url),
        "crashed": record_repaired_session(store, config, ledger_url),
        "orphan": record_orphan_session(store),
    }
