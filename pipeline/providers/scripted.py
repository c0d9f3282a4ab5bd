"""A provider that plays a script: the demo, the CLI's ``run SCRIPT`` and tests.

A script is a list of steps played in order, one per request:

- a :class:`~pipeline.providers.base.ChatResponse` is returned;
- a :class:`~pipeline.providers.base.ProviderError` is raised;
- a callable ``(ChatRequest) -> ChatResponse`` is called with the request, so a
  test can assert on what was sent and answer from it.

Every request is recorded in :attr:`ScriptedProvider.requests`, including those
answered by an error. A request after the last step raises
:class:`ScriptExhaustedError`.

Script files (:meth:`ScriptedProvider.from_file`) are TOML (``.toml``) or JSON
(any other suffix)::

    model = "scripted-1"            # optional

    [[steps]]                       # an answer that calls tools
    text = "Let me check."          # optional, default ""
    [[steps.tool_calls]]
    name = "memory_recall"
    arguments = { query = "deadline" }  # a table, or JSON text
    id = "call_1"                   # optional, default "call_<step>_<index>"
    [steps.usage]                   # optional
    input_tokens = 120
    output_tokens = 14
    cached_input_tokens = 0         # optional, like the two below
    cache_write_tokens = 0
    reasoning_tokens = 0

    [[steps]]                       # a failure
    error = "context_overflow"      # an ErrorKind
    message = "prompt is too long"  # optional
    status = 400                    # optional, default by kind
    retryable = false               # optional, default by kind

    [[steps]]
    text = "The deadline is Friday."
    finish_reason = "stop"          # optional: "tool_calls" when calls, else "stop"

In JSON the same document is ``{"model": ..., "steps": [...]}``, or just the
list of steps. Unknown keys are errors, so a typo does not pass silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, TypeAlias

import msgspec

from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, read_input_file
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ErrorKind,
    ProviderError,
    Usage,
)
from turnledger.policies.messages import Message, ToolCall

__all__ = [
    "DEFAULT_MODEL",
    "ScriptExhaustedError",
    "ScriptFormatError",
    "ScriptedProvider",
    "Step",
]

NAME: Final = "scripted"
"""The provider kind."""

DEFAULT_MODEL: Final = "scripted-1"
"""The model a script answers as, unless it names one."""

Step: TypeAlias = ChatResponse | ProviderError | Callable[[ChatRequest], ChatResponse]
"""One scripted answer: returned, raised, or computed from the request."""


class ScriptExhaustedError(ProviderError):
    """A request arrived after the script's last step.

    Attributes:
        steps: How many steps the script had.
    """

    def __init__(self, *, steps: int, source: str) -> None:
        self.steps = steps
        message = (
            f"Expected at most {steps} requests to {source}, found request {steps + 1}"
        )
        super().__init__("bad_request", message)


class ScriptFormatError(PipelineError, ValueError):
    """A script file does not follow the script format."""


class ScriptedProvider:
    """Plays steps in order and records every request.

    Args:
        steps: The script (see :data:`Step`).
        model: The model it answers as (filled into answers that name none).
        source: What the script is, named in :class:`ScriptExhaustedError`.

    Attributes:
        requests: Every request received, in order.
    """

    def __init__(
        self,
        steps: Iterable[Step],
        *,
        model: str = DEFAULT_MODEL,
        source: str = "the scripted provider",
    ) -> None:
        self._steps = tuple(steps)
        self._model = model
        self._source = source
        self._played = 0
        self.requests: list[ChatRequest] = []

    @property
    def name(self) -> str:
        """``scripted``."""
        return NAME

    @property
    def model(self) -> str:
        """The model it answers as."""
        return self._model

    @property
    def remaining(self) -> int:
        """How many steps are left to play."""
        return len(self._steps) - self._played

    def __repr__(self) -> str:
        return (
            f"ScriptedProvider(source={self._source!r}, model={self._model!r},"
            f" played={self._played}/{len(self._steps)})"
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Record the request and play the next step.

        Args:
            request: The neutral request.

        Returns:
            The step's answer (with the provider's model when it names none).

        Raises:
            ProviderError: The step is an error, or a callable step raised one.
            ScriptExhaustedError: No step is left.
        """
        self.requests.append(request)
        if self._played >= len(self._steps):
            raise ScriptExhaustedError(steps=len(self._steps), source=self._source)
        step = self._steps[self._played]
        self._played += 1
        if isinstance(step, ProviderError):
            raise step
        response = step if isinstance(step, ChatResponse) else step(request)
        if response.model:
            return response
        return msgspec.structs.replace(response, model=self._model)

    async def aclose(self) -> None:
        """Nothing to release."""

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        model: str | None = None,
        max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    ) -> ScriptedProvider:
        """Load a script file (format in the module docstring).

        Args:
            path: A ``.toml`` file, or a JSON file.
            model: The model it answers as; by default the file's, else
                :data:`DEFAULT_MODEL`.
            max_bytes: The largest script file read (``[runtime]
                max_input_bytes``); a larger one is an ``InputFileError``.

        Returns:
            A provider playing the file's steps, named after the file.

        Raises:
            ScriptFormatError: The file does not follow the format (the message
                names the file and where).
            OSError: The file cannot be read.
        """
        path = Path(path)
        spec = _read_script(path, max_bytes)  # regular, bounded (#17)
        steps = [_step(step, n, path) for n, step in enumerate(spec.steps, 1)]
        model = model or spec.model or DEFAULT_MODEL
        return cls(steps, model=model, source=f"script {path}")

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message],
        *,
        model: str = DEFAULT_MODEL,
        source: str = "the recorded session",
    ) -> ScriptedProvider:
        """Replay a recorded session: one step per assistant message.

        Args:
            messages: A session's messages in the neutral model (any roles; only
                the assistant's are played).
            model: The model it answers as.
            source: What the session is, named in errors.

        Returns:
            A provider answering each request with the next assistant message.
        """
        steps = [
            ChatResponse(
                text=m.text,
                tool_calls=m.tool_calls,
                finish_reason="tool_calls" if m.tool_calls else "stop",
            )
            for m in messages
            if m.role == "assistant"
        ]
        return cls(steps, model=model, source=source)


