"""The memory service: relevance that filters, [recall] reranks, config shredding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from turnledger.ledger.store import open_store
from turnledger.pipeline.config import Config, ConfigError, parse_config
from turnledger.pipeline.config.sections import (
    EmbeddingConfig,
    MemoryConfig,
    RecallConfig,
    recall_tuning,
)
from turnledger.pipeline.memory import MemoryService, rerank
from turnledger.policies.relevance import ABSENT_FULL_ROWS
from turnledger.projections.memory.protocol import MemoryEntry
from turnledger.projections.memory.shred import is_sealed


@pytest.fixture(name="service")
def _service(tmp_path):
    ledger = str(tmp_path / "l.db")
    store = open_store(ledger)
    made: list[MemoryService] = []

    def make(config: Config | None = None) -> MemoryService:
        service = MemoryService(store, config or Config(), ledger_url=ledger)
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()
    store.close()


def test_the_issues_examples_inject_nothing(service):
    """Unrelated questions get no memory block; a related one does."""
    memory = service()
    memory.store_entry("ops", "release_day", "The release is on Friday")
    memory.store_entry("ops", "api_key", "the staging API key is sk-test-123")
    memory.store_entry("ops", "editor", "Helix is my editor")
    for unrelated in ("what is the weather like on Mars", "is it", "what is my"):
        assert memory.context_block("ops", unrelated, session="s1") == ""
    block = memory.context_block("ops", "what is my editor", session="s1")
    assert "- editor: Helix is my editor" in block
    assert "release_day" not in block


def test_min_relevance_filters_partial_matches(service):
    """A row holding a quarter of the query is under the 0.4 floor (keywords only).

    In a scope of at least ``ABSENT_FULL_ROWS`` rows, where a query word no row
    holds counts fully against a row (in a smaller one it counts in part).
    """
    keywords = EmbeddingConfig(provider="none")
    memory = service(Config(embedding=keywords))
    memory.store_entry("ops", "rover", "the rover landed")
    for i in range(ABSENT_FULL_ROWS):
        memory.store_entry("ops", f"note-{i}", f"gardening note number {i}")
    query = "rover battery voltage telemetry"
    (found,) = memory.recall("ops", query)
    assert found.key == "rover"
    assert found.score is not None
    assert found.score < 0.4
    assert memory.context_block("ops", query, session="s1") == ""
    low = service(Config(embedding=keywords, recall=RecallConfig(min_relevance=0.1)))
    assert "rover" in low.context_block("ops", query, session="s1")


def entry(key: str, score: float, days: float, importance: float | None = None):
    at = datetime(2026, 11, 1, tzinfo=UTC) - timedelta(days=days)
    return MemoryEntry(
        id=key,
        key=key,
        content=f"{key} content words",
        category="daily",
        agent="ops",
        importance=importance,
        created_at=at,
        updated_at=at,
        score=score,
    )


def test_rerank_stages_follow_the_recall_settings():
    """Decay puts a fresh row above an old better one; importance lifts a row."""
    now = datetime(2026, 11, 1, tzinfo=UTC)
    old, fresh = entry("old", 0.9, days=14), entry("fresh", 0.6, days=0)
    assert [
        e.key for e in rerank([old, fresh], recall_tuning(RecallConfig()), now)
    ] == [
        "old",
        "fresh",
    ]
    decayed = rerank([old, fresh], recall_tuning(RecallConfig(decay=True)), now)
    assert [e.key for e in decayed] == ["fresh", "old"]
    assert decayed[1].score == pytest.approx(0.9 / 4)
    plain, vital = entry("plain", 0.8, 0), entry("vital", 0.7, 0, importance=1.0)
    blended = rerank(
        [plain, vital], recall_tuning(RecallConfig(importance_blend=True)), now
    )
    assert [e.key for e in blended] == ["vital", "plain"]


def test_decay_changes_what_a_turn_sees(service):
    """With [recall] decay on, the block is ordered by decayed score."""
    memory = service(Config(recall=RecallConfig(decay=True, min_relevance=0.0)))
    memory.store_entry("ops", "a", "deploy notes", category="daily")
    block = memory.context_block("ops", "deploy notes", session="s1")
    assert "- a: deploy notes" in block


def test_bad_recall_settings_are_config_errors():
    with pytest.raises(ConfigError, match="recall: Expected an MMR lambda"):
        parse_config("[recall]\nmmr = true\nmmr_lambda = 2")
    with pytest.raises(ConfigError, match=r"recall: .*half-life"):
        parse_config("[recall]\ndecay = true\nhalf_life_days = 0")


def test_memory_shredding_from_config_seals_every_write(tmp_path, service):
    """[memory] shredding = true: the ledger holds only sealed contents."""
    memory = service(Config(memory=MemoryConfig(shredding=True)))
    assert memory.shredding
    memory.store_entry("ops", "vault", "the vault code is 48151623")
    (recorded,) = [
        r for r in memory.store.read_all() if type(r.event).__name__ == "MemoryStored"
    ]
    assert is_sealed(recorded.event.content)
    assert memory.get("ops", "vault").content == "the vault code is 48151623"
    assert not service().shredding  # the default stays off


def test_namespace_and_importance_are_the_callers(service):
    memory = service()
    stored = memory.store_entry(
        "ops", "k", "deploy target", namespace="infra", importance=0.9
    )
    assert (stored.namespace, stored.importance) == ("infra", 0.9)
    with pytest.raises(ValueError, match="importance in"):
        memory.store_entry("ops", "k2", "x y", importance=1.5)


def test_recall_time_window(service):
    memory = service()
    memory.store_entry("ops", "k", "deploy target")
    now = datetime.now(UTC)
    assert memory.recall("ops", "deploy", since=now - timedelta(hours=1))
    assert memory.recall("ops", "deploy", since=now + timedelta(hours=1)) == []
    assert memory.recall("ops", "deploy", until=now - timedelta(hours=1)) == []


def test_turn_recall_summaries_carry_no_user_words(service):
    """What a turn records about its recall query is its shape, never its words."""
    memory = service()
    memory.store_entry("ops", "k", "deploy target is prod")
    recall = memory.recall_for_turn("ops", "where is my secret diary", session="s1")
    assert recall.query_summary == "24 chars, 2 content terms"
    assert "diary" not in recall.query_summary


def test_markdown_peers_are_read_and_merged_by_score(tmp_path, service):
    """read_memory_from on a Markdown agent reads its Markdown peers' files."""
    cfg = parse_config(
        f'data_dir = "{tmp_path / "d"}"\n'
        '[agents.ops]\nmemory = "markdown"\nread_memory_from = ["research"]\n'
        '[agents.research]\nmemory = "markdown"\n'
    )
    memory = service(cfg)
    memory.store_entry("research", "paper", "the coral reef survey is due Friday")
    memory.store_entry("ops", "standup", "standup notes about the reef survey")
    memory.store_entry("research", "unrelated", "lunch is at noon")
    found = memory.recall("ops", "coral reef survey due")
    assert [e.key for e in found] == ["[research] paper", "standup"]
    assert [e.agent for e in found] == ["research", "ops"]
    assert found[0].score > found[1].score
    # the peer sees nothing of ops: read_memory_from is one-way
    assert [e.key for e in memory.recall("research", "standup notes")] == []
    # the peer's files are caught up for the reader, even before the peer reads
    memory.store_entry("research", "later", "the reef survey moved to Monday")
    assert "[research] later" in [e.key for e in memory.recall("ops", "reef survey")]
