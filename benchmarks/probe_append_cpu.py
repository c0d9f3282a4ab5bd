"""Where the CPU of a SQLite append goes: raw sqlite3 built up step by step to ours.

A diagnostic, not a benchmark with a goal: it explains the floor under
``bench_append.py``'s goals 1 and 4. Every case writes the same realistic 8-event
turns (``bench_append.make_turn``) with ``synchronous=OFF`` and is timed in the
writing thread's CPU seconds, so the figures hold when a loaded disk or machine
makes wall-clock ratios spread. Each case adds one thing to the one before:

- ``0.raw``: ``BEGIN IMMEDIATE``, ``executemany`` of the turn's rows (pre-encoded,
  as bench_append's raw baseline), ``COMMIT``;
- ``1.rowid``: the same rows inserted at explicit positions, as the ledger does;
- ``2.triggers``: into a file the ledger created (its append-only triggers fire
  on every row);
- ``3.data_version``: plus the ``PRAGMA data_version`` the writer reads per group;
- ``4.encode_chain``: plus validating and encoding the events
  (``MsgspecMapper.encode_rows``) and chaining the rows (``chain_rows``);
- ``5.ours``: ``EventStore.append`` (the whole public call; bench_append's case 6).

And the group commit of goal 4, per turn, 64 turns per transaction:
``6.raw_group`` (raw rows), ``7.ours_group_writer`` (``EventStore.write_requests``
of 64 encoded appends: what the async facade's writer thread does) and
``8.ours_encode`` (``EventStore.encode`` of the same turns: what its event loop
does before handing them over).

Run::

    .venv/bin/python benchmarks/probe_append_cpu.py            # ~1 min
    .venv/bin/python benchmarks/probe_append_cpu.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from uuid import UUID, uuid4

from turnledger.ledger.chain import GENESIS, chain_rows
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.events import Event
from turnledger.ledger.frame import now_us
from turnledger.ledger.store import Append, open_store

try:
    from benchmarks._harness import Case, Series, print_table, run_rounds
    from benchmarks.bench_append import (
        EVENTS_PER_TURN,
        INSERT,
        Files,
        make_turn,
        ours_turn_appends,
        raw_connect,
        stream_plan,
        turn_rows,
    )
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from _harness import Case, Series, print_table, run_rounds  # type: ignore[no-redef]
    from bench_append import (  # type: ignore[no-redef]
        EVENTS_PER_TURN,
        INSERT,
        Files,
        make_turn,
        ours_turn_appends,
        raw_connect,
        stream_plan,
        turn_rows,
    )

INSERT_AT = (
    "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, "
    "state) VALUES (?,?,?,?,?)"
)
GROUP = 64
ROWID, TRIGGERS, DATA_VERSION, ENCODE_CHAIN = 1, 2, 3, 4
Turns = Sequence[Sequence[Event]]
STEPS = ("0.raw", "1.rowid", "2.triggers", "3.data_version", "4.encode_chain")
"""Cases 0-4, by level (see :func:`step`)."""


def _ledger_file(files: Files) -> Path:
    """A fresh file with the ledger's schema and triggers, closed again."""
    path = files.fresh()
    open_store(str(path), synchronous="OFF").close()
    return path


def step(level: int, files: Files, turns: Turns) -> Callable[[int], float]:
    """Cases 0-4: one transaction per turn, each level adding one thing."""
    mapper = MsgspecMapper()

    def run(n: int) -> float:
        if level >= TRIGGERS:
            path = _ledger_file(files)
            conn = sqlite3.connect(path, isolation_level=None)
        else:
            path = files.fresh()
            conn = raw_connect(path)
        conn.execute("PRAGMA synchronous=OFF")
        plan = stream_plan(n, [uuid4() for _ in range(GROUP)])
        work = [(s, turns[i % len(turns)], v) for i, (s, v) in enumerate(plan)]
        rows = [turn_rows(s.hex, v + 1, events) for s, events, v in work]
        heads: dict[UUID, bytes] = {}
        position = 1
        started = time.thread_time()
        for i, (stream, events, version) in enumerate(work):
            conn.execute("BEGIN IMMEDIATE")
            if level >= DATA_VERSION:
                conn.execute("PRAGMA data_version").fetchone()
            if level >= ENCODE_CHAIN:
                encoded = mapper.encode_rows(events, version + 1, now_us())
                chained, heads[stream] = chain_rows(
                    encoded, stream, stream.hex, position, heads.get(stream, GENESIS)
                )
                conn.executemany(INSERT_AT, chained)
            elif level >= ROWID:
                at = [(position + j, *row) for j, row in enumerate(rows[i])]
                conn.executemany(INSERT_AT, at)
            else:
                conn.executemany(INSERT, rows[i])
            conn.execute("COMMIT")
            position += len(events)
        seconds = time.thread_time() - started
        conn.close()
        files.drop(path)
        return seconds

    return run


