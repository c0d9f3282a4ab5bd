"""What the HTTP providers share: sending, classifying failures, redacting keys.

Every :class:`~pipeline.providers.base.ProviderError` built here is raised
outside the ``except`` block that caught the httpx exception, so it carries no
``__cause__`` or ``__context__``: the httpx exception holds the request, and the
request holds the API key in its headers. The cause's type and scrubbed text are
kept in the message instead.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias, TypeVar

import httpx
import msgspec

from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.providers.base import ErrorKind, ProviderError
from turnledger.policies.scrubbing import REDACTED, scrub_text

T = TypeVar("T")

MAX_DETAIL_CHARS: Final = 500
"""How much of a provider's error text an error message repeats."""

MIN_SECRET_CHARS: Final = 4
"""Shorter keys are placeholders (``x``, ``-``), not secrets worth replacing."""

OVERFLOW_CODES: Final = frozenset(
    {
        "context_length_exceeded",  # OpenAI, Groq, most OpenAI-compatible servers
        "exceed_context_size_error",  # llama.cpp server
        "request_too_large",  # Anthropic 413
    }
)
"""Error codes or types that mean the request does not fit the model."""

# What servers say when the prompt does not fit. Go servers (Ollama) say "context
# deadline exceeded" for timeouts, so a bare "context ... exceeded" is not enough.
_OVERFLOW_TEXT: Final = re.compile(
    r"context[ _-]?(?:length|window|size|limit)"
    r"|maximum context"
    r"|prompt is too long"
    r"|input is too long"
    r"|input token count",
    re.IGNORECASE,
)

