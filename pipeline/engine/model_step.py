"""A turn's model step: assemble and record the prompt, call the model, record it.

:class:`ModelStep` assembles the prompt through the session cursor's
:class:`~turnledger.pipeline.engine.prompt_cache.PromptCache` and records it
(its fingerprint, never the prompt), calls the provider
(:func:`~turnledger.pipeline.engine.model_calls.call_model`), counts the call's
cost in the budget guard at once and queues its ``model.called`` event to
commit with the reply. A context overflow triggers the reactive 2/3 trim
(recorded as a trim) and one retry; any other provider failure ends the turn
with a failure of kind ``provider_error``. A response that cannot be recorded
whole (:func:`turnledger.policies.recordable.response_problem`: text UTF-8
cannot encode, a call id with a control character, arguments nested too deep,
more than ``[runtime] max_response_chars``) ends it with a failure of kind
``unrecordable_response``, before any of the response is appended; the call's
``model.called`` (its usage and cost) is then recorded with the failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnledger.pipeline.config.sections import RuntimeConfig
from turnledger.pipeline.engine.budget_guard import BudgetGuard
from turnledger.pipeline.engine.failure import TurnFailure
from turnledger.pipeline.engine.logger import engine_logger as _logger
from turnledger.pipeline.engine.model_calls import ModelCallFailedError, call_model
from turnledger.pipeline.engine.prompting import trim_event
from turnledger.pipeline.engine.session_cursor import SessionCursor, SessionCursors
from turnledger.pipeline.providers.base import (
    ChatResponse,
    Provider,
    ProviderError,
    ToolSpec,
)
from turnledger.policies.messages import Message
from turnledger.policies.pricing import ModelPrice
from turnledger.policies.recordable import response_problem
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.policies.trimming import REASON_CONTEXT_OVERFLOW, trim_after_overflow


class ModelStep:
    """One model call of a turn, its prompt and its recovery, recorded.

    Args:
        sessions: The session cursors it appends through.
        provider: The model endpoint.
        tool_specs: The tools each call offers the model.
        pricing: The per-model prices the calls' usage is costed with.
        runtime: The ``[runtime]`` limits the prompt is assembled under.
        budget: The budget guard each call's cost is counted in.
        system_prompt: The system prompt (ephemeral: only its digest is recorded).
    """

    def __init__(
        self,
        *,
        sessions: SessionCursors,
        provider: Provider,
        tool_specs: Sequence[ToolSpec],
        pricing: Mapping[str, ModelPrice],
        runtime: RuntimeConfig,
        budget: BudgetGuard,
        system_prompt: str,
    ) -> None:
        self._sessions = sessions
        self._provider = provider
        self._tool_specs = tuple(tool_specs)
        self._pricing = pricing
        self._runtime = runtime
        self._budget = budget
        self._system_prompt = system_prompt

    async def call(
        self, session: SessionCursor, turn_id: str, iteration: int, block: str
    ) -> ChatResponse | TurnFailure:
        """Record the prompt and call the model; the response, or why the turn fails.

        ``block`` is the recalled memory injected into the prompt. A failure is
        returned for the engine to record; when the call succeeded but its
        response cannot be recorded, the call's ``model.called`` (usage and
        cost, no response) waits in the cursor's pending events and goes out
        with the failure.
        """
        prompt = session.prompts.assemble(
            session.state,
            turn_id=turn_id,
            iteration=iteration,
            system=self._system_prompt,
            memory_block=block,
            runtime=self._runtime,
        )
        await self._sessions.append(
            session, prompt.events, step_key=f"{turn_id}:prompt-{iteration}"
        )
        messages = list(prompt.messages)
        try:
            response = await self._complete(session, turn_id, iteration, messages)
        except ProviderError as e:
            if e.kind != "context_overflow":
                return _provider_failed(e)
        else:
            return self._recordable(response)
        # Reactive recovery: trim to 2/3 of the current estimate, retry once.
        recovery = trim_after_overflow(messages)
        if recovery.decision.trimmed:
            await self._sessions.append(
                session,
                [
                    trim_event(
                        session.state,
                        turn_id,
                        recovery.decision.messages,
                        REASON_CONTEXT_OVERFLOW,
                        recovery.decision,
                    )
                ],
                step_key=f"{turn_id}:trim-{iteration}",
            )
        try:
            retried = list(recovery.decision.messages)
            response = await self._complete(
                session, turn_id, iteration, retried, attempt=1
            )
        except ProviderError as e:
            return _provider_failed(e)
        return self._recordable(response)

    def _recordable(self, response: ChatResponse) -> ChatResponse | TurnFailure:
        """The response, or the failure naming why it cannot be recorded whole."""
        problem = response_problem(
            response.text,
            response.tool_calls,
            max_chars=self._runtime.max_response_chars,
        )
        if problem is None:
            return response
        return TurnFailure(kind="unrecordable_response", error=problem)

    async def _complete(
        self,
        session: SessionCursor,
        turn_id: str,
        iteration: int,
        messages: list[Message],
        *,
        attempt: int = 0,
    ) -> ChatResponse:
        try:
            call = await call_model(
                self._provider,
                messages,
                self._tool_specs,
                pricing=self._pricing,
                turn_id=turn_id,
                iteration=iteration,
            )
        except ModelCallFailedError as failed:
            await self._sessions.append(
                session,
                [failed.event],
                step_key=f"{turn_id}:model-{iteration}.{attempt}",
            )
            raise failed.error from None
        # Recorded together with the assistant message it produced (one commit).
        session.pending.append(call.event)
        self._budget.add(call.event.cost_usd)
        _logger().info(
            "model.called", iteration=iteration, calls=len(call.response.tool_calls)
        )
        return call.response


def _provider_failed(error: ProviderError) -> TurnFailure:
    """The failure a provider error ends the turn with (scrubbed, bounded)."""
    return TurnFailure(
        kind="provider_error", error=summarize(scrub_text(f"{error.kind}: {error}"))
    )
