"""Import throughput on the corpus, and replay of a 10k-event session vs raw SQLite.

1. Import (goal >= 0.5): every transcript file of the shared corpus (the
   128 ``.jsonl``, ``.json`` and ``.yaml`` files under ``shared/corpus``) read with
   ``read_transcript`` (format detection included) and written with
   ``import_transcript`` into a fresh SQLite ledger at the default durability
   (``synchronous=FULL``, one transaction per file, as ``turnledger import``
   does), each file under its own agent. Figures: files/s and events/s, from the
   same runs. Creating the empty ledger is outside the timing; reading the
   files is inside (the page cache is warm after the warm-up run). Raw
   baseline, same files in the same run: the file's bytes parsed the same way
   (``read_transcript``, the events built by ``conversation_events``), then each
   event encoded with ``msgspec.json`` and inserted with ``sqlite3`` into a bare
   ``(stream, version, body)`` table, one transaction per file, WAL and
   ``synchronous=FULL``. Goal: ours files/s >= 0.5 x raw files/s.
2. Replay (goal >= 0.5): one session stream of N events (10,000 by default;
   realistic turns: user input, prompt digests, model calls, 0-3 parallel tool
   calls with their results, some failing, a final answer, the completion),
   written once. Ours: ``EventStore.read_stream`` of the whole stream (select,
   then decode every row into a ``Recorded`` envelope around its typed event).
   Raw baseline, on the same file in the same run: ``sqlite3`` SELECT of the
   stream's rows in version order, then ``msgspec.json.Decoder(LedgerEvent)``
   (the tagged union of every event type) on each body after the 12-byte frame
   header, so the baseline decodes to typed events too. Goal: ours events/s >=
   0.5 x raw events/s, as the median of the per-repetition ratios.
   Also reported: ``replay_session`` (the fold into the session history,
   digests, and the re-derivation of every recorded prompt digest) in events/s.

Each repetition runs every case once, round-robin; figures are medians over
repetitions. The script reports; it exits 0 even when the goal is missed (the
line then says MISS).

Run::

    .venv/bin/python benchmarks/bench_replay.py            # full run (~1 min)
    .venv/bin/python benchmarks/bench_replay.py --quick    # smoke: a few seconds
    .venv/bin/python benchmarks/bench_replay.py --json out.json --repeat 7
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from uuid import UUID

import msgspec
from _harness import (
    Case,
    Ratio,
    Scratch,
    Series,
    Stopwatch,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)

from turnledger.ledger.chain import BODY_OFFSET
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    LedgerEvent,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.formats import read_transcript
from turnledger.pipeline.importer import conversation_events, import_transcript
from turnledger.pipeline.timetravel.replay import replay_session

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".yaml")
SELECT_STREAM = (
    "SELECT rowid, originator_version, topic, state FROM stored_events "
    "WHERE originator_id=? ORDER BY originator_version"
)
GOAL = 0.5

TEXT = (
    "the nightly export failed after the schema migration so check the logs "
    "for the billing table and propose a fix that keeps the retention policy"
)
WORDS = TEXT.split(" ")


# -- workload ---------------------------------------------------------------------


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:chars]


def _hex(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


def make_turn(rng: random.Random, i: int) -> list[Event]:
    """One turn: input, prompt, model call, parallel calls and results, answer."""
    turn = f"turn-{i:06d}"
    calls = tuple(
        ToolCallRecord(
            id=f"call_{rng.getrandbits(64):016x}",
            name=rng.choice(["grep_file", "read_file", "http_get"]),
            arguments=msgspec.json.encode(
                {"path": f"/srv/logs/{i % 31}.log", "pattern": "ERROR", "n": 50}
            ).decode(),
        )
        for _ in range(rng.randrange(4))
    )
    events: list[Event] = [
        TurnStarted(turn_id=turn, origin="interactive", user_input=_text(rng, 200)),
        PromptAssembled(
            turn_id=turn,
            sections=tuple(
                PromptSection(
                    name=name,
                    chars=rng.randrange(100, 9000),
                    messages=rng.randrange(40),
                    digest=_hex(rng),
                )
                for name in ("system", "memory", "history")
            ),
            fingerprint=_hex(rng),
            estimated_tokens=rng.randrange(1000, 9000),
        ),
        ModelCalled(
            turn_id=turn,
            provider="anthropic",
            model="claude-sonnet-4-5",
            input_tokens=rng.randrange(1000, 9000),
            output_tokens=rng.randrange(50, 900),
            cost_usd=round(rng.random() / 20, 6),
            duration_ms=round(rng.random() * 4000, 1),
        ),
        AssistantMessage(turn_id=turn, text=_text(rng, 60), tool_calls=calls),
    ]
    for call in calls:
        ok = rng.random() < 0.85
        events.append(
            ToolResultRecorded(
                turn_id=turn,
                call_id=call.id,
                tool=call.name,
                success=ok,
                output=_text(rng, 300) if ok else "",
                error=None if ok else "permission denied",
                original_chars=300,
                kept_chars=300,
            )
        )
    events += [
        AssistantMessage(turn_id=turn, text=_text(rng, 250), iteration=1),
        TurnCompleted(turn_id=turn, iterations=2),
    ]
    return events


def make_session(rng: random.Random, n: int) -> list[Event]:
    """A session of exactly ``n`` events (the last turn may be cut short)."""
    events: list[Event] = [SessionOpened(agent="bench", session_key="replay")]
    i = 0
    while len(events) < n:
        events += make_turn(rng, i)
        i += 1
    return events[:n]


# -- 1. import ------------------------------------------------------------------------


def corpus_files() -> list[Path]:
    """Every transcript file of the corpus, in a stable order."""
    return sorted(
        p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in TRANSCRIPT_SUFFIXES
    )


class ImportRun:
    """Imports the corpus into a fresh ledger per run; counts the events written."""

    def __init__(self, root: Path, files: Sequence[Path]) -> None:
        self.root = root
        self.files = list(files)
        self.runs = 0
        self.events = 0

    def __call__(self, n: int) -> float:
        self.runs += 1
        path = self.root / f"import{self.runs}.db"
        store = open_store(str(path))
        events = 0
        with Stopwatch() as sw:
            for i, file in enumerate(self.files[:n]):
                report = import_transcript(
                    store, read_transcript(file), agent=f"corpus{i}"
                )
                events += sum(s.events for s in report.sessions)
        store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        self.events = events
        return sw.seconds


class RawImportRun:
    """The raw baseline: same parse, then ``sqlite3`` inserts of encoded events."""

    def __init__(self, root: Path, files: Sequence[Path]) -> None:
        self.root = root
        self.files = list(files)
        self.runs = 0

    def __call__(self, n: int) -> float:
        self.runs += 1
        path = self.root / f"raw_import{self.runs}.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(
            "CREATE TABLE events (stream TEXT, version INTEGER, body BLOB, "
            "PRIMARY KEY (stream, version))"
        )
        encode = msgspec.json.Encoder().encode
        with Stopwatch() as sw:
            for i, file in enumerate(self.files[:n]):
                parsed = read_transcript(file)
                rows = []
                for c, conversation in enumerate(parsed.conversations):
                    events, _ = conversation_events(
                        conversation, agent=f"corpus{i}", session_key=f"c{c}"
                    )
                    stream = f"corpus{i}/c{c}"
                    rows += [(stream, v, encode(e)) for v, e in enumerate(events, 1)]
                db.execute("BEGIN")
                db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
                db.execute("COMMIT")
        db.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return sw.seconds


# -- 2. replay ------------------------------------------------------------------------


def ours_read_stream(path: Path, stream: UUID) -> Callable[[int], float]:
    """Ours: ``store.read_stream`` of the whole stream."""
    store = open_store(str(path))

    def run(n: int) -> float:
        with Stopwatch() as sw:
            events = store.read_stream(stream)
        _expect(len(events), n)
        return sw.seconds

    return run


def raw_select_decode(path: Path, stream: UUID) -> Callable[[int], float]:
    """Raw: SELECT the stream's rows, typed msgspec decode of each body."""
    decoder = msgspec.json.Decoder(LedgerEvent)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    skip = BODY_OFFSET  # the stored body starts after the header and chain tail

    def run(n: int) -> float:
        with Stopwatch() as sw:
            rows = conn.execute(SELECT_STREAM, (stream.hex,)).fetchall()
            events = [
                (r[0], r[1], decoder.decode(memoryview(r[3])[skip:])) for r in rows
            ]
        _expect(len(events), n)
        return sw.seconds

    return run


