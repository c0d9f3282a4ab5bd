"""What the bench_adapters sections share: seeded text, scratch folders, ceilings."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

try:
    from benchmarks._harness import Ratio
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _harness import Ratio  # type: ignore[no-redef]

_SENTENCE = (
    "the export job failed again last night after the schema migration can you "
    "check logs for the nightly run and tell me which table broke then propose a "
    "fix that keeps the retention policy and does not touch production credentials"
)
WORDS = _SENTENCE.split()


def text(rng: random.Random, chars: int) -> str:
    """Return ``chars`` characters of seeded words."""
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:chars]


class Folder:
    """Fresh database paths in one temporary folder."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench_adapters_"))
        self.count = 0

    def fresh(self) -> Path:
        """Return a new database path."""
        self.count += 1
        return self.root / f"db{self.count}.sqlite"

    def cleanup(self) -> None:
        """Delete the folder."""
        shutil.rmtree(self.root, ignore_errors=True)


def ceiling_line(ceiling: Ratio, goal: float, ours: str) -> str:
    """The ceiling's line: the best any backend could reach, against the goal.

    ``ceiling`` is the framework with no persistence over its own SQLite backend:
    a backend that cost nothing would reach that ratio, and none can pass it.
    """
    values = ceiling.values
    head = (
        f"{ceiling.name}: {ceiling.numerator.ops_per_s:,.1f} vs "
        f"{ceiling.denominator.ops_per_s:,.1f} turns/s -> ratio "
        f"{ceiling.median:.2f} (per-repeat {min(values):.2f}-{max(values):.2f})"
    )
    if ceiling.median < goal:
        return (
            f"CEILING {head}; below the goal of {goal:g}x: no backend can reach "
            f"it in this run (a backend costing nothing runs "
            f"{ceiling.median:.2f}x), so the goal for {ours} is impossible here"
        )
    return f"info {head}; the goal of {goal:g}x is under the ceiling"
