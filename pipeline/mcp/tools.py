"""The MCP tools: memory (store, recall, forget, list) and ledger reads.

Each tool is declared once (:data:`TOOLS`): its arguments (:class:`Arg`) give
both the JSON schema a client lists and the check every call passes before
anything runs (:func:`check_arguments`): no unknown argument, every required
one present, each of its type, strings within their caps (and never empty but
a memory's content and a recall's query: a key, a category, a session or a
time that is empty names nothing, and is not read as the default), numbers
within their range. A call that fails the check is refused with
:class:`RefusedCallError`.

Every tool is answered by the service that owns it, scoped to the configured
agent: memory through :class:`~turnledger.pipeline.memory.MemoryService` (own
rows and the configured ``read_memory_from`` peers; writes as the agent),
sessions through :mod:`pipeline.sessions`, history as of a point through
:mod:`pipeline.timetravel.pointintime`, pairing audits through
:mod:`pipeline.audit`, costs through :mod:`projections.costs`. The ledger
tools see the sessions of the agent and its peers only. Answers are JSON text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from turnledger.ledger.errors import quote_value
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.config import Config
    from turnledger.pipeline.memory import MemoryService
    from turnledger.pipeline.sessions import SessionRef
    from turnledger.projections.costs import CostTotals

MAX_KEY_CHARS: Final = 256
"""The longest memory key, category, namespace, session or position accepted."""

MAX_CONTENT_CHARS: Final = 65_536
"""The longest memory content accepted, in characters."""

MAX_QUERY_CHARS: Final = 4_096
"""The longest recall query accepted, in characters."""

MAX_ROWS: Final = 500
"""The most rows a list answers with."""

ArgKind = Literal["string", "integer", "number"]


class RefusedCallError(PipelineError, ValueError):
    """A call refused before it ran; nothing was written.

    Its tool is unknown, an argument is bad or oversized, or it writes while
    writes are off.
    """


class ToolFailedError(PipelineError):
    """A call that ran and failed (an unknown session, an append-only backend)."""


class Arg(msgspec.Struct, frozen=True, kw_only=True):
    """One argument of a tool.

    Attributes:
        kind: Its JSON type.
        description: What it is (listed to the client).
        required: Whether it must be given.
        max_chars: A string's longest length, in characters.
        min_chars: A string's shortest length (1: never empty).
        minimum: A number's least value.
        maximum: A number's greatest value.
        choices: The values a string may take (any when empty).
    """

    kind: ArgKind
    description: str
    required: bool = False
    max_chars: int = MAX_KEY_CHARS
    min_chars: int = 1
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, object]:
        """The argument's JSON schema."""
        schema: dict[str, object] = {"type": self.kind, "description": self.description}
        if self.kind == "string":
            schema["maxLength"] = self.max_chars
            if self.min_chars:
                schema["minLength"] = self.min_chars
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


class ToolDef(msgspec.Struct, frozen=True, kw_only=True):
    """A tool: its name, what it does, its arguments, whether it writes."""

    name: str
    description: str
    args: dict[str, Arg]
    writes: bool = False

    def input_schema(self) -> dict[str, object]:
        """The JSON schema of its arguments (no others accepted)."""
        return {
            "type": "object",
            "properties": {name: arg.schema() for name, arg in self.args.items()},
            "required": [name for name, arg in self.args.items() if arg.required],
            "additionalProperties": False,
        }


_LIMIT = Arg(
    kind="integer",
    description="How many rows at most (default 5).",
    minimum=1,
    maximum=100,
)

