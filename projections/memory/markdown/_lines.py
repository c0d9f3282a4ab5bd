"""The Markdown memory line format: one write per line, parsed back exactly."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Final

import msgspec

from turnledger.projections.memory.protocol import MemoryEntry, NewMemory

FORGOTTEN_TEXT: Final = "[forgotten]"
"""The content a forgotten key's lines are rewritten to."""

_LINE = re.compile(
    r"^- \*\*(?P<key>(?:[^*\\]|\\.)*)\*\* "
    r'\[(?P<meta>(?:[^\]"]|"(?:[^"\\]|\\.)*")*)\]:(?: (?P<content>.*))?$'
)
_META = re.compile(r'(?P<name>\w+)=(?P<value>"(?:[^"\\]|\\.)*"|[^\s"\]]*)')
_BARE = re.compile(r"[\w.:+\-]+")
_ESCAPED = re.compile(r"\\(.)")
_UNESCAPE: Final = {"n": "\n", "r": "\r"}
FORGOTTEN_META: Final = " forgotten=true]:"
"""How a redacted line's metadata ends."""


def _escape(text: str, *, key: bool = False) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return text.replace("*", "\\*") if key else text


def _unescape(text: str) -> str:
    return _ESCAPED.sub(lambda m: _UNESCAPE.get(m[1], m[1]), text)


def _meta_value(value: str) -> str:
    return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)


def utc(moment: datetime) -> datetime:
    """Return a moment in UTC (a naive one is taken as UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _stamp(moment: datetime) -> str:
    return utc(moment).isoformat().replace("+00:00", "Z")


def format_line(
    entry: NewMemory, position: int | None = None, *, forgotten: bool = False
) -> str:
    """Return the Markdown line that records one write.

    Args:
        entry: The write.
        position: The ledger position that wrote it, when applied from the ledger.
        forgotten: Write the line as redacted (``forgotten=true``, content
            :data:`FORGOTTEN_TEXT`).

    Returns:
        The line, without its newline.
    """
    if forgotten:
        entry = msgspec.structs.replace(entry, content=FORGOTTEN_TEXT)
    meta = [("category", entry.category)]
    if entry.session is not None:
        meta.append(("session", entry.session))
    meta += [("at", _stamp(entry.at)), ("id", entry.entry_id)]
    if position is not None:
        meta.append(("pos", str(position)))
    if entry.namespace != "default":
        meta.append(("ns", entry.namespace))
    if entry.importance is not None:
        meta.append(("importance", repr(entry.importance)))
    if forgotten:
        meta.append(("forgotten", "true"))
    fields = " ".join(f"{name}={_meta_value(value)}" for name, value in meta)
    return f"- **{_escape(entry.key, key=True)}** [{fields}]: {_escape(entry.content)}"


def _parse_meta(text: str) -> dict[str, str]:
    meta: dict[str, str] = {}
    for match in _META.finditer(text):
        value = match["value"]
        meta[match["name"]] = str(json.loads(value)) if value.startswith('"') else value
    return meta


def parse_line(line: str, *, agent: str) -> tuple[MemoryEntry, int | None] | None:
    """Parse one line written by :func:`format_line`.

    Args:
        line: The line, without its newline.
        agent: The agent owning the file.

    Returns:
        The entry (unscored) and the position that wrote it, or ``None`` for a
        line that is not a memory line (headers, prose a human added).
    """
    match = _LINE.match(line.rstrip("\r"))
    if match is None:
        return None
    meta = _parse_meta(match["meta"])
    try:
        at = utc(datetime.fromisoformat(meta["at"]))
        position = int(meta["pos"]) if "pos" in meta else None
        importance = float(meta["importance"]) if "importance" in meta else None
    except (KeyError, ValueError):
        return None
    entry = MemoryEntry(
        id=meta.get("id", ""),
        key=_unescape(match["key"]),
        content=_unescape(match["content"] or ""),
        category=meta.get("category", "core"),
        agent=agent,
        session=meta.get("session"),
        namespace=meta.get("ns", "default"),
        importance=importance,
        created_at=at,
        updated_at=at,
    )
    return entry, position


def as_new(entry: MemoryEntry) -> NewMemory:
    """Return the write that produced an entry (for rewriting its line)."""
    return NewMemory(
        agent=entry.agent,
        key=entry.key,
        content=entry.content,
        category=entry.category,
        session=entry.session,
        namespace=entry.namespace,
        importance=entry.importance,
        entry_id=entry.id,
        at=entry.updated_at,
    )
