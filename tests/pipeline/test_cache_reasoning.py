"""Cache-read, cache-write and reasoning tokens, end to end over real HTTP.

A turn runs through the real engine against the fake LLM server (real sockets,
each wire format's own usage fields); the recorded ``model.called`` event carries
the counts and the cost priced from ``[pricing.<model>]``; ``turnledger costs
--json``, ``turnledger observe --json`` and the chat span carry them too. The
pricing keys are validated when the configuration loads.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.pipeline.fake_llm_server import FakeLLMServer, anthropic_text, openai_text
from turnledger.ledger.events import ModelCalled
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.config.sections import TelemetryConfig
from turnledger.pipeline.providers.anthropic import AnthropicProvider
from turnledger.pipeline.providers.base import ChatRequest, Provider, Usage
from turnledger.pipeline.providers.openai_compatible import OpenAICompatibleProvider
from turnledger.pipeline.telemetry import export_run
from turnledger.policies.messages import make_message

API_KEY = "sk-test-cache-reasoning"
HELLO = ChatRequest(messages=(make_message("user", "hello"),))

PRICING = """
[pricing.gpt-r]
input_per_million = 2.0
output_per_million = 8.0
cached_input_per_million = 0.5
reasoning_per_million = 12.0

[pricing.claude-r]
input_per_million = 3.0
output_per_million = 15.0
cached_input_per_million = 0.3
cache_write_per_million = 3.75
"""


class Case:
    """One wire format: its reply, provider and what the event must record."""

    def __init__(
        self,
        *,
        model: str,
        queue: Callable[[FakeLLMServer], None],
        provider: Callable[[FakeLLMServer], Provider],
        counts: dict[str, int],
        cost: float,
    ) -> None:
        self.model = model
        self.queue = queue
        self.provider = provider
        self.counts = counts
        self.cost = cost


CASES = {
    # OpenAI: 1200 prompt tokens (1024 cached), 500 completion (448 reasoning).
    "openai": Case(
        model="gpt-r",
        queue=lambda s: s.queue_openai(
            openai_text("Friday.", usage=(1200, 500, 1024, 448))
        ),
        provider=lambda s: OpenAICompatibleProvider(
            s.openai_base_url, "gpt-r", api_key=API_KEY, timeout=30.0
        ),
        counts={
            "input_tokens": 1200,
            "cached_input_tokens": 1024,
            "cache_write_tokens": 0,
            "output_tokens": 500,
            "reasoning_tokens": 448,
        },
        cost=(176 * 2.0 + 1024 * 0.5 + 52 * 8.0 + 448 * 12.0) / 1e6,
    ),
    # Anthropic: 100 fresh + 900 read + 400 written input tokens; 30 output.
    "anthropic": Case(
        model="claude-r",
        queue=lambda s: s.queue_anthropic(
            anthropic_text("Friday.", usage=(100, 30, 900, 400))
        ),
        provider=lambda s: AnthropicProvider(
            s.url, model="claude-r", api_key=API_KEY, timeout=30.0
        ),
        counts={
            "input_tokens": 1400,
            "cached_input_tokens": 900,
            "cache_write_tokens": 400,
            "output_tokens": 30,
            "reasoning_tokens": 0,
        },
        cost=(100 * 3.0 + 900 * 0.3 + 400 * 3.75 + 30 * 15.0) / 1e6,
    ),
}


@pytest.fixture(name="llm_server")
def _llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


async def run_turn(tmp_path: Path, server: FakeLLMServer, case: Case) -> str:
    db = str(tmp_path / "l.db")
    config = parse_config(f'data_dir = "{tmp_path / "d"}"\nledger = "{db}"\n{PRICING}')
    case.queue(server)
    provider = case.provider(server)
    try:
        async with bootstrap(config, provider=provider) as runtime:
            outcome = await runtime.engine.run_turn("ops", "s1", "when is it due?")
    finally:
        await provider.aclose()
    assert outcome.completed
    assert outcome.answer == "Friday."
    return db


@pytest.mark.parametrize("wire", sorted(CASES))
async def test_counts_are_recorded_priced_and_reported(
    wire: str,
    tmp_path: Path,
    llm_server: FakeLLMServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Event, cost, costs --json, observe --json and the span all carry them."""
    case = CASES[wire]
    db = await run_turn(tmp_path, llm_server, case)
    with open_store(db) as store:
        calls = [
            r for r in store.read_all(limit=1_000) if isinstance(r.event, ModelCalled)
        ]
        assert len(calls) == 1
        event = calls[0].event
        assert isinstance(event, ModelCalled)
        assert {name: getattr(event, name) for name in case.counts} == case.counts
        assert event.model == case.model
        assert math.isclose(event.cost_usd, case.cost, rel_tol=1e-12)

        exporter = InMemorySpanExporter()
        tracer = TracerProvider()
        tracer.add_span_processor(SimpleSpanProcessor(exporter))
        export_run(store, TelemetryConfig(console=True), after=0, provider=tracer)
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    attributes = chat.attributes or {}
    assert attributes["gen_ai.usage.input_tokens"] == case.counts["input_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == case.counts["output_tokens"]
    assert (
        attributes["gen_ai.usage.cache_read.input_tokens"]
        == (case.counts["cached_input_tokens"])
    )
    assert (
        attributes["gen_ai.usage.cache_creation.input_tokens"]
        == (case.counts["cache_write_tokens"])
    )
    assert (
        attributes["gen_ai.usage.reasoning.output_tokens"]
        == (case.counts["reasoning_tokens"])
    )

    capsys.readouterr()  # the turn's own log lines
    code, out, err = run(capsys, "--db", db, "costs", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    (row,) = report["rows"]
    assert row["group"] == case.model
    for name, value in case.counts.items():
        assert row[name] == report["total"][name] == value, name
    assert math.isclose(row["cost_usd"], case.cost, rel_tol=1e-12)

    code, out, err = run(capsys, "--db", db, "observe", "--json")
    assert (code, err) == (0, "")
    assert f'"cache_write_tokens": {case.counts["cache_write_tokens"]}' in out or (
        f'"cache_write_tokens":{case.counts["cache_write_tokens"]}' in out
    )
    assert f'"reasoning_tokens": {case.counts["reasoning_tokens"]}' in out or (
        f'"reasoning_tokens":{case.counts["reasoning_tokens"]}' in out
    )


counts = st.integers(min_value=0, max_value=10**9)


def test_wire_counts_are_read_exactly_over_http() -> None:
    """Any counts either wire reports arrive in the neutral meaning, none lost."""
    with FakeLLMServer() as server:

        async def ask(provider: Provider) -> Usage | None:
            try:
                return (await provider.complete(HELLO)).usage
            finally:
                await provider.aclose()

        @settings(max_examples=25, deadline=None)
        @given(fresh=counts, read=counts, written=counts, out=counts, thinking=counts)
        def check(fresh: int, read: int, written: int, out: int, thinking: int) -> None:
            server.queue_openai(
                openai_text("ok", usage=(fresh + read, out + thinking, read, thinking))
            )
            openai = OpenAICompatibleProvider(
                server.openai_base_url, "m", api_key=API_KEY, timeout=30.0
            )
            assert asyncio.run(ask(openai)) == Usage(
                input_tokens=fresh + read,
                output_tokens=out + thinking,
                cached_input_tokens=read,
                reasoning_tokens=thinking,
            )
            server.queue_anthropic(
                anthropic_text("ok", usage=(fresh, out, read, written))
            )
            anthropic = AnthropicProvider(
                server.url, model="m", api_key=API_KEY, timeout=30.0
            )
            assert asyncio.run(ask(anthropic)) == Usage(
                input_tokens=fresh + read + written,
                output_tokens=out,
                cached_input_tokens=read,
                cache_write_tokens=written,
            )

        check()


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("cache_write_per_million", "-1.5", "-1.5"),
        ("reasoning_per_million", "nan", "nan"),
        ("cached_input_per_million", "inf", "inf"),
        ("reasoning_per_million", "-inf", "-inf"),
    ],
)
def test_bad_rates_are_refused_at_load(key: str, value: str, shown: str) -> None:
    """A negative or non-finite rate names its key and value; none is zeroed."""
    text = "[pricing.m]\ninput_per_million = 1\noutput_per_million = 2\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(f"{text}{key} = {value}\n")
    expected = f"pricing.m.{key}: expected a finite number >= 0, found {shown}"
    assert str(caught.value) == expected


