"""Pydantic AI: turnledger's history policies, and ledger sessions as conversations.

``TurnledgerHistoryProcessor`` goes in an agent's capabilities
(``Agent(model, capabilities=[processor.capability()])``, pydantic-ai's
``ProcessHistory``). Before
each model request it applies turnledger's policies to the history the request
is built from: whole-turn trimming to a token budget with its breadcrumb
(:func:`~turnledger.policies.trim_to_budget`), tool-result bounding
(:func:`~turnledger.policies.bound_tool_result`), then pairing repair (a tool
return without its call is dropped; a call without its return gets the
interrupted result, :data:`~turnledger.policies.pairing_repair.INTERRUPTED_TEXT`). Each
trim is recorded as a ``history.trimmed`` event on the conversation's ledger
stream (a trim repeated on the same history, as on each request of one run,
is recorded once). The stored conversation is
not touched: the trim shapes the request, the ledger keeps everything.

:func:`conversation_from_session` reads any ledger session (written by the
OpenAI Agents SDK session, the ADK service, the turn engine, an import...) as
Pydantic AI messages: its provider-visible history, mapped message by message.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Final

from pydantic_ai import RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from turnledger.adapters._ledger import LedgerHandle, LedgerTarget
from turnledger.adapters.pydantic_ai.events import FRAMEWORK
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event, HistoryTrimmed, SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.policies import bound_tool_result, make_message, trim_to_budget
from turnledger.policies.messages import BREADCRUMB_TEXT, Message, ToolCall, ToolResult
from turnledger.policies.pairing_repair import INTERRUPTED_TEXT
from turnledger.projections.history.read import visible_messages
from turnledger.projections.queries import SessionHistories

DEFAULT_AGENT: Final = "pydantic-ai"


def neutral(message: ModelMessage) -> Message:
    """One Pydantic AI message as turnledger's neutral message."""
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = tuple(
            ToolCall(
                id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str()
            )
            for p in message.parts
            if isinstance(p, ToolCallPart)
        )
        return make_message("assistant", text, tool_calls=calls)
    users = [p for p in message.parts if isinstance(p, UserPromptPart)]
    results = tuple(
        ToolResult(
            call_id=p.tool_call_id, content=p.model_response_str(), name=p.tool_name
        )
        for p in message.parts
        if isinstance(p, ToolReturnPart)
    )
    if users:
        text = "\n".join(str(p.content) for p in users)
        return make_message("user", text, tool_results=results)
    if results:
        return make_message("tool", tool_results=results)
    if any(isinstance(p, SystemPromptPart) for p in message.parts):
        text = "\n".join(
            p.content for p in message.parts if isinstance(p, SystemPromptPart)
        )
        return make_message("system", text)
    return make_message("user", "")


