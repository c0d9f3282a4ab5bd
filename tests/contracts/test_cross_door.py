"""The cross-door contract, engine and import side: the same facts by every door.

The conversation of :mod:`tests.contracts.cross_door` is run through the real
turn engine (the scripted provider answering with the two tool calls and the
usage, the calls run by real tools registered in the engine, priced with
``[pricing]``), then ``turnledger export`` writes that session in every export
format and ``turnledger import`` reads each file into a fresh ledger. Every
door's session projects to :data:`~tests.contracts.cross_door.EXPECTED`, except
for what a format has no place for, which :data:`CARRIES` states per format:
an import must not invent a fact its format cannot carry, and an export must
not drop one it can. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.contracts.cross_door import (
    CALLS,
    EXPECTED,
    MODEL,
    PRICING,
    SYSTEM_PROMPT,
    USAGE,
    USER_TEXT,
    DoorFacts,
    ScriptedCall,
    projected_facts,
)
from turnledger.ledger.events import ModelCalled
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import load_config
from turnledger.pipeline.export import EXPORT_FORMATS
from turnledger.pipeline.formats._common import Sink
from turnledger.pipeline.formats.model import ModelUsage
from turnledger.pipeline.formats.usage import (
    MALFORMED,
    adk_usage,
    adk_usage_fields,
    langchain_usage,
    langchain_usage_fields,
    pydantic_ai_usage,
    pydantic_ai_usage_fields,
)
from turnledger.pipeline.formats.writers import CARRIES_USAGE, DROPS_SYSTEM
from turnledger.pipeline.importer import UNRECORDABLE_MODEL
from turnledger.pipeline.providers.base import ChatResponse, ToolSpec, Usage
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall

AGENT = "door"
KEY = "engine"
IMPORTED = "imported"


class Carries(NamedTuple):
    """What an export format has a place for (besides messages and tool calls)."""

    system_prompt: bool
    usage: bool


CARRIES: dict[str, Carries] = {
    "openai-chat": Carries(system_prompt=True, usage=False),
    "openai-responses": Carries(system_prompt=True, usage=False),
    "anthropic": Carries(system_prompt=True, usage=False),
    "gemini": Carries(system_prompt=True, usage=False),
    "langchain": Carries(system_prompt=True, usage=True),
    "pydantic-ai": Carries(system_prompt=True, usage=True),
    "adk": Carries(system_prompt=False, usage=True),
}
"""Per export format: whether it carries the system prompt and model usage.

The four request payloads (OpenAI chat and Responses, Anthropic, Gemini) have
no field for a response's usage; an ADK session's events have no place for
the agent's instruction.
"""


def expected_for(fmt: str) -> DoorFacts:
    """The facts an export then import in ``fmt`` must show."""
    carries = CARRIES[fmt]
    return dataclasses.replace(
        EXPECTED,
        system_prompt=EXPECTED.system_prompt if carries.system_prompt else None,
        model_calls=EXPECTED.model_calls if carries.usage else (),
    )


class ScriptTool:
    """A real tool of the engine answering one scripted call's result."""

    def __init__(self, call: ScriptedCall) -> None:
        self.call = call
        self.seen: list[dict[str, Any]] = []

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.call.name,
            description=f"{self.call.name} of a city",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        del context
        self.seen.append(arguments)
        return ToolOutcome(output=self.call.result)


def _steps() -> list[ChatResponse]:
    (in1, out1), (in2, out2) = USAGE
    calls = tuple(
        ToolCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments)) for c in CALLS
    )
    return [
        ChatResponse(
            tool_calls=calls,
            finish_reason="tool_calls",
            usage=Usage(input_tokens=in1, output_tokens=out1),
        ),
        ChatResponse(
            text=EXPECTED.history[-1][1],
            usage=Usage(input_tokens=in2, output_tokens=out2),
        ),
    ]


def _config(tmp_path: Path) -> Path:
    rates = PRICING[MODEL]
    path = tmp_path / "turnledger.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        "[runtime]\ncontext_budget_tokens = 0\n"
        f'[pricing."{MODEL}"]\n'
        f"input_per_million = {rates.input_per_million}\n"
        f"output_per_million = {rates.output_per_million}\n"
    )
    return path


