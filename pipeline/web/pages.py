"""The HTML pages: sessions, a session's timeline, memory, costs.

Every page is rendered on the server from the read functions of
:mod:`pipeline.web.queries` (over the projections' query APIs); a rendered page
is cached under the ledger version it shows, so an unchanged ledger is not read
twice. A fork's session page shows its source's events up to the fork point
first (marked as the source prefix), then its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import tag_of
from turnledger.pipeline.export import EXPORT_FORMATS
from turnledger.pipeline.memory import MemoryAccessError
from turnledger.pipeline.sessions import SessionRef
from turnledger.pipeline.web.queries import (
    PAGE_EVENTS,
    SessionData,
    filter_sessions,
    memory_histories,
)
from turnledger.pipeline.web.state import WebState
from turnledger.policies.messages import BREADCRUMB_TEXT
from turnledger.projections.costs import grand_total, totals
from turnledger.projections.queries import cost_records

SESSIONS_PER_PAGE: Final = 50
"""Rows per page of the sessions list."""


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the sessions list."""

    stream_id: str
    agent: str
    key: str
    channel: str
    turns: int
    events: int
    last_activity: str
    cost_usd: float
    violations: int
    fork_of: str = ""
    fork_at: int = 0


def _row(data: SessionData) -> SessionRow:
    state = data.state
    forked = data.forked
    last = data.events[-1].recorded_at.astimezone(UTC) if data.events else None
    return SessionRow(
        stream_id=str(data.ref.stream_id),
        agent=data.ref.agent,
        key=data.ref.key,
        channel=data.ref.channel,
        turns=state.turns_completed + len(state.turns_failed),
        events=len(data.events),
        last_activity=f"{last:%Y-%m-%d %H:%M:%S}" if last else "",
        cost_usd=data.costs.cost_usd,
        violations=sum(len(v) for v in data.violations.values()),
        fork_of=forked.source_stream if forked else "",
        fork_at=forked.source_position if forked else 0,
    )


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name, "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else default


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status)


def _not_found(state: WebState, what: str) -> HTMLResponse:
    return _html(state.render("error.html", title="Not found", message=what), 404)


def routes(state: WebState) -> list[Route]:
    """The page routes over ``state``."""

    def sessions_page(request: Request) -> Response:
        agent = request.query_params.get("agent", "")
        text = request.query_params.get("q", "")
        page = max(1, _int(request, "page", 1))
        key = ("sessions", state.store.max_position(), agent, text, page)
        return _html(
            state.cached_page(key, lambda: _sessions(state, agent, text, page))
        )

    def session_page(request: Request) -> Response:
        ref = session_ref(state, request.path_params["stream"])
        if ref is None:
            return _not_found(state, "No session with that id.")
        data = state.cache.data(ref)
        page = min(max(1, _int(request, "page", 1)), data.pages)
        key = ("session", str(ref.stream_id), data.version, page)
        return _html(state.cached_page(key, lambda: _timeline(state, data, page)))

    def memory_page(request: Request) -> Response:
        agents = sorted(
            {r.agent for r in state.cache.sessions()}
            | set(state.settings.config.agents)
        )
        agent = request.query_params.get("agent", "") or (agents[0] if agents else "")
        query = request.query_params.get("q", "")
        return _html(_memory(state, agents, agent, query))

    def costs_page(request: Request) -> Response:
        del request
        key = ("costs", state.store.max_position())
        return _html(state.cached_page(key, lambda: _costs(state)))

    return [
        Route("/", state.gated(sessions_page)),
        Route("/sessions/{stream}", state.gated(session_page)),
        Route("/memory", state.gated(memory_page)),
        Route("/costs", state.gated(costs_page)),
    ]


def session_ref(state: WebState, text: str) -> SessionRef | None:
    """The session a path names by stream id, if there is one."""
    try:
        stream_id = uuid.UUID(text)
    except ValueError:
        return None
    return state.cache.ref(stream_id)


