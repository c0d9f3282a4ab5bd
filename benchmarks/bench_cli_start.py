"""How long the ``turnledger`` command takes to start, against ``python -c pass``.

Four commands run ``--repeat`` times each (9 by default), in rounds (one of each
per round, so a slow spell of the machine falls on all of them), each a fresh
process timed from start to exit:

- ``python -c pass``: the interpreter of this venv starting and stopping, the
  baseline;
- ``turnledger --help``;
- ``turnledger sessions`` on a small ledger (one ``turnledger demo`` session,
  made first in a scratch folder);
- ``turnledger audit FILE`` on a small transcript of ``tests/fixtures/transcripts``
  (a HAR file of 4.7 KB whose tool calls all pair up, so it exits 0).

``turnledger`` is the venv's console script, the file next to ``sys.executable``.
Each command's median is printed over the baseline's median as a ratio, with the
goal ``<= 2.5x python -c pass``. The script measures only; it always exits 0
unless a command fails.

Run::

    .venv/bin/python benchmarks/bench_cli_start.py           # 9 rounds
    .venv/bin/python benchmarks/bench_cli_start.py --quick   # smoke: 3 rounds
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from _harness import Cost, Scratch, median_runs, print_table, write_json

GOAL = 2.5  # at most this many times python -c pass
ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPT = (
    ROOT
    / "tests/fixtures/transcripts/har"
    / "AzureOpenAiChatAdapter-makes-a-call-to-the-api_2948200871.har"
)
BASELINE = "python -c pass"


def commands(cli: Path, ledger: Path) -> dict[str, list[str]]:
    """The baseline and the three ``turnledger`` commands, by name."""
    db = ["--db", str(ledger)]
    return {
        BASELINE: [sys.executable, "-c", "pass"],
        "turnledger --help": [str(cli), "--help"],
        "turnledger sessions": [str(cli), *db, "sessions"],
        "turnledger audit": [str(cli), *db, "audit", str(TRANSCRIPT)],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the commands in rounds; print the table and one goal line each."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds (9)")
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke)")
    parser.add_argument("--json", metavar="PATH", help="also write JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 3
    cli = Path(sys.executable).parent / "turnledger"
    with Scratch("bench_cli_start") as scratch:
        ledger = scratch.root / "small.db"
        subprocess.run(
            [str(cli), "--db", str(ledger), "demo"],
            cwd=scratch.root,
            capture_output=True,
            check=True,
        )
        series = median_runs(
            commands(cli, ledger), repeat=args.repeat, cwd=scratch.root
        )
    baseline, *measured = series
    costs = [Cost(s.name, s, baseline, GOAL) for s in measured]
    print(
        f"bench_cli_start: python {platform.python_version()}, {cli}, "
        f"{args.repeat} rounds, load average {os.getloadavg()[0]:.1f}; "
        f"audit file {TRANSCRIPT.name} ({TRANSCRIPT.stat().st_size:,} bytes)"
    )
    print_table(series)
    for cost in costs:
        print(cost.line())
    if args.json:
        meta = {"python": platform.python_version(), "repeat": args.repeat}
        write_json(args.json, meta=meta, series=series, ratios=costs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
