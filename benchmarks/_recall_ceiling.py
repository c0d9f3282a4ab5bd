"""What any fusion of the hybrid's two legs could reach (``--ceiling``).

The hybrid ranks by fusing a keyword leg and a vector leg, each handing the
fusion its best ``2 x limit`` rows (20 for the benchmark's top 10). A fusion
only reorders what the legs found: a question whose evidence is in neither
leg's best 20 is missed by every fusion of them. So, per question:

- the keyword leg: the engine's own keyword-only recall (the ``keyword``
  configuration: BM25 in scope, thread lending, newer first), its best 20;
- the vector leg: the mode's embedder over every message, each scored by its
  best window's cosine (as the engine scores a long entry), exact, its best 20;
- either leg's top 10 (what a fusion taking ten from each leg's ten would
  hold) and either leg's top 20: the bound of any fusion choosing its 10 among
  the legs' candidates.

A goal above the top-20 figure is above what fusing these legs can reach; only
a better leg (another model, another index) can move it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from turnledger.projections.memory.embedding import Embedder
from turnledger.projections.memory.embedding.windows import window_texts

CANDIDATES = 20
"""Each leg's candidates for a top 10 (the engine's ``2 x limit``)."""

TOP = 10

KeywordLeg = Callable[[str], Sequence[str]]
"""A conversation's keyword-only recall: a question's ranked keys."""


@dataclass
class Ceiling:
    """Per answerable question, where its evidence is; printed as shares."""

    asked: int = 0
    hits: Counter[str] = field(default_factory=Counter)

    def add(
        self, evidence: set[str], keyword: Sequence[str], vector: Sequence[str]
    ) -> None:
        """Count one question by the two legs' ranked keys."""
        self.asked += 1
        hit = self.hits
        hit["keyword@10"] += bool(evidence.intersection(keyword[:TOP]))
        hit["vector@10"] += bool(evidence.intersection(vector[:TOP]))
        hit["either@10"] += bool(evidence.intersection([*keyword[:TOP], *vector[:TOP]]))
        hit["either@20"] += bool(evidence.intersection([*keyword, *vector]))

    def shares(self) -> dict[str, float]:
        """Each count as a share of the questions asked."""
        asked = max(1, self.asked)
        names = ("keyword@10", "vector@10", "either@10", "either@20")
        return {name: self.hits[name] / asked for name in names}


def vector_leg(
    embedder: Embedder, messages: Sequence[tuple[str, str]]
) -> Callable[[str], list[str]]:
    """The exact vector leg over a conversation: a question's best keys."""
    owners: list[int] = []
    windows: list[str] = []
    spans = getattr(embedder, "window_spans", None)
    for index, (_, text) in enumerate(messages):
        cut = window_texts(spans(text), text) if callable(spans) else []
        cut = cut or [text]
        windows += cut
        owners += [index] * len(cut)
    vectors = _unit(np.asarray(embedder.embed(windows), dtype=np.float32))
    owner = np.asarray(owners)
    keys = [key for key, _ in messages]

    def ranked(question: str) -> list[str]:
        query = _unit(np.asarray(embedder.embed([question]), dtype=np.float32))[0]
        best = np.full(len(keys), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, vectors @ query)
        order = np.argsort(-best, kind="stable")[:CANDIDATES]
        return [keys[i] for i in order]

    return ranked


def _unit(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows at unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
