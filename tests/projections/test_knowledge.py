"""Knowledge graph: explicit captures per agent and node; neighbours and paths."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import KnowledgeCaptured, MemoryStored
from turnledger.ledger.store import open_store
from turnledger.policies.lifecycle import validate_declaration
from turnledger.projections.base import digest, fold
from turnledger.projections.knowledge import (
    KNOWLEDGE_GRAPH,
    Neighbour,
    NodeState,
    Triple,
    captured_edges,
    neighbours,
    node_key,
    paths,
)
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

STREAM = uuid.UUID(int=7)
AT = datetime(2026, 5, 1, tzinfo=UTC)


def recorded(*events, stream=STREAM):
    versions: Counter[uuid.UUID] = Counter()
    out = []
    for position, event in enumerate(events, start=1):
        versions[stream] += 1
        out.append(
            Recorded(
                stream_id=stream,
                version=versions[stream],
                position=position,
                recorded_at=AT,
                event=event,
            )
        )
    return out


def fold_in_pages(projection, records, cuts):
    """Fold page by page through msgspec JSON, as the runner's view store does."""
    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(projection.state_type)
    stored: dict[str, bytes] = {}
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in itertools.pairwise(bounds):
        page = [
            r for r in records[start:end] if isinstance(r.event, projection.event_types)
        ]
        keys = {k for r in page for k in projection.keys(r)}
        loaded = {k: decoder.decode(stored[k]) for k in keys if k in stored}
        changed = fold(projection, page, loaded)
        stored.update((k, encoder.encode(changed[k])) for k in keys if k in changed)
    return {k: decoder.decode(v) for k, v in stored.items()}


def capture(subject, relation, obj, agent="a", provenance=""):
    return KnowledgeCaptured(
        agent=agent,
        subject=subject,
        relation=relation,
        object=obj,
        provenance=provenance,
    )


def t(subject, relation, obj):
    return Triple(subject=subject, relation=relation, object=obj)


def example_graph():
    return fold(
        KNOWLEDGE_GRAPH,
        recorded(
            capture("alice", "knows", "bob", provenance="told by user"),
            capture("bob", "works_at", "acme"),
            capture("alice", "works_at", "acme"),
            capture("carol", "knows", "alice"),
            capture("alice", "knows", "bob", provenance="again"),
            capture("alice", "hates", "bob", agent="b"),
            MemoryStored(agent="a", key="k", content="alice knows dave"),
        ),
    )


def test_a_capture_changes_both_ends_and_repeats_are_counted():
    """Subject and object each record the edge; a repeat counts, keeps the first."""
    graph = example_graph()
    alice = graph[node_key("a", "alice")]
    assert [(e.relation, e.node, e.captures) for e in alice.outgoing] == [
        ("knows", "bob", 2),
        ("works_at", "acme", 1),
    ]
    assert (alice.outgoing[0].first_position, alice.outgoing[0].provenance) == (
        1,
        "told by user",
    )
    assert [(e.relation, e.node) for e in alice.incoming] == [("knows", "carol")]
    bob = graph[node_key("a", "bob")]
    assert [(e.relation, e.node) for e in bob.incoming] == [("knows", "alice")]


def test_only_explicit_captures_make_nodes():
    """A memory write mentioning people adds nothing to the graph."""
    graph = example_graph()
    assert node_key("a", "dave") not in graph
    assert {(s.agent, s.node) for s in graph.values()} == {
        ("a", "alice"),
        ("a", "bob"),
        ("a", "acme"),
        ("a", "carol"),
        ("b", "alice"),
        ("b", "bob"),
    }


def test_keys_are_unambiguous_and_a_self_loop_has_one():
    """Node keys never collide across agents and names; a loop touches one node."""
    assert node_key("a/b", "c") != node_key("a", "b/c")
    assert node_key('a"', "b") != node_key("a", '"b')
    loop = recorded(capture("x", "is", "x"))
    assert KNOWLEDGE_GRAPH.keys(loop[0]) == (node_key("a", "x"),)
    state = fold(KNOWLEDGE_GRAPH, loop)[node_key("a", "x")]
    assert len(state.outgoing) == len(state.incoming) == 1
    assert KNOWLEDGE_GRAPH.initial(node_key("a/b", "c")) == NodeState(
        agent="a/b", node="c"
    )