TOOLS: Final[dict[str, ToolDef]] = {
    t.name: t
    for t in (
        ToolDef(
            name="memory_store",
            description=(
                "Store a fact, preference or note in the agent's long-term memory "
                "(recorded as a memory.stored event). Category 'core' (default) and "
                "'daily' are visible from every session; other categories stay in "
                "this MCP session."
            ),
            args={
                "key": Arg(
                    kind="string", description="The entry's key.", required=True
                ),
                "content": Arg(
                    kind="string",
                    description="What to remember.",
                    required=True,
                    max_chars=MAX_CONTENT_CHARS,
                    min_chars=0,
                ),
                "category": Arg(
                    kind="string", description="core, daily, conversation or a name."
                ),
                "namespace": Arg(
                    kind="string", description="An isolation tag (default 'default')."
                ),
                "importance": Arg(
                    kind="number", description="0 to 1.", minimum=0.0, maximum=1.0
                ),
            },
            writes=True,
        ),
        ToolDef(
            name="memory_recall",
            description=(
                "Recall the agent's (and its peers') memories for a query: the rows, "
                "best first, or with format 'block' exactly the [Memory context] "
                "block a turn of the agent would be given (empty when none qualifies)."
            ),
            args={
                "query": Arg(
                    kind="string",
                    description="Words to look for ('' or '*': recent memories).",
                    required=True,
                    max_chars=MAX_QUERY_CHARS,
                    min_chars=0,
                ),
                "limit": _LIMIT,
                "format": Arg(
                    kind="string",
                    description="rows (default) or block.",
                    choices=("rows", "block"),
                ),
            },
        ),
        ToolDef(
            name="memory_forget",
            description=(
                "Forget one of the agent's own memories by key (a memory.forgotten "
                "event); a peer's entry is refused."
            ),
            args={
                "key": Arg(kind="string", description="The entry's key.", required=True)
            },
            writes=True,
        ),
        ToolDef(
            name="memory_list",
            description="List the agent's (and its peers') memories, newest first.",
            args={
                "category": Arg(kind="string", description="Only this category."),
                "session": Arg(kind="string", description="Only this session's rows."),
                "limit": Arg(
                    kind="integer",
                    description=f"How many rows at most (default 50, max {MAX_ROWS}).",
                    minimum=1,
                    maximum=MAX_ROWS,
                ),
            },
        ),
        ToolDef(
            name="ledger_sessions",
            description=(
                "List the sessions of the agent and its peers "
                "(agent, session, channel, stream)."
            ),
            args={},
        ),
        ToolDef(
            name="ledger_history",
            description=(
                "A session's provider-visible history (the messages a provider is sent "
                "next), now or as of 'at': a global position, a turn id or an ISO time."
            ),
            args={
                "session": Arg(
                    kind="string",
                    description="The session key or stream id.",
                    required=True,
                ),
                "at": Arg(
                    kind="string", description="A position, a turn id or an ISO time."
                ),
            },
        ),
        ToolDef(
            name="ledger_audit",
            description=(
                "Audit tool-call pairing of one session, or of every session of the "
                "agent and its peers: counts and the unpaired calls and results."
            ),
            args={
                "session": Arg(
                    kind="string", description="The session key or stream id."
                )
            },
        ),
        ToolDef(
            name="ledger_costs",
            description=(
                "Model call costs of the agent's sessions: tokens and USD grouped by "
                "model, agent, session or day, most costly first."
            ),
            args={
                "by": Arg(
                    kind="string",
                    description="model (default), agent, session or day.",
                    choices=("model", "agent", "session", "day"),
                ),
                "since": Arg(
                    kind="string", description="Only calls at or after (ISO)."
                ),
            },
        ),
    )
}
"""Every tool, by name."""


def check_arguments(
    name: str, arguments: Mapping[str, Any] | None, *, allow_writes: bool
) -> dict[str, Any]:
    """Return a call's arguments when the call may run.

    Raises:
        RefusedCallError: The tool is unknown, writes while they are off, or an
            argument is unknown, missing, of another type or out of bounds.
    """
    tool = TOOLS.get(name)
    if tool is None:
        msg = f"Expected one of the tools {', '.join(TOOLS)}, found {quote_value(name)}"
        raise RefusedCallError(msg)
    if tool.writes and not allow_writes:
        msg = (
            f"Expected a server started with --allow-writes to call {name}, "
            "found writes off (nothing was written)"
        )
        raise RefusedCallError(msg)
    given = dict(arguments or {})
    unknown = [key for key in given if key not in tool.args]
    if unknown:
        msg = (
            f"Expected arguments of {name} among {', '.join(tool.args) or 'none'}, "
            f"found {quote_value(unknown[0])}"
        )
        raise RefusedCallError(msg)
    for key, arg in tool.args.items():
        if key not in given or given[key] is None:
            if arg.required:
                msg = f"Expected argument {key!r} of {name}, found none"
                raise RefusedCallError(msg)
            given.pop(key, None)
            continue
        _check(name, key, arg, given[key])
    return given


