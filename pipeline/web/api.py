"""JSON for the scrubber and the live view, and the actions of ``--allow-writes``.

The scrubber reads a session as of a position with the functions of
``turnledger history`` and ``turnledger replay --at`` (the fold of the prefix);
the live view sends new events through the observer rule (ids, counts, scrubbed
bounded summaries: never raw payloads). Export is ``turnledger export``'s
shaping; forget is ``turnledger memory forget``.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from turnledger.ledger.errors import LedgerError, quote_value
from turnledger.ledger.events import tag_of
from turnledger.ledger.numbers import parse_whole
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.memory import MemoryAccessError
from turnledger.pipeline.sessions import SessionRef, load_history
from turnledger.pipeline.timetravel import (
    TimeTravelError,
    fork_session,
    rewind_session,
)
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.pipeline.web.pages import session_ref
from turnledger.pipeline.web.state import WebState
from turnledger.policies.messages import Message
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.structured_scrubbing import scrub_json_text
from turnledger.projections.costs import grand_total
from turnledger.projections.history.read import provider_messages
from turnledger.projections.memory.protocol import Unsupported
from turnledger.projections.observer.export import render_item
from turnledger.projections.observer.items import observe
from turnledger.projections.queries import cost_records
from turnledger.projections.record import memory_keys_at, recall_after, recall_before

_JSON = msgspec.json.Encoder()


def _json(value: Any, status: int = 200) -> Response:
    return Response(
        _JSON.encode(value), status_code=status, media_type="application/json"
    )


def _message(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "kind": m.kind,
        "text": scrub_text(m.text),
        "tool_calls": [
            {
                "id": scrub_text(c.id),
                "name": scrub_text(c.name),
                "arguments": scrub_json_text(c.arguments),
            }
            for c in m.tool_calls
        ],
        "tool_results": [
            {
                "call_id": scrub_text(r.call_id),
                "name": None if r.name is None else scrub_text(r.name),
                "content": scrub_text(r.content),
                "is_error": r.is_error,
            }
            for r in m.tool_results
        ],
    }


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin") or request.headers.get("referer") or ""
    return bool(origin) and urlsplit(origin).netloc == request.headers.get("host", "")


def _at_route(state: WebState, request: Request) -> Response:
    ref = session_ref(state, request.path_params["stream"])
    if ref is None:
        return _json({"error": "no such session"}, 404)
    data = state.cache.data(ref)
    raw = request.query_params.get("index", "")
    if not data.events or not (raw.isascii() and raw.isdigit()):
        return _json(
            {"error": f"Expected an index from 0, found {quote_value(raw)}"}, 400
        )
    last = len(data.events) - 1
    index = parse_whole(raw, last)
    if index is None:  # a number beyond the last: the last
        index = last
    position = data.events[index].position
    history = load_history(state.store, ref.stream_id, at=position)
    report = replay_session(state.store, ref.stream_id, at=position)
    costs = grand_total(cost_records(state.store, stream_id=ref.stream_id, at=position))
    recall = recall_before(data.events, position)
    upcoming = recall_after(data.events, position)
    return _json(
        {
            "index": index,
            "position": position,
            "version": data.events[index].version,
            "type": tag_of(type(data.events[index].event)),
            "messages": [_message(m) for m in provider_messages(history)],
            "replay": {
                "events": report.events,
                "messages": report.messages,
                "turns_completed": report.turns_completed,
                "ok": report.ok,
            },
            "memory": {
                "keys": [
                    scrub_text(key)
                    for key in memory_keys_at(state.store, ref.agent, position)
                ],
                "recalled": [
                    {"key": scrub_text(e.key), "score": e.score}
                    for e in (recall.entries if recall else ())
                ],
                "injected_chars": recall.injected_chars if recall else 0,
                "next": None
                if upcoming is None
                else {
                    "turn_id": upcoming.turn_id,
                    "recalled": [
                        {"key": scrub_text(e.key), "score": e.score}
                        for e in upcoming.entries
                    ],
                    "injected_chars": upcoming.injected_chars,
                },
            },
            "costs": {
                "calls": costs.calls,
                "input_tokens": costs.input_tokens,
                "output_tokens": costs.output_tokens,
                "cost_usd": costs.cost_usd,
            },
        }
    )


def _events_route(state: WebState, request: Request) -> Response:
    ref = session_ref(state, request.path_params["stream"])
    if ref is None:
        return _json({"error": "no such session"}, 404)
    raw = request.query_params.get("after", "0")
    after = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else 0
    data = state.cache.data(ref)
    fresh = [r for r in data.events[after:] if r.version > after]
    return _json(
        {
            "head": data.version,
            "events": [
                {
                    "version": r.version,
                    "type": tag_of(type(r.event)),
                    "items": [render_item(i) for i in observe(r)],
                }
                for r in fresh[:500]
            ],
        }
    )


def _export_route(state: WebState, request: Request) -> Response:
    if not state.settings.allow_writes:
        return PlainTextResponse("Actions need turnledger serve --allow-writes", 403)
    ref = session_ref(state, request.path_params["stream"])
    fmt = request.query_params.get("format", "")
    if ref is None or fmt not in EXPORT_FORMATS:
        return PlainTextResponse(
            f"Expected a session and a format in {list(EXPORT_FORMATS)}, "
            f"found {quote_value(fmt)}",
            400,
        )
    history = load_history(state.store, ref.stream_id)
    prepared = prepare_history(provider_messages(history), ExportOptions())
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{ref.agent}-{ref.key}-{fmt}.json")
    return Response(
        _JSON.encode(render(prepared.messages, fmt)),
        media_type="application/json",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


async def _forget_route(state: WebState, request: Request) -> Response:
    if not state.settings.allow_writes:
        return PlainTextResponse("Actions need turnledger serve --allow-writes", 403)
    if not _same_origin(request):
        return PlainTextResponse("Expected a request from this app's own pages", 403)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    agent = (form.get("agent") or [""])[0]
    key = (form.get("key") or [""])[0]
    if not agent or not key:
        return PlainTextResponse("Expected an agent and a key to forget", 400)
    try:
        outcome = await run_in_threadpool(_forget, state, agent, key)
    except MemoryAccessError as e:
        return PlainTextResponse(str(e), 403)
    if isinstance(outcome, Unsupported):
        return PlainTextResponse(f"Unsupported: {outcome.reason}", 409)
    if not outcome:
        return PlainTextResponse(f"No memory found with key: {key}", 404)
    return RedirectResponse(f"/memory?agent={quote(agent)}", status_code=303)


async def _action_form(
    state: WebState, request: Request
) -> tuple[SessionRef, dict[str, str]] | Response:
    """Check an action may run; return the session and its form fields."""
    if not state.settings.allow_writes:
        return PlainTextResponse("Actions need turnledger serve --allow-writes", 403)
    if not _same_origin(request):
        return PlainTextResponse("Expected a request from this app's own pages", 403)
    ref = session_ref(state, request.path_params["stream"])
    if ref is None:
        return PlainTextResponse("Expected a session of this ledger", 404)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    return ref, {k: v[0] for k, v in form.items() if v}


async def _fork_route(state: WebState, request: Request) -> Response:
    checked = await _action_form(state, request)
    if isinstance(checked, Response):
        return checked
    ref, form = checked
    try:
        report = await run_in_threadpool(
            fork_session, state.store, ref, form.get("at", ""), new_key=form.get("as")
        )
    except (TimeTravelError, LedgerError) as e:
        return PlainTextResponse(str(e), 400)
    return RedirectResponse(f"/sessions/{report.stream}", status_code=303)


async def _rewind_route(state: WebState, request: Request) -> Response:
    checked = await _action_form(state, request)
    if isinstance(checked, Response):
        return checked
    ref, form = checked
    rule = form.get("memory", "keep")
    if rule not in ("keep", "supersede"):
        return PlainTextResponse(
            f"Expected memory keep or supersede, found {quote_value(rule)}", 400
        )
    try:
        await run_in_threadpool(
            partial(
                rewind_session,
                memory_rule="supersede" if rule == "supersede" else "keep",
            ),
            state.store,
            ref,
            form.get("to", ""),
        )
    except (TimeTravelError, LedgerError) as e:
        return PlainTextResponse(str(e), 400)
    return RedirectResponse(f"/sessions/{ref.stream_id}", status_code=303)


def routes(state: WebState) -> list[Route]:
    """The JSON and action routes over ``state``."""
    return [
        Route("/api/sessions/{stream}/at", state.gated(partial(_at_route, state))),
        Route(
            "/api/sessions/{stream}/events",
            state.gated(partial(_events_route, state)),
        ),
        Route("/sessions/{stream}/export", state.gated(partial(_export_route, state))),
        Route("/memory/forget", partial(_forget_route, state), methods=["POST"]),
        Route(
            "/sessions/{stream}/fork",
            partial(_fork_route, state),
            methods=["POST"],
        ),
        Route(
            "/sessions/{stream}/rewind",
            partial(_rewind_route, state),
            methods=["POST"],
        ),
    ]


def _forget(state: WebState, agent: str, key: str) -> bool | Unsupported:
    with state.readers, state.memory() as service:
        return service.forget(agent, key)
