"""The knowledge graph: explicit (subject, relation, object) captures, per agent.

Only ``knowledge.captured`` events feed it: nothing is inferred from
conversations, files or channel data (the seed's "capture is explicit"). Node
names are kept exactly as captured.

There is one state per (agent, node), holding the node's outgoing and incoming
edges, so a capture changes two small states and a neighbour query reads one;
a single state per agent would be rewritten whole on every capture and grow
without bound. Path queries read the nodes they visit, from any
:class:`~collections.abc.Mapping` of loaded states (a dict from :func:`fold`, or
a lazy mapping over the view store supplied by the shell).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Final, Literal, NamedTuple, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, KnowledgeCaptured
from turnledger.policies.lifecycle import LifecycleDeclaration

Direction: TypeAlias = Literal["out", "in", "both"]
"""Which edges of a node a query follows: outgoing, incoming or both."""

DEFAULT_MAX_DEPTH: Final = 4
"""The default longest path, in edges."""

DEFAULT_PATH_LIMIT: Final = 100
"""The default number of paths returned at most."""

_KEY_DECODER: Final = msgspec.json.Decoder(tuple[str, str])


class Edge(msgspec.Struct, frozen=True, kw_only=True):
    """One captured edge, seen from one of its ends.

    Attributes:
        relation: The relation.
        node: The node at the other end.
        captures: How many times the same triple was captured.
        first_position: The ledger position of its first capture.
        provenance: The provenance of its first capture.
    """

    relation: str
    node: str
    captures: int = 1
    first_position: int
    provenance: str = ""


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """One node of an agent's graph, with its edges in first-capture order.

    Attributes:
        agent: The agent that captured it.
        node: The node's name.
        outgoing: Edges where it is the subject.
        incoming: Edges where it is the object.
    """

    agent: str = ""
    node: str = ""
    outgoing: tuple[Edge, ...] = ()
    incoming: tuple[Edge, ...] = ()


class Triple(msgspec.Struct, frozen=True, kw_only=True, order=True):
    """A captured (subject, relation, object) edge."""

    subject: str
    relation: str
    object: str


class Neighbour(msgspec.Struct, frozen=True, kw_only=True, order=True):
    """A node joined to the queried one by a captured edge.

    Attributes:
        relation: The edge's relation.
        node: The neighbour.
        direction: ``out`` when the queried node is the subject, ``in`` when it
            is the object.
    """

    relation: str
    node: str
    direction: Literal["out", "in"]


Path: TypeAlias = tuple[Triple, ...]
"""A path as the captured edges it follows, from the source to the target."""


def node_key(agent: str, node: str) -> str:
    """Return the state key of an agent's node (an unambiguous JSON pair)."""
    return msgspec.json.encode((agent, node)).decode()


def _add_edge(edges: tuple[Edge, ...], edge: Edge) -> tuple[Edge, ...]:
    for index, known in enumerate(edges):
        if (known.relation, known.node) == (edge.relation, edge.node):
            counted = msgspec.structs.replace(known, captures=known.captures + 1)
            return (*edges[:index], counted, *edges[index + 1 :])
    return (*edges, edge)


class KnowledgeGraph:
    """The knowledge-graph projection (one state per agent and node)."""

    name: str = "knowledge_graph"
    state_type: type[NodeState] = NodeState
    event_types: tuple[type[Event], ...] = (KnowledgeCaptured,)
    lifecycle: LifecycleDeclaration = LifecycleDeclaration(
        surface="Knowledge graph",
        owner="projections.knowledge (KnowledgeGraph fold of knowledge.captured)",
        durability="memory",
        scope="agent",
        reviewers_check=(
            "Capture is explicit: only knowledge.captured events add edges. "
            "Enabling the graph never ingests conversations, files or channel "
            "data, and every query names the agent whose graph it reads."
        ),
    )

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Return the subject's and the object's keys (one for a self-loop)."""
        match recorded.event:
            case KnowledgeCaptured(agent=agent, subject=subject, object=obj):
                if subject == obj:
                    return (node_key(agent, subject),)
                return (node_key(agent, subject), node_key(agent, obj))
            case _:
                return ()

    def initial(self, key: str) -> NodeState:
        """Return a node without edges, named by its key."""
        agent, node = _KEY_DECODER.decode(key)
        return NodeState(agent=agent, node=node)

    def evolve(self, state: NodeState, recorded: Recorded) -> NodeState:
        """Add a captured edge to the node at either end of it."""
        match recorded.event:
            case KnowledgeCaptured(
                subject=subject, relation=relation, object=obj, provenance=source
            ):
                position = recorded.position
                if state.node == subject:
                    edge = Edge(
                        relation=relation,
                        node=obj,
                        first_position=position,
                        provenance=source,
                    )
                    state = msgspec.structs.replace(
                        state, outgoing=_add_edge(state.outgoing, edge)
                    )
                if state.node == obj:
                    edge = Edge(
                        relation=relation,
                        node=subject,
                        first_position=position,
                        provenance=source,
                    )
                    state = msgspec.structs.replace(
                        state, incoming=_add_edge(state.incoming, edge)
                    )
                return state
            case _:
                return state


KNOWLEDGE_GRAPH: Final = KnowledgeGraph()
"""The knowledge-graph projection."""


def neighbours(
    graph: Mapping[str, NodeState],
    node: str,
    relation: str | None = None,
    *,
    agent: str,
    direction: Direction = "both",
) -> tuple[Neighbour, ...]:
    """Return the nodes joined to ``node`` by a captured edge.

    Args:
        graph: Node states by key (a node that is absent has no edges).
        node: The node.
        relation: Only edges with this relation; all when ``None``.
        agent: The agent whose graph is read.
        direction: ``out`` (``node`` is the subject), ``in`` (it is the object)
            or ``both``.

    Returns:
        The neighbours sorted by relation, node and direction.
    """
    state = graph.get(node_key(agent, node))
    if state is None:
        return ()
    found: list[Neighbour] = []
    if direction in ("out", "both"):
        found += (
            Neighbour(relation=e.relation, node=e.node, direction="out")
            for e in state.outgoing
        )
    if direction in ("in", "both"):
        found += (
            Neighbour(relation=e.relation, node=e.node, direction="in")
            for e in state.incoming
        )
    return tuple(sorted(n for n in found if relation in (None, n.relation)))


class _Graph(NamedTuple):
    """One agent's graph, as the path search reads it."""

    states: Mapping[str, NodeState]
    agent: str

    def steps(self, node: str, direction: Direction) -> list[tuple[str, Triple]]:
        """Return ``(next node, edge)`` pairs leaving ``node``, in a fixed order."""
        steps = [
            (
                n.node,
                Triple(subject=node, relation=n.relation, object=n.node)
                if n.direction == "out"
                else Triple(subject=n.node, relation=n.relation, object=node),
            )
            for n in neighbours(
                self.states, node, agent=self.agent, direction=direction
            )
        ]
        return sorted(steps)


