"""The seed's configuration layout of ``turnledger.toml``, and keys in messages.

ADR-005 and the reference (§3) configure an agent's memory in sub-tables::

    [agents.ops.memory]
    backend = "sqlite"

    [agents.ops.workspace]
    read_memory_from = ["research"]

:func:`seed_layout` flattens them into the flat keys of ``[agents.<alias>]``
(``memory``, ``read_memory_from``, and ``workspace`` for the workspace ``path``),
which stay a compatible spelling, and remembers how each key was spelled so that
every message names the key as the file wrote it; :func:`check_entries` converts
each named entry alone, so that an error names its key. The number ranges are
checked with the rest of the cross-key rules, on the whole ``Config``, in
:mod:`pipeline.config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence


class LayoutError(ValueError):
    """A layout rule is broken, or an entry does not convert; names the key."""


AGENT_TABLES: Final = {
    "memory": {"backend": "memory"},
    "workspace": {"read_memory_from": "read_memory_from", "path": "workspace"},
}
"""The seed's per-agent sub-tables: each key and the flat field it fills."""


MEMORY_SPELLINGS: Final = {"auto_save": "autosave"}
"""The reference's ``[memory]`` keys honoured under turnledger's own name."""

REFUSED_MEMORY_KEYS: Final = {
    "audit_enabled": (
        "no audit switch (every memory write is a ledger event: the ledger is "
        "the audit trail)"
    ),
    "auto_reindex_on_identity_change": (
        "no switch (a new embedding model always drops the old vectors; "
        "`turnledger memory reindex` computes new ones)"
    ),
    "dedup_on_write": (
        "no dedup switch (storing a key again updates that entry; other "
        "contents are never merged)"
    ),
    "min_relevance_score": "[recall] min_relevance (turnledger's spelling)",
    "rerank_enabled": "[recall] decay, importance_blend or mmr (the rerank stages)",
    "policy": "no memory policy table (threat scanning is not part of turnledger)",
    "types": "no typed memory (a category is a free string: core, daily...)",
    "embedding_provider": "[embedding] provider",
    "embedding_model": "[embedding] model",
    "embedding_dimensions": "[embedding] dims",
    "embedding_api_key": "[embedding] api_key_env (keys come from the environment)",
    "embedding_routes": "[embedding] (one embedder per install)",
}
"""ZeroClaw's ``[memory]`` keys (reference) turnledger refuses, with what it
expects instead."""


def memory_table(raw: dict[str, object]) -> dict[str, object]:
    """Check ``[memory]``'s reference keys: rename honoured ones, refuse the rest.

    Raises:
        LayoutError: A refused key (named with what turnledger expects
            instead), or a key given in both spellings.
    """
    table = raw.get("memory")
    if not isinstance(table, dict):
        return raw
    flat = dict(table)
    for key, value in table.items():
        instead = REFUSED_MEMORY_KEYS.get(key)
        if instead is not None:
            shown = " ".join(repr(value).split())[:80]
            msg = f"memory.{key}: expected {instead}, found {key} = {shown}"
            raise LayoutError(msg)
        field = MEMORY_SPELLINGS.get(key)
        if field is not None:
            if field in table:
                msg = f"memory.{key}: expected it once, found it also as memory.{field}"
                raise LayoutError(msg)
            flat[field] = flat.pop(key)
    return {**raw, "memory": flat}


