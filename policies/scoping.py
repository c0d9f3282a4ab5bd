"""Agent scope: whose memory rows an agent may recall and forget (§3).

The allowlist of an agent is itself plus its configured ``read_memory_from``
peers. A caller's list of agents only ever narrows it (intersection, never
union). Read access never implies delete: an agent forgets only its own rows
(:func:`check_forget`). Configuration errors (self-reference, unknown peer, a
peer on another backend, an unknown backend kind) are raised once, at load.

Two ZeroClaw behaviours are fixed here: an unknown backend kind was silently
mapped to Markdown (here it is an error), and Markdown peer recall concatenated
own-then-peer results without re-sorting, so a weak own row beat a strong peer
row [quirk]; :func:`merge_agent_recall` sorts by score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.recall_scope import RecallCandidate, bound_recall_limit

BACKEND_KINDS: Final[frozenset[str]] = frozenset(
    {"sqlite", "lucid", "postgres", "qdrant", "markdown", "none"}
)
"""Every valid memory backend kind."""

DEFAULT_BACKEND_ALIAS: Final = "default"
"""The instance alias a bare backend kind refers to."""


class ScopeConfigError(PolicyError):
    """The agents' memory configuration is inconsistent."""


class AgentMemoryConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's memory settings, as configured.

    Attributes:
        backend: ``<kind>`` or ``<kind>.<alias>`` (e.g. ``sqlite`` or
            ``postgres.shared``).
        read_memory_from: The aliases of the peers whose rows it may read.
    """

    backend: str = "sqlite"
    read_memory_from: tuple[str, ...] = ()


class AgentScope(msgspec.Struct, frozen=True, kw_only=True):
    """The validated memory scope of one agent.

    Attributes:
        agent: The agent bound to this scope.
        backend: Its backend as ``<kind>.<alias>``.
        allowed: The allowlist: ``agent`` first, then its peers in configured
            order.
    """

    agent: str
    backend: str
    allowed: tuple[str, ...]


def normalize_backend(ref: str) -> str:
    """Return a backend reference as ``<kind>.<alias>``.

    Args:
        ref: ``<kind>`` or ``<kind>.<alias>``; the kind is case-insensitive.

    Returns:
        The reference with a lowercase kind and the alias ``default`` when none
        was given.

    Raises:
        ScopeConfigError: The kind is not one of :data:`BACKEND_KINDS`.
    """
    kind, _, alias = ref.strip().partition(".")
    kind = kind.lower()
    if kind not in BACKEND_KINDS:
        msg = (
            f"Expected a memory backend kind in {sorted(BACKEND_KINDS)}, found {ref!r}"
        )
        raise ScopeConfigError(msg)
    return f"{kind}.{alias or DEFAULT_BACKEND_ALIAS}"


def _check_peer(
    agent: str, backend: str, peer: str, agents: Mapping[str, AgentMemoryConfig]
) -> None:
    if peer == agent:
        msg = (
            f"Agent {agent!r} lists itself in read_memory_from;"
            " expected only other agents (an agent always sees its own rows)"
        )
        raise ScopeConfigError(msg)
    if peer not in agents:
        msg = (
            f"Agent {agent!r} reads memory from {peer!r};"
            " expected a configured agent, found none by that name"
        )
        raise ScopeConfigError(msg)
    peer_backend = normalize_backend(agents[peer].backend)
    if peer_backend != backend:
        msg = (
            f"Agent {agent!r} (backend {backend!r}) reads memory from {peer!r}"
            f" (backend {peer_backend!r}); expected the same backend"
        )
        raise ScopeConfigError(msg)


def build_agent_scope(
    agent: str, agents: Mapping[str, AgentMemoryConfig]
) -> AgentScope:
    """Validate one agent's memory configuration and return its scope.

    Args:
        agent: The agent alias.
        agents: Every configured agent's memory settings, by alias.

    Returns:
        The scope, peers de-duplicated in configured order.

    Raises:
        ScopeConfigError: ``agent`` is not configured, lists itself, lists an
            unknown peer or a peer on another backend, or uses the ``none``
            backend with peers; or a backend kind is unknown.
    """
    if agent not in agents:
        msg = f"Expected a configured agent, found {agent!r}"
        raise ScopeConfigError(msg)
    config = agents[agent]
    backend = normalize_backend(config.backend)
    peers = tuple(dict.fromkeys(config.read_memory_from))
    if peers and backend.startswith("none."):
        msg = (
            f"Agent {agent!r} uses the 'none' backend, which stores nothing;"
            f" expected no read_memory_from peers, found {list(peers)}"
        )
        raise ScopeConfigError(msg)
    for peer in peers:
        _check_peer(agent, backend, peer, agents)
    return AgentScope(agent=agent, backend=backend, allowed=(agent, *peers))


def recall_agents(
    scope: AgentScope, requested: Iterable[str] | None = None
) -> tuple[str, ...]:
    """Return the agents a recall may read: the allowlist, narrowed by the caller.

    Args:
        scope: The bound agent's scope.
        requested: The caller's agent list; ``None`` or empty means "my whole
            allowlist". Agents outside the allowlist are dropped, never added.

    Returns:
        The agents to filter on, in allowlist order; empty when the caller asked
        only for agents outside the allowlist (the recall then returns nothing).
    """
    if requested is None:
        return scope.allowed
    wanted = frozenset(requested)
    if not wanted:
        return scope.allowed
    return tuple(agent for agent in scope.allowed if agent in wanted)


AccessReason: TypeAlias = Literal["own", "cross_agent", "unattributed"]
"""Why an access was allowed or refused."""


class AccessDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Whether an agent may touch a row.

    Attributes:
        allowed: Whether it may.
        reason: Why (see :data:`AccessReason`).
        detail: A sentence naming the agents.
    """

    allowed: bool
    reason: AccessReason
    detail: str


