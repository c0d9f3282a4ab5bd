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
  (a HAR file of 4.7 KB whose tool calls all pair up, so it exits 0);
- ``turnledger memory store`` and ``turnledger memory recall`` with the default
  config (the static model: the command embeds, so it reads the shipped table),
  each store a new key;
- with ``--transformer`` (where the ``local-embeddings`` extra is installed),
  the same two with ``[embedding] provider = "local"`` (the model loads in each
  process).

``turnledger`` is the venv's console script, the file next to ``sys.executable``.
Each command's median is printed over the baseline's median as a ratio, with the
goal ``<= 2.5x python -c pass``; the memory commands are judged by their
median wall time, goal ``<= 2 s`` (issue #28: a CLI command that embeds). The
script measures only; it always exits 0 unless a command fails.

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
EMBED_GOAL_S = 2.0  # a memory command that embeds, wall time
ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPT = (
    ROOT
    / "tests/fixtures/transcripts/har"
    / "AzureOpenAiChatAdapter-makes-a-call-to-the-api_2948200871.har"
)
BASELINE = "python -c pass"


def commands(cli: Path, ledger: Path) -> dict[str, list[str]]:
    """The baseline and the light ``turnledger`` commands, by name."""
    db = ["--db", str(ledger)]
    return {
        BASELINE: [sys.executable, "-c", "pass"],
        "turnledger --help": [str(cli), "--help"],
        "turnledger sessions": [str(cli), *db, "sessions"],
        "turnledger audit": [str(cli), *db, "audit", str(TRANSCRIPT)],
    }


def memory_commands(
    cli: Path, ledger: Path, label: str, config: Path | None = None
) -> dict[str, list[str]]:
    """``memory store`` (the same key and text each run) and ``memory recall``."""
    head = [str(cli), "--db", str(ledger)]
    if config is not None:
        head += ["--config", str(config)]
    return {
        f"memory store ({label})": [
            *head,
            "memory",
            "store",
            "--agent",
            "ops",
            "editor",
            "I program in the Helix editor, with a dark theme",
        ],
        f"memory recall ({label})": [
            *head,
            "memory",
            "recall",
            "--agent",
            "ops",
            "which text editor do I use",
        ],
    }


def _has_transformer() -> bool:
    try:
        __import__("sentence_transformers")
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the commands in rounds; print the table and one goal line each."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds (9)")
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke)")
    parser.add_argument("--json", metavar="PATH", help="also write JSON here")
    parser.add_argument(
        "--transformer",
        action="store_true",
        help='also time the memory commands with provider = "local"',
    )
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
        runs = commands(cli, ledger)
        runs.update(memory_commands(cli, ledger, "static, the default"))
        if args.transformer and _has_transformer():
            local = scratch.root / "local.toml"
            local.write_text('[embedding]\nprovider = "local"\n', encoding="utf-8")
            runs.update(memory_commands(cli, ledger, "transformer", local))
        series = median_runs(runs, repeat=args.repeat, cwd=scratch.root)
    baseline, *measured = series
    light = [s for s in measured if not s.name.startswith("memory ")]
    costs = [Cost(s.name, s, baseline, GOAL) for s in light]
    print(
        f"bench_cli_start: python {platform.python_version()}, {cli}, "
        f"{args.repeat} rounds, load average {os.getloadavg()[0]:.1f}; "
        f"audit file {TRANSCRIPT.name} ({TRANSCRIPT.stat().st_size:,} bytes)"
    )
    print_table(series)
    for cost in costs:
        print(cost.line())
    for s in measured:
        if s.name.startswith("memory "):
            verdict = "PASS" if s.median_seconds <= EMBED_GOAL_S else "MISS"
            ratio = s.median_seconds / baseline.median_seconds
            print(
                f"{verdict:<4}  turnledger {s.name}: {s.median_seconds:.2f} s "
                f"(median of {len(s.seconds)}; {ratio:.1f}x {baseline.name}); "
                f"goal <= {EMBED_GOAL_S:g} s"
            )
    if args.json:
        meta = {"python": platform.python_version(), "repeat": args.repeat}
        write_json(args.json, meta=meta, series=series, ratios=costs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
