"""Append and replay throughput of the SQLite ledger, against raw sqlite3.

Every goal is a ratio to a raw ``sqlite3`` baseline measured in the same run, on
the same disk (one temporary folder), with the same pragmas (WAL,
``synchronous=FULL``), the same table (``stored_events``: originator_id TEXT,
originator_version INTEGER, topic TEXT, state BLOB, primary key on the first two)
and rows of the same size (the raw blobs are the ledger's frames: a 12-byte
header, a 72-byte chain tail, which raw leaves zeroed and never computes, and the
event encoded with msgspec JSON). The events are realistic
turns of 8 events (a ~200-char user message, recall references, prompt section
digests, a model call, a tool call with JSON arguments, a ~300-char tool output, a
final answer, the completion). The raw baselines get their rows pre-encoded, so
they time only SQLite; "ours" times the whole public call (validation, encoding,
checks, insert, commit; or select and decode).

1. Durable turns: raw ``BEGIN IMMEDIATE``, ``executemany`` of the turn's 8 rows,
   ``COMMIT`` vs ``EventStore.append`` of one 8-event turn per call (one commit per
   turn, hash chain included). Goal: ours turns/s >= 0.8 x raw turns/s. Also
   reported: raw one commit per 8-row turn / raw one commit per row.
2. Bulk: raw ``executemany`` of N rows in one transaction vs one
   ``EventStore.append`` of N events to one stream. Goal: events/s >= 0.5 x raw.
3. Replay: raw SELECT of an N-row stream + typed msgspec decode of each body vs
   ``EventStore.read_stream`` of the same N-event stream (same file). Goal >= 0.5.
4. Concurrency: 64 sessions appending turns at once through ``AsyncLedger`` (group
   commit) vs raw sqlite3 writing the same turns 64 per transaction. Goal: turns/s
   >= 0.7 x raw. Also reported: raw group commit / raw one commit per turn.
5. The hash chain alone (``chain_state`` over a turn's frames, no I/O) vs case 1's
   durable turn appends. Goal: >= 10 (the chain is <= 10 % of an append).
6. Diagnostic, no goal: case 1's two paths with ``synchronous=OFF``, timed in
   the thread's CPU seconds: what each path costs the CPU, the part of case 1
   the code controls (case 1 adds the same fsync to both), steady when a
   loaded disk makes case 1's per-repeat ratios spread.

``--diagnose`` (no goal; instead of the cases above) shows where the CPU of an
append goes, the floor under goals 1 and 4. Every case writes the same 8-event
turns with ``synchronous=OFF``, timed in the writing thread's CPU seconds (so the
figures hold when a loaded disk or machine makes wall-clock ratios spread), each
adding one thing to the one before:

- ``0.raw``: ``BEGIN IMMEDIATE``, ``executemany`` of the turn's rows (pre-encoded,
  as the raw baseline of case 1), ``COMMIT``;
- ``1.rowid``: the same rows inserted at explicit positions, as the ledger does;
- ``2.triggers``: into a file the ledger created (its append-only triggers fire
  on every row);
- ``3.data_version``: plus the ``PRAGMA data_version`` the writer reads per group;
- ``4.encode_chain``: plus validating and encoding the events
  (``MsgspecMapper.encode_rows``) and chaining the rows (``chain_rows``);
- ``5.ours``: ``EventStore.append`` (the whole public call; case 6's ours).

And the group commit of goal 4, per turn, 64 turns per transaction:
``6.raw_group`` (raw rows), ``7.ours_group_writer`` (``EventStore.write_requests``
of 64 encoded appends: what the async facade's writer thread does) and
``8.ours_encode`` (``EventStore.encode`` of the same turns: what its event loop
does before handing them over). It prints each step's CPU µs per turn.

Each repetition runs every case once, round-robin (a fresh database file per run
for the writes); the figures are medians over repetitions and each ratio is the
median of its per-repetition ratios. The script reports; it exits 0 even when a
goal is missed (the line then says MISS).

Run::

    .venv/bin/python benchmarks/bench_append.py            # full run (1-3 min)
    .venv/bin/python benchmarks/bench_append.py --quick    # smoke: a few seconds
    .venv/bin/python benchmarks/bench_append.py --json out.json --repeat 7
    .venv/bin/python benchmarks/bench_append.py --diagnose  # CPU by step (~1 min)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import msgspec
from _harness import (
    Case,
    Ratio,
    Scratch,
    Series,
    Stopwatch,
    device_of,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)

from turnledger.ledger import (
    AssistantMessage,
    Event,
    LedgerEvent,
    MemoryRecalled,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    RecallRef,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
    tag_of,
)
from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.chain import (
    BODY_OFFSET,
    CHAIN_FORMAT,
    GENESIS,
    TAIL_SIZE,
    chain_rows,
    chain_state,
)
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.frame import now_us
from turnledger.ledger.store import Append, open_store

EVENTS_PER_TURN = 8
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, "
    "originator_version INTEGER, topic TEXT, state BLOB, "
    "PRIMARY KEY (originator_id, originator_version))"
)
INSERT = "INSERT INTO stored_events VALUES (?,?,?,?)"
SELECT_STREAM = (
    "SELECT rowid, originator_version, topic, state FROM stored_events "
    "WHERE originator_id=? AND originator_version>? ORDER BY originator_version LIMIT ?"
)
HEADER = struct.Struct(">BBHq")  # the ledger's frame header: format, flags, v, time

TEXT = (
    "the export job failed again last night after the schema migration, can you "
    "check logs for the nightly run and tell me which table broke, then propose a "
    "fix that keeps the retention policy and does not touch production credentials "
    "please also summarise what changed since Tuesday in the billing service repo"
)
WORDS = TEXT.split()

Row = tuple[str, int, str, bytes]


# -- workload -------------------------------------------------------------------


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _digest(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


def make_turn(rng: random.Random, i: int) -> list[Event]:
    """Return one realistic turn of 8 events (a tool call and its result)."""
    turn_id = f"turn-{i:06d}-{rng.getrandbits(32):08x}"
    call_id = f"call_{rng.getrandbits(64):016x}"
    arguments = msgspec.json.encode(
        {
            "path": f"/srv/export/logs/nightly-{i % 31 + 1:02d}.log",
            "pattern": "ERROR|Traceback|IntegrityError",
            "context_lines": 5,
            "max_matches": 50,
        }
    ).decode()
    return [
        TurnStarted(turn_id=turn_id, origin="interactive", user_input=_text(rng, 200)),
        MemoryRecalled(
            turn_id=turn_id,
            backend="sqlite-fts5",
            entries=tuple(
                RecallRef(
                    key=f"project/{w}",
                    entry_id=f"m-{rng.getrandbits(40):010x}",
                    score=round(rng.random(), 4),
                    agent="main",
                )
                for w in ("export", "retention", "billing")
            ),
            query_summary=_text(rng, 60),
            injected_chars=rng.randrange(300, 2000),
        ),
        PromptAssembled(
            turn_id=turn_id,
            sections=tuple(
                PromptSection(
                    name=name,
                    chars=rng.randrange(200, 20000),
                    messages=rng.randrange(0, 40),
                    digest=_digest(rng),
                )
                for name in ("system", "memory", "history")
            ),
            fingerprint=_digest(rng),
            estimated_tokens=rng.randrange(1000, 9000),
        ),
        ModelCalled(
            turn_id=turn_id,
            provider="anthropic",
            model="claude-sonnet-4-5",
            input_tokens=rng.randrange(1000, 9000),
            output_tokens=rng.randrange(50, 900),
            cached_input_tokens=rng.randrange(0, 5000),
            cost_usd=round(rng.random() / 20, 6),
            duration_ms=round(rng.random() * 4000, 1),
        ),
        AssistantMessage(
            turn_id=turn_id,
            text=_text(rng, 80),
            tool_calls=(
                ToolCallRecord(id=call_id, name="grep_file", arguments=arguments),
            ),
        ),
        ToolResultRecorded(
            turn_id=turn_id,
            call_id=call_id,
            tool="grep_file",
            output=_text(rng, 300),
            original_chars=rng.randrange(300, 90000),
            kept_chars=300,
            truncated=True,
        ),
        AssistantMessage(turn_id=turn_id, text=_text(rng, 250), iteration=1),
        TurnCompleted(
            turn_id=turn_id, iterations=2, duration_ms=round(rng.random() * 9000, 1)
        ),
    ]


def frame(event: Event, at_us: int) -> bytes:
    """Return bytes as long as the ledger stores (header, chain tail, msgspec JSON).

    The raw baselines store the same number of bytes, but compute no chain link.
    """
    return (
        HEADER.pack(CHAIN_FORMAT, 0, type(event).SCHEMA_VERSION, at_us)
        + bytes(TAIL_SIZE)
        + msgspec.json.encode(event)
    )


def turn_rows(stream_hex: str, first_version: int, turn: Sequence[Event]) -> list[Row]:
    """Return the raw rows of one turn, as the ledger would store them."""
    at_us = time.time_ns() // 1000
    return [
        (stream_hex, first_version + i, tag_of(type(e)), frame(e, at_us))
        for i, e in enumerate(turn)
    ]


# -- raw baselines ----------------------------------------------------------------


def raw_connect(path: Path) -> sqlite3.Connection:
    """Open a raw connection: autocommit, WAL, synchronous=FULL, the ledger's table."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(SCHEMA)
    return conn