class Ledgers:
    """Fresh ledgers of one backend: the engine's and one per import."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.made: list[str] = []

    def fresh(self, name: str) -> str:
        if self.backend == "sqlite":
            return str(self.tmp_path / f"{name}.db")
        url = fresh_schema_url(require_postgres())
        self.made.append(url)
        return url

    def close(self) -> None:
        for url in self.made:
            drop_schema(url)


@pytest.fixture(name="ledgers", params=["sqlite", "postgres"])
def _ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledgers]:
    ledgers = Ledgers(request.param, tmp_path)
    if request.param == "postgres":
        require_postgres()
    yield ledgers
    ledgers.close()


async def _engine_door(ledger: str, config: Path) -> list[ScriptTool]:
    """Run the scripted conversation through the turn engine into ``ledger``."""
    tools = [ScriptTool(c) for c in CALLS]
    store = open_store(ledger)
    runtime = bootstrap(
        load_config(config),
        provider=ScriptedProvider(_steps(), model=MODEL),
        store=store,
        ledger_url=ledger,
        tools={t.call.name: t for t in tools},
        system_prompt=SYSTEM_PROMPT,
    )
    try:
        outcome = await runtime.engine.run_turn(AGENT, KEY, USER_TEXT)
    finally:
        await runtime.aclose()
        store.close()
    assert outcome.completed
    return tools


def _facts(ledger: str, agent: str, key: str) -> DoorFacts:
    store = open_store(ledger)
    try:
        return projected_facts(store, session_stream_id(agent, key))
    finally:
        store.close()


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), (args, err)
    return out


def _usage_keys(payload: object) -> set[str]:
    """The usage and model fields anywhere in an exported payload."""
    found: set[str] = set()
    if isinstance(payload, dict):
        for key, value in payload.items():
            if "usage" in key.lower() or key in {"model_name", "modelVersion"}:
                found.add(key)
            found |= _usage_keys(value)
    elif isinstance(payload, list):
        for value in payload:
            found |= _usage_keys(value)
    return found


def test_the_carries_table_is_what_the_writers_declare() -> None:
    """The table covers every export format and agrees with the writers' own sets."""
    assert set(CARRIES) == set(EXPORT_FORMATS)
    assert {f for f, c in CARRIES.items() if not c.system_prompt} == DROPS_SYSTEM
    assert {f for f, c in CARRIES.items() if c.usage} == CARRIES_USAGE


