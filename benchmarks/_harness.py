"""The one harness every benchmark script uses.

A benchmark defines :class:`Case` objects: ``run(n)`` does ``n`` units of work and
returns the seconds they took (it times itself with :class:`Stopwatch`, so that
per-run setup such as creating a fresh database stays out of the figure).
:func:`run_rounds` warms every case up, then runs all cases round-robin within
each repetition, so that a ratio of two cases can be taken per repetition (steadier
than a ratio of medians on a noisy machine). :class:`Series` holds the timings,
:class:`Ratio` compares two series against a goal, and :func:`print_table`,
:func:`print_ratios` and :func:`write_json` report them.

Besides: :class:`Scratch` (fresh file paths in one temporary folder, deleted at
the end); :func:`percentile`; :func:`seeded_text` (a workload's seeded words);
:func:`ceiling_line` (the best any backend could reach, against a goal);
:func:`median_runs` (wall times of a few runs of each command, in rounds) and
:class:`Cost` (a time over a baseline time, judged at most a goal); and
:func:`installed` (whether an optional peer imports; when not, one line says how
to install it, and the caller skips what needs it). The goal lines of
:func:`print_ratios`, :meth:`Cost.line` and :func:`ceiling_line` start with their
verdict (``PASS``, ``MISS``, ``CEILING``), a form ``run_all.py`` collects.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
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
    ratios: Sequence[Ratio | Cost] = (),
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


_SENTENCE = (
    "the export job failed again last night after the schema migration can you "
    "check logs for the nightly run and tell me which table broke then propose a "
    "fix that keeps the retention policy and does not touch production credentials"
)
WORDS = tuple(_SENTENCE.split())


def seeded_text(rng: random.Random, chars: int, words: Sequence[str] = WORDS) -> str:
    """Return ``chars`` characters of words drawn from ``words`` by ``rng``."""
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def ceiling_line(ceiling: Ratio, goal: float, ours: str) -> str:
    """The ceiling's line: the best any backend could reach, against the goal.

    ``ceiling`` is the framework with no persistence over its own SQLite backend:
    a backend that cost nothing would reach that ratio, and none can pass it.
    Below the goal the line starts with ``CEILING`` (``run_all.py`` collects it).
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


class Scratch:
    """Fresh file paths in one temporary folder, deleted by :meth:`cleanup`.

    Every path comes from the same folder, so every case of a run writes to the
    same disk. Usable as a context manager (the folder goes on exit).
    """

    def __init__(self, prefix: str, parent: str | Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"{prefix}_", dir=parent))
        self.count = 0

    def fresh(self, suffix: str = ".sqlite") -> Path:
        """Return a new, unused path in the folder (``db<n><suffix>``)."""
        self.count += 1
        return self.root / f"db{self.count}{suffix}"

    @staticmethod
    def drop(path: Path) -> None:
        """Delete a file and what sits beside it under its name.

        That is ``<name>-wal``, ``<name>-shm`` and any file or folder whose name
        is the path's stem followed by ``-`` or ``.`` (a projection's files).
        """
        for found in path.parent.glob(f"{path.stem}*"):
            rest = found.name[len(path.stem) :]
            if found.name != path.name and rest[:1] not in ("-", "."):
                continue
            if found.is_dir():
                shutil.rmtree(found, ignore_errors=True)
            else:
                found.unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Delete the folder."""
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (0-100), linear between closest ranks; nan if none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class Cost:
    """``command`` median time ÷ ``baseline`` median time, judged at most ``goal``.

    The cost side of :class:`Ratio`: lower is better, and the ratio is the one of
    the medians (each a median of runs taken in the same rounds).
    """

    name: str
    command: Series
    baseline: Series
    goal: float

    @property
    def ratio(self) -> float:
        """The command's median time over the baseline's."""
        return self.command.median_seconds / self.baseline.median_seconds

    @property
    def verdict(self) -> str:
        """``PASS`` when the ratio is at most the goal, else ``MISS``."""
        return "PASS" if self.ratio <= self.goal else "MISS"

    def line(self) -> str:
        """The goal line, verdict first (the format ``run_all.py`` collects)."""
        return (
            f"{self.verdict:<4}  {self.name}: {self.command.median_seconds * 1e3:.1f} "
            f"ms vs {self.baseline.name} {self.baseline.median_seconds * 1e3:.1f} ms "
            f"(median of {len(self.command.seconds)}) -> ratio {self.ratio:.2f}; "
            f"goal <= {self.goal:g}x {self.baseline.name}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON (the keys of :meth:`Ratio.as_dict` that apply)."""
        return {
            "numerator": self.command.name,
            "denominator": self.baseline.name,
            "numerator_median_s": self.command.median_seconds,
            "denominator_median_s": self.baseline.median_seconds,
            "ratio": self.ratio,
            "goal": self.goal,
            "goal_is_at_most": True,
            "verdict": self.verdict,
        }


def median_runs(
    commands: Mapping[str, Sequence[str]], *, repeat: int, cwd: Path | None = None
) -> list[Series]:
    """Run each command ``repeat`` times, in rounds; one series of wall times each.

    The commands run round-robin (one of each per round), so a slow spell of the
    machine falls on all of them; a command that exits non-zero raises.
    """
    series = [Series(name, 1, "run") for name in commands]
    for _ in range(repeat):
        for s, command in zip(series, commands.values(), strict=True):
            start = time.perf_counter()
            done = subprocess.run(command, cwd=cwd, capture_output=True, check=False)
            s.seconds.append(time.perf_counter() - start)
            if done.returncode != 0:
                tail = done.stderr.decode(errors="replace")[-2000:]
                msg = f"{s.name} exited {done.returncode}: {tail}"
                raise RuntimeError(msg)
    return series


def installed(
    label: str, *modules: str, hint: str = "pip install -e '.[bench]'"
) -> bool:
    """Whether every module imports; if not, print the one-line skip and say no.

    The dev extras install every peer, so a missing one is a partial install: the
    caller skips what needs it and the script still exits 0.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            print(f"{label}: not installed ({hint})")
            return False
    return True
