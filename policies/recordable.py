"""Whether a model's response can be recorded whole, decided before any of it is.

A turn records the model's answer (its text and tool calls) and then runs the
calls; every later reader parses those calls' arguments again (the tool runner,
each export format, a re-run). A response that the ledger cannot store, or that
a reader cannot parse, must fail its turn before any of it is appended, never
halfway through. :func:`response_problem` names the first such problem:

- text UTF-8 cannot encode (a lone surrogate such as U+D800 alone), in the
  answer's text or a call's id, name or arguments;
- a call id holding a control character (identifiers never do, see
  :func:`turnledger.ledger.ids.check_identifier`);
- call arguments whose brackets nest deeper than :data:`MAX_ARGUMENT_DEPTH`
  (counted outside JSON strings, whether or not the text is valid JSON: a
  recursive parser would exhaust the interpreter's recursion limit on them);
- a response longer than ``max_chars`` characters (its text plus every call's
  id, name and arguments).

The reason it returns names the field, what was expected and counts or a
character's code point: never the response's text. The check is pure and
bounded: one pass over each text in C, and a bracket count only for arguments
holding more opening brackets than the limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from turnledger.ledger.ids import CONTROL_CHARACTERS
from turnledger.policies.messages import ToolCall

__all__ = [
    "DEFAULT_MAX_RESPONSE_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "json_depth",
    "nests_within",
    "response_problem",
    "text_problem",
]

MAX_ARGUMENT_DEPTH: Final = 200
"""The deepest bracket nesting recorded in a tool call's arguments.

Far beyond any tool's schema, and far below the interpreter's recursion limit
(1,000 frames) that ``json.loads`` and msgspec spend one frame per level of.
"""

DEFAULT_MAX_RESPONSE_CHARS: Final = 32 * 1024 * 1024
"""The longest response recorded by default (``[runtime] max_response_chars``)."""

_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
"""A JSON string (to its closing quote, or to the end when it has none) or a
bracket: one linear pass, never a backtracking search for a closing quote."""


def text_problem(field: str, text: str) -> str | None:
    """Return why ``text`` cannot be stored (UTF-8 cannot encode it), else ``None``.

    Args:
        field: The field named in the reason.
        text: The text.

    Returns:
        ``FIELD: expected text encodable as UTF-8, found the lone surrogate
        U+D800 at character N`` (the character's code point, never the text).
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        kind = "lone surrogate" if "\ud800" <= char <= "\udfff" else "character"
        return (
            f"{field}: expected text encodable as UTF-8, found the {kind}"
            f" U+{ord(char):04X} at character {error.start}"
        )
    return None


def json_depth(text: str) -> int:
    """Return how deep the brackets of ``text`` nest, outside JSON strings.

    Valid JSON gets its exact nesting depth. Any other text gets the depth a
    recursive JSON parser could reach before it fails: brackets inside a
    string (one left open runs to the end) do not count, and closing brackets
    never take the count below zero.
    """
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        char = text[match.start()]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char != '"' and depth:
            depth -= 1
    return deepest


def nests_within(text: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether the brackets of ``text`` nest at most ``limit`` deep.

    The depth is :func:`json_depth`'s; text with at most ``limit`` opening
    brackets is not scanned.
    """
    if text.count("[") + text.count("{") <= limit:
        return True
    return json_depth(text) <= limit


def _arguments_problem(field: str, arguments: str) -> str | None:
    if nests_within(arguments):
        return None
    depth = json_depth(arguments)
    return (
        f"{field}: expected JSON nested at most {MAX_ARGUMENT_DEPTH} levels deep,"
        f" found {depth} levels"
    )


def response_problem(
    text: str,
    calls: Sequence[ToolCall],
    *,
    max_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
) -> str | None:
    """Return why a model's response cannot be recorded whole, else ``None``.

    Args:
        text: The answer's text.
        calls: The tool calls it asked for (an empty id is allowed: the engine
            names such a call itself).
        max_chars: The longest response recorded; 0 sets no limit.

    Returns:
        The first problem found, as one bounded line naming the field (see the
        module docstring), or ``None`` when the response can be recorded.
    """
    size = len(text) + sum(len(c.id) + len(c.name) + len(c.arguments) for c in calls)
    if max_chars and size > max_chars:
        return (
            f"response: expected at most {max_chars} characters (text and tool"
            f" calls), found {size}"
        )
    problem = text_problem("text", text)
    for i, call in enumerate(calls):
        if problem is not None:
            return problem
        where = f"tool_calls[{i}]"
        bad = CONTROL_CHARACTERS.search(call.id)
        if bad is not None:
            return (
                f"{where}.id: expected no control characters, found"
                f" U+{ord(bad.group()):04X} at character {bad.start()}"
            )
        problem = (
            text_problem(f"{where}.id", call.id)
            or text_problem(f"{where}.name", call.name)
            or text_problem(f"{where}.arguments", call.arguments)
            or _arguments_problem(f"{where}.arguments", call.arguments)
        )
    return problem