# The file format.


class _CallSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    arguments: str | dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None


_Count = Annotated[int, msgspec.Meta(ge=0)]


class _UsageSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cached_input_tokens: _Count = 0
    cache_write_tokens: _Count = 0
    reasoning_tokens: _Count = 0


class _StepSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str = ""
    tool_calls: list[_CallSpec] = msgspec.field(default_factory=list)
    usage: _UsageSpec | None = None
    finish_reason: str | None = None
    model: str = ""
    error: ErrorKind | None = None
    message: str | None = None
    status: int | None = None
    retryable: bool | None = None


class _ScriptSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    steps: list[_StepSpec]
    model: str | None = None


_json_decoder: Final = msgspec.json.Decoder(_ScriptSpec | list[_StepSpec])
_encoder: Final = msgspec.json.Encoder()

_RETRYABLE: Final = frozenset({"rate_limit", "server", "timeout", "network"})
_STATUS: Final[dict[str, int]] = {
    "context_overflow": 400,
    "bad_request": 400,
    "auth": 401,
    "rate_limit": 429,
    "server": 500,
}


def _read_script(path: Path, max_bytes: int) -> _ScriptSpec:
    data = read_input_file(path, max_bytes=max_bytes, what="provider script")
    try:
        if path.suffix.lower() == ".toml":
            return msgspec.toml.decode(data, type=_ScriptSpec)
        decoded = _json_decoder.decode(data)
    except msgspec.DecodeError as e:
        problem = str(e)
    else:
        if isinstance(decoded, list):
            return _ScriptSpec(steps=decoded)
        return decoded
    msg = f"Expected a script file at {path} (see the scripted provider), {problem}"
    raise ScriptFormatError(msg)


def _arguments(value: str | dict[str, Any]) -> str:
    return value if isinstance(value, str) else _encoder.encode(value).decode()


def _error(kind: ErrorKind, spec: _StepSpec, number: int) -> ProviderError:
    message = spec.message or f"scripted {kind} error (step {number})"
    retryable = kind in _RETRYABLE if spec.retryable is None else spec.retryable
    status = _STATUS.get(kind) if spec.status is None else spec.status
    return ProviderError(kind, message, status=status, retryable=retryable)


def _step(spec: _StepSpec, number: int, path: Path) -> Step:
    if spec.error is not None:
        if spec.text or spec.tool_calls or spec.usage or spec.finish_reason:
            msg = (
                f"Expected step {number} of {path} to be an error or an answer,"
                f" found a {spec.error!r} error with text, tool_calls, usage or"
                " finish_reason"
            )
            raise ScriptFormatError(msg)
        return _error(spec.error, spec, number)
    calls = tuple(
        ToolCall(
            id=call.id or f"call_{number}_{index}",
            name=call.name,
            arguments=_arguments(call.arguments),
        )
        for index, call in enumerate(spec.tool_calls, 1)
    )
    usage = Usage(**msgspec.structs.asdict(spec.usage)) if spec.usage else None
    return ChatResponse(
        text=spec.text,
        tool_calls=calls,
        usage=usage,
        model=spec.model,
        finish_reason=spec.finish_reason or ("tool_calls" if calls else "stop"),
    )
