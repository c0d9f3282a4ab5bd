"""What erasability costs the ledger: sealed vs clear sessions, same run.

Two SQLite ledgers get the same sessions, one opened with ``erasable=True``
(every session event sealed under its session's data key, ``ledger.erasable``)
and one without. Reported per operation: erasable rate / clear rate (1.0 =
free; 0.5 = twice as slow), the median of per-round ratios; no goal.

1. Appends: one ``turn.started`` + ``assistant.message`` append to an open
   session (the session's key remembered by the key store while its
   ``data_version`` says no other connection changed it: one PRAGMA per append,
   then one AES-GCM seal per event).
2. Reads: ``read_stream`` of a session of 200 events (per read call: the key
   store's ``data_version`` checked once and the session's key looked up once;
   per sealed row: one AES-GCM open, then the same fast decode as a clear row).
3. Erase (erasable only, in the table): ``pipeline.erasure.erase`` of one
   session of a ledger of that many sessions (keys destroyed, receipt, views
   and memory rebuilt, files rewritten).

Run::

    .venv/bin/python benchmarks/bench_erasure.py            # ~1 min
    .venv/bin/python benchmarks/bench_erasure.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

from _harness import (
    Case,
    Ratio,
    Scratch,
    Stopwatch,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)

from turnledger.ledger.events import AssistantMessage, SessionOpened, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.config import Config
from turnledger.pipeline.erasure import erase

AGENT = "bench"
READ_EVENTS = 200


def _turn(i: int) -> list[TurnStarted | AssistantMessage]:
    text = f"turn {i}: the release moves to Friday, the editor is Helix"
    return [
        TurnStarted(turn_id=f"t{i}", origin="channel", user_input=text),
        AssistantMessage(turn_id=f"t{i}", text=f"Noted ({i}).", iteration=0),
    ]


def _open_session(store: EventStore, key: str, turns: int) -> int:
    stream = session_stream_id(AGENT, key)
    events = [SessionOpened(agent=AGENT, session_key=key)]
    for i in range(turns):
        events.extend(_turn(i))
    return store.append(stream, events, expected_version=0).last_version


class Workload:
    """One mode's ledger (erasable or clear) and its cases."""

    def __init__(self, mode: str, root: Path, sessions: int) -> None:
        self.mode = mode
        self.root = root
        self.sessions = sessions
        self.store = open_store(
            str(root / f"{mode}.db"), synchronous="NORMAL", erasable=mode == "erasable"
        )
        self.version = _open_session(self.store, "writer", 0)
        _open_session(self.store, "reader", READ_EVENTS // 2)
        self._count = 0

    def cases(self) -> list[Case]:
        mode = self.mode
        cases = [
            Case(f"append {mode}", 500, self.append, "append"),
            Case(f"read {mode}", 50, self.read, "session read"),
        ]
        if mode == "erasable":
            cases.append(Case("erase one session", 1, self.erase, "erase", warmup_n=1))
        return cases

    def append(self, count: int) -> float:
        stream = session_stream_id(AGENT, "writer")
        with Stopwatch() as sw:
            for i in range(count):
                result = self.store.append(
                    stream, _turn(i), expected_version=self.version
                )
                self.version = result.last_version
        return sw.seconds

    def read(self, count: int) -> float:
        stream = session_stream_id(AGENT, "reader")
        with Stopwatch() as sw:
            for _ in range(count):
                self.store.read_stream(stream)
        return sw.seconds

    def erase(self, count: int) -> float:
        seconds = 0.0
        for _ in range(count):
            self._count += 1
            path = self.root / f"erase-{self._count}.db"
            with open_store(str(path), synchronous="NORMAL", erasable=True) as store:
                for s in range(self.sessions):
                    _open_session(store, f"s{s}", 5)
                with Stopwatch() as sw:
                    erase(
                        store,
                        Config(data_dir=str(self.root / "data")),
                        subject="session",
                        agent=AGENT,
                        key="s0",
                        ledger_url=str(path),
                        views_at=str(path.with_name(path.stem + ".views.db")),
                        command="bench",
                    )
            seconds += sw.seconds
        return seconds

    def close(self) -> None:
        self.store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--sessions", type=int, default=200, help="for the erase")
    parser.add_argument("--repeat", type=int, default=5, help="rounds")
    parser.add_argument("--dir", default=None, help="where to put the temporary files")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.repeat = 10, 1
    print(
        f"python {platform.python_version()}; sessions={args.sessions}, "
        f"rounds={args.repeat}"
    )
    with Scratch("bench_erasure", args.dir) as scratch:
        workloads = [
            Workload(mode, scratch.root, args.sessions)
            for mode in ("clear", "erasable")
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
                f"{op}: erasable / clear",
                by_name[f"{op} erasable"],
                by_name[f"{op} clear"],
            )
            for op in ("append", "read")
        ]
        print_ratios(ratios)
        if args.json:
            write_json(
                args.json,
                meta={"sessions": args.sessions, "repeat": args.repeat},
                series=series,
                ratios=ratios,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
