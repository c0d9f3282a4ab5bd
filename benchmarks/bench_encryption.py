"""What encryption at rest costs the side files: SQLCipher vs clear SQLite, same run.

The memory and view stores of ``bench_memory`` / the projection runner, each run
twice per round on the same data: once in a clear file, once in a SQLCipher
file keyed from a cipher key (``TURNLEDGER_CIPHER_KEY``'s derived keys). The
ledger is clear in both, so only the side files differ. Reported per
operation: keyed rate / clear rate (1.0 = free; 0.8 = 20 % slower), the median
of per-round ratios. Clear files run on Python's ``sqlite3`` (its SQLite), keyed
ones on SQLCipher's SQLite (another version): the ratios include that.

1. Memory rebuild: ``SQLiteMemory.apply`` of N ``memory.stored`` events read
   from the ledger (pages of 1,000) into a fresh file (FTS5 index included).
2. Memory writes: ``SQLiteMemory.store`` one entry per transaction.
3. Keyword recall: ``recall`` of 2-3 content words (``bm25`` mode) over the N
   memories, a page cache as the store runs it (32 MiB).
4. Keyword recall, cold: the same after opening the file (its first query
   reads and decrypts the pages it needs).
5. Views: ``SQLiteViewStore.commit`` of pages of 100 states, then ``load`` of
   each page's keys.

Run::

    .venv/bin/python benchmarks/bench_encryption.py            # ~1 min
    .venv/bin/python benchmarks/bench_encryption.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import base64
import platform
import random
import sqlite3
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from _harness import (
    Case,
    Ratio,
    Scratch,
    Stopwatch,
    installed,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)
from bench_memory import build_ledger, content_queries, make_corpus

from turnledger.ledger.store import open_store
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.views import SQLiteViewStore

KEY = base64.b64encode(b"k" * 32).decode()
MODES = {"clear": "", "keyed": KEY}
PAGE = 1_000
AGENTS = ("agent0", "agent1", "agent2", "agent3")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rebuild(ledger: Path, target: Path, cipher_key: str) -> int:
    """Apply every ledger event to a fresh memory file; return the count."""
    store = open_store(str(ledger), synchronous="NORMAL", cipher_key="")
    memory = SQLiteMemory(target, cipher_key=cipher_key)
    applied, after = 0, 0
    try:
        while page := store.read_all(after=after, limit=PAGE):
            memory.apply(page, page[-1].position)
            applied += len(page)
            after = page[-1].position
    finally:
        memory.close()
        store.close()
    return applied


class Workload:
    """One mode's cases (clear or keyed) over the same ledger, corpus and queries."""

    def __init__(
        self, mode: str, root: Path, ledger: Path, queries: list[str], n: int
    ) -> None:
        self.mode = mode
        self.key = MODES[mode]
        self.root = root
        self.ledger = ledger
        self.queries = queries
        self.n = n
        self.built = root / f"built-{mode}.db"
        rebuild(ledger, self.built, self.key)
        self.warm = SQLiteMemory(self.built, cipher_key=self.key, search_mode="bm25")
        self._count = 0

    def fresh(self, prefix: str) -> Path:
        self._count += 1
        return self.root / f"{prefix}-{self.mode}-{self._count}.db"

    def cases(self) -> list[Case]:
        mode, queries = self.mode, len(self.queries)
        return [
            Case(
                f"memory rebuild {mode}", self.n, self.rebuild, "event", warmup_n=self.n
            ),
            Case(f"memory store {mode}", 200, self.store, "write"),
            Case(f"keyword recall {mode}", queries, self.recall, "query"),
            Case(
                f"keyword recall cold {mode}", max(5, queries // 10), self.cold, "query"
            ),
            Case(f"views commit+load {mode}", 2_000, self.views, "state", warmup_n=200),
        ]

    def rebuild(self, _: int) -> float:
        target = self.fresh("rebuild")
        with Stopwatch() as sw:
            rebuild(self.ledger, target, self.key)
        return sw.seconds

    def store(self, count: int) -> float:
        memory = SQLiteMemory(self.fresh("store"), cipher_key=self.key)
        try:
            with Stopwatch() as sw:
                for i in range(count):
                    memory.store(
                        NewMemory(
                            agent=AGENTS[i % len(AGENTS)],
                            key=f"k{i}",
                            content=f"fact number {i} about the release",
                            entry_id=f"e{i}",
                            at=T0,
                        )
                    )
        finally:
            memory.close()
        return sw.seconds

    def recall(self, count: int) -> float:
        with Stopwatch() as sw:
            for i in range(count):
                query = self.queries[i % len(self.queries)]
                self.warm.recall(query, agents=AGENTS, limit=10)
        return sw.seconds

    def cold(self, count: int) -> float:
        seconds = 0.0
        for i in range(count):
            query = self.queries[i % len(self.queries)]
            with Stopwatch() as sw:
                memory = SQLiteMemory(
                    self.built, cipher_key=self.key, search_mode="bm25"
                )
                memory.recall(query, agents=AGENTS, limit=10)
                memory.close()
            seconds += sw.seconds
        return seconds

    def views(self, count: int) -> float:
        views = SQLiteViewStore(str(self.fresh("views")), cipher_key=self.key)
        try:
            with Stopwatch() as sw:
                for page in range(count // 100):
                    states = {
                        f"s{page}-{i}": {"turns": i, "text": f"message {page} {i}"}
                        for i in range(100)
                    }
                    views.commit("history", states, page + 1)
                    views.load("history", list(states), dict)
        finally:
            views.close()
        return sw.seconds

    def close(self) -> None:
        self.warm.close()


OPERATIONS = (
    "memory rebuild",
    "memory store",
    "keyword recall",
    "keyword recall cold",
    "views commit+load",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--n", type=int, default=20_000, help="memories")
    parser.add_argument("--queries", type=int, default=200, help="queries per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", default=None, help="where to put the temporary files")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.repeat = 1_000, 20, 1
    if not installed(
        "SQLCipher", "sqlcipher3.dbapi2", hint="pip install 'turnledger[sqlcipher]'"
    ):
        return 0
    import sqlcipher3.dbapi2 as cipher  # noqa: PLC0415 - the extra, checked above

    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"sqlcipher's sqlite {cipher.sqlite_version}; n={args.n:,}, "
        f"queries={args.queries}, rounds={args.repeat}"
    )
    rng = random.Random(args.seed)
    with Scratch("bench_encryption", args.dir) as scratch:
        corpus = make_corpus(args.n, args.seed)
        ledger = scratch.root / "ledger.db"
        build_ledger(ledger, corpus.texts)
        queries = [q for q, _ in content_queries(corpus, args.queries, rng)]
        workloads = [
            Workload(mode, scratch.root, ledger, queries, args.n) for mode in MODES
        ]
        try:
            cases = [case for w in workloads for case in w.cases()]
            series = run_rounds(cases, repeat=args.repeat, warmup=1)
        finally:
            for workload in workloads:
                workload.close()
        print_table(series)
        by_name = {s.name: s for s in series}
        ratios = [
            Ratio(
                f"{op}: keyed / clear", by_name[f"{op} keyed"], by_name[f"{op} clear"]
            )
            for op in OPERATIONS
        ]
        print_ratios(ratios)
        if args.json:
            write_json(
                args.json,
                meta={"n": args.n, "queries": args.queries, "repeat": args.repeat},
                series=series,
                ratios=ratios,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
