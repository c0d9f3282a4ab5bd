"""Stress: processes running turns of ONE agent at once never crash each other.

Issue #10 item 5. For each ledger (SQLite file, PostgreSQL schema) and each
layout (every process in its own session; every process in the same session),
P processes (default 4) each run T turns (default 200) of agent ``ops`` through
the real engine, with autosave on, the memory and knowledge tools called every
turn (each turn stores its own fact, captures a triple, and stores or forgets a
key all processes share) and consolidation after every turn. The children and
the checks are ``tests/pipeline/concurrent_agent_child.py``'s, which
``tests/pipeline/test_concurrent_agents.py`` runs at small sizes.

Printed per case: crashed turns, failed turns, turns recorded complete, memory
writes lost (fact stores missing from the ledger or from the memory backend),
``verify`` problems, memory-stream appends that lost a race and were retried,
and throughput: P processes' turns/s against ONE process
running T turns alone in the same run (the baseline), as a ratio. In the same
session, turns are serialized by the session lock, so its ratio is about 1 at
best. Exit 1 when any check fails (the problems are printed).

Run::

    .venv/bin/python benchmarks/stress_agents.py              # 4 x 200, both ledgers
    .venv/bin/python benchmarks/stress_agents.py --quick      # 2 x 4 (smoke test)
    .venv/bin/python benchmarks/stress_agents.py --processes 8 --turns 50 --only sqlite
    .venv/bin/python benchmarks/stress_agents.py --layout same --only postgresql

PostgreSQL is the server at ``$TURNLEDGER_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``), a fresh schema per case, dropped
after; without a server its cases are reported as skipped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
AGENT = "ops"
THINK = 0.03
"""Seconds a same-session child pauses between turns (a user's pause), so that
the session lock, which is not fair, lets the other processes in."""


def _children() -> Any:
    # The child and the checks live with the tests (a package, not installed).
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("tests.pipeline.concurrent_agent_child")


def _postgres(base: str) -> tuple[str | None, str]:
    import psycopg  # noqa: PLC0415 - only when PostgreSQL cases run

    try:
        with psycopg.connect(base, connect_timeout=3):
            pass
    except psycopg.Error as e:
        return None, " ".join(str(e).split())
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}schema=stress_{uuid.uuid4().hex[:10]}", ""


def _drop(url: str) -> None:
    import psycopg  # noqa: PLC0415

    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _ledger(kind: str, folder: Path, name: str) -> tuple[str | None, str]:
    if kind == "sqlite":
        return str(folder / f"{name}.db"), ""
    return _postgres(os.environ.get("TURNLEDGER_TEST_POSTGRES_URL", DEFAULT_URL))


def _one_run(
    kind: str, folder: Path, name: str, sessions: list[str], *, turns: int, think: float
) -> tuple[Any, str]:
    child = _children()
    ledger, why = _ledger(kind, folder, name)
    if ledger is None:
        return None, why
    memory_url = ledger if kind == "postgresql" else None
    try:
        run = child.run_children(
            ledger, AGENT, sessions, turns, memory_url=memory_url, think=think
        )
        child.check_run(run, ledger, AGENT, memory_url=memory_url)
    finally:
        if kind == "postgresql":
            _drop(ledger)
    return run, ""


def _case(kind: str, layout: str, processes: int, turns: int, folder: Path) -> bool:
    sessions = (
        [f"s{i}" for i in range(processes)]
        if layout == "different"
        else ["s"] * processes
    )
    think = THINK if layout == "same" else 0.0  # the baseline pauses alike
    base, why = _one_run(
        kind, folder, f"{layout}-base", sessions[:1], turns=turns, think=think
    )
    if base is None:
        print(f"{kind:10} {layout:9} skipped: {why}")
        return True
    run, _ = _one_run(kind, folder, layout, sessions, turns=turns, think=think)
    total = processes * turns
    counts = run.counts
    crashed = sum(len(r["crashed"]) for r in run.reports)
    failed = sum(len(r["failed"]) for r in run.reports)
    lost = (total - counts["fact_writes"]) + counts["facts_lost_in_memory"]
    ours = total / run.seconds if run.seconds else 0.0
    alone = turns / base.seconds if base.seconds else 0.0
    ratio = ours / alone if alone else 0.0
    print(
        f"{kind:10} {layout:9} {processes} x {turns}: crashed {crashed}, "
        f"failed {failed}, complete {counts['turns_recorded_complete']}/{total}, "
        f"lost writes {lost}, "
        f"verify problems {counts['verify_problems']}, "
        f"conflicts retried {counts['conflicts_retried']}; "
        f"{ours:,.1f} turn/s vs 1 process alone {alone:,.1f} turn/s "
        f"-> ratio {ratio:.2f}"
    )
    problems = [*base.problems, *run.problems]
    for problem in problems[:10]:
        print(f"  FAIL {problem}")
    return not problems


def main(argv: list[str] | None = None) -> int:
    """Run every case; exit 1 when a check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4, help="default 4")
    parser.add_argument("--turns", type=int, default=200, help="default 200 each")
    parser.add_argument("--only", choices=("sqlite", "postgresql"), default=None)
    parser.add_argument("--layout", choices=("different", "same"), default=None)
    parser.add_argument("--quick", action="store_true", help="2 processes x 4 turns")
    args = parser.parse_args(argv)
    processes, turns = (2, 4) if args.quick else (args.processes, args.turns)
    kinds = [args.only] if args.only else ["sqlite", "postgresql"]
    ok = True
    with tempfile.TemporaryDirectory(prefix="stress-agents-") as tmp:
        for kind in kinds:
            for layout in [args.layout] if args.layout else ["different", "same"]:
                ok = _case(kind, layout, processes, turns, Path(tmp)) and ok
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
