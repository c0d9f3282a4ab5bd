"""Time-travel stress: the Hypothesis state machine of the tests, longer.

``tests/pipeline/test_timetravel_machine.py`` drives engine turns, crashes,
forks (of forks), rewinds, redos and re-runs on SQLite and PostgreSQL and
checks its invariants after every step; the suite runs 6 short examples. This
script runs the same machine with more examples and steps (it sets
``TURNLEDGER_MACHINE_EXAMPLES`` and ``TURNLEDGER_MACHINE_STEPS`` and runs
pytest on that file), and prints pytest's summary; the exit code is pytest's.

Run::

    .venv/bin/python benchmarks/stress_timetravel.py                  # 100 x 40
    .venv/bin/python benchmarks/stress_timetravel.py --examples 20 --steps 20
    .venv/bin/python benchmarks/stress_timetravel.py --backend sqlite
    .venv/bin/python benchmarks/stress_timetravel.py --quick    # smoke: 1 x 4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "tests/pipeline/test_timetravel_machine.py"


def main() -> int:
    """Run the machine at the given size; return pytest's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--backend", choices=("sqlite", "postgres", "both"), default="both"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes (smoke): 1 x 4 on SQLite"
    )
    args = parser.parse_args()
    if args.quick:
        args.examples, args.steps, args.backend = 1, 4, "sqlite"
    env = {
        **os.environ,
        "TURNLEDGER_MACHINE_EXAMPLES": str(args.examples),
        "TURNLEDGER_MACHINE_STEPS": str(args.steps),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", MACHINE]
    if args.backend != "both":
        command += ["-k", args.backend]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
