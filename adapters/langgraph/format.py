"""The compact form of the saver's records: positional, names interned, ids packed.

The saver builds each record as a dict (``checkpoint`` or ``writes``, see
:mod:`turnledger.adapters.langgraph.records`) with every message reference
explicit (``[version, residual]``), then writes it in this compact form, as the
item kinds ``cp`` and ``wr``; the fold expands a compact record back into the dict
before applying it, so both forms fold the same way (records written as dicts,
kinds ``checkpoint`` and ``writes``, still read as they always did).

- A record is a JSON array: ``cp`` is ``[id, p, ts, u, md, vals, vs]`` and ``wr``
  ``[c, t, p, w]``, each followed by a dict of the rarer keys when any is set.
- Channel, node and task-path names are ints: indexes into the thread's name
  table, which every record extends with the names it is the first to use (its
  ``n`` key), in stream order, so writer and reader hold the same table.
- A canonical UUID (checkpoint ids, task ids) is ``~`` and its 16 bytes in
  unpadded URL-safe base64; any other id is kept as it is, with a leading ``~``
  doubled.
- A message reference ``[version]`` means the residual the thread's earlier
  records last gave that message (none yet: ``{}``); a residual that is only a
  canonical UUID ``id`` is written as that UUID's 22 base64 characters.
- A value spec ``["e"]`` (empty) is ``0`` and ``["n"]`` (null) is ``1``.
- ``vs`` is ``[[node, [[channel, version], ...]], ...]``; a checkpoint stored whole
  (no parent to be a delta of) carries ``f: 1``.
- When every value entry of a ``cp`` carries the same string version (no ``cv``:
  the channels a step wrote) and there are two or more, the entries leave it out
  and ``vv`` holds it once.
- ``md`` (in either form) is a blob, or ``1`` or a dict of keys: the parent's
  metadata with the next ``step``, and those keys set (:func:`metadata_delta`).

What the compact form refers to (the name table and each message's latest
residual) is a thread's :class:`CompactTable`, held by its fold and extended as
records are written and read. The writer's own fold applies the dict it built
rather than decoding what it has just encoded (:func:`built`, :func:`record_of`).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from turnledger.adapters.langgraph.codec import decode_json
from turnledger.ledger.events import ItemRecorded

COMPACT_KINDS: Final = {"cp": "checkpoint", "wr": "writes"}
"""The compact record kinds and the dict kinds they expand to."""

KIND_OF: Final = {v: k for k, v in COMPACT_KINDS.items()}
Record = dict[str, Any]


@dataclass
class CompactTable:
    """What one thread's compact records refer to, in stream order.

    ``names`` is the name table (``index`` maps each name to its position);
    ``latest`` holds, by a typed message's event version, the residual the
    thread's records last gave that message.
    """

    names: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    latest: dict[int, dict[str, Any]] = field(default_factory=dict)

    def declare(self, new: list[str]) -> None:
        """Extend the name table with the names a record declares."""
        for name in new:
            self.index.setdefault(name, len(self.names))
            self.names.append(name)


def _canonical(text: object) -> uuid.UUID | None:
    if not isinstance(text, str) or len(text) != 36:
        return None
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        return None
    return parsed if str(parsed) == text else None


def _b64(parsed: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(parsed.bytes).rstrip(b"=").decode("ascii")


def _from_b64(text: str) -> str:
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))


def pack_id(value: Any) -> Any:
    """An id as a record holds it (see the module docstring); non-str as is."""
    parsed = _canonical(value)
    if parsed is not None:
        return "~" + _b64(parsed)
    if isinstance(value, str) and value.startswith("~"):
        return "~" + value
    return value


def unpack_id(value: Any) -> Any:
    """The id :func:`pack_id` packed."""
    if not isinstance(value, str) or not value.startswith("~"):
        return value
    if value.startswith("~~"):
        return value[1:]
    return _from_b64(value[1:])


class Names:
    """Name references against a thread's table, collecting the new names."""

    def __init__(self, table: CompactTable) -> None:
        self.index = table.index
        self.base = len(table.names)
        self.new: list[str] = []
        self.added: dict[str, int] = {}

    def ref(self, name: str) -> int:
        """The int standing for ``name`` (a new one is declared by the record)."""
        at = self.index.get(name)
        if at is None:
            at = self.added.get(name)
        if at is None:
            at = self.base + len(self.new)
            self.new.append(name)
            self.added[name] = at
        return at


