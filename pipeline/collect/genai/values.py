"""Attribute values as the GenAI readers take them: JSON text parsed, text.

What an attribute or a message field holds is read by these alone: text as
text, JSON text as its value, anything else as nothing (never a guess).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


def json_of(value: object) -> object:
    """A JSON text value parsed (structured values pass as they are)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):
            return value
    return value


def seq(value: object) -> Sequence[object]:
    """A list or tuple as it is; anything else as empty."""
    return value if isinstance(value, (list, tuple)) else ()


def get(value: object, key: str) -> object:
    """A dict's value at ``key``; ``None`` for anything else."""
    return value.get(key) if isinstance(value, dict) else None


def string(value: object) -> str:
    """Text as it is; anything else as ``""``."""
    return value if isinstance(value, str) else ""


def as_text(value: object) -> str:
    """Content as text: text as it is, text parts joined by newlines, else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(p, dict) and isinstance(p.get("text", p.get("content")), str)
        for p in value
    ):
        return joined([str(p.get("text", p.get("content"))) for p in value])
    return msgspec.json.encode(value, enc_hook=repr).decode()


def arguments_text(value: object) -> str:
    """A tool call's arguments as text: as sent, or as JSON (none: ``{}``)."""
    if isinstance(value, str):
        return value or "{}"
    if value is None:
        return "{}"
    return msgspec.json.encode(value, enc_hook=repr).decode()


def joined(texts: Sequence[str]) -> str:
    """Text parts as one text: joined by newlines, empty ones left out."""
    if len(texts) == 1:
        return texts[0]
    return "\n".join(t for t in texts if t)
