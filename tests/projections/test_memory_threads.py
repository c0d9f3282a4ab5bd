"""Conversation threads: a message lends its neighbours part of its evidence.

A reply rarely repeats the words of what it answers; keyword recall finds the
question and, through its thread (the agent's ``conversation`` rows of one
session and namespace, in the order stored), the reply beside it. Rows of
other categories have no thread; a row the caller may not see is never lent
to, nor stepped onto. SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.contracts.memory_contract import T0, put
from turnledger.policies.threads import THREAD_SHARE, lend_along_threads
from turnledger.projections.memory.postgres import PostgresMemory
from turnledger.projections.memory.protocol import MemoryEntry
from turnledger.projections.memory.sqlite import SQLiteMemory

Memory = SQLiteMemory | PostgresMemory


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest) -> Iterator[Memory]:
    if request.param == "sqlite":
        store = SQLiteMemory(":memory:")
        try:
            yield store
        finally:
            store.close()
        return
    url = fresh_schema_url(require_postgres())
    pg = PostgresMemory(url)
    try:
        yield pg
    finally:
        pg.close()
        drop_schema(url)


class Writer:
    """Stores rows one after another (a minute apart, in the order given)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.clock = itertools.count()

    def __call__(
        self,
        key: str,
        content: str,
        *,
        agent: str = "ops",
        session: str | None = "s1",
        namespace: str = "default",
        category: str = "conversation",
    ) -> None:
        put(
            self.memory,
            key,
            content,
            agent=agent,
            category=category,
            session=session,
            namespace=namespace,
            at=T0 + timedelta(minutes=next(self.clock)),
        )


def _recall(memory: Memory, query: str, **scope: object) -> list[MemoryEntry]:
    found = memory.recall(query, agents=["ops"], limit=10, **scope)  # type: ignore[arg-type]
    assert isinstance(found, list)
    return found


CHAT = (
    ("k1", "user: we adopted a kitten last week"),
    ("k2", "user: which editor should I pick for rust"),
    ("k3", "assistant: helix, with its language server"),
    ("k4", "user: the deploy freeze starts friday"),
    ("k5", "user: my sister visits in june"),
)


def test_a_reply_is_recalled_beside_the_question_it_answers(memory: Memory) -> None:
    put = Writer(memory)
    for key, content in CHAT:
        put(key, content)
    found = _recall(memory, "rust editor", session="s1")
    keys = [e.key for e in found]
    assert keys[0] == "k2"
    assert set(keys) == {"k1", "k2", "k3"}  # the two neighbours, nothing else
    lender = found[0].score
    assert lender is not None
    for borrower in found[1:]:
        assert borrower.score == pytest.approx(THREAD_SHARE * lender)


def test_facts_of_other_categories_lend_nothing(memory: Memory) -> None:
    put = Writer(memory)
    for key, content in CHAT:
        put(key, content, category="core", session=None)
    assert [e.key for e in _recall(memory, "rust editor")] == ["k2"]


def test_a_neighbour_holding_words_of_its_own_rises(memory: Memory) -> None:
    # "b2" and "c2" hold the same word once and are as long; "b2", stored
    # last, is the newer fact; only "c2" follows a row holding the query's
    # other word.
    put = Writer(memory)
    put("a1", "user: the weather was grey all day")
    put("c1", "user: the staging database moved to heron")
    put("c2", "user: deploy went fine on tuesday evening")
    put("a3", "user: nothing much happened at lunch today")
    put("b2", "user: deploy went fine on thursday evening")
    keys = [e.key for e in _recall(memory, "deploy to heron", session="s1")]
    assert keys.index("c2") < keys.index("b2")


def test_a_thread_steps_over_rows_the_caller_may_not_see(memory: Memory) -> None:
    put = Writer(memory)
    put("k1", "user: which editor should I pick for rust")
    put("x1", "assistant: not this agent's", agent="other")
    put("x2", "assistant: not this session", session="s2")
    put("x3", "assistant: not this namespace", namespace="scratch")
    put("x4", "assistant: not a conversation row", category="core", session=None)
    put("k2", "assistant: helix, with its language server")
    keys = [e.key for e in _recall(memory, "rust editor", session="s1")]
    assert keys == ["k1", "k2"]


def test_a_forgotten_or_superseded_row_is_stepped_over(memory: Memory) -> None:
    put = Writer(memory)
    put("k1", "user: which editor should I pick for rust")
    put("k2", "assistant: one moment")
    put("k3", "assistant: let me think")
    put("k4", "assistant: helix, with its language server")
    memory.forget("k2", agent="ops")
    memory.supersede("k3", agent="ops", superseded_by="ops-k4")
    keys = [e.key for e in _recall(memory, "rust editor", session="s1")]
    assert keys == ["k1", "k4"]


