"""The memory strategy against a real SQLite ledger, with a fake provider."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest

from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import (
    AgentConfig,
    EmbeddingConfig,
    MemoryConfig,
)
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy import DefaultMemoryStrategy, strategy_for
from turnledger.pipeline.memory.strategy.types import (
    ConsolidationReport,
    NoStrategy,
    StrategySettings,
)
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse, ProviderError
from turnledger.policies.consolidation import CONSOLIDATION_SYSTEM_PROMPT

AGENT = "ops"
DAY = datetime(2026, 3, 9, 15, 30, tzinfo=UTC)
USER = "Where do our deploys go these days? I keep forgetting."
ASSISTANT = "They go to prod-cluster-3 [IMAGE:/tmp/diagram.png]."
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FakeProvider:
    """Answers each request with the next canned step (implements Provider)."""

    name = "fake"
    model = "fake-1"

    def __init__(self, *steps: str | ProviderError) -> None:
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        return ChatResponse(text=step, model=self.model)

    async def aclose(self) -> None:
        pass


def answer(history: str, update: str | None = None) -> str:
    return json.dumps({"history_entry": history, "memory_update": update})


def ids():
    numbers = count(1)
    return lambda: f"id{next(numbers)}"


@pytest.fixture(name="world")
def _world(tmp_path):
    path = str(tmp_path / "ledger.db")
    store = open_store(path)
    services: list[MemoryService] = []

    def service(config: Config | None = None, *, where: str = path) -> MemoryService:
        made = MemoryService(store, config or Config(), ledger_url=where)
        services.append(made)
        return made

    yield service, store, tmp_path
    for made in services:
        made.close()
    store.close()


def strategy(memory, provider, **settings):
    return DefaultMemoryStrategy(
        memory,
        provider,
        settings=StrategySettings(**settings),
        clock=lambda: DAY,
        new_id=ids(),
    )


def memory_events(store, agent=AGENT):
    return [r.event for r in store.read_stream(memory_stream_id(agent))]


def seed(memory, key, content, category="core"):
    memory.store_entry(AGENT, key, content, category=category, source="cli")


# -- consolidation -------------------------------------------------------------


async def test_consolidation_records_a_daily_entry_and_a_core_fact(world):
    """One call; a daily and a core memory.stored event, source consolidation."""
    service, store, _ = world
    memory = service()
    provider = FakeProvider(
        answer(
            "Discussed where deploys go.", "Deploys must always target prod-cluster-3."
        )
    )
    report = await strategy(memory, provider).consolidate_turn(
        AGENT, "s1", USER, ASSISTANT
    )
    assert report == ConsolidationReport(
        agent=AGENT,
        session="s1",
        outcome="recorded",
        daily_key="daily_2026-03-09_id1",
        core="stored",
        core_key="core_id2",
    )
    [request] = provider.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].text == CONSOLIDATION_SYSTEM_PROMPT
    assert request.messages[1].text == (
        f"User: {USER}\nAssistant: They go to prod-cluster-3 [media attachment]."
    )
    daily, core = memory_events(store)
    assert isinstance(daily, MemoryStored)
    assert isinstance(core, MemoryStored)
    assert (
        daily.key,
        daily.category,
        daily.source,
        daily.importance,
        daily.session,
    ) == (
        "daily_2026-03-09_id1",
        "daily",
        "consolidation",
        0.3,
        None,
    )
    assert daily.content == "Discussed where deploys go."
    assert (core.key, core.category, core.source, core.importance) == (
        "core_id2",
        "core",
        "consolidation",
        0.9,
    )
    assert memory.get(AGENT, "core_id2").content == (
        "Deploys must always target prod-cluster-3."
    )


async def test_an_answer_without_a_fact_records_only_the_daily_entry(world):
    """A null memory_update writes the daily entry alone."""
    service, store, _ = world
    report = await strategy(
        service(), FakeProvider(answer("Small talk."))
    ).consolidate_turn(AGENT, None, USER, "hi")
    assert (report.outcome, report.core, report.daily_key) == (
        "recorded",
        "none",
        "daily_2026-03-09_id1",
    )
    assert [e.key for e in memory_events(store)] == ["daily_2026-03-09_id1"]


@pytest.mark.parametrize(
    ("config", "message", "detail"),
    [
        (Config(), "too short", "turn does not qualify: too_short"),
        (
            Config(memory=MemoryConfig(autosave=False)),
            USER,
            "turn does not qualify: disabled",
        ),
        (
            Config(agents={AGENT: AgentConfig(autosave=False)}),
            USER,
            "turn does not qualify: disabled",
        ),
    ],
)
async def test_turns_that_do_not_qualify_call_nothing(world, config, message, detail):
    """Autosave off or a short message: no provider call, no event."""
    service, store, _ = world
    provider = FakeProvider(answer("x", "y"))
    report = await strategy(service(config), provider).consolidate_turn(
        AGENT, "s1", message, "ok"
    )
    assert (report.outcome, report.detail) == ("skipped", detail)
    assert provider.requests == []
    assert memory_events(store) == []


async def test_without_a_provider_nothing_happens(world):
    """No model configured: skipped."""
    service, store, _ = world
    report = await strategy(service(), None).consolidate_turn(AGENT, "s1", USER, "ok")
    assert report.detail == "no provider is configured for consolidation"
    assert memory_events(store) == []


async def test_a_none_backend_is_reported_unsupported(world):
    """An agent on the none backend keeps nothing; the model is not called."""
    service, _, _ = world
    memory = service(Config(agents={AGENT: AgentConfig(memory="none")}))
    provider = FakeProvider(answer("x"))
    report = await strategy(memory, provider).consolidate_turn(AGENT, "s1", USER, "ok")
    assert (report.outcome, report.detail) == (
        "unsupported",
        "none memory stores nothing",
    )
    assert provider.requests == []


async def test_a_near_duplicate_fact_is_rejected(world):
    """Jaccard 6/7 with a live core fact: no new core entry; the daily one stays."""
    service, store, _ = world
    memory = service()
    seed(memory, "pref", "User prefers Rust for systems work")
    provider = FakeProvider(
        answer("Talked Rust.", "user prefers Rust for all systems work")
    )
    report = await strategy(memory, provider).consolidate_turn(AGENT, "s1", USER, "ok")
    assert (report.outcome, report.core, report.duplicate_of, report.core_key) == (
        "recorded",
        "duplicate",
        "pref",
        None,
    )
    assert [e.key for e in memory_events(store)] == ["pref", "daily_2026-03-09_id1"]


@pytest.mark.parametrize(("seeded", "expected"), [(0.5, 0.5), (None, 0.7)])
async def test_merge_mode_folds_the_fact_into_the_survivor(world, seeded, expected):
    """Merge re-stores the survivor's key with both facts, keeping its importance."""
    service, store, _ = world
    memory = service()
    memory.store_entry(
        AGENT,
        "pref",
        "User prefers Rust for systems work",
        source="cli",
        importance=seeded,
    )
    provider = FakeProvider(
        answer("Talked Rust.", "User prefers Rust for all systems work")
    )
    report = await strategy(memory, provider, dedup_mode="merge").consolidate_turn(
        AGENT, "s1", USER, "ok"
    )
    assert (report.core, report.core_key) == ("merged", "pref")
    merged = memory_events(store)[-1]
    assert isinstance(merged, MemoryStored)
    assert (merged.key, merged.source, merged.importance) == (
        "pref",
        "consolidation",
        expected,
    )
    assert memory.get(AGENT, "pref").content == (
        "User prefers Rust for all systems work\nUser prefers Rust for systems work"
    )