def _check(tool: str, key: str, arg: Arg, value: object) -> None:
    where = f"argument {key!r} of {tool}"
    if arg.kind == "string":
        if not isinstance(value, str):
            msg = f"Expected {where} to be a string, found {type(value).__name__}"
            raise RefusedCallError(msg)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            msg = (
                f"Expected {where} to be valid Unicode, found the lone surrogate "
                f"U+{ord(value[e.start]):04X} at character {e.start}"
            )
            raise RefusedCallError(msg) from None
        if len(value) < arg.min_chars:
            msg = f"Expected {where} to be a non-empty string, found an empty one"
            raise RefusedCallError(msg)
        if len(value) > arg.max_chars:
            msg = (
                f"Expected {where} of at most {arg.max_chars} characters, "
                f"found {len(value)}"
            )
            raise RefusedCallError(msg)
        if arg.choices and value not in arg.choices:
            listed = ", ".join(arg.choices)
            msg = f"Expected {where} among {listed}, found {quote_value(value)}"
            raise RefusedCallError(msg)
        return
    numeric = int if arg.kind == "integer" else (int, float)
    if isinstance(value, bool) or not isinstance(value, numeric):
        msg = f"Expected {where} to be an {arg.kind}, found {type(value).__name__}"
        raise RefusedCallError(msg)
    low = arg.minimum if arg.minimum is not None else float("-inf")
    high = arg.maximum if arg.maximum is not None else float("inf")
    if not low <= value <= high:
        msg = (
            f"Expected {where} from {arg.minimum} to {arg.maximum}, "
            f"found {quote_value(value)}"
        )
        raise RefusedCallError(msg)


class ToolServices:
    """What the tools run on: the ledger, the memory service, the agent's scope.

    Args:
        store: The ledger.
        memory: The memory service.
        config: The configuration (the agent's peers).
        agent: The agent every tool is scoped to.
    """

    def __init__(
        self, *, store: EventStore, memory: MemoryService, config: Config, agent: str
    ) -> None:
        self.store = store
        self.memory = memory
        self.agent = agent
        self.allowed = frozenset(config.scope(agent).allowed)

    def run(self, name: str, args: Mapping[str, Any], session_key: str) -> str:
        """Run a checked call; return its answer as JSON text.

        Raises:
            ToolFailedError: The call ran and failed.
        """
        answer = _HANDLERS[name](self, args, session_key)
        return msgspec.json.encode(answer).decode()

    def sessions(self) -> list[SessionRef]:
        """The sessions of the agent and its peers, in the order opened."""
        from turnledger.pipeline.sessions import list_sessions  # noqa: PLC0415

        return [s for s in list_sessions(self.store) if s.agent in self.allowed]

    def session(self, target: str) -> SessionRef:
        """The one session of the agent or its peers named by key or stream id.

        Raises:
            ToolFailedError: None is, or more than one is.
        """
        found = [s for s in self.sessions() if target in (str(s.stream_id), s.key)]
        if len(found) == 1:
            return found[0]
        if not found:
            msg = (
                f"Expected a session of agent {self.agent!r} or its peers, "
                f"found none named {quote_value(target)}"
            )
        else:
            msg = (
                f"Expected one session named {quote_value(target)}, found {len(found)}"
            )
        raise ToolFailedError(msg)


def _entry_row(entry: object) -> dict[str, object]:
    row: dict[str, object] = msgspec.to_builtins(entry)
    row.pop("id", None)
    return row


