"""The keyword gate's contract: a backend scores each row as SQLite does.

SQLite's keyword gate (:class:`~policies.relevance.KeywordGate`) is the
reference; PostgreSQL and Markdown compute it their own way (tsvector counts,
a scope read whole). :func:`assert_scores_are_sqlites` stores the same rows in
both and compares each row's score for the same query. The words share no
substring, so SQLite's substring frequencies are token counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import put
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.memory.sqlite import SQLiteMemory

GATE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

gate_texts = st.lists(
    st.lists(st.sampled_from(GATE_WORDS), min_size=1, max_size=6).map(" ".join),
    min_size=1,
    max_size=8,
)
"""A scope's rows: up to 8 texts of the gate's words."""

gate_queries = st.lists(
    st.sampled_from((*GATE_WORDS, "which", "zulu")), max_size=4
).map(" ".join)
"""A query: the gate's words, a stop word, a word no row holds."""


def assert_scores_are_sqlites(
    memory: MemoryBackend, texts: list[str], query: str, agent: str
) -> None:
    """Store ``texts`` (keys ``k0``...) in ``memory`` and in SQLite; same scores."""
    sqlite = SQLiteMemory(":memory:")
    try:
        for i, text in enumerate(texts):
            for backend in (sqlite, memory):
                put(backend, f"k{i}", text, agent=agent)
        # Every row (at most 8): rows scored alike may be cut in another order.
        expected = {
            e.key: e.score for e in sqlite.recall(query, agents=[agent], limit=10)
        }
        found = {e.key: e.score for e in memory.recall(query, agents=[agent], limit=10)}
    finally:
        sqlite.close()
    assert found.keys() == expected.keys()
    for key, score in expected.items():
        ours = found[key]
        if score is None or ours is None:  # an empty query: the newest, unscored
            assert ours is score
        else:
            assert abs(ours - score) <= 1e-6


def gate_cases(test: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``test(..., texts, query)`` on 40 scopes and queries (Hypothesis).

    Always among them: six rows scored alike, more than recall's default limit.
    """
    seen = example(texts=["alpha"] * 6, query="alpha")(test)
    cases = given(texts=gate_texts, query=gate_queries)(seen)
    return settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(cases)