# -- 1. durable turns -------------------------------------------------------------


def raw_row_commits(
    files: Scratch, turns: Sequence[Sequence[Event]], sessions: int
) -> Callable[[int], float]:
    """Raw: one INSERT per row in autocommit mode, so one FULL commit per row."""

    def run(n: int) -> float:
        path = files.fresh()
        conn = raw_connect(path)
        batch = raw_stream_rows(turns, sessions, n)
        with Stopwatch() as sw:
            for row in batch:
                conn.execute(INSERT, row)
        conn.close()
        files.drop(path)
        return sw.seconds

    return run


def stream_plan(turns: int, streams: Sequence[UUID]) -> list[tuple[UUID, int]]:
    """Return (stream, expected version) for each turn, streams in rotation."""
    heads = dict.fromkeys(streams, 0)
    plan = []
    for i in range(turns):
        stream = streams[i % len(streams)]
        plan.append((stream, heads[stream]))
        heads[stream] += EVENTS_PER_TURN
    return plan


def raw_stream_rows(
    turns: Sequence[Sequence[Event]], sessions: int, n_rows: int
) -> list[Row]:
    """Return ``n_rows`` raw rows spread over ``sessions`` streams, in turn order."""
    plan = stream_plan(
        n_rows // EVENTS_PER_TURN + 1, [uuid4() for _ in range(sessions)]
    )
    rows: list[Row] = []
    for i, (stream, version) in enumerate(plan):
        rows.extend(turn_rows(stream.hex, version + 1, turns[i % len(turns)]))
    return rows[:n_rows]


