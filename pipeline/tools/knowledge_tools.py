"""The knowledge tools: capture explicit triples, query the agent's graph.

``knowledge_capture`` records a ``knowledge.captured`` event on the agent's
memory stream (provenance: the turn id); nothing is inferred. ``knowledge_query``
folds that stream's captures with the knowledge-graph projection and answers
with a node's neighbours, or with the paths between two nodes. An agent only
ever reads its own graph.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.events import KnowledgeCaptured
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.tools._arguments import (
    ArgumentError,
    check_object,
    failure,
    ok,
    optional_choice,
    optional_int,
    optional_str,
    required_str,
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.projections.knowledge import (
    Direction,
    Neighbour,
    NodeState,
    Path,
    Triple,
    neighbours,
    paths,
)
from turnledger.projections.queries import knowledge_graph

MAX_QUERY_DEPTH: Final = 6
"""The longest path ``knowledge_query`` searches, in edges."""

DEFAULT_QUERY_LIMIT: Final = 20
"""How many neighbours or paths are listed when ``limit`` is omitted."""

MAX_QUERY_LIMIT: Final = 100
"""The most neighbours or paths listed."""

_DIRECTIONS: Final[tuple[Direction, ...]] = ("both", "out", "in")

KNOWLEDGE_CAPTURE_SPEC: Final = ToolSpec(
    name="knowledge_capture",
    description=(
        "Record an explicit fact as a (subject, relation, object) triple in your "
        "knowledge graph, e.g. ('alice', 'works_at', 'acme'). Nothing is inferred: "
        "only what you capture is in the graph."
    ),
    parameters={
        "type": "object",
        "properties": {
            "subject": {"type": "string", "description": "The node the fact is about"},
            "relation": {"type": "string", "description": "The relation's name"},
            "object": {"type": "string", "description": "The node it points to"},
        },
        "required": ["subject", "relation", "object"],
    },
)

KNOWLEDGE_QUERY_SPEC: Final = ToolSpec(
    name="knowledge_query",
    description=(
        "Query your knowledge graph: the neighbours of a node (optionally one "
        "relation), or with 'target' the paths from the node to the target."
    ),
    parameters={
        "type": "object",
        "properties": {
            "node": {"type": "string", "description": "The node to start from"},
            "relation": {
                "type": "string",
                "description": "Only edges with this relation (neighbours only)",
            },
            "target": {
                "type": "string",
                "description": "Find the paths from 'node' to this node instead",
            },
            "direction": {
                "type": "string",
                "enum": list(_DIRECTIONS),
                "description": (
                    "Edges to follow: 'out' (node is the subject), 'in' (node is "
                    "the object) or 'both'. Default: 'both' for neighbours, 'out' "
                    "for paths."
                ),
            },
            "max_depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_QUERY_DEPTH,
                "description": "The longest path, in edges (paths only; default 4)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_QUERY_LIMIT,
                "description": f"Listed at most (default {DEFAULT_QUERY_LIMIT})",
            },
        },
        "required": ["node"],
    },
)


def format_triple(triple: Triple) -> str:
    """Return ``subject --relation--> object``."""
    return f"{triple.subject} --{triple.relation}--> {triple.object}"


def format_neighbour(node: str, neighbour: Neighbour) -> str:
    """Return a neighbour as the edge joining it to ``node``."""
    if neighbour.direction == "out":
        triple = Triple(
            subject=node, relation=neighbour.relation, object=neighbour.node
        )
    else:
        triple = Triple(
            subject=neighbour.node, relation=neighbour.relation, object=node
        )
    return format_triple(triple)


def format_path(path: Path) -> str:
    """Return a path as its edges joined by ``; ``."""
    return "; ".join(format_triple(triple) for triple in path) or "(same node)"


def _listing(header: str, lines: list[str], total: int) -> str:
    body = "".join(f"- {line}\n" for line in lines)
    more = "" if total <= len(lines) else f"... and {total - len(lines)} more\n"
    return f"{header}\n{body}{more}"


def load_graph(store: EventStore, agent: str) -> dict[str, NodeState]:
    """Return the agent's own graph (its captures, on its memory stream)."""
    return knowledge_graph(store, agent)


