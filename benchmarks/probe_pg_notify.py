"""Why the PostgreSQL ledger does not NOTIFY inside its write transactions.

A diagnostic, not a benchmark with a goal: it explains a change behind
``bench_scale.py``. PostgreSQL serialises every transaction that sent a NOTIFY on
one cluster-wide lock, taken at pre-commit and held until its commit's WAL flush
(``PreCommit_Notify`` in ``src/backend/commands/async.c``). Four threads commit
one-row transactions as fast as they can, for ``--seconds`` each, in three ways,
round-robin within every repetition:

- ``none``: ``BEGIN; INSERT; COMMIT``;
- ``inside``: the same with a ``NOTIFY`` in the transaction (the old write path);
- ``after``: the same, followed in the same message by ``BEGIN; SET LOCAL
  synchronous_commit TO off; NOTIFY; COMMIT`` (``wake_followers`` in
  ``ledger.postgres.order``, sent with the write's COMMIT as
  ``ledger.postgres.write`` does).

It prints commits/s and, per repetition, each way's ratio to ``none``.

Run::

    .venv/bin/python benchmarks/probe_pg_notify.py             # ~20 s
    .venv/bin/python benchmarks/probe_pg_notify.py --quick     # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid

import psycopg

DEFAULT_URL = os.environ.get(
    "TURNLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
WAYS = ("none", "inside", "after")


def _commit(conn: psycopg.Connection[tuple[object, ...]], table: str, way: str) -> None:
    insert = f"INSERT INTO {table} VALUES (1)"
    if way == "inside":
        conn.execute(f"BEGIN; {insert}; NOTIFY tl_probe_notify; COMMIT")
        return
    if way == "after":  # in the same message, as the ledger sends it
        conn.execute(
            f"BEGIN; {insert}; COMMIT; BEGIN; SET LOCAL synchronous_commit TO off; "
            "NOTIFY tl_probe_notify; COMMIT"
        )
        return
    conn.execute(f"BEGIN; {insert}; COMMIT")


def run(url: str, table: str, way: str, threads: int, seconds: float) -> float:
    """Commits/s of ``threads`` committers, each on its own connection."""
    stop = threading.Event()
    counts = [0] * threads

    def worker(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                _commit(conn, table, way)
                counts[i] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repeat = 0.2, 1
    try:
        psycopg.connect(args.url, connect_timeout=3).close()
    except psycopg.Error as e:
        print(f"PostgreSQL not available at {args.url}: {e}; nothing measured")
        return
    table = f"public.tl_probe_notify_{uuid.uuid4().hex[:8]}"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"probe_pg_notify: {args.threads} committers x {args.seconds} s per way, "
        f"{args.repeat} repetition(s), load {load}"
    )
    rates: dict[str, list[float]] = {way: [] for way in WAYS}
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (x int)")
        try:
            for _ in range(args.repeat):
                for way in WAYS:
                    rates[way].append(
                        run(args.url, table, way, args.threads, args.seconds)
                    )
        finally:
            conn.execute(f"DROP TABLE {table}")
    for way in WAYS:
        ratios = [r / n for r, n in zip(rates[way], rates["none"], strict=True)]
        print(
            f"  {way:6s} {statistics.median(rates[way]):8,.0f} commits/s; vs none "
            f"per repetition: {', '.join(f'{x:.2f}' for x in ratios)}"
        )


if __name__ == "__main__":
    main()