_REVERSE: Final[Mapping[Direction, Direction]] = {
    "out": "in",
    "in": "out",
    "both": "both",
}


def _distances_to(
    graph: _Graph, target: str, max_depth: int, direction: Direction
) -> dict[str, int]:
    """Return each node's distance to ``target`` (up to ``max_depth``), by BFS."""
    distance = {target: 0}
    queue = deque([target])
    while queue:
        node = queue.popleft()
        if distance[node] == max_depth:
            continue
        for other, _ in graph.steps(node, _REVERSE[direction]):
            if other not in distance:
                distance[other] = distance[node] + 1
                queue.append(other)
    return distance


def paths(
    graph: Mapping[str, NodeState],
    source: str,
    target: str,
    *,
    agent: str,
    max_depth: int = DEFAULT_MAX_DEPTH,
    direction: Direction = "out",
    limit: int = DEFAULT_PATH_LIMIT,
) -> tuple[Path, ...]:
    """Return the simple paths from ``source`` to ``target`` over captured edges.

    Paths are found breadth-first, so shorter ones come first; among paths of the
    same length the order follows the sorted (node, edge) steps, so it is the same
    for the same graph. A first BFS from ``target`` prunes every step that cannot
    reach it within the remaining depth, so the search only extends paths that
    can still end at ``target``.

    Args:
        graph: Node states by key (see :func:`neighbours`).
        source: The start node.
        target: The end node.
        agent: The agent whose graph is read.
        max_depth: The longest path, in edges (>= 0).
        direction: ``out`` follows edges from subject to object, ``in`` the
            reverse, ``both`` either way.
        limit: The number of paths returned at most (>= 1).

    Returns:
        The paths, each a tuple of captured triples in walking order, with no
        node visited twice; ``((),)`` when ``source == target`` and the node was
        captured; ``()`` when there is none.

    Raises:
        ValueError: ``max_depth`` is negative or ``limit`` is below 1.
    """
    if max_depth < 0 or limit < 1:
        msg = f"Expected max_depth >= 0 and limit >= 1, found {max_depth}, {limit}"
        raise ValueError(msg)
    if node_key(agent, source) not in graph or node_key(agent, target) not in graph:
        return ()
    if source == target:
        return ((),)
    view = _Graph(graph, agent)
    distance = _distances_to(view, target, max_depth, direction)
    if source not in distance:
        return ()
    walk = _walk(view, (source, target), distance, max_depth, direction)
    return tuple(islice(walk, limit))


def _walk(
    graph: _Graph,
    ends: tuple[str, str],
    distance: Mapping[str, int],
    max_depth: int,
    direction: Direction,
) -> Iterator[Path]:
    source, target = ends
    queue: deque[tuple[str, tuple[str, ...], Path]] = deque([(source, (source,), ())])
    while queue:
        node, visited, path = queue.popleft()
        left = max_depth - len(path) - 1
        for other, edge in graph.steps(node, direction):
            # Only steps from which the target is still reachable in time.
            if other in visited or distance.get(other, max_depth + 1) > left:
                continue
            if other == target:
                yield (*path, edge)
            else:
                queue.append((other, (*visited, other), (*path, edge)))


def captured_edges(
    graph: Mapping[str, NodeState], *, agent: str | None = None
) -> tuple[Triple, ...]:
    """Return every captured triple (of one agent, or all), sorted."""
    return tuple(
        sorted(
            Triple(subject=state.node, relation=edge.relation, object=edge.node)
            for state in graph.values()
            if agent in (None, state.agent)
            for edge in state.outgoing
        )
    )