async def test_engine_and_every_export_import_show_the_same_facts(
    ledgers: Ledgers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Engine, then export -> import in each format: the same projected facts.

    What a format cannot carry is absent after its import (never invented);
    what it can carry is present (never dropped by the export), and exporting
    the imported session gives the same payload again.
    """
    config = _config(tmp_path)
    engine_ledger = ledgers.fresh("engine")
    tools = await _engine_door(engine_ledger, config)
    assert [t.seen for t in tools] == [[c.arguments] for c in CALLS]
    assert _facts(engine_ledger, AGENT, KEY) == EXPECTED

    for fmt in EXPORT_FORMATS:
        out = _cli(
            capsys,
            *("--db", engine_ledger, "--config", str(config), "export", KEY),
            *("--agent", AGENT, "--format", fmt),
        )
        payload = json.loads(out)
        carries = CARRIES[fmt]
        assert (SYSTEM_PROMPT in out) is carries.system_prompt, fmt
        assert bool(_usage_keys(payload)) is carries.usage, (fmt, _usage_keys(payload))
        file = tmp_path / f"{fmt}.json"
        file.write_text(out)
        imported = ledgers.fresh(f"import-{fmt}")
        report = json.loads(
            _cli(
                capsys,
                *("--db", imported, "--config", str(config), "import", str(file)),
                *("--format", fmt, "--agent", IMPORTED, "--session", fmt, "--json"),
            )
        )
        assert report["format"] == fmt
        assert _facts(imported, IMPORTED, fmt) == expected_for(fmt), fmt
        again = _cli(
            capsys,
            *("--db", imported, "--config", str(config), "export", fmt),
            *("--agent", IMPORTED, "--format", fmt),
        )
        assert json.loads(again) == payload, fmt  # export -> import is a fixed point


def test_usage_without_a_rate_or_malformed_is_never_guessed(
    ledgers: Ledgers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model the rate sheet lacks costs 0; a usage with a bad count is skipped."""
    (in1, out1), _ = USAGE
    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "text", "content": "hello"}],
            "usage": {"input_tokens": in1, "output_tokens": out1},
            "model_name": "unpriced-model",
        },
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and"}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "text", "content": "more"}],
            "usage": {"input_tokens": -1, "output_tokens": "9"},
            "model_name": MODEL,
        },
    ]
    file = tmp_path / "pydantic.json"
    file.write_text(json.dumps(messages))
    ledger = ledgers.fresh("priced")
    report = json.loads(
        _cli(
            capsys,
            *("--db", ledger, "--config", str(_config(tmp_path)), "import", str(file)),
            *("--format", "pydantic-ai", "--session", "s", "--json"),
        )
    )
    assert report["skipped"] == {MALFORMED: 1}
    store = open_store(ledger)
    try:
        calls = [
            r.event
            for r in store.read_stream(session_stream_id(IMPORTED, "s"))
            if isinstance(r.event, ModelCalled)
        ]
    finally:
        store.close()
    assert [(c.model, c.input_tokens, c.output_tokens, c.cost_usd) for c in calls] == [
        ("unpriced-model", in1, out1, 0.0)
    ]


