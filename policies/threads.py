"""Conversation threads: a message lends its neighbours part of its evidence (pure).

Entries of the ``conversation`` category are a conversation's messages, stored
in the order they were said. A message that answers a question rarely repeats
the question's words ("what did you research?" / "adoption agencies, mostly"),
so keyword ranking finds the question and misses the answer beside it. A
*thread* is an agent's ``conversation`` rows of one session and namespace, in
the order they were first stored; a row's neighbours are the rows just before
and just after it in its thread, among the rows the caller may see.

Each keyword candidate a backend ranks closely (SQLite's rescored pool,
PostgreSQL's 64 likeliest) lends :data:`THREAD_SHARE` of its evidence to its
neighbours (:func:`lend_along_threads`):

- its **rank** (BM25): a row's rank becomes its own plus the share of each
  neighbour's, so a message whose neighbours match the query rises, and a
  neighbour holding none of the query's words can enter the list;
- its **score** (what the ``[recall] min_relevance`` floor is compared to): a
  row scores the greater of its own score and the share of its best
  neighbour's. A lent score is always below the lender's, so lending never
  decides *whether* anything passes the floor, only which rows.

Rows of other categories (facts stored one by one: ``core``, ``daily``, custom)
have no thread: stored one after another, they are not about each other.

:data:`THREAD_SHARE` (0.5) was chosen on the development split of the public
benchmarks (``benchmarks/bench_recall_public.py --split dev``: LoCoMo's first
5 conversations, BEAM's first 10), against no lending: with keywords only, at
0.3, 0.5 and 0.7, any@10 rose by 0.05-0.07 on LoCoMo and 0.02-0.04 on BEAM,
and LoCoMo's any@1 fell as the share grew (0.32 to 0.29 at 0.5, 0.24 at 0.7);
in the default hybrid, at 0.4, 0.5 and 0.6, any@10 rose by 0.05 on LoCoMo and
0.01-0.04 on BEAM, any@1 by 0.01-0.03 on both.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, Generic, NamedTuple, TypeVar

from turnledger.policies.types import CONVERSATION_CATEGORY

THREAD_CATEGORY: Final = CONVERSATION_CATEGORY
"""The category whose rows form threads (a conversation's messages)."""

THREAD_SHARE: Final = 0.5
"""The share of a row's rank and score each of its neighbours borrows."""

_Row = TypeVar("_Row", bound=Hashable)


class Lent(NamedTuple, Generic[_Row]):
    """Ranks after lending along threads, and who lent to whom.

    Attributes:
        ranks: Every lender's and borrower's rank: its own (0 for a borrower
            that had none) plus :data:`THREAD_SHARE` of each neighbour's.
        lenders: Each row's neighbours that lent to it.
    """

    ranks: dict[_Row, float]
    lenders: dict[_Row, list[_Row]]

    def score(self, row: _Row, own: Callable[[_Row], float]) -> float:
        """Return the greater of ``row``'s own score and its best lender's share.

        Args:
            row: A lender or a borrower.
            own: A row's own score, on [0, 1] (0 for a row no keyword found);
                called for ``row`` and the rows that lent to it only.
        """
        lent = (THREAD_SHARE * own(lender) for lender in self.lenders.get(row, ()))
        return max([own(row), *lent])


def lend_along_threads(
    ranks: Mapping[_Row, float], neighbours: Mapping[_Row, Iterable[_Row]]
) -> Lent[_Row]:
    """Lend each candidate's rank to its thread neighbours.

    Args:
        ranks: The candidates' own ranks (greater: better; none negative).
        neighbours: Each candidate's neighbours in its thread (none for a row
            without a thread). A neighbour may be a candidate too, or a row
            no keyword found (a borrower).

    Returns:
        The ranks of the candidates and of every neighbour, and who lent to
        whom (:meth:`Lent.score` lends the scores).
    """
    lent: dict[_Row, float] = dict(ranks)
    lenders: dict[_Row, list[_Row]] = {}
    for row, rank in ranks.items():
        for neighbour in neighbours.get(row, ()):
            lent[neighbour] = lent.get(neighbour, 0.0) + THREAD_SHARE * rank
            lenders.setdefault(neighbour, []).append(row)
    return Lent(lent, lenders)
