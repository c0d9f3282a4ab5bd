"""Codex rollouts: a ``token_count`` event's usage is its model call's.

No Codex file of the corpus or the fixtures carries ``token_count`` events,
so these rollouts are written here in the shape Codex CLI writes them.
"""

from __future__ import annotations

import json

import pytest

from turnledger.pipeline.formats.codex import parse_codex
from turnledger.pipeline.formats.usage import MALFORMED


def _line(kind: str, payload: dict) -> dict:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def _count(inputs: object, cached: int, outputs: int, reasoning: int) -> dict:
    last = {
        "input_tokens": inputs,
        "cached_input_tokens": cached,
        "output_tokens": outputs,
        "reasoning_output_tokens": reasoning,
        "total_tokens": 0,
    }
    info = {"total_token_usage": last, "last_token_usage": last}
    return _line("event_msg", {"type": "token_count", "info": info})


def _rollout(first_input: object = 100) -> bytes:
    lines = [
        _line("session_meta", {"id": "s1"}),
        _line("turn_context", {"cwd": "/", "model": "gpt-5-codex"}),
        _line("event_msg", {"type": "token_count", "info": None}),
        _line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "ls"}],
            },
        ),
        _line("response_item", {"type": "reasoning", "summary": []}),
        _line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": "{}",
                "call_id": "c1",
            },
        ),
        _count(first_input, 80, 20, 5),
        _line(
            "response_item",
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        ),
        _line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "a.txt"}],
            },
        ),
        _count(130, 100, 7, 0),
        _count(130, 100, 7, 0),  # repeated with nothing new: no second call
    ]
    return "\n".join(json.dumps(line) for line in lines).encode()


def test_each_token_count_is_the_call_of_the_items_before_it() -> None:
    parsed = parse_codex(_rollout(), name="rollout.jsonl")
    (found,) = parsed.conversations
    given = [
        (
            m.role,
            u.model,
            u.input_tokens,
            u.cached_input_tokens,
            u.output_tokens,
            u.reasoning_tokens,
        )
        for m, u in zip(found.messages, found.usage, strict=True)
        if u is not None
    ]
    assert given == [
        ("assistant", "gpt-5-codex", 100, 80, 20, 5),
        ("assistant", "gpt-5-codex", 130, 100, 7, 0),
    ]
    assert sum(m.role == "assistant" for m in found.messages) == 2


@pytest.mark.parametrize("bad", [-1, "100", 1.5, True])
def test_a_malformed_token_count_is_skipped_not_guessed(bad: object) -> None:
    parsed = parse_codex(_rollout(bad), name="rollout.jsonl")
    (found,) = parsed.conversations
    given = [
        (m.text, u.input_tokens)
        for m, u in zip(found.messages, found.usage, strict=True)
        if u is not None
    ]
    assert given == [("a.txt", 130)]  # the first call's items get none
    assert parsed.skipped[MALFORMED] == 1
