"""The provider contract: a neutral request in, a neutral response out.

Providers speak their wire format over HTTP; the engine only sees these types.
Errors are classified (a context overflow triggers the reactive trim) and never
carry an API key.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from turnledger.policies.messages import Message, ToolCall

ErrorKind: TypeAlias = Literal[
    "context_overflow",
    "rate_limit",
    "auth",
    "bad_request",
    "server",
    "timeout",
    "network",
]
"""How a provider call failed."""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as the model sees it: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What the engine asks a provider.

    Attributes:
        messages: The prompt in the neutral model (system messages first).
        tools: The tools the model may call.
        max_output_tokens: A cap on the answer, when set.
        temperature: Sampling temperature, when set.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    temperature: float | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token usage a provider reported, in the neutral meaning.

    Attributes:
        input_tokens: The whole prompt, cache reads and writes included.
        output_tokens: The whole completion, reasoning included.
        cached_input_tokens: The part of the input read from the prompt cache.
        cache_write_tokens: The part of the input written to the prompt cache.
        reasoning_tokens: The part of the output spent on reasoning.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class ChatResponse(msgspec.Struct, frozen=True, kw_only=True):
    """What a provider answered.

    Attributes:
        text: The assistant's text (may be empty when it only calls tools).
        tool_calls: The calls it made, in order (parallel calls included).
        usage: Reported usage, when the provider reports it.
        model: The model that answered.
        finish_reason: The provider's stop reason, normalised when possible
            (``stop``, ``tool_calls``, ``length``).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    model: str = ""
    finish_reason: str = "stop"


class ProviderError(Exception):
    """A provider call failed.

    Attributes:
        kind: The classified failure (``context_overflow`` triggers a trim).
        status: The HTTP status, when there was one.
        retryable: Whether trying again may succeed.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        self.kind = kind
        self.status = status
        self.retryable = retryable
        super().__init__(message)


class Provider(Protocol):
    """A model endpoint."""

    @property
    def name(self) -> str:
        """The provider kind (``scripted``, ``openai-compatible``, ``anthropic``)."""
        ...

    @property
    def model(self) -> str:
        """The model it calls."""
        ...

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send a request; return the answer.

        Raises:
            ProviderError: The call failed (classified, key-free message).
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