def test_a_row_outside_the_time_window_is_not_lent_to(memory: Memory) -> None:
    put = Writer(memory)
    put("k1", "user: an early remark")  # T0
    put("k2", "user: which editor should I pick for rust")  # T0 + 1 min
    put("k3", "assistant: helix, with its language server")  # T0 + 2 min
    since = T0 + timedelta(seconds=30)
    keys = [e.key for e in _recall(memory, "rust editor", session="s1", since=since)]
    assert keys == ["k2", "k3"]


# The whole store, any interleaving: every recalled row is in the caller's
# scope, and every row holding none of the query's words sits next to one that
# does, in its thread, among the caller's rows.

row = st.tuples(
    st.sampled_from(["ops", "other"]),
    st.sampled_from(["s1", "s2", None]),
    st.sampled_from(["default", "scratch"]),
    st.sampled_from(["conversation", "core"]),
    st.booleans(),  # holds the query's word
)


def _visible(agent: str, session: str | None, category: str) -> bool:
    # recall(agents=["ops"], session="s1"): the agent's rows of s1, and its
    # session-less core rows.
    return agent == "ops" and (
        session == "s1" or (session is None and category == "core")
    )


def _check_threads(make: Callable[[], Memory]) -> Callable[[list[tuple]], None]:
    def check(rows: list[tuple]) -> None:
        memory = make()
        try:
            put = Writer(memory)
            for i, (agent, session, namespace, category, holds) in enumerate(rows):
                word = "needle" if holds else "filler"
                put(
                    f"r{i}",
                    f"{word} {i}",
                    agent=agent,
                    session=session,
                    namespace=namespace,
                    category=category,
                )
            found = {e.key for e in _recall(memory, "needle", session="s1")}
            seen = [(i, r) for i, r in enumerate(rows) if _visible(r[0], r[1], r[3])]
            assert found <= {f"r{i}" for i, _ in seen}
            for i, (_, session, namespace, category, holds) in seen:
                if f"r{i}" not in found or holds:
                    continue
                assert category == "conversation"
                thread = [
                    (j, r)
                    for j, r in seen
                    if r[3] == "conversation" and r[1] == session and r[2] == namespace
                ]
                place = [j for j, _ in thread].index(i)
                beside = (
                    thread[max(0, place - 1) : place] + thread[place + 1 : place + 2]
                )
                assert any(r[4] for _, r in beside)
        finally:
            memory.close()

    return check


rows = st.lists(row, min_size=1, max_size=14)
few = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@few
@given(rows=rows)
def test_sqlite_threads_never_leak_a_scope(rows: list[tuple]) -> None:
    _check_threads(lambda: SQLiteMemory(":memory:"))(rows)


@pytest.fixture(scope="module")
def postgres_url() -> str:
    return require_postgres()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rows=rows)
def test_postgres_threads_never_leak_a_scope(
    postgres_url: str, rows: list[tuple]
) -> None:
    url = fresh_schema_url(postgres_url)
    try:
        _check_threads(lambda: PostgresMemory(url))(rows)
    finally:
        drop_schema(url)


# The lending itself (pure).

lenders = st.dictionaries(
    st.integers(0, 20), st.floats(0.01, 50.0), min_size=1, max_size=10
)


@given(data=st.data(), ranks=lenders)
def test_lending_never_decides_whether_anything_passes_the_floor(
    data: st.DataObject, ranks: dict[int, float]
) -> None:
    scores = {r: data.draw(st.floats(0.0, 1.0)) for r in ranks}
    neighbours = {
        r: data.draw(st.lists(st.integers(0, 30), max_size=2, unique=True))
        for r in ranks
    }
    lent = lend_along_threads(ranks, neighbours)
    assert lent.ranks.keys() == ranks.keys() | {
        n for ns in neighbours.values() for n in ns
    }
    lent_scores = {r: lent.score(r, lambda x: scores.get(x, 0.0)) for r in lent.ranks}
    for r, rank in ranks.items():
        assert lent.ranks[r] >= rank  # lending only adds
        assert lent_scores[r] >= scores[r]
    assert max(lent_scores.values()) == max(scores.values())  # the best stays the best
    for r, score in lent_scores.items():
        if r not in ranks:  # a borrower: half its best lender, no more
            assert score == THREAD_SHARE * max(
                scores[o] for o, ns in neighbours.items() if r in ns
            )