def _pack_refs(refs: list[Any], latest: dict[int, Any]) -> list[Any]:
    out: list[Any] = []
    for ref in refs:
        if not isinstance(ref[0], int):
            out.append(ref)  # a message blob
            continue
        at, residual = ref[0], ref[1] if len(ref) > 1 else {}
        if residual == latest.get(at, {}):
            out.append([at])
        elif len(residual) == 1 and _canonical(residual.get("id")):
            out.append([at, _b64(uuid.UUID(residual["id"]))])
        else:
            out.append([at, residual])
    return out


def _unpack_refs(refs: list[Any], latest: dict[int, Any]) -> list[Any]:
    out: list[Any] = []
    for ref in refs:
        if not isinstance(ref[0], int):
            out.append(ref)
        elif len(ref) == 1:
            out.append([ref[0], latest.get(ref[0], {})])
        elif isinstance(ref[1], str):
            out.append([ref[0], {"id": _from_b64(ref[1])}])
        else:
            out.append(ref)
    return out


_SHORT_SPECS: Final = (["e"], ["n"])
"""Value specs a compact record writes as their index here."""


def _pack_spec(spec: list[Any], latest: dict[int, Any], names: Names) -> Any:
    if spec in _SHORT_SPECS:
        return _SHORT_SPECS.index(spec)
    if spec[0] == "m":
        return [*spec[:2], _pack_refs(spec[2], latest)]
    if spec[0] == "s":
        refs = _pack_refs(spec[2], latest)
        return [spec[0], spec[1], refs, spec[3], names.ref(spec[4])]
    return spec


def _unpack_spec(spec: Any, latest: dict[int, Any], names: list[str]) -> list[Any]:
    if isinstance(spec, int):
        return list(_SHORT_SPECS[spec])
    if spec[0] == "m":
        return [*spec[:2], _unpack_refs(spec[2], latest)]
    if spec[0] == "s":
        refs = _unpack_refs(spec[2], latest)
        return [spec[0], spec[1], refs, spec[3], names[spec[4]]]
    return list(spec)


def successor(parent: dict[str, Any], md: int | dict[str, Any]) -> dict[str, Any]:
    """The metadata a record's ``md`` stands for, given its parent's metadata.

    ``1``: the parent's with the next ``step``; a dict: those keys set as well
    (written only when that rebuilds the metadata exactly).
    """
    changed = md if isinstance(md, dict) else {}
    return {**parent, "step": parent["step"] + 1, **changed}


