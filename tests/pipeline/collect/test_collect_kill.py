"""kill -9 of a ``turnledger collect`` process while the OTLP exporter sends batches.

Every batch the exporter saw acknowledged (SUCCESS: an HTTP 200) is in the
ledger whole, and no batch is there in part.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.pipeline.collect.conftest import Ledger
from tests.pipeline.collect.spans import ANSWER, USER, chat_attributes
from turnledger.ledger.events import ModelCalled
from turnledger.pipeline.sessions import list_sessions

SPANS_PER_BATCH = 25
BATCHES = 40


def _batches() -> list[tuple[str, list[ReadableSpan]]]:
    """Each batch one trace of chat spans (one session per batch)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "killed"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("kill")
    found = []
    for _ in range(BATCHES):
        memory.clear()
        with tracer.start_as_current_span("root") as root:
            for _n in range(SPANS_PER_BATCH):
                attrs = chat_attributes(inputs=[USER], outputs=[ANSWER])
                with tracer.start_as_current_span("chat", attributes=attrs):
                    pass
        trace = format(root.get_span_context().trace_id, "032x")
        chats = [s for s in memory.get_finished_spans() if s.name == "chat"]
        found.append((trace, chats))
    provider.shutdown()
    return found


def test_kill_9_loses_no_acknowledged_batch_and_leaves_none_half_written(
    ledger: Ledger, tmp_path: Path
) -> None:
    batches = _batches()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "turnledger.pipeline.cli", "--db", ledger.url),
            *("collect", "--port", "0", "--json"),
        ],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_")},
    )
    try:
        assert process.stdout is not None
        endpoint = json.loads(process.stdout.readline())["endpoint"]
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=2)
        acknowledged: list[str] = []
        third = threading.Event()

        def kill_soon() -> None:
            third.wait(30)
            process.send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_soon)
        killer.start()
        for trace, spans in batches:
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                break
            acknowledged.append(trace)
            if len(acknowledged) == 3:
                third.set()
        third.set()
        killer.join()
        exporter.shutdown()
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    assert 3 <= len(acknowledged) < BATCHES
    calls: dict[str, int] = {}
    for session in list_sessions(ledger.store):
        events = ledger.store.read_stream(session.stream_id, types=(ModelCalled,))
        calls[session.key] = len(events)
    for trace in acknowledged:
        assert calls.get(trace) == SPANS_PER_BATCH
    assert set(calls.values()) <= {SPANS_PER_BATCH}


def test_collect_command_prints_where_it_listens_and_its_totals(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "turnledger.pipeline.cli", "--db", str(db)),
            *("collect", "--port", "0", "--json"),
        ],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_")},
    )
    try:
        assert process.stdout is not None
        address = json.loads(process.stdout.readline())
        assert address["host"] == "127.0.0.1"
        assert address["endpoint"] == f"{address['url']}/v1/traces"
        assert address["logs_endpoint"] == f"{address['url']}/v1/logs"
        assert address["token_required"] is False
        exporter = OTLPSpanExporter(endpoint=address["endpoint"], timeout=10)
        (_trace, spans), *_rest = _batches()[:1]
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        process.send_signal(signal.SIGTERM)
        totals = json.loads(process.stdout.readline())
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    assert totals == {
        "batches": 1,
        "spans": SPANS_PER_BATCH,
        "log_records": 0,
        "refused": 0,
    }
