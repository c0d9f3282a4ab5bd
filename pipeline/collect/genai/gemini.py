"""Gemini's ``Content`` objects, as ADK's previous-form message events hold them.

Google's Agent Development Kit in its previous telemetry form
(``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, the form of ADK 1.x) sends the
previous form's message events as log records, each message's ``content``
the ``google-genai`` ``Content`` object as it dumps it: ``{"role": "user" |
"model", "parts": [...]}``, each part with every field of its type, ``None``
when unset: ``text`` (``thought`` set: the model's reasoning),
``function_call`` (``{"id", "name", "args"}``), ``function_response``
(``{"id", "name", "response"}``), ``inline_data``, ``file_data``... Each
message of a request is a ``gen_ai.user.message`` event, the model's earlier
ones and the function responses too: the object's role says whose it is.

With content capture off, ADK sends the words :data:`ELIDED` as each event's
content: they are not what was said (:func:`~.events.carries_content`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

from turnledger.pipeline.collect.genai.said import (
    AssistantSaid,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    said_of,
    text_of_parts,
)
from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    string,
)

ELIDED: Final = "<elided>"
"""ADK's content of a message event when content capture is off: not text."""

_PART_FIELDS: Final = (
    "text",
    "function_call",
    "function_response",
    "inline_data",
    "file_data",
    "executable_code",
    "code_execution_result",
)
"""The fields of a Gemini part that hold what it is (one is set)."""

GeminiContent: TypeAlias = tuple[str, Sequence[Mapping[str, object]]]
"""A ``Content`` object's role and its parts."""


def gemini_content(value: object) -> GeminiContent | None:
    """A ``Content`` object's role and parts, or ``None`` when not one.

    One is an object of a ``parts`` array (and a ``role``), each part an
    object without a ``type`` (the conventions' parts have one), one of them
    at least of Gemini's part fields.
    """
    parts = get(value, "parts")
    if not isinstance(parts, (list, tuple)) or not parts:
        return None
    if not all(isinstance(part, dict) and "type" not in part for part in parts):
        return None
    if not any(field in part for part in parts for field in _PART_FIELDS):
        return None
    return string(get(value, "role")), parts


def gemini_text(content: GeminiContent) -> Text:
    """A ``Content`` object's text (system instructions), its other parts' types."""
    return text_of_parts(_kind(part) for part in content[1])


def gemini_said(content: GeminiContent) -> list[Said]:
    """What a ``Content`` object says, by its role (``model``: the assistant's)."""
    role, parts = content
    calls: list[ToolCallSaid] = []
    results: list[ToolSaid] = []
    others: list[tuple[str, object]] = []
    for part in parts:
        call = part.get("function_call")
        response = part.get("function_response")
        if call is not None:
            calls.append(
                ToolCallSaid(
                    id=string(get(call, "id")),
                    name=string(get(call, "name")),
                    arguments=arguments_text(get(call, "args")),
                )
            )
        elif response is not None:
            results.append(
                ToolSaid(
                    call_id=string(get(response, "id")),
                    content=as_text(get(response, "response")),
                    name=string(get(response, "name")),
                )
            )
        else:
            others.append(_kind(part))
    return said_of(role or "user", text_of_parts(others), calls, results)


def gemini_answer(content: GeminiContent) -> AssistantSaid:
    """The model's answer of a ``Content`` object (a ``gen_ai.choice`` event's)."""
    said = gemini_said(("model", content[1]))[0]  # said_of says one at least
    return said if isinstance(said, AssistantSaid) else AssistantSaid("")


INLINE_SUMMARY: Final = re.compile(r"<inline_data: [^,<>]*, [0-9]+ bytes>")
"""The words ADK writes for a part's inline data in the response it records."""


def _kind(part: Mapping[str, object]) -> tuple[str, object]:
    """A part that is neither a call nor a response: its type, and its words."""
    text = part.get("text")
    if isinstance(text, str) and INLINE_SUMMARY.fullmatch(text):
        return "inline_data", None  # ADK's words for it: not text
    if isinstance(text, str):
        return ("reasoning" if part.get("thought") else "text"), text
    for field in _PART_FIELDS[3:]:
        if part.get(field) is not None:
            return field, None
    return "untyped", None
