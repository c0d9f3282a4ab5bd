"""Issue #25 item 4: recorded model traffic imports each response's usage.

A cassette or HAR file's responses report what each call used; the reader
gives each assistant message the usage of the response that produced it (its
own request's response, or an earlier one whose answer the client re-sent
exactly), and ``turnledger import`` records it as a priced ``model.called``
before that message, which ``turnledger costs`` then shows.

The counts are checked against :mod:`tests.usage_counter`, which decodes the
raw bodies without turnledger. A response whose answer was re-sent changed
(or is in no conversation) is counted as skipped (``unmatched model usage``):
the table below says, per real file, which responses those are and why.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.usage_counter import har_usage, response_usage
from turnledger.ledger.events import AssistantMessage, ModelCalled
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats.cassette import parse_cassette
from turnledger.pipeline.formats.read import read_transcript
from turnledger.pipeline.formats.usage import MALFORMED, UNMATCHED_USAGE

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/transcripts/cassettes"
CORPUS = ROOT.parent / "shared" / "corpus" / "pydantic-ai"

UNMATCHED: dict[str, tuple[set[int], str]] = {
    "test_tool_use_failed_error.yaml": (
        {1},
        "the client re-sent the answer without its <think> text",
    ),
    "test_tool_use_failed_error_streaming.yaml": (
        {1},
        "the client re-sent the answer without its <think> text",
    ),
    "test_groq__test_tool_use_failed_error.yaml": (
        {1},
        "the client re-sent the answer without its <think> text",
    ),
    "test_bedrock_mantle__test_reused_tool_call_ids[request].yaml": (
        {0, 1},
        "the client re-sent the calls under ids of its own (call_0 -> resp_...)",
    ),
    "test_openai_responses__test_openai_responses_stream.yaml": (
        {0},
        "the client re-sent the call under the item id, not the call id",
    ),
}
"""Per real file: the interactions whose usage no message gets, and why."""

POLLED = {"test_openai_responses__test_background_mode_with_tool_vcr.yaml"}
"""Usage only in a ``GET .../responses/{id}`` poll, which the counter skips."""


def _real_cassettes() -> list[Path]:
    files = sorted(FIXTURES.glob("*/*.yaml"))
    if CORPUS.is_dir():
        files += sorted(CORPUS.glob("*.yaml"))
    elif os.environ.get("CI") == "true":
        pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
    return files


@pytest.mark.parametrize("path", _real_cassettes(), ids=lambda p: p.name)
def test_every_reported_usage_is_recorded_once_or_counted(path: Path) -> None:
    """Attached usages are the counter's, each once; the rest are counted."""
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    attached = Counter(
        (used.input_tokens, used.output_tokens)
        for found in parsed.conversations
        for used in found.usage
        if used is not None
    )
    raw = response_usage(path)
    if path.name in POLLED:
        assert raw == []
        assert sum(attached.values()) == 1
        return
    unmatched, _why = UNMATCHED.get(path.name, (set(), ""))
    expected = Counter((i, o) for index, i, o in raw if index not in unmatched)
    assert attached == expected
    assert parsed.skipped.get(UNMATCHED_USAGE, 0) == len(unmatched)
    assert MALFORMED not in parsed.skipped


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "tests/fixtures/transcripts/har").glob("*.har")),
    ids=lambda p: p.name,
)
def test_a_har_file_records_each_reported_usage(path: Path) -> None:
    """HAR entries follow the cassette rules; the counter decodes them apart."""
    parsed = read_transcript(path)
    attached = [
        (used.input_tokens, used.output_tokens)
        for found in parsed.conversations
        for used in found.usage
        if used is not None
    ]
    assert attached
    assert Counter(attached) == Counter((i, o) for _, i, o in har_usage(path))
    assert UNMATCHED_USAGE not in parsed.skipped


def test_a_real_cassette_gives_the_model_and_the_cache_tokens() -> None:
    """Bedrock Converse: the model is the URI's id; cache reads are input."""
    path = FIXTURES / "bedrock/test_bedrock_model_retry.yaml"
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    (found,) = parsed.conversations
    used = [u for u in found.usage if u is not None]
    assert [(u.model, u.provider) for u in used] == [
        ("us.amazon.nova-micro-v1:0", "bedrock")
    ] * 2
    assert [(u.input_tokens, u.output_tokens) for u in used] == [
        (i, o) for _, i, o in response_usage(path)
    ]


def _interaction(uri: str, request: object, response: str, kind: str) -> dict:
    return {
        "request": {"method": "POST", "uri": uri, "body": json.dumps(request)},
        "response": {
            "status": {"code": 200},
            "headers": {"content-type": [kind]},
            "body": {"string": response},
        },
    }


def _sse(*events: dict) -> str:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events)


ANTHROPIC = "https://api.anthropic.com/v1/messages"


def _anthropic_stream(text: str, usage: dict, output: object) -> str:
    return _sse(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "usage": usage,
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    )


def _cassette(tmp_path: Path, *interactions: dict) -> Path:
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps({"interactions": list(interactions)}))
    return path


def _two_turns(tmp_path: Path, second_output: object = 7) -> Path:
    """Two streamed Anthropic calls; the second request re-sends the first answer."""
    first = {"model": "claude-test", "messages": [{"role": "user", "content": "hi"}]}
    second = {
        "model": "claude-test",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
            {"role": "user", "content": "more"},
        ],
    }
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "output_tokens": 1,
    }
    stream = "text/event-stream"
    return _cassette(
        tmp_path,
        _interaction(ANTHROPIC, first, _anthropic_stream("hello", usage, 5), stream),
        _interaction(
            ANTHROPIC,
            second,
            _anthropic_stream("more text", {"input_tokens": 40}, second_output),
            stream,
        ),
    )