Redactor: TypeAlias = Callable[[str], str]
"""Text in, the same text with every known key and credential removed."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes tens of milliseconds: do it once per process,
    # not once per provider.
    return httpx.create_ssl_context()


def new_client(timeout: float) -> httpx.AsyncClient:
    """Open a connection pool for a provider (certificates loaded once)."""
    return httpx.AsyncClient(timeout=timeout, verify=_ssl_context())


class ProviderConfigError(PipelineError, ValueError):
    """A provider cannot be built from its settings (bad URL, missing key, ...).

    Messages name the setting or environment variable, never a key's value.
    """


def validated_url(base_url: str) -> httpx.URL:
    """Parse a provider base URL.

    Args:
        base_url: The configured URL.

    Returns:
        The parsed URL.

    Raises:
        ProviderConfigError: It is not an ``http`` or ``https`` URL with a host.
    """
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        shown = scrub_text(base_url)
        msg = f"Expected an http(s) base URL with a host, found {shown!r}"
        raise ProviderConfigError(msg)
    return url


def make_redactor(secrets: Iterable[str | None]) -> Redactor:
    """Build the function every error text goes through.

    Args:
        secrets: The literal keys this provider sends (``None`` and those
            shorter than :data:`MIN_SECRET_CHARS` are skipped).

    Returns:
        ``redact(text)``: each known secret replaced by ``[REDACTED]``, then
        :func:`policies.scrubbing.scrub_text` applied.
    """
    # Longest first, so a secret that contains another is removed whole. Dummy
    # keys of local servers ("x", "-") are not secrets, and replacing every "x"
    # would make the message unreadable.
    known = sorted(
        {secret for secret in secrets if secret and len(secret) >= MIN_SECRET_CHARS},
        key=len,
        reverse=True,
    )

    def redact(text: str) -> str:
        for secret in known:
            text = text.replace(secret, REDACTED)
        return scrub_text(text)

    return redact


def mentions_overflow(codes: Iterable[str], message: str) -> bool:
    """Return whether an error says the request exceeds the model's context."""
    return any(code in OVERFLOW_CODES for code in codes) or bool(
        _OVERFLOW_TEXT.search(message)
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_DETAIL_CHARS:
        return text
    return text[:MAX_DETAIL_CHARS] + "\u2026"


class ErrorDetail(msgspec.Struct, frozen=True, kw_only=True):
    """What an error body says, read loosely (any server, any shape).

    Attributes:
        codes: The ``code`` and ``type`` strings found, when any.
        message: The human-readable message (the raw body when it is not JSON).
    """

    codes: tuple[str, ...] = ()
    message: str = ""


def read_error_detail(content: bytes) -> ErrorDetail:
    """Read ``{"error": {"message", "type", "code"}}`` and its relatives.

    OpenAI and Anthropic nest the fields under ``error``; vLLM puts them at the top
    level; Ollama sends ``{"error": "text"}``; a proxy may send HTML.

    Args:
        content: The response body.

    Returns:
        The codes and message found.
    """
    text = content.decode("utf-8", errors="replace")
    try:
        value: Any = msgspec.json.decode(content)
    except (msgspec.DecodeError, RecursionError):
        return ErrorDetail(message=text)
    if isinstance(value, dict) and "error" in value:
        value = value["error"]
    if isinstance(value, str):
        return ErrorDetail(message=value)
    if not isinstance(value, dict):
        return ErrorDetail(message=text)
    codes = tuple(
        str(value[field]) for field in ("code", "type") if value.get(field) is not None
    )
    return ErrorDetail(codes=codes, message=str(value.get("message") or text))


def status_kind(status: int) -> tuple[ErrorKind, bool]:
    """Classify an HTTP error status (the context overflow is checked apart).

    Args:
        status: The response status, 400 or more.

    Returns:
        The error kind and whether retrying may succeed.
    """
    if status in (401, 403):
        return "auth", False
    if status == 408:
        return "timeout", True
    if status == 429:
        return "rate_limit", True
    if status >= 500:
        return "server", True
    return "bad_request", False


def http_error(
    provider: str,
    response: httpx.Response,
    redact: Redactor,
    *,
    overflow: Callable[[int, ErrorDetail], bool],
) -> ProviderError:
    """Build the error for a non-2xx response.

    Args:
        provider: The provider kind, named in the message.
        response: The failed response.
        redact: Applied to the whole message.
        overflow: Whether this status and detail mean the context was exceeded
            (the provider's own rule).

    Returns:
        A classified, key-free error.
    """
    status = response.status_code
    detail = read_error_detail(response.content)
    kind, retryable = status_kind(status)
    if kind not in ("auth", "rate_limit") and overflow(status, detail):
        kind, retryable = "context_overflow", False
    code = f" ({detail.codes[0]})" if detail.codes else ""
    message = f"{provider} returned HTTP {status}{code}: {_short(detail.message)}"
    return ProviderError(kind, redact(message), status=status, retryable=retryable)


def transport_error(
    provider: str, url: str, error: Exception, timeout: float, redact: Redactor
) -> ProviderError:
    """Build the error for a request that got no response.

    Args:
        provider: The provider kind, named in the message.
        url: The endpoint (its query string is scrubbed).
        error: The httpx exception.
        timeout: The timeout in seconds, named when it was hit.
        redact: Applied to the whole message.

    Returns:
        A ``timeout`` error for httpx timeouts, else a ``network`` error; both
        retryable.
    """
    cause = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if isinstance(error, httpx.TimeoutException):
        message = f"{provider} did not answer {url} within {timeout:g} s ({cause})"
        return ProviderError("timeout", redact(message), retryable=True)
    message = f"{provider} could not reach {url} ({_short(cause)})"
    return ProviderError("network", redact(message), retryable=True)


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    provider: str,
    timeout_seconds: float,
    redact: Redactor,
) -> httpx.Response:
    """Send a request and return the response, whatever its status.

    Args:
        client: The connection pool.
        request: The built request (its repr shows no headers).
        provider: The provider kind, named in errors.
        timeout_seconds: The request's timeout, named in errors.
        redact: Applied to error messages.

    Returns:
        The response, read whole.

    Raises:
        ProviderError: ``timeout`` or ``network`` (no exception chained).
    """
    url = str(request.url)
    try:
        response = await client.send(request)
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        failure = transport_error(provider, url, e, timeout_seconds, redact)
    else:
        return response
    raise failure


def decode_body(
    provider: str,
    response: httpx.Response,
    decoder: msgspec.json.Decoder[T],
    redact: Redactor,
) -> T:
    """Decode a 2xx body into the provider's response type.

    Args:
        provider: The provider kind, named in errors.
        response: The successful response.
        decoder: The module-level decoder for the wire type.
        redact: Applied to error messages.

    Returns:
        The decoded body.

    Raises:
        ProviderError: A ``server`` error (not retryable) when the body is not
            the expected JSON, naming where it differs.
    """
    try:
        return decoder.decode(response.content)
    except msgspec.DecodeError as e:
        problem = str(e)
    except RecursionError:
        problem = "JSON nested deeper than the interpreter's recursion limit"
    # Outside the except: the decode error holds nothing secret, but one rule for
    # every provider error keeps the chain empty.
    message = (
        f"Expected JSON in the {provider} answer from {response.url}"
        f" (HTTP {response.status_code}), found a body that does not decode:"
        f" {_short(problem)}"
    )
    raise ProviderError(
        kind="server", message=redact(message), status=response.status_code
    )