def test_an_import_with_usage_is_still_refused_by_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Model calls imported with their usage have no recorded prompts to re-run."""
    config = _config(tmp_path)
    engine_ledger = str(tmp_path / "engine.db")
    asyncio.run(_engine_door(engine_ledger, config))
    out = _cli(
        capsys,
        *("--db", engine_ledger, "export", KEY, "--agent", AGENT),
        *("--format", "pydantic-ai"),
    )
    file = tmp_path / "pydantic-ai.json"
    file.write_text(out)
    ledger = str(tmp_path / "imported.db")
    _cli(capsys, "--db", ledger, "import", str(file), "--session", "s")
    capsys.readouterr()
    code = main(["--db", ledger, "replay", "s", "--agent", IMPORTED, "--rerun"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "imported from a transcript: it has no recorded prompts to re-run" in err


counts = st.integers(min_value=0, max_value=10**12)


@st.composite
def usages(draw: st.DrawFn) -> ModelUsage:
    """Any usage a model call reports (reasoning within the output)."""
    output = draw(counts)
    return ModelUsage(
        model=draw(st.sampled_from(["", MODEL, "gemini-2.5-pro"])),
        provider=draw(st.sampled_from(["", "openai"])),
        input_tokens=draw(counts),
        output_tokens=output,
        cached_input_tokens=draw(counts),
        cache_write_tokens=draw(counts),
        reasoning_tokens=draw(st.integers(min_value=0, max_value=output)),
    )


@given(usage=usages())
def test_every_usage_field_a_format_carries_survives_its_writer_and_reader(
    usage: ModelUsage,
) -> None:
    """Writer then reader gives back each usage field the format has a place for.

    LangChain and Pydantic AI keep every field; ADK (Gemini's usageMetadata)
    has no provider and no cache-write count.
    """
    sink = Sink()
    lc = langchain_usage(langchain_usage_fields(usage), sink)
    pa = pydantic_ai_usage(pydantic_ai_usage_fields(usage), sink)
    adk = adk_usage(adk_usage_fields(usage), sink)
    assert (lc, pa) == (usage, usage)
    assert adk == msgspec.structs.replace(usage, provider="", cache_write_tokens=0)
    assert sink.transcript("langchain", []).skipped == {}


@pytest.mark.parametrize(
    "bad", [-1, "9", 1.5, True, None], ids=["negative", "text", "float", "bool", "null"]
)
def test_a_usage_count_that_is_not_an_int_is_never_guessed(bad: object) -> None:
    """A bad count drops that usage whole and counts it; ``null`` reads as absent."""
    sink = Sink()
    found = langchain_usage({"usage_metadata": {"input_tokens": bad}}, sink)
    if bad is None:
        assert found == ModelUsage()
        assert sink.transcript("langchain", []).skipped == {}
    else:
        assert found is None
        assert sink.transcript("langchain", []).skipped == {MALFORMED: 1}


def _claude_line(n: int, kind: str, message: dict[str, Any]) -> str:
    return json.dumps(
        {"type": kind, "uuid": f"u{n}", "sessionId": "s1", "message": message}
    )


def test_a_claude_code_message_split_over_lines_is_one_priced_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line's usage of a split message; a synthetic message is no call.

    Anthropic counts cache reads and writes apart from the input; the ledger's
    input is their sum, priced at the input rate of ``[pricing]``.
    """
    usage = {"input_tokens": 4, "cache_read_input_tokens": 30}
    lines = [
        _claude_line(1, "user", {"role": "user", "content": USER_TEXT}),
        _claude_line(
            2,
            "assistant",
            {
                "id": "msg_1",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": "Checking."}],
                "usage": {
                    **usage,
                    "cache_creation_input_tokens": 8,
                    "output_tokens": 1,
                },
            },
        ),
        _claude_line(
            3,
            "assistant",
            {
                "id": "msg_1",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": "Sunny."}],
                "usage": {
                    **usage,
                    "cache_creation_input_tokens": 8,
                    "output_tokens": 9,
                },
            },
        ),
        _claude_line(4, "user", {"role": "user", "content": "thanks"}),
        _claude_line(
            5,
            "assistant",
            {
                "id": "msg_2",
                "role": "assistant",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": "No response requested."}],
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        ),
    ]
    file = tmp_path / "session.jsonl"
    file.write_text("\n".join(lines) + "\n")
    ledger = str(tmp_path / "cc.db")
    config = str(_config(tmp_path))
    _cli(capsys, "--db", ledger, "--config", config, "import", str(file))
    store = open_store(ledger)
    try:
        (stream,) = {
            r.stream_id for r in store.read_all() if isinstance(r.event, ModelCalled)
        }
        calls = [
            r.event
            for r in store.read_stream(stream)
            if isinstance(r.event, ModelCalled)
        ]
    finally:
        store.close()
    rates = PRICING[MODEL]
    assert [(c.model, c.provider) for c in calls] == [(MODEL, "anthropic")]
    assert [
        (c.input_tokens, c.cached_input_tokens, c.cache_write_tokens, c.output_tokens)
        for c in calls
    ] == [(42, 30, 8, 9)]
    assert calls[0].cost_usd == pytest.approx(
        42 * rates.input_per_million / 1e6 + 9 * rates.output_per_million / 1e6
    )


@pytest.mark.parametrize("model", ["m\x00x", "m" * 201], ids=["control", "long"])
def test_a_model_name_the_ledger_cannot_keep_is_unknown_and_counted(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The call and its tokens are kept; the name is ``unknown``, never mangled."""
    (in1, out1), _ = USAGE
    messages = [
        {"type": "human", "data": {"type": "human", "content": USER_TEXT}},
        {
            "type": "ai",
            "data": {
                "type": "ai",
                "content": "Sunny.",
                "tool_calls": [],
                "usage_metadata": {"input_tokens": in1, "output_tokens": out1},
                "response_metadata": {"model_name": model},
            },
        },
    ]
    file = tmp_path / "lc.json"
    file.write_text(json.dumps(messages))
    ledger = str(tmp_path / "lc.db")
    report = json.loads(
        _cli(
            capsys,
            *("--db", ledger, "import", str(file)),
            *("--format", "langchain", "--session", "s", "--json"),
        )
    )
    assert report["skipped"] == {UNRECORDABLE_MODEL: 1}
    store = open_store(ledger)
    try:
        calls = [
            r.event
            for r in store.read_stream(session_stream_id(IMPORTED, "s"))
            if isinstance(r.event, ModelCalled)
        ]
    finally:
        store.close()
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("unknown", in1, out1)
    ]