def _json_exact(value: Any) -> bool:
    """Whether JSON gives ``value`` back with the very same types."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return True
    if kind is list:
        return all(_json_exact(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    return False


def metadata_delta(
    parent: dict[str, Any] | None, md: dict[str, Any]
) -> int | dict[str, Any] | None:
    """How a record can give ``md`` as its parent's successor, or ``None``.

    ``1`` when ``md`` is the parent's metadata with the next step; else the keys
    that differ (JSON-exact values), when keys are only changed or added.
    """
    step = None if parent is None else parent.get("step")
    if parent is None or type(step) is not int:
        return None
    base = successor(parent, 1)
    if not set(base) <= set(md):
        return None
    delta = {
        k: v
        for k, v in md.items()
        if k not in base or type(base[k]) is not type(v) or base[k] != v
    }
    if not delta:
        return 1
    if not _json_exact(delta) or successor(parent, delta) != md:
        return None
    return delta


_CP_RARE: Final = ("v", "ns", "x", "cv", "cvd", "vsd")


def _shared_version(record: Record, vals: list[list[Any]]) -> str | None:
    """The string version every value entry of a record carries, if one does.

    A record without ``cv`` gives each value entry its version, and the values
    a step writes share one; an int version (short already), or a string one of
    a single entry (shorter where it is), is left as it is.
    """
    if "cv" in record or len(vals) < 2 or any(len(e) != 3 for e in vals):
        return None
    first = vals[0][2]
    if not isinstance(first, str) or any(e[2] != first for e in vals):
        return None
    return first


def compact(kind: str, record: Record, table: CompactTable) -> list[Any]:
    """The compact form of a dict record built against a thread's ``table``.

    The table is left as it is: the record is applied to the fold (and its new
    names declared) once it is written.
    """
    names = Names(table)
    latest = table.latest
    if kind == "writes":
        entries = [
            [e[0], names.ref(e[1]), e[2]]
            if len(e) == 3
            else [e[0], names.ref(e[1]), _pack_refs(e[3], latest), int(e[4])]
            for e in record["w"]
        ]
        out: list[Any] = [
            pack_id(record["c"]),
            pack_id(record["t"]),
            names.ref(record["p"]),
            entries,
        ]
        rare = {"ns": record["ns"]} if "ns" in record else {}
    else:
        vals = [
            [names.ref(e[0]), _pack_spec(e[1], latest, names), *e[2:]]
            for e in record["vals"]
        ]
        shared = _shared_version(record, vals)
        if shared is not None:
            vals = [e[:2] for e in vals]
        vs = [
            [names.ref(node), [[names.ref(c), v] for c, v in seen.items()]]
            for node, seen in record["vs"].items()
        ]
        out = [
            pack_id(record["id"]),
            pack_id(record["p"]),
            record["ts"],
            record["u"],
            record["md"],
            vals,
            vs,
        ]
        rare = {k: record[k] for k in _CP_RARE if k in record}
        if not record.get("d"):
            rare["f"] = 1
        if shared is not None:
            rare["vv"] = shared
    if names.new:
        rare["n"] = names.new
    if rare:
        out.append(rare)
    return out


def expand(kind: str, data: list[Any], table: CompactTable) -> Record:
    """The dict record a compact one stands for; extends the thread's name table.

    ``kind`` is the compact kind (``cp`` or ``wr``).
    """
    rare: Record = data[-1] if isinstance(data[-1], dict) else {}
    table.declare(rare.get("n", []))
    names, latest = table.names, table.latest
    if kind == "wr":
        entries = [
            [e[0], names[e[1]], e[2]]
            if len(e) == 3
            else [e[0], names[e[1]], None, _unpack_refs(e[2], latest), bool(e[3])]
            for e in data[3]
        ]
        record: Record = {
            "c": unpack_id(data[0]),
            "t": unpack_id(data[1]),
            "p": names[data[2]],
            "w": entries,
        }
        if "ns" in rare:
            record["ns"] = rare["ns"]
        return record
    record = {
        "id": unpack_id(data[0]),
        "p": unpack_id(data[1]),
        "ts": data[2],
        "u": data[3],
        "md": data[4],
        "vals": [
            [names[e[0]], _unpack_spec(e[1], latest, names), *e[2:]]
            + ([rare["vv"]] if "vv" in rare else [])
            for e in data[5]
        ],
        "vs": {names[node]: {names[c]: v for c, v in seen} for node, seen in data[6]},
    }
    record |= {k: rare[k] for k in _CP_RARE if k in rare}
    if not rare.get("f"):
        record["d"] = 1
    return record


_BUILT: dict[int, tuple[ItemRecorded, Record, list[Any]]] = {}
"""Records this process just built, by their event's identity (see :func:`built`)."""
_BUILT_MAX: Final = 1024


def built(event: ItemRecorded, record: Record, data: list[Any]) -> None:
    """Remember the dict ``record`` a writer wrote as ``event`` (compact ``data``).

    The writer's own fold then applies that dict (:func:`record_of`) instead of
    decoding and expanding the JSON it has just encoded: the same record, as
    :func:`expand` gives it back.
    """
    if len(_BUILT) >= _BUILT_MAX:
        _BUILT.clear()
    _BUILT[id(event)] = (event, record, data)


def record_of(event: ItemRecorded, table: CompactTable) -> Record:
    """The dict record of a compact event (the one built for it, if remembered)."""
    found = _BUILT.pop(id(event), None)
    if found is not None and found[0] is event:
        data = found[2]
        table.declare(data[-1].get("n", []) if isinstance(data[-1], dict) else [])
        return found[1]
    return expand(event.kind, decode_json(event.fields), table)
