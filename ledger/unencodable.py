"""Naming the field of an event that cannot be encoded (issue #17).

An event built in Python can hold text no ledger can store (a lone surrogate
such as U+D800 alone, which UTF-8 cannot encode) or values nested so deep that
encoding them exhausts the interpreter's recursion limit. msgspec raises
``UnicodeEncodeError`` and ``RecursionError`` for those; the codec turns them into
an :class:`~turnledger.ledger.errors.InvalidEventError` whose message comes from
here: the field (with its position inside tuples, lists and dicts), what was
expected and a bounded quote of what was found, never the whole value.

The search is iterative and bounded (:data:`MAX_NODES` values visited,
:data:`MAX_DEPTH` levels), so it cannot itself recurse too deep or run long on
a huge value.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

MAX_NODES: Final = 100_000
"""The most values the search looks at before naming only the top-level field."""

MAX_DEPTH: Final = 64
"""How deep the search descends (a path is named only down to this depth)."""

QUOTED: Final = 40
"""Characters of an offending text quoted in a message."""


def quote(text: str) -> str:
    """Return ``repr`` of a bounded prefix of ``text`` (with its length if cut)."""
    if len(text) <= QUOTED:
        return repr(text)
    return f"{text[:QUOTED]!r}\u2026 ({len(text)} characters)"


def _children(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, msgspec.Struct):
        return [(f"{path}.{f}", getattr(value, f)) for f in value.__struct_fields__]
    if isinstance(value, (list, tuple)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out.append((f"{path} key {quote(k) if isinstance(k, str) else k!r}", k))
            out.append((f"{path}[{quote(k) if isinstance(k, str) else k!r}]", v))
        return out
    return []


def _path_of(event: msgspec.Struct, target: object) -> str | None:
    """Return where ``target`` (by identity) sits in ``event``, searched bounded."""
    stack = [(f, getattr(event, f), 0) for f in reversed(event.__struct_fields__)]
    seen = 0
    while stack and seen < MAX_NODES:
        path, value, depth = stack.pop()
        seen += 1
        if value is target:
            return path
        if depth < MAX_DEPTH:
            children = _children(value, path)
            stack.extend((p, v, depth + 1) for p, v in reversed(children))
    return None


def _field_failing(event: msgspec.Struct, error: type[BaseException]) -> str | None:
    """Return the first top-level field whose value alone fails with ``error``."""
    for name in event.__struct_fields__:
        try:
            msgspec.json.encode(getattr(event, name))
        except error:
            return name
        except (TypeError, ValueError, msgspec.EncodeError):
            continue
    return None


def unencodable_text(event: msgspec.Struct, error: UnicodeEncodeError) -> str:
    """Describe the text of ``event`` that UTF-8 cannot encode.

    Args:
        event: The event whose encoding failed.
        error: msgspec's error; its ``object`` is the offending text.

    Returns:
        ``FIELD: expected text encodable as UTF-8, found ...`` naming the
        character, its position and a bounded quote of the text.
    """
    text = error.object if isinstance(error.object, str) else ""
    where = _path_of(event, text) if text else None
    if where is None:
        where = _field_failing(event, UnicodeEncodeError) or "a field"
    char = text[error.start] if 0 <= error.start < len(text) else ""
    kind = "lone surrogate" if "\ud800" <= char <= "\udfff" else "character"
    found = (
        f"the {kind} U+{ord(char):04X} at character {error.start} of {quote(text)}"
        if char
        else "unencodable text"
    )
    return f"{where}: expected text encodable as UTF-8, found {found}"


def too_deep(event: msgspec.Struct) -> str:
    """Describe the field of ``event`` nested too deep to encode."""
    where = _field_failing(event, RecursionError) or "a field"
    return (
        f"{where}: expected values nested at most a few hundred levels deep,"
        " found deeper nesting (encoding exceeded the recursion limit)"
    )
