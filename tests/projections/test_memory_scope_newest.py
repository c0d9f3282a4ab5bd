"""The keyword leg's scope samples: newest rows by insertion, and row lengths.

:func:`~turnledger.projections.memory.sqlite._scope.newest_sql` with
``by_rowid`` (the keyword leg's samples: the length sample and the
frequent-term estimate's edge) walks the ``memories_agent`` index per agent
and session part; it must give exactly the rowids a plain ``ORDER BY rowid
DESC`` over the scope's predicate gives. A row's length is read from its FTS5
``docsize`` record, one SQLite varint per column (:func:`doc_length`).
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._fts import doc_length
from turnledger.projections.memory.sqlite._scope import (
    make_scope,
    newest_sql,
    scope_sql,
)

AGENTS = ("a", "b", "c")
SESSIONS = (None, "s1", "s2")
CATEGORIES = ("core", "daily", "conversation")

rows = st.lists(
    st.tuples(
        st.sampled_from(AGENTS),
        st.sampled_from(SESSIONS),
        st.sampled_from(CATEGORIES),
        st.integers(0, 5),  # days after T0
        st.booleans(),  # superseded
    ),
    max_size=40,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    written=rows,
    asked=st.tuples(
        st.lists(st.sampled_from(AGENTS), min_size=1, max_size=3, unique=True),
        st.sampled_from(SESSIONS),
        st.booleans(),  # strict
        st.none() | st.integers(0, 5),  # since, days after T0
    ),
    limit=st.integers(1, 12),
)
def test_the_index_walk_gives_the_plain_sorts_rows(written, asked, limit):
    agents, session, strict, since = asked
    memory = SQLiteMemory(":memory:", background_vectors=False)
    for n, (agent, sess, category, day, superseded) in enumerate(written):
        key = f"k{n}"
        memory.store(
            NewMemory(
                agent=agent,
                key=key,
                content=f"row {n}",
                category=category,
                session=sess,
                entry_id=f"e{n}",
                at=T0 + timedelta(days=day),
            )
        )
        if superseded:
            memory.supersede(key, agent=agent, superseded_by="later")
    scope = make_scope(
        agents,
        session=session,
        strict=strict,
        since=None if since is None else T0 + timedelta(days=since),
    )
    db = memory._db.conn
    sql, params = newest_sql(scope, limit, "m.rowid AS rowid", by_rowid=True)
    walked = [rowid for (rowid,) in db.execute(sql, params)]
    where, plain_params = scope_sql(scope)
    plain = [
        rowid
        for (rowid,) in db.execute(
            f"SELECT m.rowid FROM memories AS m WHERE {where} "
            "ORDER BY m.rowid DESC LIMIT ?",
            [*plain_params, limit],
        )
    ]
    assert walked == plain
    memory.close()


def _varint(value: int) -> bytes:
    """SQLite's varint: 7 bits a byte, high bit on all but the last; 9 bytes
    above 56 bits, the ninth carrying 8."""
    if value >= 1 << 56:
        head = [((value >> (8 + 7 * i)) & 0x7F) | 0x80 for i in reversed(range(8))]
        return bytes([*head, value & 0xFF])
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(groups))


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=3))
def test_a_docsize_record_reads_as_the_sum_of_its_varints(columns):
    # One-byte varints take doc_length's fast path; longer ones the loop.
    assert doc_length(b"".join(map(_varint, columns))) == sum(columns)
