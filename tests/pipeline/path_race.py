"""A path race: a thread swaps directories and files while the tools read.

Shared by ``tests/pipeline/test_hostile_paths.py`` (a short run in the suite)
and ``benchmarks/stress_paths.py`` (a long one). The workspace holds
``d/f.txt`` (text ``inside``); outside it, ``out/d/f.txt`` and ``out/secret``
hold ``SECRET``. The swapper, in a loop, moves ``d`` aside and puts a symlink to
``out/d`` in its place, puts it back, and replaces ``d/f.txt`` atomically by a
symlink to ``out/secret``, a FIFO, a hard link of ``out/secret`` or a fresh
regular file. Each attempt reads ``d/f.txt`` through a reader; an attempt
escapes when the reader returns ``SECRET`` and hangs when it has not returned
within the hang bound.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

SECRET = "SECRET"  # noqa: S105 - the planted marker, not a password
HANG_SECONDS = 10.0


@dataclass
class RaceResult:
    """What the attempts returned."""

    attempts: int = 0
    escapes: int = 0
    hangs: int = 0
    swaps: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


def make_tree(base: Path) -> Path:
    """Create the workspace and the outside files; return the workspace."""
    workspace, outside = base / "ws", base / "out"
    (workspace / "d").mkdir(parents=True)
    (workspace / "d" / "f.txt").write_text("inside\n")
    (outside / "d").mkdir(parents=True)
    (outside / "d" / "f.txt").write_text(f"{SECRET}\n")
    (outside / "secret").write_text(f"{SECRET}\n")
    return workspace


def _swap_once(workspace: Path, step: int) -> None:
    directory, outside = workspace / "d", workspace.parent / "out"
    if step % 5 == 0:  # the parent directory becomes a symlink for a moment
        aside = workspace / "d.aside"
        directory.rename(aside)
        directory.symlink_to(outside / "d")
        time.sleep(0)
        directory.unlink()
        aside.rename(directory)
        return
    temporary = directory / ".swap"
    kind = step % 5
    if kind == 1:
        temporary.symlink_to(outside / "secret")
    elif kind == 2:
        os.mkfifo(temporary)
    elif kind == 3:
        os.link(outside / "secret", temporary)
    else:
        temporary.write_text("inside\n")
    temporary.replace(directory / "f.txt")


def _swapper(workspace: Path, stop: threading.Event, result: RaceResult) -> None:
    step = 0
    while not stop.is_set():
        _swap_once(workspace, step)
        step += 1
        result.swaps += 1


def run_race(
    workspace: Path, reader: Callable[[str], str], attempts: int
) -> RaceResult:
    """Read ``d/f.txt`` ``attempts`` times while the swapper runs.

    Args:
        workspace: From :func:`make_tree`.
        reader: Reads a workspace-relative path; returns the text, or a string
            starting with ``refused:`` and the reason.
        attempts: How many reads.

    Returns:
        The counts; ``outcomes`` counts the first word of each answer.
    """
    result = RaceResult()
    stop = threading.Event()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads finely
    swapper = threading.Thread(target=_swapper, args=(workspace, stop, result))
    swapper.start()
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        for _ in range(attempts):
            future = pool.submit(reader, "d/f.txt")
            result.attempts += 1
            try:
                answer = future.result(timeout=HANG_SECONDS)
            except FutureTimeout:
                result.hangs += 1
                break  # the worker is stuck; stop rather than pile up
            if SECRET in answer:
                result.escapes += 1
            words = answer.split(":", 1)[0].split()
            result.outcomes[words[0] if words else "empty"] += 1
    finally:
        stop.set()
        swapper.join()
        sys.setswitchinterval(interval)
        pool.shutdown(wait=result.hangs == 0, cancel_futures=True)
    return result
