"""Vendored from openai-agents 0.24.0, the version pyproject.toml pins (``>=0.24,<0.25``)
and the one installed: its sdist on PyPI ships the repository's tests/ (``pip download openai-agents==0.24.0 --no-deps --no-binary :all:``,
openai_agents-0.24.0.tar.gz, sha256
4b4b285f4fed81fdf1b4ac426a9101658d9cd29b4fb1aaeee18f639b77e704e3),
file tests/test_responses.py (only ``get_text_message``). Licence: MIT, Copyright (c) 2025 OpenAI."""

from __future__ import annotations

from openai.types.responses import (
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)


def get_text_message(content: str) -> ResponseOutputItem:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[
            ResponseOutputText(
                text=content, type="output_text", annotations=[], logprobs=[]
            )
        ],
        status="completed",
    )
