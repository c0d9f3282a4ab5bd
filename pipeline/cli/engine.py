"""Engine commands: run (scripted turns), chat (interactive), observe."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    count,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli.projections import open_views

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.config import Config
    from turnledger.pipeline.providers.base import Provider


async def _turns(
    store: EventStore,
    cfg: Config,
    provider: Provider,
    args: argparse.Namespace,
    inputs: Iterable[str],
) -> int:
    from turnledger.pipeline.bootstrap import bootstrap

    failures = 0
    consolidate = args.agent if getattr(args, "consolidate", False) else None
    try:
        async with bootstrap(
            cfg,
            provider=provider,
            store=store,
            ledger_url=target(args),
            views=getattr(args, "views", None),
            consolidate_agent=consolidate,
        ) as runtime:
            for text in inputs:
                if not text.strip():
                    continue
                outcome = await runtime.engine.run_turn(
                    args.agent, args.session, text, origin=args.origin, channel="cli"
                )
                if outcome.completed:
                    print(outcome.answer, flush=True)
                else:
                    failures += 1
                    print(
                        f"[turn {outcome.turn_id} failed: {outcome.failure}]",
                        flush=True,
                    )
    finally:
        await provider.aclose()
    return 0 if failures == 0 else 1


def cmd_run(args: argparse.Namespace) -> int:
    """Run scripted turns: the model plays SCRIPT, the user says each --turn.

    With no --turn, each line of standard input is one user turn. Exit 1 when a
    turn failed (provider error, iteration limit, budget, a model response that
    cannot be recorded: nothing of it is).

    Example: turnledger run script.toml --agent ops --turn "When is the release?"
    """
    import asyncio

    from turnledger.pipeline.providers.scripted import ScriptedProvider

    cfg = config(args)
    limit = cfg.runtime.max_input_bytes
    provider = ScriptedProvider.from_file(args.script, max_bytes=limit)
    inputs = args.turn or [line.rstrip("\n") for line in sys.stdin]
    with open_ledger(args) as store:
        return asyncio.run(_turns(store, cfg, provider, args, inputs))


def cmd_chat(args: argparse.Namespace) -> int:
    """Chat with a configured provider; one line of input is one turn.

    The provider comes from --provider, else the agent's ``provider`` in
    turnledger.toml, else the only one configured.

    Example: turnledger chat --agent ops --session mine
    """
    import asyncio

    from turnledger.ledger.ids import check_identifier
    from turnledger.pipeline.providers.factory import make_provider

    cfg = config(args)
    name = args.provider or cfg.agent(args.agent).provider
    if name is None and len(cfg.providers) == 1:
        name = next(iter(cfg.providers))
    if name is None or name not in cfg.providers:
        msg = (
            "Expected a provider: add [providers.NAME] to turnledger.toml and pass "
            f"--provider NAME (configured: {sorted(cfg.providers) or 'none'})"
        )
        raise UsageError(msg)
    spec = cfg.providers[name]
    provider = make_provider(
        spec.kind,
        model=spec.model,
        base_url=spec.base_url,
        api_key_env=spec.api_key_env,
        script=spec.script,
        timeout=spec.timeout,
        max_bytes=cfg.runtime.max_input_bytes,
    )
    # The names are checked before they are shown (a control character would
    # reach the terminal, and the refusal must stay the one line printed).
    check_identifier("agent", args.agent)
    check_identifier("session_key", args.session)
    print(
        f"chatting as {args.agent} in session {args.session}; end with Ctrl-D",
        file=sys.stderr,
    )
    with open_ledger(args) as store:
        return asyncio.run(_turns(store, cfg, provider, args, sys.stdin))


def cmd_observe(args: argparse.Namespace) -> int:
    """Print the observer view: bounded, scrubbed events (ids, counts, durations).

    Without SESSION, every stream's newest items; with SESSION, that session's
    (a fork's include its source's up to the fork point, as history does).
    With --json, one JSON object per line. Never raw payloads.

    Example: turnledger observe demo-1 --json --limit 50
    """
    from turnledger.pipeline.sessions import resolve_session
    from turnledger.projections.lineage import session_timeline
    from turnledger.projections.observer import OBSERVER_VIEW, timeline
    from turnledger.projections.observer.export import render_item
    from turnledger.projections.queries import ReadModels

    with open_ledger(args) as store:
        if args.session is not None:
            ref = resolve_session(store, args.session, agent=args.agent)
            items = session_timeline(store, ref.stream_id, limit=args.limit)
        else:
            views = open_views(args, store)
            try:
                states = ReadModels(store, views).states(OBSERVER_VIEW)
            finally:
                views.close()
            items = timeline(states, agent=args.agent, limit=args.limit)
    for item in items:
        fields = render_item(item)
        if args.json:
            print_json(fields)
            continue
        event = fields.pop("event")
        position = fields.pop("position")
        fields.pop("at", None)
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        print(f"{position:>8} {event:<28} {detail}")
    return 0


COMMANDS: Final[dict[str, Command]] = {
    "run": cmd_run,
    "chat": cmd_chat,
    "observe": cmd_observe,
}

_ORIGINS: Final = [
    "interactive",
    "channel",
    "agent_direct",
    "cron",
    "daemon",
    "sub_turn",
]


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add an engine command's options."""
    if name == "run":
        p.add_argument("script", help="a provider script (TOML or JSON)")
        p.add_argument("--turn", action="append", default=[], help="a user turn")
    if name == "chat":
        p.add_argument("--provider", default=None, help="a [providers.NAME] entry")
        p.add_argument(
            "--consolidate",
            action="store_true",
            help="after each turn, one provider call consolidates it into memory",
        )
    if name in ("run", "chat"):
        p.add_argument("--agent", default="default")
        p.add_argument("--session", default="cli")
        p.add_argument("--origin", default="interactive", choices=_ORIGINS)
    if name == "observe":
        p.add_argument(
            "session", nargs="?", default=None, help="only this session (its lineage)"
        )
        p.add_argument("--agent", default=None, help="only this agent's sessions")
        p.add_argument("--limit", type=count, default=200, help="the newest N items")
        p.add_argument("--json", action="store_true", help="one JSON object per line")
