"""Small shared helpers for the benchmark scripts.

A benchmark defines :class:`Case` objects: ``run(n)`` does ``n`` units of work and
returns the seconds they took (it times itself with :class:`Stopwatch`, so that
per-run setup such as creating a fresh database stays out of the figure).
:func:`run_rounds` warms every case up, then runs all cases round-robin within
each repetition, so that a ratio of two cases can be taken per repetition (steadier
than a ratio of medians on a noisy machine). :class:`Series` holds the timings,
:class:`Ratio` compares two series against a goal, and :func:`print_table`,
:func:`print_ratios` and :func:`write_json` report them.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self


class Stopwatch:
    """Times the body of a ``with`` block with ``time.perf_counter``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Self:
        self._start = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.seconds = time.perf_counter() - self._start


@dataclass(frozen=True)
class Case:
    """One thing to time: ``run(n)`` does ``n`` units and returns its seconds."""

    name: str
    n: int
    run: Callable[[int], float]
    unit: str = "op"
    note: str = ""
    warmup_n: int | None = None  # default: a tenth of ``n``


@dataclass
class Series:
    """The timings of one case, one per repetition."""

    name: str
    n: int
    unit: str
    note: str = ""
    seconds: list[float] = field(default_factory=list)

    @property
    def rates(self) -> list[float]:
        """Units per second, per repetition."""
        return [self.n / s for s in self.seconds]

    @property
    def median_seconds(self) -> float:
        """The median time of one run of ``n`` units."""
        return statistics.median(self.seconds)

    @property
    def us_per_op(self) -> float:
        """Median microseconds per unit."""
        return self.median_seconds / self.n * 1e6

    @property
    def ops_per_s(self) -> float:
        """Units per second, at the median time."""
        return self.n / self.median_seconds

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON."""
        rates = self.rates
        return {
            "unit": self.unit,
            "n": self.n,
            "note": self.note,
            "us_per_op": self.us_per_op,
            "ops_per_s": self.ops_per_s,
            "ops_per_s_min": min(rates),
            "ops_per_s_max": max(rates),
            "seconds": self.seconds,
        }


@dataclass
class Ratio:
    """``numerator`` rate ÷ ``denominator`` rate, taken per repetition."""

    name: str
    numerator: Series
    denominator: Series
    goal: float | None = None  # None: reported, not judged

    @property
    def values(self) -> list[float]:
        """The ratio in each repetition."""
        pairs = zip(self.numerator.rates, self.denominator.rates, strict=True)
        return [a / b for a, b in pairs]

    @property
    def median(self) -> float:
        """The median of the per-repetition ratios."""
        return statistics.median(self.values)

    @property
    def verdict(self) -> str:
        """``PASS``, ``MISS``, or ``info`` when there is no goal."""
        if self.goal is None:
            return "info"
        return "PASS" if self.median >= self.goal else "MISS"

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON."""
        return {
            "numerator": self.numerator.name,
            "denominator": self.denominator.name,
            "numerator_ops_per_s": self.numerator.ops_per_s,
            "denominator_ops_per_s": self.denominator.ops_per_s,
            "ratio": self.median,
            "ratio_per_repeat": self.values,
            "goal": self.goal,
            "verdict": self.verdict,
        }


def run_rounds(cases: Sequence[Case], *, repeat: int, warmup: int) -> list[Series]:
    """Warm every case up, then run them round-robin ``repeat`` times.

    The order is reversed on odd repetitions so that no case always goes first.
    """
    for case in cases:
        for _ in range(warmup):
            case.run(case.warmup_n or max(1, case.n // 10))
    series = [Series(c.name, c.n, c.unit, c.note) for c in cases]
    pairs = list(zip(cases, series, strict=True))
    for i in range(repeat):
        for case, s in pairs if i % 2 == 0 else reversed(pairs):
            s.seconds.append(case.run(case.n))
    return series


def _si(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def print_table(series: Sequence[Series]) -> None:
    """Print µs/op, ops/s (median) and the min-max ops/s of each series."""
    header = ("case", "n", "unit", "µs/op", "ops/s", "ops/s min-max", "note")
    rows = [
        (
            s.name,
            f"{s.n:,}",
            s.unit,
            _si(s.us_per_op),
            _si(s.ops_per_s),
            f"{_si(min(s.rates))}-{_si(max(s.rates))}",
            s.note,
        )
        for s in series
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {1, 3, 4, 5}
    for row in [header, tuple("-" * w for w in widths), *rows]:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())


def print_ratios(ratios: Sequence[Ratio]) -> None:
    """Print one line per ratio: baseline, ours, ratio, goal and verdict."""
    for r in ratios:
        values = r.values
        spread = f"per-repeat {min(values):.2f}-{max(values):.2f}"
        goal = "no goal" if r.goal is None else f"goal >= {r.goal:.2f}"
        print(
            f"{r.verdict:<4}  {r.name}: {r.numerator.name} "
            f"{_si(r.numerator.ops_per_s)} {r.numerator.unit}/s vs "
            f"{r.denominator.name} {_si(r.denominator.ops_per_s)} "
            f"{r.denominator.unit}/s -> ratio {r.median:.2f} ({spread}); {goal}"
        )


def write_json(
    path: str | Path,
    *,
    meta: Mapping[str, Any],
    series: Sequence[Series],
    ratios: Sequence[Ratio] = (),
) -> None:
    """Write the figures as JSON: metadata, every series and every ratio."""
    doc = {
        "meta": dict(meta),
        "series": {s.name: s.as_dict() for s in series},
        "ratios": {r.name: r.as_dict() for r in ratios},
    }
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def device_of(path: Path) -> str:
    """Return ``device (mount point)`` of the filesystem holding ``path``."""
    mount = path.resolve()
    while not os.path.ismount(mount):
        mount = mount.parent
    source = "?"
    try:
        for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) > 1 and parts[1] == str(mount):
                source = parts[0]
    except OSError:
        pass
    return f"{source} (mounted at {mount})"