def test_negative_base_rate_is_refused_too() -> None:
    """The input and output rates are checked the same way."""
    with pytest.raises(ConfigError, match=r"pricing\.m\.input_per_million: .* -3"):
        parse_config("[pricing.m]\ninput_per_million = -3\noutput_per_million = 2\n")


def test_unknown_pricing_key_is_refused() -> None:
    """A misspelt rate is rejected, never ignored."""
    with pytest.raises(ConfigError, match="reasoning_per_milion"):
        parse_config(
            "[pricing.m]\ninput_per_million = 1\noutput_per_million = 2\n"
            "reasoning_per_milion = 4\n"
        )


def test_rates_parse_with_defaults_left_unset() -> None:
    """Unset cache-write and reasoning rates stay unset (input/output rates apply)."""
    config = parse_config(
        "[pricing.m]\ninput_per_million = 1\noutput_per_million = 2\n"
        "cache_write_per_million = 0\n"
    )
    price = config.pricing["m"]
    assert (price.cache_write_per_million, price.reasoning_per_million) == (0.0, None)


def test_cli_refuses_a_bad_rate_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the CLI: exit 2, one line on stderr, no traceback, no ledger written."""
    config = tmp_path / "turnledger.toml"
    config.write_text(
        "[pricing.m]\ninput_per_million = 1\noutput_per_million = 2\n"
        "cache_write_per_million = -1\n"
    )
    script = tmp_path / "script.toml"
    script.write_text('[[steps]]\ntext = "hi"\n')
    db = tmp_path / "l.db"
    code, out, err = run(
        capsys,
        "--config",
        str(config),
        "--db",
        str(db),
        "run",
        str(script),
        "--turn",
        "hello",
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "pricing.m.cache_write_per_million" in err
    assert "-1" in err
    assert "Traceback" not in err
    assert not db.exists()