def ours_turn_appends(
    files: Scratch,
    turns: Sequence[Sequence[Event]],
    sessions: int,
    *,
    cpu: bool = False,
) -> Callable[[int], float]:
    """Ours: ``store.append`` of one 8-event turn per call (one commit each).

    With ``cpu`` (a diagnostic): ``synchronous=OFF``, timed in this thread's CPU
    seconds, so the figure is the append path's own CPU cost, whatever the disk
    and the machine's load do.
    """

    def run(n: int) -> float:
        path = files.fresh()
        store = open_store(str(path), synchronous="OFF" if cpu else "FULL")
        plan = stream_plan(n, [uuid4() for _ in range(sessions)])
        work = [(s, turns[i % len(turns)], v) for i, (s, v) in enumerate(plan)]
        started = time.thread_time()
        with Stopwatch() as sw:
            for stream, events, version in work:
                store.append(stream, events, expected_version=version)
        seconds = time.thread_time() - started if cpu else sw.seconds
        store.close()
        files.drop(path)
        return seconds

    return run


# -- 2. bulk ------------------------------------------------------------------------


def raw_bulk(files: Scratch, events: Sequence[Event]) -> Callable[[int], float]:
    """Raw: ``executemany`` of n pre-encoded rows of one stream in one transaction."""

    def run(n: int) -> float:
        path = files.fresh()
        conn = raw_connect(path)
        stream = uuid4().hex
        at_us = time.time_ns() // 1000
        rows = [
            (stream, i + 1, tag_of(type(e)), frame(e, at_us))
            for i, e in enumerate(events[:n])
        ]
        with Stopwatch() as sw:
            conn.execute("BEGIN")
            conn.executemany(INSERT, rows)
            conn.execute("COMMIT")
        conn.close()
        files.drop(path)
        return sw.seconds

    return run


