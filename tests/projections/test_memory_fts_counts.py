"""Keyword recall's term frequencies: substring counts on SQLite's lowercased text.

Counted with ``str.count`` on ``lower(key || ' ' || content)`` read once per
row, they must equal SQL's own ``(length(x) - length(replace(x, t, ''))) /
length(t)``, which PostgreSQL's scoring mirrors (any text, ASCII or not).
"""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from turnledger.projections.memory.sqlite._fts import Term, _frequencies

words = st.sampled_from(("ab", "aba", "Day", "friday", "é", "ÉTÉ", "x", "naïve"))
texts = st.lists(words, max_size=12).map(" ".join)


@given(
    rows=st.lists(st.tuples(texts, texts), min_size=1, max_size=6),
    terms=st.lists(
        st.sampled_from(("ab", "aba", "day", "é", "été", "x", "naïve")),
        min_size=1,
        max_size=4,
        unique=True,
    ),
)
def test_counts_are_sqls_substring_counts(rows, terms):
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE memories (id TEXT, key TEXT, content TEXT)")
        db.executemany(
            "INSERT INTO memories VALUES (?, ?, ?)",
            [(f"e{i}", key, content) for i, (key, content) in enumerate(rows)],
        )
        rowids = [r for (r,) in db.execute("SELECT rowid FROM memories")]
        live = [Term(t) for t in terms]
        holding = {t: frozenset(rowids) for t in live}  # every row "holds" each
        ids, found = _frequencies(db, live, holding, rowids)
        for rowid in rowids:
            assert ids[rowid] == f"e{rowid - 1}"
            for term in live:
                (expected,) = db.execute(
                    "SELECT (length(x) - length(replace(x, ?1, ''))) / length(?1) "
                    "FROM (SELECT lower(key || ' ' || content) AS x FROM memories "
                    "WHERE rowid = ?2)",
                    (term.text, rowid),
                ).fetchone()
                assert found[rowid][term] == max(1, expected)
    finally:
        db.close()