class KnowledgeCaptureTool:
    """``knowledge_capture {subject*, relation*, object*}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return KNOWLEDGE_CAPTURE_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Record the triple; ``Captured: subject --relation--> object``."""
        try:
            args = check_object(arguments)
            triple = Triple(
                subject=required_str(args, "subject"),
                relation=required_str(args, "relation"),
                object=required_str(args, "object"),
            )
        except ArgumentError as e:
            return failure(str(e))
        event = KnowledgeCaptured(
            agent=context.agent,
            subject=triple.subject,
            relation=triple.relation,
            object=triple.object,
            provenance=context.turn_id,
        )
        # A capture depends on no earlier state: retried as is on a conflict.
        stream = memory_stream_id(context.agent)
        try:
            await asyncio.to_thread(
                append_decided, context.store, stream, lambda _head: [event]
            )
        except LedgerError as e:
            return failure(f"Failed to capture knowledge: {e}")
        return ok(f"Captured: {format_triple(triple)}")


class KnowledgeQueryTool:
    """``knowledge_query {node*, relation?, target?, direction?, max_depth?, ...}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return KNOWLEDGE_QUERY_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Answer with neighbours or paths, from the agent's own graph only."""
        try:
            args = check_object(arguments)
            node = required_str(args, "node")
            target = optional_str(args, "target")
            limit = optional_int(
                args,
                "limit",
                default=DEFAULT_QUERY_LIMIT,
                minimum=1,
                maximum=MAX_QUERY_LIMIT,
            )
        except ArgumentError as e:
            return failure(str(e))
        try:
            graph = await asyncio.to_thread(load_graph, context.store, context.agent)
        except LedgerError as e:
            return failure(f"Failed to query knowledge: {e}")
        try:
            if target is None:
                return ok(_neighbours(graph, node, args, context.agent, limit))
            return ok(_paths(graph, (node, target), args, context.agent, limit))
        except ArgumentError as e:
            return failure(str(e))


def _direction(args: Mapping[str, Any], default: Direction) -> Direction:
    chosen = optional_choice(args, "direction", _DIRECTIONS, default)
    return next(d for d in _DIRECTIONS if d == chosen)


def _neighbours(
    graph: Mapping[str, NodeState],
    node: str,
    args: Mapping[str, Any],
    agent: str,
    limit: int,
) -> str:
    relation = optional_str(args, "relation")
    found = neighbours(
        graph, node, relation, agent=agent, direction=_direction(args, "both")
    )
    if not found:
        about = f" with relation '{relation}'" if relation else ""
        return f"No knowledge found about '{node}'{about}."
    lines = [format_neighbour(node, n) for n in found[:limit]]
    header = f"Found {len(found)} facts about '{node}':"
    return _listing(header, lines, len(found))


def _paths(
    graph: Mapping[str, NodeState],
    ends: tuple[str, str],
    args: Mapping[str, Any],
    agent: str,
    limit: int,
) -> str:
    if args.get("relation") is not None:
        msg = "Expected no 'relation' with 'target' (paths follow every relation)"
        raise ArgumentError(msg)
    source, target = ends
    depth = optional_int(
        args, "max_depth", default=4, minimum=1, maximum=MAX_QUERY_DEPTH
    )
    found = paths(
        graph,
        source,
        target,
        agent=agent,
        max_depth=depth,
        direction=_direction(args, "out"),
        limit=limit + 1,
    )
    if not found:
        return f"No path found from '{source}' to '{target}'."
    shown = found[:limit]
    more = "+" if len(found) > limit else ""
    header = f"Found {len(shown)}{more} paths from '{source}' to '{target}':"
    body = "".join(f"- {format_path(path)}\n" for path in shown)
    return f"{header}\n{body}"


def knowledge_tools() -> tuple[KnowledgeCaptureTool, KnowledgeQueryTool]:
    """Return the two knowledge tools."""
    return (KnowledgeCaptureTool(), KnowledgeQueryTool())