def ours_bulk(files: Scratch, events: Sequence[Event]) -> Callable[[int], float]:
    """Ours: one ``store.append`` of n events to one new stream."""

    def run(n: int) -> float:
        path = files.fresh()
        store = open_store(str(path))
        batch = list(events[:n])
        with Stopwatch() as sw:
            store.append(uuid4(), batch, expected_version=0)
        store.close()
        files.drop(path)
        return sw.seconds

    return run


# -- 3. replay ----------------------------------------------------------------------


def raw_replay(path: Path, stream: UUID) -> Callable[[int], float]:
    """Raw: SELECT the stream's rows, then a typed msgspec decode of each body."""
    decoder = msgspec.json.Decoder(LedgerEvent)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    skip = BODY_OFFSET

    def run(n: int) -> float:
        with Stopwatch() as sw:
            rows = conn.execute(SELECT_STREAM, (stream.hex, 0, n)).fetchall()
            events = [(r[0], r[1], decoder.decode(r[3][skip:])) for r in rows]
        if len(events) != n:
            msg = f"Expected {n} rows, found {len(events)}"
            raise RuntimeError(msg)
        return sw.seconds

    return run


def ours_replay(path: Path, stream: UUID) -> Callable[[int], float]:
    """Ours: ``store.read_stream`` of the stream."""
    store = open_store(str(path))

    def run(n: int) -> float:
        with Stopwatch() as sw:
            events = store.read_stream(stream, limit=n)
        if len(events) != n:
            msg = f"Expected {n} events, found {len(events)}"
            raise RuntimeError(msg)
        return sw.seconds

    return run


# -- 4. concurrent sessions ---------------------------------------------------------


def raw_group_commits(
    files: Scratch, turns: Sequence[Sequence[Event]], sessions: int
) -> Callable[[int], float]:
    """Raw: the sessions' turns, ``sessions`` turns per transaction (one fsync)."""

    def run(n: int) -> float:
        path = files.fresh()
        conn = raw_connect(path)
        streams = [uuid4().hex for _ in range(sessions)]
        rounds = max(1, n // sessions)
        groups = [
            [
                row
                for s, stream in enumerate(streams)
                for row in turn_rows(
                    stream,
                    r * EVENTS_PER_TURN + 1,
                    turns[(r * sessions + s) % len(turns)],
                )
            ]
            for r in range(rounds)
        ]
        with Stopwatch() as sw:
            for rows in groups:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT, rows)
                conn.execute("COMMIT")
        conn.close()
        files.drop(path)
        return sw.seconds * n / (rounds * sessions)

    return run


def raw_turn_commits(
    files: Scratch,
    turns: Sequence[Sequence[Event]],
    sessions: int,
    *,
    cpu: bool = False,
) -> Callable[[int], float]:
    """Raw: one transaction per turn (8 rows, one fsync).

    With ``cpu`` (a diagnostic): ``synchronous=OFF``, timed in this thread's CPU
    seconds (see :func:`ours_turn_appends`).
    """

    def run(n: int) -> float:
        path = files.fresh()
        conn = raw_connect(path)
        if cpu:
            conn.execute("PRAGMA synchronous=OFF")
        plan = stream_plan(n, [uuid4() for _ in range(sessions)])
        work = [
            turn_rows(s.hex, v + 1, turns[i % len(turns)])
            for i, (s, v) in enumerate(plan)
        ]
        started = time.thread_time()
        with Stopwatch() as sw:
            for rows in work:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT, rows)
                conn.execute("COMMIT")
        seconds = time.thread_time() - started if cpu else sw.seconds
        conn.close()
        files.drop(path)
        return seconds

    return run


