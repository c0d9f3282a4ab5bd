"""The LIKE fallback: substring search over the scope's newest rows.

It runs when no keyword or vector stage found anything: a word inside a longer
word (``ploy`` in ``deployment``), emoji and symbols the tokenizer drops. Its
cost is bounded by scanning at most :data:`LIKE_WINDOW` rows, and its scores are
capped below a real match's.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final, NamedTuple

from turnledger.policies.relevance import is_content_term, word_tokens
from turnledger.projections.memory.sqlite._schema import COLUMNS
from turnledger.projections.memory.sqlite._scope import Scope, newest_sql

LIKE_TERMS: Final = 8
"""How many whitespace words of a query the LIKE fallback looks for."""

LIKE_WINDOW: Final = 500
"""How many of the scope's newest rows the LIKE fallback scans at most."""

_WINDOW_COLUMNS: Final = "m.rowid AS rowid, m.updated_us AS updated_us, m.id AS id"
_LIKE_KEY: Final = "key LIKE ? ESCAPE '\\'"
_LIKE_CONTENT: Final = "content LIKE ? ESCAPE '\\'"


LIKE_MAX_SCORE: Final = 0.5
"""The score of a row containing every word: substring evidence is weaker than
a ranked match, so a fallback hit never scores like the best keyword hit."""


class _Needle(NamedTuple):
    text: str
    prefix: bool


def like_search(
    db: sqlite3.Connection, query: str, scope: Scope, limit: int
) -> list[tuple[tuple[Any, ...], float]]:
    """Find rows containing the query's words as substrings (the fallback).

    Scans the scope's :data:`LIKE_WINDOW` newest rows, so its cost is bounded.
    A word ending in ``*`` must start a word of the row (at the start of the
    text or after a space); any other word may occur anywhere (ASCII letters
    match case-insensitively). The score is :data:`LIKE_MAX_SCORE` times the
    share of the query's words a row contains (the reference gave every hit
    1.0, so any substring hit passed the relevance floor).

    Args:
        db: The memory database.
        query: The user's query text.
        scope: The rows that may match.
        limit: How many rows to return at most.

    Returns:
        ``(row, score)`` pairs (rows as :data:`COLUMNS`), most words first, then
        newest, then by id.
    """
    needles = _needles(query)
    if not needles:
        return []
    window, window_params = newest_sql(scope, LIKE_WINDOW, columns=_WINDOW_COLUMNS)
    tests: list[str] = []
    params: list[Any] = []
    for needle in needles:
        test, patterns = _like_test(needle)
        tests.append(test)
        params += patterns
    sql = (
        f"SELECT * FROM (SELECT {COLUMNS}, {' + '.join(tests)} AS hits "
        f"FROM memories WHERE rowid IN (SELECT rowid FROM ({window}))) "
        "WHERE hits > 0 ORDER BY hits DESC, updated_us DESC, id LIMIT ?"
    )
    rows = db.execute(sql, [*params, *window_params, limit]).fetchall()
    share = LIKE_MAX_SCORE / len(needles)
    return [(tuple(row[:-1]), share * row[-1]) for row in rows]


def _needles(query: str) -> list[_Needle]:
    found: dict[_Needle, None] = {}
    for word in query.split()[:LIKE_TERMS]:
        stem = word.rstrip("*")
        if not any(is_content_term(t) for t in word_tokens(stem)):
            continue  # stop words and one-letter words are never searched for
        if stem and stem != word:
            found.setdefault(_Needle(stem, prefix=True))
        else:
            found.setdefault(_Needle(word, prefix=False))
    return list(found)


def _like_test(needle: _Needle) -> tuple[str, list[str]]:
    text = _escape_like(needle.text)
    if not needle.prefix:
        return f"({_LIKE_KEY} OR {_LIKE_CONTENT})", [f"%{text}%"] * 2
    patterns = [f"{text}%", f"% {text}%"] * 2
    test = f"({_LIKE_KEY} OR {_LIKE_KEY} OR {_LIKE_CONTENT} OR {_LIKE_CONTENT})"
    return test, patterns


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