def test_a_streamed_anthropic_call_sums_cache_tokens_into_the_input(
    tmp_path: Path,
) -> None:
    """message_start's usage updated by message_delta's; the re-sent answer matches."""
    path = _two_turns(tmp_path)
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    (found,) = parsed.conversations
    assert [m.role for m in found.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    first, second = found.usage[1], found.usage[3]
    assert first is not None
    assert second is not None
    assert (
        first.input_tokens,
        first.cached_input_tokens,
        first.cache_write_tokens,
    ) == (
        130,
        100,
        20,
    )
    assert (first.output_tokens, first.model, first.provider) == (
        5,
        "claude-test",
        "anthropic",
    )
    assert (second.input_tokens, second.output_tokens) == (40, 7)
    assert found.usage[0] is None
    assert found.usage[2] is None
    assert UNMATCHED_USAGE not in parsed.skipped


@pytest.mark.parametrize("bad", [-1, "7", 1.5, True])
def test_a_malformed_streamed_count_is_skipped_not_guessed(
    tmp_path: Path, bad: object
) -> None:
    path = _two_turns(tmp_path, second_output=bad)
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    (found,) = parsed.conversations
    assert found.usage[3] is None
    assert found.usage[1] is not None
    assert parsed.skipped[MALFORMED] == 1


def test_a_changed_re_sent_answer_gets_no_usage_and_is_counted(
    tmp_path: Path,
) -> None:
    """The client re-sent another text than the response's: no call is invented."""
    path = _two_turns(tmp_path)
    data = json.loads(path.read_text())
    body = json.loads(data["interactions"][1]["request"]["body"])
    body["messages"][1]["content"] = [{"type": "text", "text": "hello!"}]
    data["interactions"][1]["request"]["body"] = json.dumps(body)
    path.write_text(json.dumps(data))
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    (found,) = parsed.conversations
    assert found.usage[1] is None
    assert found.usage[3] is not None
    assert parsed.skipped[UNMATCHED_USAGE] == 1


def test_a_shared_answer_is_given_to_one_conversation_only(tmp_path: Path) -> None:
    """Two branches re-send the same first answer: its call is recorded once."""
    path = _two_turns(tmp_path)
    data = json.loads(path.read_text())
    branch = json.loads(json.dumps(data["interactions"][1]))
    body = json.loads(branch["request"]["body"])
    body["messages"][2]["content"] = "other"
    branch["request"]["body"] = json.dumps(body)
    data["interactions"].append(branch)
    path.write_text(json.dumps(data))
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    assert len(parsed.conversations) == 2
    firsts = [found.usage[1] for found in parsed.conversations]
    assert sum(used is not None for used in firsts) == 1


@pytest.fixture(name="ledger", params=["sqlite", "postgres"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    url = fresh_schema_url(require_postgres())
    yield url
    drop_schema(url)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), (args, err)
    return out


def test_costs_shows_the_calls_an_imported_cassette_reports(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Import a real cassette with [pricing]; costs and the ledger agree with it."""
    path = FIXTURES / "bedrock/test_bedrock_model_iter_stream.yaml"
    raw = response_usage(path)
    parsed = parse_cassette(path.read_bytes(), name=path.name)
    model = next(u.model for u in parsed.conversations[0].usage if u is not None)
    config = tmp_path / "turnledger.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[pricing."{model}"]\ninput_per_million = 2.0\noutput_per_million = 10.0\n'
    )
    common = ("--db", ledger, "--config", str(config))
    _cli(capsys, *common, "import", str(path), "--session", "s", "--json")
    costs = json.loads(_cli(capsys, *common, "costs", "--json"))
    inputs = sum(i for _, i, _ in raw)
    outputs = sum(o for _, _, o in raw)
    total = costs["total"]
    assert (total["calls"], total["input_tokens"], total["output_tokens"]) == (
        len(raw),
        inputs,
        outputs,
    )
    assert total["cost_usd"] == pytest.approx((inputs * 2.0 + outputs * 10.0) / 1e6)
    assert [row["group"] for row in costs["rows"]] == [model]
    store = open_store(ledger)
    try:
        events = [
            r.event for r in store.read_stream(session_stream_id("imported", "s"))
        ]
    finally:
        store.close()
    # each call is written just before the assistant message it produced
    after = [
        events[position + 1]
        for position, event in enumerate(events)
        if isinstance(event, ModelCalled)
    ]
    assert len(after) == len(raw)
    assert all(isinstance(event, AssistantMessage) for event in after)


@pytest.mark.parametrize("bad", [-3, "9", 2.0, False])
def test_a_malformed_chat_count_is_skipped_not_guessed(
    tmp_path: Path, bad: object
) -> None:
    """A Chat Completions usage with a count that is not an int >= 0 gives none."""
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body = {
        "model": "m-2024",
        "choices": [{"message": {"role": "assistant", "content": "hello"}}],
        "usage": {"prompt_tokens": bad, "completion_tokens": 3},
    }
    uri = "https://api.openai.com/v1/chat/completions"
    good = json.loads(json.dumps(body))
    good["usage"]["prompt_tokens"] = 4
    for name, response, expected in (("bad", body, None), ("good", good, (4, 3))):
        path = _cassette(
            tmp_path,
            _interaction(uri, request, json.dumps(response), "application/json"),
        )
        parsed = parse_cassette(path.read_bytes(), name=name)
        (found,) = parsed.conversations
        used = found.usage[-1] if found.usage else None
        assert (None if used is None else (used.input_tokens, used.output_tokens)) == (
            expected
        )
        assert (parsed.skipped.get(MALFORMED, 0) == 1) is (expected is None)
        assert used is None or used.model == "m-2024"