def chain_only(turns: Sequence[Sequence[Event]]) -> Callable[[int], float]:
    """The hash chain alone: link every frame of ``n`` turns (no I/O)."""

    def run(n: int) -> float:
        work = [
            [(r[1], r[2], r[3]) for r in turn_rows("", 1, turns[i % len(turns)])]
            for i in range(n)
        ]
        stream = uuid4()
        with Stopwatch() as sw:
            for rows in work:
                prev = GENESIS
                for position, (version, topic, state) in enumerate(rows, 1):
                    _, link = chain_state(
                        state,
                        stream,
                        version=version,
                        position=position,
                        topic=topic,
                        prev=prev,
                    )
                    prev = link[:16]
        return sw.seconds

    return run


class AsyncStats:
    """Group sizes seen by the async facade across runs."""

    def __init__(self) -> None:
        self.groups = 0
        self.appends = 0


def ours_async_sessions(
    files: Scratch, turns: Sequence[Sequence[Event]], sessions: int, stats: AsyncStats
) -> Callable[[int], float]:
    """Ours: ``sessions`` tasks, each awaiting ``AsyncLedger.append`` turn by turn."""

    async def drive(path: Path, rounds: int) -> float:
        ledger = AsyncLedger(open_store(str(path)))
        streams = [uuid4() for _ in range(sessions)]

        async def session(s: int, stream: UUID) -> None:
            version = 0
            for r in range(rounds):
                events = turns[(r * sessions + s) % len(turns)]
                result = await ledger.append(stream, events, expected_version=version)
                version = result.last_version

        with Stopwatch() as sw:
            await asyncio.gather(*(session(s, st) for s, st in enumerate(streams)))
        stats.groups += ledger.groups_committed
        stats.appends += ledger.appends_committed
        await ledger.aclose()
        return sw.seconds

    def run(n: int) -> float:
        path = files.fresh()
        rounds = max(1, n // sessions)
        seconds = asyncio.run(drive(path, rounds))
        files.drop(path)
        return seconds * n / (rounds * sessions)

    return run


# -- main -------------------------------------------------------------------------


# -- --diagnose: where the CPU of an append goes --------------------------------


INSERT_AT = (
    "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, "
    "state) VALUES (?,?,?,?,?)"
)
GROUP = 64
ROWID, TRIGGERS, DATA_VERSION, ENCODE_CHAIN = 1, 2, 3, 4
Turns = Sequence[Sequence[Event]]
DIAGNOSE_TURNS = 2048  # turns per run of --diagnose (128 with --quick)
STEPS = ("0.raw", "1.rowid", "2.triggers", "3.data_version", "4.encode_chain")
"""--diagnose cases 0-4, by level (see :func:`step`)."""


def _ledger_file(files: Scratch) -> Path:
    """A fresh file with the ledger's schema and triggers, closed again."""
    path = files.fresh()
    open_store(str(path), synchronous="OFF").close()
    return path


def step(level: int, files: Scratch, turns: Turns) -> Callable[[int], float]:
    """--diagnose cases 0-4: one transaction per turn, each adding one thing."""
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


def raw_group(files: Scratch, turns: Turns) -> Callable[[int], float]:
    """--diagnose case 6: raw rows, 64 turns per transaction."""

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


def ours_group(files: Scratch, turns: Turns, *, writer: bool) -> Callable[[int], float]:
    """--diagnose case 7 (the writer's part) or 8 (the encoding) of 64-append groups."""

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


def diagnose(args: argparse.Namespace) -> int:
    """--diagnose: where the CPU of an append goes, raw sqlite3 built up to ours."""
    rng = random.Random(args.seed)
    args.turns = 128 if args.quick else DIAGNOSE_TURNS
    turns = [make_turn(rng, i) for i in range(64)]
    files = Scratch("bench_append", args.dir)
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
    report_diagnosis(series, load_before, args)
    return 0


def report_diagnosis(
    series: Sequence[Series], load_before: float, args: argparse.Namespace
) -> None:
    """Print the --diagnose table, then what each step adds per turn."""
    print(
        f"bench_append --diagnose: sqlite {sqlite3.sqlite_version}, synchronous=OFF, "
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--turns", type=int, default=2000, help="turns in case 1 (default 2000)"
    )
    p.add_argument(
        "--n", type=int, default=10_000, help="events in cases 2 and 3 (10k)"
    )
    p.add_argument("--sessions", type=int, default=64, help="concurrent sessions (64)")
    p.add_argument(
        "--rounds", type=int, default=100, help="turns per session in case 4 (100)"
    )
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs per case (1)")
    p.add_argument("--dir", default=None, help="folder for the database files (/tmp)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    p.add_argument(
        "--diagnose",
        action="store_true",
        help="instead of the goals, where the CPU of an append goes, step by step",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.n, args.rounds, args.repeat = 40, 400, 2, 2
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run every case, print the table and the goal lines; always return 0."""
    args = parse_args(argv)
    if args.diagnose:
        return diagnose(args)
    rng = random.Random(args.seed)
    turns = [make_turn(rng, i) for i in range(64)]
    flat = [e for t in turns for e in t]
    bulk_events = [flat[i % len(flat)] for i in range(args.n)]
    sizes = [len(frame(e, 0)) for e in flat]
    files = Scratch("bench_append", args.dir)
    load_before = os.getloadavg()
    try:
        # The replay file: written once through the ledger, read by both cases.
        replay_path = files.fresh()
        replay_stream = uuid4()
        with open_store(str(replay_path)) as store:
            store.append(replay_stream, bulk_events, expected_version=0)
        stats = AsyncStats()
        concurrent_n = args.sessions * args.rounds
        cases = [
            Case(
                "1.raw_row_commit",
                args.turns,
                raw_row_commits(files, turns, args.sessions),
                "row",
                "autocommit INSERT, FULL",
            ),
            Case(
                "1.raw_turn_commit",
                args.turns,
                raw_turn_commits(files, turns, args.sessions),
                "turn",
                "BEGIN IMMEDIATE, executemany(8 rows), COMMIT",
            ),
            Case(
                "1.ours_turn_append",
                args.turns,
                ours_turn_appends(files, turns, args.sessions),
                "turn",
                "store.append(8 events)",
            ),
            Case(
                "6.raw_turn_cpu",
                args.turns,
                raw_turn_commits(files, turns, args.sessions, cpu=True),
                "turn",
                "as 1.raw_turn_commit, sync OFF, CPU seconds",
            ),
            Case(
                "6.ours_turn_cpu",
                args.turns,
                ours_turn_appends(files, turns, args.sessions, cpu=True),
                "turn",
                "as 1.ours_turn_append, sync OFF, CPU seconds",
            ),
            Case(
                "5.chain_only",
                args.turns,
                chain_only(turns),
                "turn",
                "chain_state over 8 frames, no I/O",
            ),
            Case(
                "2.raw_executemany",
                args.n,
                raw_bulk(files, bulk_events),
                "event",
                "1 txn",
            ),
            Case(
                "2.ours_bulk_append",
                args.n,
                ours_bulk(files, bulk_events),
                "event",
                "store.append(n events)",
            ),
            Case(
                "3.raw_select_decode",
                args.n,
                raw_replay(replay_path, replay_stream),
                "event",
                "SELECT + typed msgspec decode",
            ),
            Case(
                "3.ours_read_stream",
                args.n,
                ours_replay(replay_path, replay_stream),
                "event",
                "store.read_stream",
            ),
            Case(
                "4.raw_group_commit",
                concurrent_n,
                raw_group_commits(files, turns, args.sessions),
                "turn",
                f"{args.sessions} turns per txn",
                warmup_n=args.sessions * 2,
            ),
            Case(
                "4.ours_async_sessions",
                concurrent_n,
                ours_async_sessions(files, turns, args.sessions, stats),
                "turn",
                f"{args.sessions} tasks, AsyncLedger",
                warmup_n=args.sessions * 2,
            ),
        ]
        series = run_rounds(cases, repeat=args.repeat, warmup=args.warmup)
    finally:
        files.cleanup()
    by = {s.name: s for s in series}
    ratios = [
        Ratio(
            "1 durable turn append vs raw BEGIN IMMEDIATE..COMMIT per turn (turns/s)",
            by["1.ours_turn_append"],
            by["1.raw_turn_commit"],
            0.8,
        ),
        Ratio(
            "1r raw 8-row commit / raw 1-row commit",
            by["1.raw_turn_commit"],
            by["1.raw_row_commit"],
        ),
        Ratio(
            "5 chain cost: chain-only turns/s / durable turn appends/s "
            "(>= 10: the chain is <= 10% of an append)",
            by["5.chain_only"],
            by["1.ours_turn_append"],
            10.0,
        ),
        Ratio(
            "6 diagnostic, case 1's paths with sync OFF in thread CPU time (turns per "
            "CPU second; = raw CPU per turn / ours; steadier than 1 under load)",
            by["6.ours_turn_cpu"],
            by["6.raw_turn_cpu"],
        ),
        Ratio(
            "2 bulk append (events/s)",
            by["2.ours_bulk_append"],
            by["2.raw_executemany"],
            0.5,
        ),
        Ratio(
            "3 replay read_stream (events/s)",
            by["3.ours_read_stream"],
            by["3.raw_select_decode"],
            0.5,
        ),
        Ratio(
            "4 64 sessions, group commit (turns/s)",
            by["4.ours_async_sessions"],
            by["4.raw_group_commit"],
            0.7,
        ),
        Ratio(
            "4r raw group commit / raw commit per turn (reference 5.5-8.5x)",
            by["4.raw_group_commit"],
            by["1.raw_turn_commit"],
        ),
    ]
    group = stats.appends / stats.groups if stats.groups else 0.0
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "msgspec": msgspec.__version__,
        "folder": str(files.root),
        "device": device_of(files.root.parent),
        "repo_device": device_of(Path(__file__).parent),
        "same_device": files.root.parent.stat().st_dev
        == Path(__file__).parent.stat().st_dev,
        "row_bytes_mean": sum(sizes) / len(sizes),
        "row_bytes_min": min(sizes),
        "row_bytes_max": max(sizes),
        "async_mean_group": group,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
    }
    report(meta, series, ratios)
    if args.json:
        write_json(args.json, meta=meta, series=series, ratios=ratios)
        print(f"\nfigures written to {args.json}")
    return 0


def report(
    meta: dict[str, Any], series: Sequence[Series], ratios: Sequence[Ratio]
) -> None:
    """Print the context, the table and the goal lines."""
    a = meta["args"]
    print(
        f"bench_append: python {meta['python']}, sqlite {meta['sqlite']}, "
        f"msgspec {meta['msgspec']}; WAL, synchronous=FULL for raw and ours"
    )
    same = "same device as the repo" if meta["same_device"] else "NOT the repo's device"
    before, after = meta["loadavg_before"][0], meta["loadavg_after"][0]
    print(
        f"machine: {meta['cpus']} CPUs, load average {before:.1f} before, "
        f"{after:.1f} after (a busy machine lowers the CPU-bound ratios 2-4)"
    )
    print(f"disk: {meta['folder']} on {meta['device']} ({same})")
    print(
        f"rows: {meta['row_bytes_mean']:.0f} B mean ({meta['row_bytes_min']}-"
        f"{meta['row_bytes_max']} B) per event frame; repeat {a['repeat']}, "
        f"warm-up {a['warmup']}{', QUICK sizes' if a['quick'] else ''}"
    )
    print(
        f"async facade: mean group {meta['async_mean_group']:.1f} appends per commit "
        f"({a['sessions']} sessions)\n"
    )
    print_table(series)
    print()
    print_ratios(ratios)
    missed = [r.name for r in ratios if r.verdict == "MISS"]
    print(
        f"\n{len(missed)} goal(s) MISSED: " + "; ".join(missed)
        if missed
        else "\nall goals met"
    )


if __name__ == "__main__":
    sys.exit(main())