async def test_a_conflicting_fact_is_superseded(world):
    """Lexical conflict above the threshold: a memory.superseded event hides it."""
    service, store, _ = world
    memory = service()
    seed(memory, "pref", "User prefers Rust for systems work")
    seed(memory, "standup", "Team standup moved to 0930")
    provider = FakeProvider(
        answer("Talked Go.", "User now prefers Go for systems work")
    )
    report = await strategy(memory, provider, conflict_threshold=0.6).consolidate_turn(
        AGENT, "s1", USER, "ok"
    )
    assert (report.core, report.core_key, report.superseded) == (
        "stored",
        "core_id2",
        ("pref",),
    )
    superseded = memory_events(store)[-1]
    assert superseded == MemorySuperseded(
        agent=AGENT,
        key="pref",
        superseded_by="core_id2",
        source="consolidation",
        reason="conflicts with the newer fact core_id2",
    )
    assert memory.get(AGENT, "pref") is None
    assert memory.get(AGENT, "standup") is not None


async def test_keyword_scores_do_not_supersede_by_default(world):
    """Without vectors the default uses token Jaccard: a shared word is no conflict."""
    service, _, _ = world
    memory = service(Config(embedding=EmbeddingConfig(provider="none")))
    seed(memory, "pref", "User prefers Rust for systems work")
    provider = FakeProvider(
        answer("Talked Go.", "User now prefers Go for systems work")
    )
    report = await strategy(memory, provider).consolidate_turn(AGENT, "s1", USER, "ok")
    assert report.superseded == ()
    assert memory.get(AGENT, "pref") is not None


