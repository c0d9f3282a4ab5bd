"""Inspect AI logs: a ``model`` event's usage is the call that output a message.

The fixture log's model is Inspect's ``hardcoded`` one, whose events report
no usage (``output.usage`` is null: nothing is recorded); the tests write
usage into those events, in Inspect's ``ModelUsage`` fields, and check it
reaches the assistant message whose id the event's output names.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from turnledger.pipeline.formats.inspect_ai import parse_inspect_ai
from turnledger.pipeline.formats.usage import MALFORMED, UNMATCHED_USAGE

EVAL = (
    Path(__file__).resolve().parents[2]
    / "tests/fixtures/transcripts/inspect-ai/log_message_deduplication.eval"
)
SAMPLE = "samples/0_epoch_1.json"


def _with_usage(usages: list[dict | None]) -> bytes:
    """The fixture with each model event's ``output.usage`` set in turn."""
    source = zipfile.ZipFile(EVAL)
    sample = json.loads(source.read(SAMPLE))
    models = [e for e in sample["events"] if e.get("event") == "model"]
    for event, usage in zip(models, usages, strict=False):
        event["output"]["usage"] = usage
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for member in source.namelist():
            data = (
                json.dumps(sample).encode() if member == SAMPLE else source.read(member)
            )
            target.writestr(member, data)
    return out.getvalue()


def test_the_fixture_reports_no_usage() -> None:
    parsed = parse_inspect_ai(EVAL.read_bytes(), name=EVAL.name)
    assert all(not found.usage for found in parsed.conversations)


def test_each_model_event_gives_its_usage_to_the_message_it_output() -> None:
    openai_like = {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55}
    cached_inside = {
        "input_tokens": 50,
        "output_tokens": 5,
        "total_tokens": 55,
        "input_tokens_cache_read": 40,
    }
    cached_apart = {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 57,
        "input_tokens_cache_read": 40,
        "input_tokens_cache_write": 2,
        "reasoning_tokens": 3,
    }
    data = _with_usage([openai_like, cached_inside, cached_apart])
    parsed = parse_inspect_ai(data, name="log.eval")
    (found,) = parsed.conversations
    given = [
        (
            u.model,
            u.input_tokens,
            u.cached_input_tokens,
            u.cache_write_tokens,
            u.reasoning_tokens,
        )
        for u in found.usage
        if u is not None
    ]
    assert given == [
        ("hardcoded", 50, 0, 0, 0),
        ("hardcoded", 50, 40, 0, 0),
        ("hardcoded", 52, 40, 2, 3),
    ]
    assistants = [m for m, u in zip(found.messages, found.usage, strict=True) if u]
    assert all(m.role == "assistant" for m in assistants)
    assert UNMATCHED_USAGE not in parsed.skipped


@pytest.mark.parametrize(
    "bad",
    [
        {"input_tokens": -1, "output_tokens": 5, "total_tokens": 4},
        {"input_tokens": "9", "output_tokens": 5, "total_tokens": 14},
        # a total that fits neither reading of the cache reads
        {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 99,
            "input_tokens_cache_read": 4,
        },
    ],
)
def test_a_malformed_usage_is_skipped_not_guessed(bad: dict) -> None:
    parsed = parse_inspect_ai(_with_usage([bad]), name="log.eval")
    (found,) = parsed.conversations
    assert not any(found.usage)
    assert parsed.skipped[MALFORMED] == 1
