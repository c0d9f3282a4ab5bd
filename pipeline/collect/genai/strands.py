"""Strands Agents' spans: its operations, and its messages as Converse content blocks.

Strands Agents (AWS's agent SDK) names itself where the conventions name the
provider: ``gen_ai.system`` (the previous form, its default) or
``gen_ai.provider.name`` (the current form), ``strands-agents``. Its ``chat``
spans are model calls and its ``execute_tool`` spans tool runs; its
``execute_event_loop_cycle`` and ``invoke_agent`` spans repeat the messages of
its calls, and its other operations (``invoke_swarm``, ``invoke_graph``,
``memory.*``) are neither: all are counted.

In the previous form, a message event's ``content`` (and ``gen_ai.choice``'s
``message``) is the message's content blocks as Bedrock's Converse API has
them, as JSON text (:func:`converse_blocks`): ``{"text": ...}``,
``{"toolUse": {"toolUseId", "name", "input"}}``, ``{"toolResult":
{"toolUseId", "status", "content": [blocks]}}``, ``{"image": ...}``... A tool
span's ``gen_ai.tool.message`` event holds the call's arguments and its
``gen_ai.choice`` event the result's blocks, ``gen_ai.tool.status`` ``error``
a failure. In the current form a tool span's ``gen_ai.tool.call.result`` is the
result's blocks as JSON text too, sent for a run that did not fail; a failed
run's result is in its output messages event (:func:`.tools.read_tool`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from turnledger.pipeline.collect.genai.readings import SpanKind
from turnledger.pipeline.collect.genai.said import (
    AssistantSaid,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    said_of,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    get,
    joined,
    json_of,
    string,
)

STRANDS: Final = "strands-agents"
"""What Strands Agents sends as ``gen_ai.system`` or ``gen_ai.provider.name``."""

_BLOCKS: Final = frozenset(
    {
        "text",
        "toolUse",
        "toolResult",
        "json",
        "image",
        "document",
        "video",
        "reasoningContent",
        "guardContent",
        "cachePoint",
        "citationsContent",
        "interruptResponse",
    }
)
"""The kinds of Converse content block (each block is an object of one of them)."""


def is_strands(attrs: Mapping[str, object]) -> bool:
    """Whether a span is Strands Agents' own."""
    return (
        attrs.get("gen_ai.provider.name") == STRANDS
        or attrs.get("gen_ai.system") == STRANDS
    )


def strands_kind(operation: str) -> tuple[SpanKind, str]:
    """A Strands span's kind and label, by its ``gen_ai.operation.name``."""
    if operation == "chat":
        return "chat", operation
    if operation == "execute_tool":
        return "tool", operation
    return "known", operation[:64] or STRANDS


def converse_blocks(value: object) -> list[tuple[str, object]] | None:
    """Content (JSON text or decoded) as Converse blocks, or ``None`` if it is not.

    Blocks are a non-empty array (JSON text, or a structured value) of objects
    of one key each, every key a kind of block (:data:`_BLOCKS`); each is
    returned as its kind and its value.
    """
    found = json_of(value)
    if not isinstance(found, (list, tuple)) or not found:
        return None
    blocks: list[tuple[str, object]] = []
    for block in found:
        if not isinstance(block, dict) or len(block) != 1:
            return None
        ((kind, inner),) = block.items()
        if kind not in _BLOCKS:
            return None
        blocks.append((kind, inner))
    return blocks


def blocks_said(role: str, blocks: Sequence[tuple[str, object]]) -> list[Said]:
    """What a message of Converse blocks says (:func:`~.said.said_of`).

    Its text blocks are its text; its ``toolUse`` blocks its calls; its
    ``toolResult`` blocks its results; any other block (an image, a reasoning
    block) is skipped, counted by its kind, as is any such block inside a
    result.
    """
    texts: list[str] = []
    skipped: list[str] = []
    calls: list[ToolCallSaid] = []
    results: list[ToolSaid] = []
    for kind, inner in blocks:
        if kind == "text" and isinstance(inner, str):
            texts.append(inner)
        elif kind == "toolUse":
            calls.append(
                ToolCallSaid(
                    id=string(get(inner, "toolUseId")),
                    name=string(get(inner, "name")),
                    arguments=arguments_text(get(inner, "input")),
                )
            )
        elif kind == "toolResult":
            text, inside = result_text(get(inner, "content"))
            skipped += inside
            results.append(
                ToolSaid(
                    call_id=string(get(inner, "toolUseId")),
                    content=text,
                    is_error=get(inner, "status") == "error",
                )
            )
        else:
            skipped.append(kind)
    return said_of(role, (joined(texts), tuple(skipped)), calls, results)


def answer_of(blocks: Sequence[tuple[str, object]]) -> AssistantSaid:
    """A model's answer of Converse blocks (``gen_ai.choice``): one assistant message.

    As :func:`blocks_said` reads an assistant's; a ``toolResult`` block (no
    answer's) is skipped, counted.
    """
    kept = [b for b in blocks if b[0] != "toolResult"]
    (said,) = blocks_said("assistant", kept)  # no result: one message
    if not isinstance(said, AssistantSaid):  # pragma: no cover - said_of's rule
        raise TypeError(said)
    dropped = ("toolResult",) * (len(blocks) - len(kept))
    if not dropped:
        return said
    return msgspec.structs.replace(said, skipped=(*said.skipped, *dropped))


def blocks_text(blocks: Sequence[tuple[str, object]]) -> Text:
    """Blocks as text (a system prompt's): the text blocks; the others skipped."""
    texts = [v for k, v in blocks if k == "text" and isinstance(v, str)]
    skipped = [k for k, v in blocks if k != "text" or not isinstance(v, str)]
    return joined(texts), tuple(skipped)


def result_text(content: object) -> Text:
    """A tool result's content blocks as text: its texts, and its JSON as JSON text.

    Joined by newlines; other blocks are skipped by kind. Content that is not
    blocks is text as it is, else JSON.
    """
    blocks = converse_blocks(content)
    if blocks is None:
        if isinstance(content, str) or content is None:
            return content or "", ()
        return msgspec.json.encode(content, enc_hook=repr).decode(), ()
    texts: list[str] = []
    skipped: list[str] = []
    for kind, inner in blocks:
        if kind == "text" and isinstance(inner, str):
            texts.append(inner)
        elif kind == "json":
            texts.append(msgspec.json.encode(inner, enc_hook=repr).decode())
        else:
            skipped.append(kind)
    return joined(texts), tuple(skipped)