def test_neighbours_by_relation_and_direction():
    """Neighbours are sorted and filtered, and scoped to one agent."""
    graph = example_graph()
    assert neighbours(graph, "alice", agent="a") == (
        Neighbour(relation="knows", node="bob", direction="out"),
        Neighbour(relation="knows", node="carol", direction="in"),
        Neighbour(relation="works_at", node="acme", direction="out"),
    )
    assert neighbours(graph, "alice", "knows", agent="a", direction="out") == (
        Neighbour(relation="knows", node="bob", direction="out"),
    )
    assert [n.node for n in neighbours(graph, "acme", agent="a", direction="in")] == [
        "alice",
        "bob",
    ]
    assert neighbours(graph, "alice", agent="b") == (
        Neighbour(relation="hates", node="bob", direction="out"),
    )
    assert neighbours(graph, "nobody", agent="a") == ()


def test_paths_are_breadth_first_and_bounded_by_depth():
    """Shorter paths come first; max_depth cuts longer ones."""
    graph = example_graph()
    assert paths(graph, "carol", "acme", agent="a") == (
        (t("carol", "knows", "alice"), t("alice", "works_at", "acme")),
        (
            t("carol", "knows", "alice"),
            t("alice", "knows", "bob"),
            t("bob", "works_at", "acme"),
        ),
    )
    assert paths(graph, "carol", "acme", agent="a", max_depth=2) == (
        (t("carol", "knows", "alice"), t("alice", "works_at", "acme")),
    )
    assert paths(graph, "carol", "acme", agent="a", limit=1) == (
        (t("carol", "knows", "alice"), t("alice", "works_at", "acme")),
    )
    assert paths(graph, "acme", "carol", agent="a") == ()


def test_paths_can_follow_edges_backwards():
    """With direction both, a path may walk an edge from object to subject."""
    graph = example_graph()
    assert paths(graph, "bob", "carol", agent="a", direction="both") == (
        (t("alice", "knows", "bob"), t("carol", "knows", "alice")),
        (
            t("bob", "works_at", "acme"),
            t("alice", "works_at", "acme"),
            t("carol", "knows", "alice"),
        ),
    )
    assert paths(graph, "acme", "carol", agent="a", direction="in") == (
        (t("alice", "works_at", "acme"), t("carol", "knows", "alice")),
        (
            t("bob", "works_at", "acme"),
            t("alice", "knows", "bob"),
            t("carol", "knows", "alice"),
        ),
    )


def test_path_edge_cases():
    """Same node, unknown nodes, another agent's graph and bad bounds."""
    graph = example_graph()
    assert paths(graph, "alice", "alice", agent="a") == ((),)
    assert paths(graph, "alice", "dave", agent="a") == ()
    assert paths(graph, "carol", "acme", agent="b") == ()
    with pytest.raises(
        ValueError, match="Expected max_depth >= 0 and limit >= 1, found -1, 100"
    ):
        paths(graph, "alice", "bob", agent="a", max_depth=-1)
    with pytest.raises(
        ValueError, match="Expected max_depth >= 0 and limit >= 1, found 4, 0"
    ):
        paths(graph, "alice", "bob", agent="a", limit=0)


def test_captured_edges_lists_each_triple_once():
    """Repeated captures are one triple; agents can be selected."""
    graph = example_graph()
    assert captured_edges(graph, agent="b") == (t("alice", "hates", "bob"),)
    assert len(captured_edges(graph, agent="a")) == 4
    assert len(captured_edges(graph)) == 5


def test_lifecycle_declaration_is_valid():
    """The graph is agent-scoped memory."""
    declaration = validate_declaration(KNOWLEDGE_GRAPH.lifecycle)
    assert (declaration.surface, declaration.durability, declaration.scope) == (
        "Knowledge graph",
        "memory",
        "agent",
    )