def seed_layout(
    raw: dict[str, object],
) -> tuple[dict[str, object], dict[tuple[str, str], str]]:
    """Flatten ``[agents.<alias>.memory]`` and ``[agents.<alias>.workspace]``.

    Args:
        raw: The decoded TOML document.

    Returns:
        The document with flat agent keys, and how each flattened key was
        spelled in the file, by ``(alias, flat field)``.

    Raises:
        LayoutError: A sub-table has an unknown key, or a key is given in both
            spellings.
    """
    agents = raw.get("agents")
    spelled: dict[tuple[str, str], str] = {}
    if not isinstance(agents, dict):
        return raw, spelled
    flat_agents: dict[str, object] = {}
    for alias, table in agents.items():
        flat = dict(table) if isinstance(table, dict) else table
        if isinstance(flat, dict):
            for name in AGENT_TABLES:
                sub = flat.get(name)
                if isinstance(sub, dict):
                    del flat[name]
                    keys = _flatten(f"agents.{alias}", name, sub, flat)
                    spelled.update({(alias, f): key for f, key in keys.items()})
        flat_agents[alias] = flat
    return {**raw, "agents": flat_agents}, spelled


def _flatten(
    prefix: str, name: str, sub: dict[str, object], flat: dict[str, object]
) -> dict[str, str]:
    """Move one sub-table's keys into ``flat``; return field -> spelled key."""
    fields = AGENT_TABLES[name]
    spelled: dict[str, str] = {}
    for key, value in sub.items():
        field = fields.get(key)
        if field is None:
            msg = (
                f"{prefix}.{name}.{key}: expected one of {sorted(fields)}, "
                "found an unknown key"
            )
            raise LayoutError(msg)
        if field in flat:
            msg = (
                f"{prefix}.{name}.{key}: expected it once, found it also as "
                f"{prefix}.{field}"
            )
            raise LayoutError(msg)
        flat[field] = value
        spelled[field] = f"{prefix}.{name}.{key}"
    return spelled


_EMPTY: Final = {"Expected `str` of length >= 1": "expected text, found an empty one"}
"""msgspec's words for an empty key (``sections.Text``), as the others read."""


def located(message: str, prefix: str, spelled: dict[tuple[str, str], str]) -> str:
    """Turn msgspec's ``"... - at `$.b`"`` into ``"<prefix>.b: ..."`` (as spelled).

    Args:
        message: A msgspec validation message, its path relative to one entry.
        prefix: The entry's key (``agents.alpha``, ``providers.local``).
        spelled: How the file spelled each flattened agent key.

    Returns:
        The message led by the full key.
    """
    detail, at, path = message.rpartition(" - at `$")
    detail = _EMPTY.get(detail, detail)
    if not at:
        return f"{prefix}: {message}" if prefix else message
    path = path.rstrip("`").lstrip(".")
    field, bracket, rest = path.partition("[")
    head, _, alias = prefix.partition(".")
    key = spelled.get((alias, field)) if head == "agents" else None
    if key is None:
        key = ".".join(part for part in (prefix, field) if part)
    return f"{key}{bracket}{rest}: {detail}"


def check_entries(
    flat: dict[str, object],
    spelled: dict[tuple[str, str], str],
    named: Sequence[tuple[str, type]],
) -> None:
    """Convert each named entry alone, so that an error names its alias and key.

    msgspec reports a dict key as ``[...]``; converted one entry at a time, the
    entry's key is known.

    Args:
        flat: The document after :func:`seed_layout`.
        spelled: How the file spelled each flattened agent key.
        named: ``(section, type)`` of the tables keyed by name (``agents``,
            ``providers``, ...); ``"storage.*"`` is keyed by kind, then alias.

    Raises:
        LayoutError: An entry does not convert; the message names its key.
    """
    entries: list[tuple[str, object, type]] = []
    for section, entry_type in named:
        table = flat.get(section.removesuffix(".*"))
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if not section.endswith(".*"):
                entries.append((f"{section}.{name}", value, entry_type))
            elif isinstance(value, dict):
                prefix = f"{section.removesuffix('.*')}.{name}"
                entries += [(f"{prefix}.{k}", v, entry_type) for k, v in value.items()]
    for prefix, value, entry_type in entries:
        try:
            msgspec.convert(value, entry_type)
        except msgspec.ValidationError as e:
            raise LayoutError(located(str(e), prefix, spelled)) from None