def _sessions(state: WebState, agent: str, text: str, page: int) -> str:
    refs = state.cache.sessions()
    chosen = filter_sessions(refs, agent=agent, text=text)
    pages = max(1, -(-len(chosen) // SESSIONS_PER_PAGE))
    page = min(page, pages)
    shown = chosen[(page - 1) * SESSIONS_PER_PAGE : page * SESSIONS_PER_PAGE]
    rows = [_row(state.cache.data(r)) for r in shown]
    return state.render(
        "sessions.html",
        title="Sessions",
        rows=rows,
        agents=sorted({r.agent for r in refs}),
        agent=agent,
        q=text,
        page=page,
        pages=pages,
        total=len(chosen),
    )


class TurnGroup(msgspec.Struct, frozen=True, kw_only=True):
    """The events of one turn on a timeline page."""

    turn_id: str
    events: tuple[Recorded, ...]


def _groups(events: Sequence[Recorded]) -> list[TurnGroup]:
    groups: list[TurnGroup] = []
    current: list[Recorded] = []
    turn = None
    for r in events:
        this = str(getattr(r.event, "turn_id", ""))
        if current and this != turn:
            groups.append(TurnGroup(turn_id=turn or "", events=tuple(current)))
            current = []
        turn = this
        current.append(r)
    if current:
        groups.append(TurnGroup(turn_id=turn or "", events=tuple(current)))
    return groups


def _timeline(state: WebState, data: SessionData, page: int) -> str:
    start = (page - 1) * PAGE_EVENTS
    shown = data.events[start : start + PAGE_EVENTS]
    return state.render(
        "session.html",
        title=f"Session {data.ref.agent}/{data.ref.key}",
        ref=data.ref,
        stream=str(data.ref.stream_id),
        data=data,
        groups=_groups(shown),
        page=page,
        pages=data.pages,
        tag_of=lambda r: tag_of(type(r.event)),
        breadcrumb=BREADCRUMB_TEXT,
        formats=EXPORT_FORMATS,
        head_version=data.version,
        count=len(data.events),
    )


def _memory(state: WebState, agents: list[str], agent: str, query: str) -> str:
    entries: list[Any] = []
    block = ""
    problem = ""
    if agent:
        with state.memory() as service:
            try:
                entries = service.list(agent)
                if query:
                    block = service.context_block(agent, query)
            except MemoryAccessError as e:
                problem = str(e)
    live = {(e.agent, e.key): e for e in entries}
    histories = memory_histories(state.cache, agent) if agent else []
    pages = {
        h.key: {
            f.position: state.cache.data(r).page_of(f.turn_version)
            for f in h.facts
            if f.stream_id and (r := state.cache.ref(uuid.UUID(f.stream_id)))
        }
        for h in histories
    }
    return state.render(
        "memory.html",
        title=f"Memory of {agent}" if agent else "Memory",
        agents=agents,
        agent=agent,
        entries=entries,
        live=live,
        histories=histories,
        pages=pages,
        query=query,
        block=block,
        problem=problem,
    )


def _costs(state: WebState) -> str:
    states = cost_records(state.store)
    days = totals(states, "day")
    budgets = state.settings.config.budgets
    daily_limit = budgets.daily_limit_usd if budgets.enabled else None
    peak = max([t.cost_usd for t in days.values()] + [daily_limit or 0.0, 1e-9])
    bars = [
        {
            "day": day,
            "cost": t.cost_usd,
            "height": round(160 * t.cost_usd / peak, 2),
            "x": 40 + i * 48,
        }
        for i, (day, t) in enumerate(days.items())
    ]
    limit_y = None if daily_limit is None else round(180 - 160 * daily_limit / peak, 2)
    return state.render(
        "costs.html",
        title="Costs",
        days=days,
        models=totals(states, "model"),
        agents=totals(states, "agent"),
        total=grand_total(states),
        bars=bars,
        width=max(320, 80 + 48 * len(bars)),
        limit_y=limit_y,
        budgets=budgets,
        now=datetime.now(UTC),
    )