def ours_replay_session(path: Path, stream: UUID) -> Callable[[int], float]:
    """Info: ``replay_session`` (read, fold into the history, check digests)."""
    store = open_store(str(path))

    def run(n: int) -> float:
        with Stopwatch() as sw:
            report = replay_session(store, stream)
        _expect(report.events, n)
        return sw.seconds

    return run


def _expect(found: int, wanted: int) -> None:
    if found != wanted:
        msg = f"Expected {wanted} events, found {found}"
        raise RuntimeError(msg)


# -- main ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000, help="replay size (10k)")
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (1)")
    p.add_argument("--dir", default=None, help="folder for the database files (/tmp)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    args.files = None
    if args.quick:
        args.events, args.repeat, args.files = 1_000, 2, 12
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases, print the table and the goal line; always return 0."""
    args = parse_args(argv)
    rng = random.Random(args.seed)
    scratch = Scratch("bench_replay", args.dir)
    root = scratch.root
    load_before = os.getloadavg()
    try:
        cases: list[Case] = []
        files = corpus_files() if CORPUS.exists() else []
        if args.files is not None:
            files = files[:: max(1, len(files) // args.files)][: args.files]
        importer = ImportRun(root, files)
        if files:
            cases.append(
                Case(
                    "1.import_corpus",
                    len(files),
                    importer,
                    "file",
                    "read_transcript + import_transcript, FULL",
                    warmup_n=len(files),
                )
            )
            cases.append(
                Case(
                    "1.raw_import_corpus",
                    len(files),
                    RawImportRun(root, files),
                    "file",
                    "same parse + sqlite3 executemany, FULL",
                    warmup_n=len(files),
                )
            )
        else:
            print(f"corpus not found at {CORPUS}: the import part is skipped")
        path = root / "replay.db"
        stream = session_stream_id("bench", "replay")
        with open_store(str(path), synchronous="OFF") as store:
            store.append(stream, make_session(rng, args.events), expected_version=0)
        n = args.events
        cases += [
            Case(
                "2.raw_select_decode",
                n,
                raw_select_decode(path, stream),
                "event",
                "sqlite3 SELECT + Decoder(LedgerEvent)",
                warmup_n=n,
            ),
            Case(
                "2.ours_read_stream",
                n,
                ours_read_stream(path, stream),
                "event",
                "EventStore.read_stream",
                warmup_n=n,
            ),
            Case(
                "2.ours_replay_session",
                n,
                ours_replay_session(path, stream),
                "event",
                "replay_session: fold + digests",
                warmup_n=n,
            ),
        ]
        series = run_rounds(cases, repeat=args.repeat, warmup=args.warmup)
        by_name = {s.name: s for s in series}
        if files:
            imported = by_name["1.import_corpus"]
            series.insert(
                1,
                Series(
                    "1.import_corpus_events",
                    importer.events,
                    "event",
                    "same runs, events written",
                    list(imported.seconds),
                ),
            )
        ratios = (
            []
            if not files
            else [
                Ratio(
                    "import",
                    by_name["1.import_corpus"],
                    by_name["1.raw_import_corpus"],
                    GOAL,
                )
            ]
        )
        ratios += [
            Ratio(
                "replay",
                by_name["2.ours_read_stream"],
                by_name["2.raw_select_decode"],
                GOAL,
            )
        ]
        print(
            f"bench_replay: python {platform.python_version()}, sqlite "
            f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load "
            f"{load_before[0]:.2f}, {len(files)} corpus files, {n:,}-event session, "
            f"{args.repeat} repetitions"
        )
        print_table(series)
        print_ratios(ratios)
        if args.json:
            write_json(
                args.json,
                meta={
                    "python": sys.version,
                    "sqlite": sqlite3.sqlite_version,
                    "cpus": os.cpu_count(),
                    "load_before": load_before,
                    "load_after": os.getloadavg(),
                    "corpus_files": len(files),
                    "events": n,
                    "repeat": args.repeat,
                    "seed": args.seed,
                },
                series=series,
                ratios=ratios,
            )
    finally:
        scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
