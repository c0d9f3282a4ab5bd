"""Crash stress of ``turnledger collect``: SIGKILL the receiver mid-stream, many times.

Each round starts a ``turnledger collect`` process on the same ledger, has the
real OTLP/HTTP exporter send batches of GenAI chat spans (each batch one trace,
so one session), kills the receiver with SIGKILL at a random moment after a
random number of acknowledged batches (0 to 4), then checks the ledger: every
batch the exporter saw acknowledged is there whole, and no batch is there in
part (each session holds all of its batch's model calls or none). The ledger
grows across rounds.

It prints the kills done, the batches acknowledged and the whole batches found
(a batch committed as the receiver was killed, before its 200 left, is whole
and not acknowledged; the exporter would send it again, and it would not be
written twice), then OK, or FAIL with what is wrong (exit 1).

Run::

    .venv/bin/python benchmarks/stress_collect.py             # 50 kills
    .venv/bin/python benchmarks/stress_collect.py --kills 200 --seed 7
    .venv/bin/python benchmarks/stress_collect.py --quick     # 3 kills (smoke test)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from turnledger.ledger.events import ModelCalled
from turnledger.ledger.store import open_store
from turnledger.pipeline.sessions import list_sessions

SPANS = 20
BATCHES = 12


class Traces:
    """Batches of chat spans, one trace each."""

    def __init__(self) -> None:
        self.memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource({"service.name": "stress"}))
        provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = provider.get_tracer("stress")

    def batch(self) -> tuple[str, list[ReadableSpan]]:
        """One trace of ``SPANS`` chat spans with content."""
        self.memory.clear()
        user = [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.input.messages": json.dumps(user),
        }
        with self.tracer.start_as_current_span("root") as root:
            for _ in range(SPANS):
                with self.tracer.start_as_current_span("chat", attributes=attrs):
                    pass
        trace = format(root.get_span_context().trace_id, "032x")
        return trace, [s for s in self.memory.get_finished_spans() if s.name == "chat"]


def _round(db: Path, traces: Traces, rng: random.Random) -> list[str]:
    """One receiver, killed mid-stream; the traces whose batch got a 200."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_")}
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "turnledger.pipeline.cli", "--db", str(db)),
            *("collect", "--port", "0", "--json"),
        ],
        stdout=subprocess.PIPE,
        cwd=db.parent,
        env=env,
    )
    acknowledged: list[str] = []
    after = rng.randint(0, 4)
    reached = threading.Event()

    def kill() -> None:
        reached.wait(30)
        time.sleep(rng.random() * 0.02)
        process.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill)
    try:
        if process.stdout is None:
            return acknowledged
        endpoint = json.loads(process.stdout.readline())["endpoint"]
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=2)
        killer.start()
        if after == 0:
            reached.set()
        for _ in range(BATCHES):
            trace, spans = traces.batch()
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                break
            acknowledged.append(trace)
            if len(acknowledged) >= after:
                reached.set()
        reached.set()
        killer.join()
        exporter.shutdown()
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    return acknowledged


def main(argv: list[str] | None = None) -> int:
    """Kill the receiver ``--kills`` times; check the ledger after each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50, help="default 50")
    parser.add_argument("--seed", type=int, default=None, help="the kill choices")
    parser.add_argument("--quick", action="store_true", help="3 kills (smoke test)")
    args = parser.parse_args(argv)
    # The exporter logs each refused connection of a killed receiver: expected.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    kills = 3 if args.quick else args.kills
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    traces = Traces()
    acknowledged: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "ledger.db"
        for done in range(1, kills + 1):
            acknowledged += _round(db, traces, rng)
            with open_store(str(db)) as store:
                calls = {
                    s.key: len(store.read_stream(s.stream_id, types=(ModelCalled,)))
                    for s in list_sessions(store)
                }
            missing = [t for t in acknowledged if calls.get(t) != SPANS]
            partial = {k: n for k, n in calls.items() if n != SPANS}
            if missing or partial:
                print(
                    f"FAIL after {done} kills (seed {seed}): acknowledged but not "
                    f"whole {missing[:5]}, partial {dict(list(partial.items())[:5])}"
                )
                return 1
    print(
        f"stress_collect: {kills} kills (seed {seed}), {len(acknowledged)} batches "
        f"acknowledged, {len(calls)} whole batches found, none partial: OK"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
