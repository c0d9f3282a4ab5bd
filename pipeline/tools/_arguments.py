"""Tool argument checks: a wrong argument is a failed outcome, never an exception.

The model sends JSON; every tool reads its arguments through these helpers, which
raise :class:`ArgumentError` with an "expected ... found ..." message that the
tool turns into ``ToolOutcome(success=False, error=...)`` via :func:`failure`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.tools.base import ToolOutcome

_SHOWN_CHARS: Final = 60
"""How much of a wrong value an error message quotes."""

_JSON_TYPES: Final = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


class ArgumentError(PipelineError, ValueError):
    """A tool argument is missing or has the wrong type or value."""


def ok(output: str) -> ToolOutcome:
    """Return a successful outcome with ``output`` as its text."""
    return ToolOutcome(success=True, output=output)


def failure(error: str) -> ToolOutcome:
    """Return a failed outcome with ``error`` (the engine shows ``Error: ...``)."""
    return ToolOutcome(success=False, error=error)


def describe(value: Any) -> str:
    """Return a short description of a JSON value for an error message."""
    kind = next((name for cls, name in _JSON_TYPES if isinstance(value, cls)), None)
    if value is None:
        return "null"
    if kind is None:
        return type(value).__name__
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return f"{text} ({kind})"


def check_object(arguments: Any) -> Mapping[str, Any]:
    """Return the arguments when they are a JSON object.

    Raises:
        ArgumentError: They are not.
    """
    if not isinstance(arguments, Mapping):
        msg = f"Expected the arguments to be a JSON object, found {describe(arguments)}"
        raise ArgumentError(msg)
    return arguments


def required_str(
    arguments: Mapping[str, Any], name: str, *, allow_empty: bool = False
) -> str:
    """Return a required string argument.

    Args:
        arguments: The tool arguments.
        name: The argument's name.
        allow_empty: Accept ``""`` (otherwise blank strings are refused).

    Raises:
        ArgumentError: It is missing, not a string, or blank when not allowed.
    """
    wanted = "a string" if allow_empty else "a non-empty string"
    if name not in arguments:
        msg = f"Expected '{name}' to be {wanted}, found nothing"
        raise ArgumentError(msg)
    value = arguments[name]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        msg = f"Expected '{name}' to be {wanted}, found {describe(value)}"
        raise ArgumentError(msg)
    return value


def optional_str(arguments: Mapping[str, Any], name: str) -> str | None:
    """Return an optional non-empty string argument (``None`` when absent/null).

    Raises:
        ArgumentError: It is present but not a non-empty string.
    """
    if arguments.get(name) is None:
        return None
    return required_str(arguments, name)


def optional_int(
    arguments: Mapping[str, Any],
    name: str,
    *,
    default: int,
    minimum: int,
    maximum: int,
) -> int:
    """Return an optional integer argument within ``[minimum, maximum]``.

    Raises:
        ArgumentError: It is present but not an integer in range.
    """
    value = arguments.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"Expected '{name}' to be an integer, found {describe(value)}"
        raise ArgumentError(msg)
    if not minimum <= value <= maximum:
        msg = f"Expected '{name}' to be between {minimum} and {maximum}, found {value}"
        raise ArgumentError(msg)
    return value


def optional_bool(arguments: Mapping[str, Any], name: str, *, default: bool) -> bool:
    """Return an optional boolean argument.

    Raises:
        ArgumentError: It is present but not a boolean.
    """
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        msg = f"Expected '{name}' to be a boolean, found {describe(value)}"
        raise ArgumentError(msg)
    return value


def optional_choice(
    arguments: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str
) -> str:
    """Return an optional string argument that must be one of ``choices``.

    Raises:
        ArgumentError: It is present but not one of them.
    """
    value = arguments.get(name)
    if value is None:
        return default
    if value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        msg = f"Expected '{name}' to be one of {listed}, found {describe(value)}"
        raise ArgumentError(msg)
    return str(value)


def refuse_present(arguments: Mapping[str, Any], name: str, why: str) -> None:
    """Refuse an argument the tool deliberately does not honour.

    Raises:
        ArgumentError: ``name`` is present (and not null).
    """
    if arguments.get(name) is not None:
        msg = f"Expected no '{name}' ({why}), found {describe(arguments[name])}"
        raise ArgumentError(msg)
