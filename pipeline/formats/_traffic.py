"""Model traffic no reader understands: what makes a file refused, not skipped.

Readers account for every record they do not map (see
:class:`pipeline.formats._common.Sink`). Most such records are harmless (a
``GET /models`` in a cassette, a bookkeeping line of an agent log), but some
hold a conversation the reader cannot read: a ``POST`` to a model API no
request shape knows, or a record shaped like a message or a tool call in a
schema the reader does not have. Dropping those would lose calls silently, so
these functions name them and the file is refused.

The tests are generic on purpose: a shape that becomes known (a new API in
:mod:`pipeline.formats._shapes`) is read before a request reaches them. The
walk over a value is iterative and bounded, so hostile nesting cannot exhaust
the stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast
from urllib.parse import SplitResult, urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable

_MODEL_PATHS: Final = (
    "/chat",
    "/completions",
    "/complete",
    "/messages",
    "/generate",
    "/converse",
    "/invoke",
    "/responses",
    "/conversation",
    "/predict",
    "/inference",
    "/infer",
    "/agents",
    "/run",
)
"""Path pieces of model endpoints (``/v1/chat``, ``/model/x/converse``, ...)."""

_NOT_CONVERSATION: Final = (
    "embed",
    "moderation",
    "audio",
    "speech",
    "transcri",
    "image",
    "files",
    "batches",
    "fine_tun",
    "fine-tun",
    "tokeniz",
    "count_tokens",
    "count-tokens",
    "counttokens",
    "input_tokens",
    "/compact",
    "rerank",
    "vector",
    "upload",
)
"""Path pieces of model API endpoints that carry no conversation."""

_HISTORY_KEYS: Final = (
    "messages",
    "contents",
    "input",
    "inputs",
    "prompt",
    "chat_history",
    "message",
    "inputText",
    "conversation",
    "instances",
)
"""Request body fields that carry a conversation or a prompt."""

_CALL_TYPES: Final = frozenset(
    {
        "tool_use",
        "tool_call",
        "tool-call",
        "toolCall",
        "tool_calls",
        "function_call",
        "functionCall",
        "function",
        "toolUse",
    }
)
_CALL_KEYS: Final = (
    "tool_calls",
    "toolCalls",
    "function_call",
    "functionCall",
    "toolUse",
    "tool_use",
)
_ARGUMENT_KEYS: Final = ("arguments", "input", "args")
_ROLE_KEYS: Final = ("role", "author", "speaker", "sender")
_ROLE_WORDS: Final = frozenset(
    {"user", "assistant", "system", "tool", "model", "human", "ai"}
)
_CONTENT_KEYS: Final = ("content", "parts", "text", "message")
_WALK_LIMIT: Final = 10_000
"""Values examined per value at most: :func:`message_shape` calls a larger one
unexaminable (the file is refused), :func:`call_shape` stops looking (a request
or response body of a known shape is not refused for its size)."""


def unknown_model_call(
    method: str, uri: str, body: object, *, undecodable: bool = False
) -> str | None:
    """Describe a recorded request that looks like a model API call, else ``None``.

    Only called for requests no known API shape claimed. A ``POST`` whose path
    looks like a model endpoint (``/chat``, ``/completions``, ``/messages``,
    ``/generate``, ``/converse``, ...) and whose body holds a message- or
    call-shaped object, or whose JSON body carries a history (``messages``,
    ``contents``, ``input``, ``prompt``, ...), is model traffic,
    unless its path is one of the endpoints without a conversation (embeddings,
    moderation, audio, files, ...).

    Args:
        method: The HTTP method.
        uri: The request URI.
        body: The decoded request body (``None`` when absent or undecodable).
        undecodable: The body was there but could not be decoded (not JSON,
            bad gzip): a model endpoint path is then enough.

    Returns:
        ``"POST host/path"`` with what made it model traffic, or ``None``.
    """
    if method.upper() != "POST":
        return None
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None
    path = parts.path.rstrip("/")
    lowered = path.lower()
    if any(piece in lowered for piece in _NOT_CONVERSATION):
        return None
    port = f":{parts.port}" if _port(parts) else ""
    where = f"POST {parts.hostname or ''}{port}{path}"[:200]
    model_path = any(piece in lowered for piece in _MODEL_PATHS)
    if undecodable and model_path:
        return f"{where} (a model endpoint path, a body that could not be decoded)"
    obj = _as_object(body)
    keys = [key for key in _HISTORY_KEYS if obj is not None and key in obj]
    if keys:
        return f"{where} (a JSON body with `{keys[0]}`)"
    shape = message_shape(body) if obj is not None else None
    if shape is not None and model_path:
        return f"{where} (a model endpoint path, a body with {shape})"
    return None


def message_shape(value: object) -> str | None:
    """Describe an object shaped like a message or a tool call, else ``None``.

    Args:
        value: A record (or a part of one) that a reader did not recognise.

    Returns:
        The first message- or call-shaped object found in it, described by its
        fields (``"an object with `role`, `content`"``), or ``None``. A value
        too large to examine whole (over 10,000 values) is described as such:
        what it holds cannot be vouched for.
    """
    found, whole = _first(value, _shaped)
    if not whole:
        return f"more than {_WALK_LIMIT} values, too many to examine"
    return found


def call_shape(value: object) -> str | None:
    """Describe the first tool-call-shaped object in a value, else ``None``."""
    return _first(value, _call)[0]


def _first(
    value: object, describe: Callable[[dict[str, object]], str | None]
) -> tuple[str | None, bool]:
    """The first object of a value (depth first, in order) ``describe`` names.

    Returns:
        That description (``None`` if none), and whether the walk ended before
        :data:`_WALK_LIMIT` values without finding one (``False``: it stopped
        at the limit).
    """
    seen = 0
    stack: list[object] = [value]
    while stack:
        if seen >= _WALK_LIMIT:
            return None, False
        current = stack.pop()
        seen += 1
        obj = _as_object(current)
        if obj is not None:
            found = describe(obj)
            if found is not None:
                return found, True
            stack.extend(reversed(list(obj.values())))
            continue
        items = _as_list(current)
        if items is not None:
            stack.extend(reversed(items))
    return None, True


def _shaped(obj: dict[str, object]) -> str | None:
    call = _call(obj)
    if call is not None:
        return call
    role = next((key for key in _ROLE_KEYS if isinstance(obj.get(key), str)), None)
    if role is None and _get_str(obj, "type") in _ROLE_WORDS:
        role = "type"
    content = next((key for key in _CONTENT_KEYS if key in obj), None)
    if role is not None and content is not None:
        return f"a message-shaped object with `{role}`, `{content}`"
    return None


def _call(obj: dict[str, object]) -> str | None:
    """Describe an object shaped like a tool call, or ``None``."""
    for key in _CALL_KEYS:
        value = obj.get(key)
        if _as_object(value) is not None or _as_list(value):
            return f"a tool call under `{key}`"
    kind = _get_str(obj, "type")
    arguments = next((key for key in _ARGUMENT_KEYS if key in obj), None)
    has_name = isinstance(obj.get("name"), str)
    if kind in _CALL_TYPES and (arguments is not None or _has_id(obj)):
        return f"a tool call of type {kind!r}"  # a tool definition has neither
    if has_name and arguments is not None:
        return f"a tool-call-shaped object with `name`, `{arguments}`"
    return None


def _port(parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:  # a port out of range or not a number
        return None


def _has_id(obj: dict[str, object]) -> bool:
    return any(
        isinstance(obj.get(key), str) for key in ("id", "call_id", "tool_call_id")
    )


def _as_object(value: object) -> dict[str, object] | None:
    """Return ``value`` as a JSON object, or ``None`` (as ``_common`` does)."""
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def _as_list(value: object) -> list[object] | None:
    """Return ``value`` as a JSON array, or ``None``."""
    return cast("list[object]", value) if isinstance(value, list) else None


def _get_str(obj: dict[str, object], key: str) -> str | None:
    """Return ``obj[key]`` if it is a string, else ``None``."""
    value = obj.get(key)
    return value if isinstance(value, str) else None
