"""The compact form of the saver's records (``langgraph_format``) loses nothing.

Ids pack and unpack to themselves, metadata deltas rebuild the metadata exactly,
and a ledger whose records are written in the older dict form (kinds
``checkpoint`` and ``writes``) reads back exactly as the compact one does.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adapters.test_langgraph_saver import Driver, same, step
from turnledger.adapters.langgraph import TurnledgerSaver
from turnledger.adapters.langgraph.codec import decode_json, encode_json
from turnledger.adapters.langgraph.format import (
    COMPACT_KINDS,
    CompactTable,
    expand,
    metadata_delta,
    pack_id,
    successor,
    unpack_id,
)
from turnledger.adapters.langgraph.state import ThreadState
from turnledger.ledger.events import Event, ItemRecorded
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store

ids = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.text(max_size=40),
    st.text(max_size=30).map(lambda t: "~" + t),
    st.integers(),
    st.none(),
)


@given(ids)
def test_an_id_unpacks_to_itself(value: Any) -> None:
    """Every id (and the ints and None a record reference can be) round-trips."""
    packed = pack_id(value)
    assert unpack_id(packed) == value
    assert type(unpack_id(packed)) is type(value)


def test_a_canonical_uuid_packs_to_23_characters() -> None:
    """A UUID's 36 characters become ``~`` and 22 base64 ones; others stay."""
    value = str(uuid.uuid4())
    assert len(pack_id(value)) == 23
    assert pack_id(value.upper()) == value.upper()
    assert pack_id("~x") == "~~x"


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.lists(inner, max_size=2) | st.tuples(inner),
    max_leaves=4,
)
metadata = st.dictionaries(st.sampled_from(["a", "b", "step"]), json_values)


@given(metadata, metadata, st.integers(-2, 5))
def test_a_metadata_delta_rebuilds_the_metadata(
    parent: dict[str, Any], md: dict[str, Any], step_: int
) -> None:
    """When a delta is written, the parent's successor with it equals ``md``."""
    parent["step"] = step_
    delta = metadata_delta(parent, md)
    if delta is None:
        return
    rebuilt = successor(parent, delta)
    assert rebuilt == md
    sort: Any = "sorted"  # same keys and values, same JSON types (True is not 1)
    assert msgspec.json.encode(rebuilt, order=sort) == msgspec.json.encode(
        md, order=sort
    )
    if isinstance(delta, dict):
        assert decode_json(encode_json(delta)) == delta


def test_metadata_with_a_key_removed_or_a_tuple_is_not_a_delta() -> None:
    """Only changed or added JSON-exact keys make a delta (types kept: True is
    not the next step 4)."""
    parent = {"source": "loop", "step": 3, "parents": {}}
    assert metadata_delta(parent, {"source": "loop", "step": 4, "parents": {}}) == 1
    assert metadata_delta(parent, {"source": "input", "step": 4, "parents": {}}) == {
        "source": "input"
    }
    assert metadata_delta(parent, {"source": "loop", "step": 4}) is None
    assert metadata_delta(parent, {**parent, "step": 4, "x": (1,)}) is None
    assert metadata_delta(parent, {**parent, "step": True}) == {"step": True}


def as_dict_form(path: str, serde: Any) -> list[Event]:
    """The thread's events with each compact record rewritten in the dict form."""
    stream = session_stream_id("langgraph", "t")
    fold = ThreadState("t", stream)
    out: list[Event] = []
    with open_store(path) as store:
        for recorded in store.read_stream(stream):
            event = recorded.event
            if isinstance(event, ItemRecorded) and event.kind in COMPACT_KINDS:
                probe = CompactTable(
                    list(fold.table.names),
                    dict(fold.table.index),
                    dict(fold.table.latest),
                )
                record = expand(event.kind, decode_json(event.fields), probe)
                event = msgspec.structs.replace(
                    event, kind=COMPACT_KINDS[event.kind], fields=encode_json(record)
                )
            fold.apply(recorded.version, recorded.event, serde)
            out.append(event)
    return out


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=st.lists(step, min_size=1, max_size=10))
def test_dict_form_records_read_back_as_the_compact_ones(
    steps: list[tuple[str, Any]],
) -> None:
    """A ledger of dict-form records (as written before) reads back the same."""
    with tempfile.TemporaryDirectory() as folder:
        compact_path = str(Path(folder) / "compact.db")
        dict_path = str(Path(folder) / "dict.db")
        with TurnledgerSaver.from_url(compact_path) as ours:
            driver = Driver([ours], "")
            for kind, arg in steps:
                driver.apply(kind, arg)
            events = as_dict_form(compact_path, ours.serde)
        assert not any(
            isinstance(e, ItemRecorded) and e.kind in COMPACT_KINDS for e in events
        )
        with open_store(dict_path) as store:
            stream = session_stream_id("langgraph", "t")
            store.append(stream, events, expected_version=0)
        with (
            TurnledgerSaver.from_url(compact_path) as compact,
            TurnledgerSaver.from_url(dict_path) as old,
        ):
            for config in driver.configs:
                same(old.get_tuple(config), compact.get_tuple(config))
            latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            same(old.get_tuple(latest), compact.get_tuple(latest))
            assert len(list(old.list(latest))) == len(driver.configs)
