"""Vendored from github.com/openai/openai-agents-python, tests/test_responses.py at
commit 7f7a44f8dc0650296bd5ab6c745c9bcbaa6ac3b7 (only ``get_text_message``). Licence: MIT, Copyright (c) 2025 OpenAI."""

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