def check_forget(scope: AgentScope, owner: str | None) -> AccessDecision:
    """Decide whether the bound agent may delete a row.

    The allowlist grants recall, never delete.

    Args:
        scope: The bound agent's scope.
        owner: The row's agent; ``None`` for an unattributed row.

    Returns:
        Allowed only for the bound agent's own rows.
    """
    if owner == scope.agent:
        return AccessDecision(
            allowed=True, reason="own", detail=f"{owner!r} owns the row"
        )
    if owner is None:
        return AccessDecision(
            allowed=False,
            reason="unattributed",
            detail=f"{scope.agent!r} refuses to forget an unattributed row",
        )
    return AccessDecision(
        allowed=False,
        reason="cross_agent",
        detail=f"{scope.agent!r} refuses to forget a row of {owner!r}",
    )


def _rank(candidate: RecallCandidate) -> tuple[bool, float]:
    score = candidate.score
    if score is None or math.isnan(score):
        return (True, 0.0)
    return (False, -score)


def merge_agent_recall(
    scope: AgentScope,
    results: Sequence[tuple[str, Sequence[RecallCandidate]]],
    *,
    limit: int,
) -> tuple[RecallCandidate, ...]:
    """Merge per-agent recall results (stores that recall one agent at a time).

    Args:
        scope: The bound agent's scope.
        results: ``(agent, candidates)`` pairs; agents outside the allowlist are
            dropped.
        limit: How many candidates to keep (``0`` means the 1,024 ceiling).

    Returns:
        The candidates sorted by score, highest first (unscored last, ties in
        input order), peer keys prefixed ``"[alias] "`` and every ``agent`` set.
    """
    merged: list[RecallCandidate] = []
    for agent, candidates in results:
        if agent not in scope.allowed:
            continue
        prefix = "" if agent == scope.agent else f"[{agent}] "
        merged.extend(
            msgspec.structs.replace(candidate, key=prefix + candidate.key, agent=agent)
            for candidate in candidates
        )
    merged.sort(key=_rank)
    return tuple(merged[: bound_recall_limit(limit)])
