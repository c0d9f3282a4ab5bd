"""Crash stress: SIGKILL a ledger writer hundreds of times, check the ledger each time.

A child process (``tests/ledger/crash_child.py``) appends turns of 8 events, one
append per turn, and prints each turn id once its append returned. This script
starts a child, kills it with SIGKILL at a random moment (usually a few ms after
its first acknowledged turn, sometimes at any moment from its start), then checks
the ledger: ``verify`` is clean, no turn is partial (each turn id has exactly its 8
events, in one stream, at contiguous versions, from ``turn.started`` to
``turn.completed``) and every turn acknowledged so far is present. The same ledger
is reused across kills, so it grows. The child and the checks are the ones
``tests/ledger/test_crash.py`` uses.

It prints the kills done, the turns acknowledged, the whole turns found, then OK,
or FAIL with what is wrong (exit 1; a temporary ledger is then kept for
inspection).

Run::

    .venv/bin/python benchmarks/stress_crash.py            # 200 kills, sync child
    .venv/bin/python benchmarks/stress_crash.py --async    # 4 sessions, group commit
    .venv/bin/python benchmarks/stress_crash.py --kills 1000 --db /tmp/crash.db
    .venv/bin/python benchmarks/stress_crash.py --quick    # 5 kills (smoke test)
    .venv/bin/python benchmarks/stress_crash.py --seed 42  # replay the kill choices
    .venv/bin/python benchmarks/stress_crash.py --kills 50 \
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=crash'

A temporary SQLite ledger is deleted after an OK run; a ``--db`` ledger is kept.
"""

from __future__ import annotations

import argparse
import importlib
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
QUICK_KILLS = 5


def _crash_module() -> Any:
    # The child and the checks live with the tests (a package, not installed).
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("tests.ledger.crash_child")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="SIGKILL a ledger writer again and again; check after each kill."
    )
    parser.add_argument("--kills", type=int, default=200, help="default 200")
    parser.add_argument(
        "--db",
        help="a SQLite file or a postgresql:// URL (default: a temporary file)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_KILLS} kills (smoke test)"
    )
    parser.add_argument(
        "--async",
        dest="use_async",
        action="store_true",
        help="kill the AsyncLedger child (concurrent sessions, group commit)",
    )
    parser.add_argument(
        "--sessions", type=int, default=4, help="concurrent sessions with --async"
    )
    parser.add_argument("--seed", type=int, help="seed of the kill choices")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the crash loop; return 0 when every check passed, 1 otherwise."""
    args = _arguments(argv)
    crash = _crash_module()
    kills = QUICK_KILLS if args.quick else args.kills
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rand = random.Random(seed)
    workdir: Path | None = None
    if args.db:
        db_url = args.db
    else:
        workdir = Path(tempfile.mkdtemp(prefix="stress_crash-"))
        db_url = str(workdir / "turnledger.db")
    mode = f"async, {args.sessions} sessions" if args.use_async else "sync"
    print(f"ledger {db_url} ({mode} child), {kills} kills, seed {seed}")

    loop = crash.CrashLoop(db_url, sessions=args.sessions)
    started = time.perf_counter()
    failed = None
    for i in range(kills):
        step = loop.step(rand, use_async=args.use_async)
        if not step.ok:
            failed = loop.describe(step)
            break
        if (i + 1) % 25 == 0:
            print(
                f"  {i + 1} kills, {loop.acknowledged} turns acknowledged, "
                f"{len(step.check.turns)} whole turns found",
                flush=True,
            )
    elapsed = time.perf_counter() - started

    check = loop.last_check
    found = len(check.turns) if check else 0
    print(f"kills done:           {loop.kills} ({loop.early_kills} at any moment)")
    print(f"turns acknowledged:   {loop.acknowledged}")
    print(f"turns found (whole):  {found}")
    print(f"events in the ledger: {check.events if check else 0}")
    print(f"elapsed:              {elapsed:.1f} s")
    if failed is not None:
        print(failed)
        print(f"FAIL (seed {seed}; ledger kept at {db_url})")
        return 1
    if workdir is not None:
        shutil.rmtree(workdir)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
