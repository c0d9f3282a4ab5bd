"""Issue #11 item 2: round trips are fixed points, and nothing is lost on the corpus.

For every corpus file, each conversation is imported; then for every export
format: export -> import -> export gives the same payload, and the first export
still holds every tool call, every result that pairs, and every system text of
the source (the results the documented rule leaves unpaired are kept in the
ledger but dropped from a pairing-valid export, and counted here).
"""

from __future__ import annotations

import csv
from collections import Counter

import msgspec
import pytest

from tests.conftest import CORPUS, IN_CI
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import parse_transcript, read_transcript
from turnledger.pipeline.formats.counts import match_messages, rule_for
from turnledger.pipeline.formats.writers import DROPS_SYSTEM
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.projections.history.read import provider_messages

EXPECTED = CORPUS / "EXPECTED.tsv"
WHOLE = ExportOptions(budget_tokens=0, max_tool_result_chars=0)


def corpus_paths() -> list[str]:
    if not EXPECTED.exists():
        return []
    with EXPECTED.open(newline="", encoding="utf-8") as handle:
        return [row["path"] for row in csv.DictReader(handle, delimiter="\t")]


@pytest.fixture(autouse=True)
def _corpus_present():
    if not EXPECTED.exists():
        if IN_CI:
            pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
        pytest.skip("no corpus")


class _Session:
    """Import into a fresh session of one store and export it."""

    def __init__(self, store) -> None:
        self.store = store
        self.count = 0

    def load(self, parsed) -> list:
        """Import each conversation; return each session's provider messages."""
        self.count += 1
        report = import_transcript(
            self.store, parsed, agent="rt", session=f"s{self.count}"
        )
        return [
            provider_messages(
                load_history(self.store, session_stream_id("rt", s.session))
            )
            for s in report.sessions
        ]


def _export(messages, fmt) -> bytes:
    return msgspec.json.encode(render(prepare_history(messages, WHOLE).messages, fmt))


def _tally(messages) -> tuple[Counter, Counter, list[str]]:
    calls = Counter(c.id for m in messages for c in m.tool_calls)
    results = Counter(r.call_id for m in messages for r in m.tool_results)
    system = [m.text for m in messages if m.role == "system" and m.text]
    return calls, results, system


def test_every_corpus_file_round_trips_to_a_fixed_point_losing_nothing(tmp_path):
    """128 files x 7 formats: fixed points; 0 calls, paired results, system text lost."""
    paths = corpus_paths()
    assert len(paths) == 128
    lost = Counter()
    checked = Counter()
    with open_store(str(tmp_path / "rt.db")) as store:
        sessions = _Session(store)
        for path in paths:
            parsed = read_transcript(CORPUS / path)
            source = parsed.conversations
            for conversation, messages in zip(
                source, sessions.load(parsed), strict=True
            ):
                rule = rule_for(parsed.format, conversation.api)
                unpaired = match_messages(conversation.messages, rule).unpaired
                dropped = Counter(
                    u.call_id for u in unpaired if u.kind != "orphan_call"
                )
                calls, results, system = _tally(conversation.messages)
                assert _tally(messages)[:2] == (calls, results), path  # the ledger
                for fmt in EXPORT_FORMATS:
                    first = _export(messages, fmt)
                    reread = parse_transcript(first, format=fmt)
                    again = sessions.load(reread)[0]
                    second = _export(again, fmt)
                    assert first == second, (path, fmt)
                    out_calls, out_results, out_system = _tally(
                        reread.conversations[0].messages
                    )
                    lost["calls"] += sum((calls - out_calls).values())
                    lost["results"] += sum((results - dropped - out_results).values())
                    if fmt not in DROPS_SYSTEM:
                        text = "\n\n".join(out_system)
                        lost["system"] += sum(part not in text for part in system)
                    checked["calls"] += sum(calls.values())
                    checked["results"] += sum(results.values())
                    checked["system"] += len(system)
    assert lost == Counter(), lost
    assert checked["calls"] == 387 * len(EXPORT_FORMATS)
    assert checked["system"] > 0