NODES = "abcde"
captures = st.builds(
    capture,
    st.sampled_from(NODES),
    st.sampled_from(["r", "s"]),
    st.sampled_from(NODES),
    agent=st.sampled_from(["x", "y"]),
)
graph_ledgers = st.lists(captures, max_size=14).map(lambda events: recorded(*events))
directions = st.sampled_from(["out", "in", "both"])


@settings(max_examples=50, deadline=None)
@given(records=graph_ledgers, data=st.data())
def test_folding_in_pages_equals_folding_at_once(records, data):
    """Any page split (through the JSON view encoding) gives the same states."""
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(records))))
    whole = fold(KNOWLEDGE_GRAPH, records)
    paged = fold_in_pages(KNOWLEDGE_GRAPH, records, cuts)
    assert paged == whole
    assert digest(paged) == digest(whole)


def brute_force_paths(triples, source, target, max_depth, direction):
    """Every simple path by depth-first enumeration, the slow obvious way."""
    found = set()

    def walk(node, visited, path):
        if node == target:
            found.add(path)
            return
        if len(path) == max_depth:
            return
        for triple in triples:
            ends = []
            if direction in ("out", "both") and triple.subject == node:
                ends.append(triple.object)
            if direction in ("in", "both") and triple.object == node:
                ends.append(triple.subject)
            for other in ends:
                if other not in visited:
                    walk(other, visited | {other}, (*path, triple))

    walk(source, {source}, ())
    return found


@settings(max_examples=80, deadline=None)
@given(
    records=graph_ledgers,
    source=st.sampled_from(NODES),
    target=st.sampled_from(NODES),
    max_depth=st.integers(min_value=0, max_value=4),
    direction=directions,
)
def test_paths_follow_captured_edges_and_miss_none(
    records, source, target, max_depth, direction
):
    """Each path walks captured edges of the agent, simply, from source to target;
    shorter ones come first, and together they are every such path."""
    assume(source != target)
    graph = fold(KNOWLEDGE_GRAPH, records)
    captured = set(captured_edges(graph, agent="x"))
    found = paths(
        graph,
        source,
        target,
        agent="x",
        max_depth=max_depth,
        direction=direction,
        limit=100_000,
    )
    for path in found:
        assert set(path) <= captured
        assert 1 <= len(path) <= max_depth
        node, visited = source, [source]
        for edge in path:
            forward = direction in ("out", "both") and edge.subject == node
            node = edge.object if forward else edge.subject
            assert forward or (
                direction in ("in", "both") and edge.object == visited[-1]
            )
            visited.append(node)
        assert node == target
        assert len(set(visited)) == len(visited)
    assert [len(p) for p in found] == sorted(len(p) for p in found)
    assert len(set(found)) == len(found)
    assert set(found) == brute_force_paths(
        captured, source, target, max_depth, direction
    )


def test_runner_live_catch_up_equals_rebuild(tmp_path):
    """Live catch-up in small pages on SQLite equals a rebuild and a plain fold."""
    store = open_store(str(tmp_path / "l.db"))
    views = SQLiteViewStore(str(tmp_path / "v.db"))
    runner = ProjectionRunner(store, views, [KNOWLEDGE_GRAPH])
    stream = uuid.UUID(int=42)
    for round_ in range(4):
        events = [
            capture(f"n{round_}", "next", f"n{round_ + 1}"),
            capture("hub", "has", f"n{round_}"),
            capture("hub", "has", f"n{round_}"),
        ]
        store.append(stream, events, expected_version=store.stream_version(stream))
        runner.catch_up(page_size=2)
    live = views.all(KNOWLEDGE_GRAPH.name, NodeState)
    runner.rebuild(page_size=5)
    assert digest(views.all(KNOWLEDGE_GRAPH.name, NodeState)) == digest(live)
    assert digest(live) == digest(fold(KNOWLEDGE_GRAPH, store.iter_all()))
    assert paths(live, "n0", "n4", agent="a") == (
        tuple(t(f"n{i}", "next", f"n{i + 1}") for i in range(4)),
    )
    assert [e.captures for e in live[node_key("a", "hub")].outgoing] == [2, 2, 2, 2]
    views.close()
    store.close()
