"""``turnledger demo``: a scripted multi-turn session through the real turn engine.

The session has parallel tool calls, a failing tool, memory writes and recall, an
image attachment, an oversized tool result (bounded) and a visible trim, all on
the embedded SQLite default. Afterwards the demo prints the session history, the
agent's memory, the costs, the lifecycle table and where the ledger is.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from uuid import UUID

import msgspec

from turnledger.ledger.events import HistoryTrimmed, MediaAttached, ToolResultRecorded
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.media import MediaRef, MediaStore, attachment_event
from turnledger.pipeline.providers.base import ChatResponse, Usage
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.messages import ToolCall
from turnledger.policies.pricing import ModelPrice
from turnledger.projections.costs import grand_total, totals
from turnledger.projections.history.read import visible_messages
from turnledger.projections.queries import SessionHistories, cost_records

AGENT = "demo"
MODEL = "scripted-1"

# A 1x1 transparent PNG: the "screenshot" attached in turn two.
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def _usage(inp: int, out: int) -> Usage:
    return Usage(input_tokens=inp, output_tokens=out, cached_input_tokens=inp // 4)


def demo_script() -> list[ChatResponse]:
    """The model's side of the demo, one answer per provider call."""
    return [
        ChatResponse(
            text="I'll remember both.",
            tool_calls=(
                _call(
                    "call_1",
                    "memory_store",
                    key="release_day",
                    content="The release is on Friday.",
                ),
                _call(
                    "call_2",
                    "memory_store",
                    key="editor",
                    content="The user prefers the Helix editor.",
                ),
            ),
            usage=_usage(310, 42),
        ),
        ChatResponse(
            text="Noted: release on Friday, Helix as editor.", usage=_usage(420, 12)
        ),
        ChatResponse(
            tool_calls=(
                _call("call_3", "file_read", path="build.log"),
                _call("call_4", "file_read", path="missing.txt"),
            ),
            usage=_usage(520, 30),
        ),
        ChatResponse(
            text="The build log ends with 'BUILD OK'; missing.txt does not exist.",
            usage=_usage(2900, 25),
        ),
        ChatResponse(
            tool_calls=(_call("call_5", "memory_recall", query="release"),),
            usage=_usage(900, 15),
        ),
        ChatResponse(text="The release is on Friday.", usage=_usage(1000, 9)),
        ChatResponse(text="You're welcome!", usage=_usage(380, 6)),
    ]


DEMO_TURNS = (
    "Remember that the release is on Friday and that I prefer Helix.",
    "Here is a screenshot of the build; read build.log and missing.txt.",
    "When is the release?",
    "Thanks for the help today!",
)


def demo_config(data_dir: Path) -> Config:
    """Small limits so the demo shows a bounded result and a trim."""
    cfg = Config(data_dir=str(data_dir))
    runtime = msgspec.structs.replace(
        cfg.runtime, max_tool_result_chars=600, context_budget_tokens=450
    )
    pricing = {MODEL: ModelPrice(input_per_million=3.0, output_per_million=15.0)}
    return msgspec.structs.replace(cfg, runtime=runtime, pricing=pricing)


def _free_session_key(store: EventStore) -> str:
    index = 1
    while store.stream_version(session_stream_id(AGENT, f"demo-{index}")):
        index += 1
    return f"demo-{index}"


def _prepare_workspace(config: Config) -> MediaRef:
    workspace = Path(config.data_dir) / "agents" / AGENT / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    lines = [f"[{i:04d}] compiling module {i} ... ok" for i in range(400)]
    (workspace / "build.log").write_text("\n".join([*lines, "BUILD OK"]) + "\n")
    stored = MediaStore(config.data_dir).ingest("build.png", _PNG)
    if not isinstance(stored, MediaRef):  # pragma: no cover - a 70-byte PNG fits
        msg = f"Expected the demo image to be accepted, found {stored!r}"
        raise TypeError(msg)
    return stored


async def _run(store: EventStore, config: Config, ledger_url: str, key: str) -> None:
    image = _prepare_workspace(config)
    provider = ScriptedProvider(demo_script(), model=MODEL)
    async with bootstrap(
        config, provider=provider, store=store, ledger_url=ledger_url
    ) as runtime:
        for number, text in enumerate(DEMO_TURNS):
            attachments: Sequence[MediaAttached] = ()
            if number == 1:
                attachments = (attachment_event(image, turn_id="pending"),)
            await runtime.engine.run_turn(
                AGENT, key, text, channel="cli", attachments=attachments
            )


def record_demo_session(store: EventStore, *, data_dir: str, ledger_url: str) -> UUID:
    """Run the demo session through the engine; return its stream id."""
    config = demo_config(Path(data_dir))
    key = _free_session_key(store)
    asyncio.run(_run(store, config, ledger_url, key))
    return session_stream_id(AGENT, key)


def render_history(store: EventStore, stream_id: UUID) -> Iterator[str]:
    """Yield the provider-visible history of a session, then what was trimmed."""
    events = store.read_stream(stream_id)
    state = SessionHistories(store).get(stream_id)
    channel = state.channel or "-"
    yield f"session {state.session_key} (agent {state.agent}, channel {channel})"
    for m in visible_messages(state):
        for c in m.tool_calls:
            yield f"  [assistant] -> {c.name} {c.arguments}"
        for result in m.tool_results:
            status = "error" if result.is_error else "ok"
            first = result.content.splitlines()[0] if result.content else ""
            yield f"  [tool {result.name} {status}] {first[:100]}"
        if m.text:
            label = "trim" if m.kind == "breadcrumb" else m.role
            for line in m.text.splitlines()[:3]:
                yield f"  [{label}] {line[:120]}"
    for r in events:
        if isinstance(r.event, HistoryTrimmed):
            t = r.event
            yield (
                f"  (trimmed {t.dropped_turns} turn(s), {t.dropped_messages} messages: "
                f"{t.tokens_before} -> {t.tokens_after} tokens, {t.reason})"
            )
        if isinstance(r.event, ToolResultRecorded) and r.event.truncated:
            t2 = r.event
            yield (
                f"  (tool result {t2.call_id} bounded: {t2.original_chars} -> "
                f"{t2.kept_chars} characters)"
            )


def render_costs(store: EventStore, stream_id: UUID) -> Iterator[str]:
    """Yield the session's cost records per model, and the total."""
    states = cost_records(store, stream_id=stream_id)
    for model, t in totals(states, "model").items():
        yield (
            f"  {model}: {t.calls} calls, {t.input_tokens} in / {t.output_tokens} out "
            f"tokens ({t.cached_input_tokens} cached), ${t.cost_usd:.6f}"
        )
    total = grand_total(states)
    yield f"  total: ${total.cost_usd:.6f} over {total.calls} calls"