async def test_recall_scores_supersede_above_the_default_threshold(world):
    """With recall scores, a core fact scoring above 0.85 is superseded."""
    service, _, _ = world
    memory = service()
    seed(memory, "pref", "User prefers Rust for systems work")
    seed(memory, "standup", "Team standup moved to 0930")
    # Recall scores are query coverage: every word of the update is in "pref"
    # (token Jaccard 0.5, so it is not a duplicate).
    provider = FakeProvider(answer("Talked Rust.", "User prefers Rust"))
    report = await strategy(
        memory, provider, conflict_scores="recall"
    ).consolidate_turn(AGENT, "s1", USER, "ok")
    assert report.superseded == ("pref",)
    assert sorted(e.key for e in memory.list(AGENT, category="core")) == [
        "core_id2",
        "standup",
    ]


@pytest.mark.parametrize(
    ("step", "outcome", "detail"),
    [
        (
            "I'm sorry, I can't do that.",
            "malformed",
            (
                "expected a JSON object with a string history_entry "
                "(answer: \"I'm sorry, I can't do that.\")"
            ),
        ),
        (
            ProviderError("rate_limit", "slow down, key sk-abcdefghijklmnop"),
            "provider_failed",
            "rate_limit: slow down, key [REDACTED]",
        ),
    ],
)
async def test_a_bad_answer_or_a_provider_failure_records_nothing(
    world, step, outcome, detail
):
    """Malformed output and provider errors are reported, never raised or stored."""
    service, store, _ = world
    report = await strategy(service(), FakeProvider(step)).consolidate_turn(
        AGENT, "s1", USER, "ok"
    )
    assert (report.outcome, report.detail) == (outcome, detail)
    assert memory_events(store) == []


async def test_gated_texts_are_not_written(world):
    """An empty history entry and a synthetic fact are refused by the gate."""
    service, store, _ = world
    provider = FakeProvider(answer("  ", "[cron:nightly] run backups"))
    report = await strategy(service(), provider).consolidate_turn(
        AGENT, "s1", USER, "ok"
    )
    assert (report.outcome, report.core, report.detail) == (
        "skipped",
        "gated",
        "memory update refused: synthetic",
    )
    assert memory_events(store) == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dedup_threshold": 1.2}, "Expected a dedup threshold between 0 and 1"),
        ({"dedup_mode": "drop"}, "Expected dedup mode 'reject' or 'merge'"),
        ({"conflict_threshold": -1.0}, "Expected a conflict threshold between 0 and 1"),
        ({"daily_purge_days": -1}, "Expected daily_purge_days >= 0"),
    ],
)
def test_bad_settings_fail_when_the_strategy_is_made(world, settings, message):
    """Settings are validated at wiring time, never in the middle of a turn."""
    service, _, _ = world
    with pytest.raises(ValueError, match=message):
        strategy(service(), None, **settings)


# -- strategy choice ------------------------------------------------------------


async def test_strategy_none_disables_consolidation_and_governance(world):
    """strategy = "none" gives NoStrategy, which never writes."""
    service, store, _ = world
    memory = service(Config(agents={"quiet": AgentConfig(strategy="none")}))
    chosen = strategy_for("quiet", memory, FakeProvider())
    assert isinstance(chosen, NoStrategy)
    assert chosen.name == "none"
    report = await chosen.consolidate_turn("quiet", "s1", USER, "ok")
    assert (report.outcome, report.detail) == (
        "skipped",
        "the agent's memory strategy is none",
    )
    governed = chosen.govern("quiet", DAY, dry_run=False)
    assert governed.plan.empty
    assert governed.recorded == 0
    assert store.max_position() == 0
    default = strategy_for(AGENT, memory, None)
    assert isinstance(default, DefaultMemoryStrategy)
    assert default.name == "default"


async def test_the_configured_default_strategy_mints_dated_keys(world):
    """strategy_for wires the shell's clock and ids: a dated, unique daily key."""
    service, _, _ = world
    memory = service()
    chosen = strategy_for(AGENT, memory, FakeProvider(answer("Deploy talk.")))
    report = await chosen.consolidate_turn(AGENT, "s1", USER, "ok")
    assert report.daily_key is not None
    assert re.fullmatch(r"daily_\d{4}-\d{2}-\d{2}_[0-9a-f]{32}", report.daily_key)


# -- governance ------------------------------------------------------------------


def store_at(memory, at, key, category, *, session=None):
    """Append a memory.stored event recorded at ``at`` (the store's own encoding)."""
    stream = memory_stream_id(AGENT)
    event = MemoryStored(
        agent=AGENT,
        key=key,
        content=f"{key} text",
        category=category,
        session=session,
        source="cli",
        entry_id=uuid.uuid4().hex,
    )
    at_us = (at - EPOCH) // timedelta(microseconds=1)
    version = memory.store.stream_version(stream)
    memory.store.write_requests(
        [memory.store.encode(stream, [event], version + 1, at_us)]
    )


NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def seed_ages(memory):
    rows = [
        ("conv_old", "conversation", 40, "s1"),
        ("conv_new", "conversation", 5, "s1"),
        ("day_new", "daily", 3, None),
        ("day_week", "daily", 10, None),
        ("day_old", "daily", 45, None),
        ("arch_old", "archive", 35, None),
        ("core_old", "core", 400, None),
        ("pinned_day", "daily", 45, None),
    ]
    for key, category, days, session in rows:
        store_at(memory, NOW - timedelta(days=days), key, category, session=session)


def snapshot(memory):
    rows = memory.backend(AGENT).export(agents=[AGENT])
    return {(e.key, e.category, e.content, e.session, e.created_at) for e in rows}


def test_governance_expires_archives_and_purges_exactly_the_right_entries(world):
    """A fixed now: each rule hits only its entries, all recorded as events."""
    service, store, tmp_path = world
    memory = service()
    seed_ages(memory)
    governor = strategy(memory, None, pinned_keys=frozenset({"pinned_day"}))
    before = store.max_position()

    report = governor.govern(AGENT, NOW)

    assert report.expired == ("conv_old",)
    assert report.archived == ("day_week",)
    assert sorted(report.purged) == ["arch_old", "day_old"]
    assert report.recorded == 4
    written = [r.event for r in store.read_all(after=before)]
    forgotten = [e for e in written if isinstance(e, MemoryForgotten)]
    assert sorted((e.key, e.source) for e in forgotten) == [
        ("arch_old", "governance"),
        ("conv_old", "governance"),
        ("day_old", "governance"),
    ]
    [archived] = [e for e in written if isinstance(e, MemoryStored)]
    assert (archived.key, archived.category, archived.source, archived.content) == (
        "day_week",
        "archive",
        "governance",
        "day_week text",
    )
    categories = {e.key: e.category for e in memory.list(AGENT)}
    assert categories == {
        "conv_new": "conversation",
        "day_new": "daily",
        "day_week": "archive",
        "core_old": "core",
        "pinned_day": "daily",
    }
    # The archive keeps the original creation time: its purge age counts from it.
    assert memory.get(AGENT, "day_week").created_at == NOW - timedelta(days=10)
    assert governor.govern(AGENT, NOW).plan.empty

    (tmp_path / "rebuilt").mkdir()
    rebuilt = service(where=str(tmp_path / "rebuilt" / "ledger.db"))
    assert snapshot(rebuilt) == snapshot(memory)

    later = governor.govern(AGENT, NOW + timedelta(days=26))
    assert (later.expired, later.archived, later.purged) == (
        ("conv_new",),
        ("day_new",),
        ("day_week",),
    )


def test_dry_run_reports_the_plan_and_writes_nothing(world):
    """A dry run plans exactly what a real run would, and appends no event."""
    service, store, _ = world
    memory = service()
    seed_ages(memory)
    governor = strategy(memory, None)
    before = store.max_position()
    dry = governor.govern(AGENT, NOW, dry_run=True)
    assert store.max_position() == before
    assert (dry.dry_run, dry.recorded) == (True, 0)
    assert dry.expired == ("conv_old",)
    assert set(dry.purged) == {"arch_old", "day_old", "pinned_day"}
    real = governor.govern(AGENT, NOW)
    assert real.plan == dry.plan
    assert real.recorded == 5


def test_governance_never_touches_a_peer_s_entries(world):
    """Only the agent's own rows are planned, even when it may read a peer's."""
    service, store, _ = world
    config = Config(
        agents={AGENT: AgentConfig(read_memory_from=("peer",)), "peer": AgentConfig()}
    )
    memory = service(config)
    stream = memory_stream_id("peer")
    old = MemoryStored(agent="peer", key="peer_day", content="x", category="daily")
    at_us = (NOW - timedelta(days=90) - EPOCH) // timedelta(microseconds=1)
    store.write_requests([store.encode(stream, [old], 1, at_us)])
    report = strategy(memory, None).govern(AGENT, NOW)
    assert report.plan.empty
    assert memory.get("peer", "peer_day") is not None


def test_append_only_backends_refuse_governance(world):
    """Markdown keeps every line: the plan is reported, nothing is recorded."""
    service, store, tmp_path = world
    workspace = str(tmp_path / "workspace")
    memory = service(
        Config(agents={AGENT: AgentConfig(memory="markdown", workspace=workspace)})
    )
    store_at(memory, NOW - timedelta(days=45), "day_old", "daily")
    before = store.max_position()
    report = strategy(memory, None).govern(AGENT, NOW)
    assert report.purged == ("day_old",)
    assert (report.recorded, report.refused) == (0, ("day_old",))
    assert store.max_position() == before