class TurnledgerHistoryProcessor:
    """A history processor applying turnledger's trim, bounding and repair policies.

    Args:
        ledger: Where trims are recorded (see :data:`LedgerTarget`).
        budget_tokens: The token budget of the history (0: no trimming).
        max_tool_result_chars: Bound tool returns to this many characters (0: no
            bounding).
        agent: The agent alias of the conversation streams (as the store's).

    Raises:
        ValueError: A limit is negative.
    """

    def __init__(
        self,
        ledger: LedgerTarget = None,
        *,
        budget_tokens: int,
        max_tool_result_chars: int = 0,
        agent: str = DEFAULT_AGENT,
    ) -> None:
        if budget_tokens < 0 or max_tool_result_chars < 0:
            msg = (
                "Expected a budget and a tool result limit >= 0, found "
                f"{budget_tokens} and {max_tool_result_chars}"
            )
            raise ValueError(msg)
        self.budget_tokens = budget_tokens
        self.max_tool_result_chars = max_tool_result_chars
        self.agent = agent
        self._handle = LedgerHandle(ledger)
        self._recorded: set[tuple[str, int, int, int]] = set()

    async def __call__(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        """Return the history the request is built from, policies applied."""
        originals = list(messages)
        mapped = [neutral(m) for m in originals]
        decision = trim_to_budget(mapped, self.budget_tokens)
        kept = originals
        if decision.trimmed:
            survivors = {id(m) for m in decision.messages}
            kept = [
                o for o, m in zip(originals, mapped, strict=True) if id(m) in survivors
            ]
            crumb = ModelRequest(parts=[UserPromptPart(content=BREADCRUMB_TEXT)])
            lead = sum(1 for m in mapped if m.role == "system" and id(m) in survivors)
            kept = [*kept[:lead], crumb, *kept[lead:]]
            await self._record(ctx.conversation_id, decision)
        return _repaired([self._bounded(m) for m in kept])

    def _bounded(self, message: ModelMessage) -> ModelMessage:
        if not self.max_tool_result_chars or not isinstance(message, ModelRequest):
            return message
        parts = []
        for part in message.parts:
            if type(part) is ToolReturnPart and isinstance(part.content, str):
                bounded = bound_tool_result(part.content, self.max_tool_result_chars)
                if bounded.truncated:
                    # a plain ToolReturnPart (its subclasses carry structured content)
                    part = dataclasses.replace(part, content=bounded.text)  # type: ignore[arg-type]  # noqa: PLW2901
            parts.append(part)
        return dataclasses.replace(message, parts=parts)

    async def _record(self, conversation_id: str | None, decision: Any) -> None:
        if not conversation_id:
            return
        shape = (
            conversation_id,
            decision.dropped_messages,
            decision.kept_turns,
            decision.tokens_before,
        )
        if shape in self._recorded:
            return
        stream = session_stream_id(self.agent, conversation_id)
        trim = HistoryTrimmed(
            turn_id="processor",
            dropped_messages=decision.dropped_messages,
            dropped_turns=decision.dropped_turns,
            kept_turns=decision.kept_turns,
            tokens_before=decision.tokens_before,
            tokens_after=decision.tokens_after,
            reason=decision.reason,
            breadcrumb=True,
        )
        for _ in range(8):
            version = await self._handle.ledger.stream_version(stream)
            events: list[Event] = [trim]
            if version == 0:
                opened = SessionOpened(
                    agent=self.agent, session_key=conversation_id, channel=FRAMEWORK
                )
                events.insert(0, opened)
            try:
                await self._handle.append(stream, events, expected_version=version)
            except ConcurrencyError:
                continue
            self._recorded.add(shape)
            return

    def capability(self) -> ProcessHistory[Any]:
        """This processor as the agent capability that runs it before each request."""
        return ProcessHistory(self)

    def close(self) -> None:
        """Stop using the ledger."""
        self._handle.release()


def _repaired(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Drop returns without their call; answer calls without their return."""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            calls.update(
                {
                    p.tool_call_id: p.tool_name
                    for p in message.parts
                    if isinstance(p, ToolCallPart)
                }
            )
            out.append(message)
            continue
        parts = [
            p
            for p in message.parts
            if not isinstance(p, ToolReturnPart) or p.tool_call_id in calls
        ]
        answered.update(p.tool_call_id for p in parts if isinstance(p, ToolReturnPart))
        out.append(dataclasses.replace(message, parts=parts))
    last_response = max(
        (i for i, m in enumerate(out) if isinstance(m, ModelResponse)), default=-1
    )
    missing = [cid for cid in calls if cid not in answered]
    final: list[ModelMessage] = []
    for index, message in enumerate(out):
        final.append(message)
        if index == last_response or not isinstance(message, ModelResponse):
            continue
        own = [
            p.tool_call_id
            for p in message.parts
            if isinstance(p, ToolCallPart) and p.tool_call_id in missing
        ]
        if own:
            final.append(
                ModelRequest(
                    parts=[
                        ToolReturnPart(
                            tool_name=calls[c], content=INTERRUPTED_TEXT, tool_call_id=c
                        )
                        for c in own
                    ]
                )
            )
    return final


async def conversation_from_session(
    ledger: LedgerTarget, agent: str, session_key: str
) -> Conversation:
    """Read a ledger session as a Pydantic AI conversation (its visible history).

    Args:
        ledger: The ledger.
        agent: The session's agent alias.
        session_key: Its session key.
    """
    handle = LedgerHandle(ledger)
    try:
        stream = session_stream_id(agent, session_key)
        histories = SessionHistories(handle.store)
        state = await asyncio.to_thread(histories.get, stream)
    finally:
        await asyncio.to_thread(handle.release)
    messages = visible_messages(state)
    return Conversation(conversation_id=session_key, messages=_model_messages(messages))


def _model_messages(messages: list[Message]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for m in messages:
        if m.role == "assistant":
            parts: list[Any] = [TextPart(content=m.text)] if m.text else []
            parts += [
                ToolCallPart(tool_name=c.name, args=c.arguments, tool_call_id=c.id)
                for c in m.tool_calls
            ]
            out.append(ModelResponse(parts=parts))
            continue
        request: list[Any] = [
            ToolReturnPart(
                tool_name=r.name or "", content=r.content, tool_call_id=r.call_id
            )
            for r in m.tool_results
        ]
        if m.role == "system":
            request.append(SystemPromptPart(content=m.text))
        elif m.role == "user" and m.text:
            request.append(UserPromptPart(content=m.text))
        out.append(ModelRequest(parts=request))
    return out