def _store(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    from turnledger.projections.memory.protocol import (  # noqa: PLC0415
        DURABLE_GLOBAL_CATEGORIES,
        Unsupported,
    )

    category = args.get("category", "core")
    stored = services.memory.store_entry(
        services.agent,
        args["key"],
        args["content"],
        category=category,
        session=None if category in DURABLE_GLOBAL_CATEGORIES else session,
        source="tool",
        namespace=args.get("namespace", "default"),
        importance=args.get("importance"),
    )
    if isinstance(stored, Unsupported):
        msg = f"Expected a memory backend that stores, found: {stored.reason}"
        raise ToolFailedError(msg)
    return {
        "stored": stored.key,
        "category": stored.category,
        "session": stored.session,
    }


def _recall(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    query = args["query"]
    if args.get("format") == "block":
        block = services.memory.context_block(services.agent, query, session=session)
        return {"block": block}
    entries = services.memory.recall(
        services.agent, query, session=session, limit=args.get("limit", 5)
    )
    return {"rows": [_entry_row(e) for e in entries]}


def _forget(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    from turnledger.projections.memory.protocol import Unsupported  # noqa: PLC0415

    del session
    forgotten = services.memory.forget(services.agent, args["key"], source="tool")
    if isinstance(forgotten, Unsupported):
        msg = f"Expected a memory backend that forgets, found: {forgotten.reason}"
        raise ToolFailedError(msg)
    return {"forgotten": forgotten, "key": args["key"]}


def _list(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    del session
    entries = services.memory.list(
        services.agent, category=args.get("category"), session=args.get("session")
    )
    limit = args.get("limit", 50)
    return {"rows": [_entry_row(e) for e in entries[:limit]], "total": len(entries)}


def _sessions(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    del args, session
    return [
        {
            "agent": s.agent,
            "session": s.key,
            "channel": s.channel,
            "stream": str(s.stream_id),
        }
        for s in services.sessions()
    ]


def _history(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    from turnledger.pipeline.sessions import load_history  # noqa: PLC0415
    from turnledger.pipeline.timetravel.pointintime import resolve_at  # noqa: PLC0415
    from turnledger.policies.structured_scrubbing import scrub_message  # noqa: PLC0415
    from turnledger.projections.history.read import provider_messages  # noqa: PLC0415
    from turnledger.projections.lineage import lineage  # noqa: PLC0415

    del session
    ref = services.session(args["session"])
    text = args.get("at")
    at = (
        None
        if text is None
        else resolve_at(lineage(services.store, ref.stream_id), text)
    )
    state = load_history(services.store, ref.stream_id, at=at)
    return {
        "agent": ref.agent,
        "session": ref.key,
        "at": at,
        "messages": [scrub_message(m) for m in provider_messages(state)],
    }


def _audit(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    from turnledger.pipeline.audit import audit_sessions  # noqa: PLC0415

    del session
    target = args.get("session")
    refs = services.sessions() if target is None else [services.session(target)]
    return audit_sessions(services.store, refs)


def _costs(services: ToolServices, args: Mapping[str, Any], session: str) -> object:
    from turnledger.ledger.events import (  # noqa: PLC0415
        ModelCalled,
        SessionForked,
        SessionOpened,
    )
    from turnledger.pipeline.timetravel.pointintime import parse_time  # noqa: PLC0415
    from turnledger.projections.costs import summarize_costs  # noqa: PLC0415

    del session
    since = None
    if (text := args.get("since")) is not None and (since := parse_time(text)) is None:
        msg = f"Expected 'since' as an ISO date or date-time, found {quote_value(text)}"
        raise ToolFailedError(msg)
    by = args.get("by", "model")
    events = services.store.iter_all(types=(SessionOpened, SessionForked, ModelCalled))
    total, rows = summarize_costs(events, by=by, agent=services.agent, since=since)
    return {
        "by": by,
        "total": _totals(total),
        "rows": [{"group": r.group, **_totals(r.totals)} for r in rows],
    }


def _totals(totals: CostTotals) -> dict[str, object]:
    """A cost total's fields and ``total_tokens``, as ``turnledger costs --json``."""
    found: dict[str, object] = msgspec.to_builtins(totals)
    return {**found, "total_tokens": totals.total_tokens}


_HANDLERS: Final[
    dict[str, Callable[[ToolServices, Mapping[str, Any], str], object]]
] = {
    "memory_store": _store,
    "memory_recall": _recall,
    "memory_forget": _forget,
    "memory_list": _list,
    "ledger_sessions": _sessions,
    "ledger_history": _history,
    "ledger_audit": _audit,
    "ledger_costs": _costs,
}
