"""The run hooks that show a ``TurnledgerSession`` the instructions and usage.

An Agents SDK session sees only items: neither the instructions a model is
given nor the usage of its calls. :class:`LedgerRunHooks` (from
:meth:`TurnledgerSession.run_hooks`, passed as ``Runner.run(..., hooks=...)``)
hears each model call: ``on_llm_start`` gives the system prompt it is sent
(recorded as ``system_prompt.set`` when it differs from the one in effect),
``on_llm_end`` the ``ModelResponse`` and its ``Usage`` (recorded as
``model.called``, durable before the run goes on). The model's name is the
agent's ``model`` when it is a name, or the ``model`` name of the ``Model``
object (the SDK's OpenAI and LiteLLM models have one); otherwise the SDK does
not say it and the call records ``unknown``. A ``ModelResponse`` has no
duration and no failure: a failed call raises, and is not recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, RunContextWrapper, RunHooks
from agents.items import ModelResponse


def model_name(agent: Agent[Any]) -> str | None:
    """The name of the agent's model, when the SDK says it."""
    model = agent.model
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


class LedgerRunHooks(RunHooks[Any]):
    """Run hooks recording a run's instructions and model calls in a session.

    Args:
        instructions: Records the system prompt of a model call.
        response: Records a model response (its model's name, then it).
    """

    def __init__(
        self,
        instructions: Callable[[str], Awaitable[None]],
        response: Callable[[str | None, ModelResponse], Awaitable[None]],
    ) -> None:
        self._instructions = instructions
        self._response = response

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[Any],
    ) -> None:
        """Record the system prompt the call is sent (when it changed)."""
        del context, agent, input_items
        if system_prompt:
            await self._instructions(system_prompt)

    async def on_llm_end(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        response: ModelResponse,
    ) -> None:
        """Record the call's usage."""
        del context
        await self._response(model_name(agent), response)
