"""The ADK plugin that shows the session service the instructions a model is sent.

A session service sees only events; the system instruction of a model request
is in the ``LlmRequest`` a plugin's ``before_model_callback`` receives.
:class:`InstructionsPlugin` hands that text (as ADK sends it: the agent's
instruction with what ADK adds, such as the global instruction) to the service,
which records it as ``system_prompt.set`` before the model's next event, once
per change.
"""

from __future__ import annotations

from collections.abc import Callable

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.session import Session
from google.genai import types

PLUGIN_NAME = "turnledger_instructions"
"""The plugin's name in the runner."""


def instruction_text(instruction: object) -> str | None:
    """The system instruction's text (a ``Content``'s text parts, joined)."""
    if isinstance(instruction, str):
        return instruction or None
    if isinstance(instruction, types.Content):
        texts = [p.text for p in instruction.parts or () if p.text]
        return "\n\n".join(texts) or None
    return None


class InstructionsPlugin(BasePlugin):
    """Hands each model request's system instruction to a session service.

    Args:
        note: Called with the request's session and its instruction text.
    """

    def __init__(self, note: Callable[[Session, str], None]) -> None:
        super().__init__(name=PLUGIN_NAME)
        self._note = note

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Note the request's instruction; the request goes on unchanged."""
        text = instruction_text(llm_request.config.system_instruction)
        if text is not None:
            self._note(callback_context.session, text)
        return None
