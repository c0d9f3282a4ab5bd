"""The transcript readers reproduce every row of the corpus's EXPECTED.tsv.

The corpus lives beside the repository (``../shared/corpus``). Without it the
tests skip, except under ``CI=true``, where a missing corpus fails.
"""

from __future__ import annotations

import csv
import functools
import os
from pathlib import Path
from typing import NamedTuple

import pytest

from turnledger.pipeline.formats import (
    PairingCounts,
    ParsedTranscript,
    count_messages,
    count_pairing,
    detect_format,
    read_transcript,
)
from turnledger.policies.pairing import audit_pairing

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
EXPECTED = CORPUS / "EXPECTED.tsv"
IN_CI = os.environ.get("CI", "").lower() == "true"

READER_FORMAT = {
    "claude_code_jsonl": "claude-code",
    "claude_code_loglines_json": "claude-code",
    "codex_rollout_jsonl": "codex",
}
"""EXPECTED's format column for non-cassette files -> our format name."""

API_SHAPES = {
    "openai_chat_completions": {"openai-chat"},
    "openai_responses": {"openai-responses"},
    "anthropic_messages": {"anthropic"},
    "gemini_generate_content": {"gemini"},
    "gemini_generate_content+openai_chat_completions": {"gemini", "openai-chat"},
}
"""EXPECTED's format column for cassettes -> the API shapes of the conversations."""

DIALECTS = {"mistral": "openai-chat"}
"""Our API shapes the corpus counts as another's: Mistral's chat is a Chat
Completions dialect (the reader names it ``mistral`` on ``api.mistral.ai``)."""


class Row(NamedTuple):
    path: str
    format: str
    counts: PairingCounts


def _rows() -> list[Row]:
    if not EXPECTED.exists():
        return []
    with EXPECTED.open(newline="", encoding="utf-8") as handle:
        return [
            Row(
                path=row["path"],
                format=row["format"],
                counts=PairingCounts(
                    conversations=int(row["conversations"]),
                    tool_calls=int(row["tool_calls"]),
                    tool_results=int(row["tool_results"]),
                    unpaired_calls=int(row["unpaired_calls"]),
                    unpaired_results=int(row["unpaired_results"]),
                ),
            )
            for row in csv.DictReader(handle, delimiter="\t")
        ]


ROWS = _rows()


@functools.cache
def _parsed(path: str) -> ParsedTranscript:
    """Read each corpus file once per session (the tests share the results)."""
    return read_transcript(CORPUS / path)


def _require_corpus() -> None:
    if EXPECTED.exists():
        return
    if IN_CI:
        pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
    pytest.skip(f"no corpus at {CORPUS}")


def test_corpus_is_present():
    """The corpus and its 128 expected rows are there (skips locally without it)."""
    _require_corpus()
    assert len(ROWS) == 128


@pytest.mark.parametrize("row", ROWS, ids=[row.path for row in ROWS])
def test_counts_match_expected(row: Row):
    """Reading a corpus file with format detection gives EXPECTED's counts."""
    parsed = _parsed(row.path)
    assert count_pairing(parsed) == row.counts


@pytest.mark.parametrize("row", ROWS, ids=[row.path for row in ROWS])
def test_detected_format_matches_expected(row: Row):
    """Detection names the file's format, and cassette conversations their API."""
    path = CORPUS / row.path
    parsed = _parsed(row.path)
    if row.format in API_SHAPES:
        assert detect_format(path, path.read_bytes()) == "cassette"
        apis = {c.api for c in parsed.conversations}
        assert {DIALECTS.get(api or "", api) for api in apis} == API_SHAPES[row.format]
    else:
        assert parsed.format == READER_FORMAT[row.format]


def test_totals_match_the_readme():
    """The corpus totals the README states are reproduced."""
    _require_corpus()
    total = PairingCounts(
        conversations=0,
        tool_calls=0,
        tool_results=0,
        unpaired_calls=0,
        unpaired_results=0,
    )
    for row in ROWS:
        total += count_pairing(_parsed(row.path))
    assert total == PairingCounts(
        conversations=131,
        tool_calls=387,
        tool_results=365,
        unpaired_calls=24,
        unpaired_results=2,
    )


def test_policy_audit_agrees_on_the_corpus():
    """audit_pairing's counts equal ours on every corpus conversation.

    The two differ in general (a second result for an answered id, a second
    call with a used id), but no corpus conversation has either.
    """
    _require_corpus()
    for row in ROWS:
        for conversation in _parsed(row.path).conversations:
            ours = count_messages(conversation.messages)
            audit = audit_pairing(conversation.messages)
            found = (
                audit.tool_calls,
                audit.tool_results,
                audit.unpaired_calls,
                audit.unpaired_results,
            )
            expected = (
                ours.tool_calls,
                ours.tool_results,
                ours.unpaired_calls,
                ours.unpaired_results,
            )
            assert found == expected, (row.path, conversation.id)


def test_malformed_corpus_lines_are_reported():
    """The deliberately malformed corpus files report their bad lines."""
    _require_corpus()
    codex = read_transcript(
        CORPUS
        / "claude-code-log/codex/rollout-66666666-6666-4666-8666-666666666666.jsonl"
    )
    assert [problem.line for problem in codex.problems] == [3]
    edge = read_transcript(CORPUS / "claude-code-log/edge_cases.jsonl")
    assert [problem.line for problem in edge.problems] == [10, 11, 13, 15, 16]
    assert edge.skipped["<repeated uuid>"] == 2