def raw_group(files: Files, turns: Turns) -> Callable[[int], float]:
    """Case 6: raw rows, 64 turns per transaction."""

    def run(n: int) -> float:
        path = files.fresh()
        conn = raw_connect(path)
        conn.execute("PRAGMA synchronous=OFF")
        plan = stream_plan(n, [uuid4() for _ in range(GROUP)])
        rows = [
            turn_rows(s.hex, v + 1, turns[i % len(turns)])
            for i, (s, v) in enumerate(plan)
        ]
        groups = [
            [row for turn in rows[i : i + GROUP] for row in turn]
            for i in range(0, len(rows), GROUP)
        ]
        started = time.thread_time()
        for group in groups:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, group)
            conn.execute("COMMIT")
        seconds = time.thread_time() - started
        conn.close()
        files.drop(path)
        return seconds

    return run


def ours_group(files: Files, turns: Turns, *, writer: bool) -> Callable[[int], float]:
    """Case 7 (the writer's part) or 8 (the encoding) of 64-append groups."""

    def run(n: int) -> float:
        path = files.fresh()
        store = open_store(str(path), synchronous="OFF")
        plan = stream_plan(n, [uuid4() for _ in range(GROUP)])
        appends = [Append(s, turns[i % len(turns)], v) for i, (s, v) in enumerate(plan)]
        batches = [appends[i : i + GROUP] for i in range(0, len(appends), GROUP)]
        started = time.thread_time()
        encoded = [store.encode_appends(batch) for batch in batches]
        if writer:
            started = time.thread_time()
            for requests in encoded:
                store.write_requests(requests)
        seconds = time.thread_time() - started
        store.close()
        files.drop(path)
        return seconds

    return run


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=2048, help="turns per run (2048)")
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (1)")
    p.add_argument("--dir", default=None, help="folder for the database files (/tmp)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.repeat = 128, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases and print CPU microseconds per turn, and each step's cost."""
    args = parse_args(argv)
    rng = random.Random(20240601)
    turns = [make_turn(rng, i) for i in range(64)]
    files = Files(args.dir)
    load_before = os.getloadavg()[0]
    try:
        cases = [
            Case(name, args.turns, step(level, files, turns), "turn", "CPU s")
            for level, name in enumerate(STEPS)
        ]
        cases += [
            Case(
                "5.ours",
                args.turns,
                ours_turn_appends(files, turns, GROUP, cpu=True),
                "turn",
                "CPU s",
            ),
            Case("6.raw_group", args.turns, raw_group(files, turns), "turn", "CPU s"),
            Case(
                "7.ours_group_writer",
                args.turns,
                ours_group(files, turns, writer=True),
                "turn",
                "CPU s, write_requests",
            ),
            Case(
                "8.ours_encode",
                args.turns,
                ours_group(files, turns, writer=False),
                "turn",
                "CPU s, encode",
            ),
        ]
        series = run_rounds(cases, repeat=args.repeat, warmup=args.warmup)
    finally:
        files.cleanup()
    report(series, load_before, args)
    return 0


def report(
    series: Sequence[Series], load_before: float, args: argparse.Namespace
) -> None:
    """Print the table, then what each step adds per turn."""
    print(
        f"probe_append_cpu: sqlite {sqlite3.sqlite_version}, synchronous=OFF, "
        f"thread CPU time; {EVENTS_PER_TURN} events per turn, {args.turns} turns "
        f"per run, repeat {args.repeat}; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; {threading.active_count()} thread(s)\n"
    )
    print_table(series)
    by = {s.name: s.us_per_op for s in series}
    print("\nCPU µs per turn each step adds (medians):")
    for before, after in zip(STEPS, [*STEPS[1:], "5.ours"], strict=True):
        print(f"  {after:<16} {by[after] - by[before]:+7.1f}  (total {by[after]:.1f})")
    print(f"  ours / raw, one turn per commit: {by['5.ours'] / by['0.raw']:.2f}x CPU")
    group = by["7.ours_group_writer"] + by["8.ours_encode"]
    print(
        f"  group commit of {GROUP}: raw {by['6.raw_group']:.1f}, ours writer "
        f"{by['7.ours_group_writer']:.1f} + encode {by['8.ours_encode']:.1f} = "
        f"{group:.1f} µs per turn ({group / by['6.raw_group']:.2f}x CPU)"
    )


if __name__ == "__main__":
    sys.exit(main())
