"""Text embedders for vector recall, behind one Protocol.

Three implementations: :class:`NoEmbedder` (the default: no vectors, recall is
keyword-only), :class:`OpenAICompatibleEmbedder` (any ``/embeddings`` endpoint
speaking the OpenAI format, over HTTP) and :class:`SentenceTransformerEmbedder`
(a local model; needs the optional ``sentence-transformers`` package).

Every failure is raised as :class:`EmbedderError`, so a memory backend can catch
exactly that and keep the write without its vector. An API key never appears in
an error message or a ``repr``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds an embedding request may take."""

DEFAULT_BATCH_SIZE: Final = 128
"""How many texts one embedding request carries at most."""

DEFAULT_SENTENCE_MODEL: Final = "all-MiniLM-L6-v2"
"""The local model :class:`SentenceTransformerEmbedder` loads by default."""

_EXCERPT_CHARS: Final = 200


class EmbedderError(RuntimeError):
    """An embedder could not produce vectors (network, HTTP, shape, model)."""


class EmbedderNotInstalledError(EmbedderError, ImportError):
    """An embedder's optional dependency is not installed."""


class EmbeddingIdentity(NamedTuple):
    """What produced a vector: vectors of different identities never mix.

    Attributes:
        provider: Who computes them (``none``, ``openai-compatible:<url>``...).
        model: The model name.
        dims: The vector length (0: no vectors).
    """

    provider: str
    model: str
    dims: int


class Embedder(Protocol):
    """Turns texts into vectors of ``identity.dims`` floats.

    Optional members a memory backend uses when present: ``window`` (the most
    of the embedder's own tokens one window holds) and ``window_spans(text)``
    (the character spans of the text's overlapping windows, see
    :mod:`.windows`): a long text is then embedded window by window and
    scored by its best window. Without them every text is embedded whole.
    """

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return the provider, model and dimensions of the vectors."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text, in order.

        Raises:
            EmbedderError: The vectors could not be computed.
        """
        ...


class NoEmbedder:
    """The default: no vectors at all (dimension 0); recall is keyword-only."""

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return ``("none", "none", 0)``."""
        return EmbeddingIdentity("none", "none", 0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return an empty vector per text."""
        return [[] for _ in texts]

    def __repr__(self) -> str:
        return "NoEmbedder()"


def embeddings_url(base_url: str) -> str:
    """Return the ``/embeddings`` endpoint of an OpenAI-compatible base URL.

    Args:
        base_url: The configured base (trailing slashes ignored).

    Returns:
        The base as-is when it already ends with ``/embeddings``;
        ``{base}/embeddings`` when it has a path (``.../v1``, ``.../api``);
        ``{base}/v1/embeddings`` for a bare host.

    Raises:
        EmbedderError: The base is not an http(s) URL.
    """
    base = base_url.strip().rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        msg = f"Expected an http(s) base URL for embeddings, found {base_url!r}"
        raise EmbedderError(msg)
    if base.endswith("/embeddings"):
        return base
    if parts.path:
        return f"{base}/embeddings"
    return f"{base}/v1/embeddings"


class OpenAICompatibleEmbedder:
    """Embeds texts through an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        base_url: The endpoint or its base (see :func:`embeddings_url`).
        model: The model name sent with each request.
        dims: The vector length every answer must have.
        api_key: Sent as a bearer token; never shown in errors or ``repr``.
        timeout: Seconds a request may take.
        provider: The identity's provider; defaults to
            ``openai-compatible:<endpoint>``.
        batch_size: How many texts one request carries at most.
        send_dimensions: Whether to send ``dimensions`` (models that can shorten
            their vectors, such as ``text-embedding-3-*``).
        transport: An httpx transport (tests); the default is the network.

    Raises:
        EmbedderError: The URL is not http(s), or ``dims`` or ``batch_size`` is
            below 1.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        dims: int,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        provider: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        send_dimensions: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if dims < 1 or batch_size < 1:
            msg = f"Expected dims and batch_size >= 1, found {dims} and {batch_size}"
            raise EmbedderError(msg)
        self.url = embeddings_url(base_url)
        self.model = model
        self.dims = dims
        self.timeout = timeout
        self.batch_size = batch_size
        self.send_dimensions = send_dimensions
        self._provider = provider or f"openai-compatible:{self.url}"
        self._api_key = api_key or None
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        # Here, not at the top: only this embedder needs HTTP (about 0.3 s to
        # import), and every memory command imports this module.
        import httpx  # noqa: PLC0415

        self._client = httpx.Client(
            timeout=timeout, headers=headers, transport=transport
        )

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return the provider, model and dimensions."""
        return EmbeddingIdentity(self._provider, self.model, self.dims)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text, requesting ``batch_size`` texts at a time.

        Raises:
            EmbedderError: A request timed out or failed, the server answered an
                HTTP error, or the body is not the expected shape.
        """
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._request(list(texts[start : start + self.batch_size])))
        return vectors

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __repr__(self) -> str:
        key = "***" if self._api_key else None
        return (
            f"OpenAICompatibleEmbedder(url={self.url!r}, model={self.model!r}, "
            f"dims={self.dims}, api_key={key})"
        )

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx  # noqa: PLC0415 - loaded by __init__ already

        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.send_dimensions:
            body["dimensions"] = self.dims
        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            msg = f"Embedding request to {self.url} timed out after {self.timeout}s"
            # ``from None``: a chained httpx error could carry the key in its text.
            raise EmbedderError(self._scrub(msg)) from None
        except httpx.HTTPError as e:
            msg = f"Embedding request to {self.url} failed: {type(e).__name__}: {e}"
            raise EmbedderError(self._scrub(msg)) from None
        if response.status_code >= httpx.codes.BAD_REQUEST:
            excerpt = response.text[:_EXCERPT_CHARS]
            msg = (
                f"Expected HTTP 200 from {self.url}, found {response.status_code}: "
                f"{excerpt}"
            )
            raise EmbedderError(self._scrub(msg))
        try:
            payload = response.json()
        except ValueError:
            msg = f"Expected a JSON body from {self.url}, found invalid JSON"
            raise EmbedderError(msg) from None
        return parse_embeddings(payload, count=len(texts), dims=self.dims)

    def _scrub(self, text: str) -> str:
        if self._api_key:
            return text.replace(self._api_key, "***")
        return text


def parse_embeddings(payload: object, *, count: int, dims: int) -> list[list[float]]:
    """Read the vectors of an OpenAI ``/embeddings`` answer.

    Args:
        payload: The decoded JSON body.
        count: How many vectors were asked for.
        dims: The length each must have.

    Returns:
        The vectors in input order (``data[].index`` is honoured).

    Raises:
        EmbedderError: The body is not ``{"data": [{"embedding": [...]}]}`` with
            ``count`` finite vectors of length ``dims``.
    """
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        found = len(data) if isinstance(data, list) else type(data).__name__
        msg = f"Expected {count} embeddings in 'data', found {found}"
        raise EmbedderError(msg)
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        index, vector = _item(item, position, count, dims)
        vectors[index] = vector
    if any(v is None for v in vectors):
        msg = "Expected one embedding per input index, found duplicate indexes"
        raise EmbedderError(msg)
    return [v for v in vectors if v is not None]


def _item(
    item: object, position: int, count: int, dims: int
) -> tuple[int, list[float]]:
    if not isinstance(item, dict):
        msg = f"Expected an object at data[{position}], found {type(item).__name__}"
        raise EmbedderError(msg)
    index = item.get("index", position)
    if not isinstance(index, int) or not 0 <= index < count:
        msg = f"Expected data[{position}].index in 0..{count - 1}, found {index!r}"
        raise EmbedderError(msg)
    return index, check_vector(item.get("embedding"), dims, where=f"data[{position}]")


def check_vector(raw: object, dims: int, *, where: str = "vector") -> list[float]:
    """Return ``raw`` as a list of ``dims`` finite floats.

    Raises:
        EmbedderError: It is not a list of that many finite numbers.
    """
    if not isinstance(raw, list) or len(raw) != dims:
        found = len(raw) if isinstance(raw, list) else type(raw).__name__
        msg = f"Expected a {dims}-dimension embedding at {where}, found {found}"
        raise EmbedderError(msg)
    if not all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
        for x in raw
    ):
        msg = f"Expected finite numbers in the embedding at {where}"
        raise EmbedderError(msg)
    return [float(x) for x in raw]


class SentenceTransformerEmbedder:
    """Embeds texts with a local sentence-transformers model.

    The package is imported when the embedder is built; the model is loaded then
    too (which may download it once, into the sentence-transformers cache).

    Args:
        model: The model name or path.
        device: ``cpu``, ``cuda``...; ``None`` lets the library choose.

    Raises:
        EmbedderNotInstalledError: ``sentence-transformers`` is not installed.
        EmbedderError: The model could not be loaded.
    """

    def __init__(
        self, model: str = DEFAULT_SENTENCE_MODEL, *, device: str | None = None
    ) -> None:
        module = _sentence_transformers()
        try:
            self._model = module.SentenceTransformer(model, device=device)
            dims = int(self._model.get_sentence_embedding_dimension() or 0)
        except Exception as e:  # the library raises many types; one typed error out
            msg = f"Expected to load sentence-transformers model {model!r}: {e}"
            raise EmbedderError(msg) from e
        self._identity = EmbeddingIdentity("sentence-transformers", model, dims)

    @property
    def identity(self) -> EmbeddingIdentity:
        """Return the provider, model and dimensions."""
        return self._identity

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text.

        Raises:
            EmbedderError: The model failed.
        """
        if not texts:
            return []
        try:
            encoded = self._model.encode(list(texts), convert_to_numpy=True)
        except Exception as e:  # the library raises many types; one typed error out
            msg = f"Expected embeddings from {self._identity.model!r}: {e}"
            raise EmbedderError(msg) from e
        dims = self._identity.dims
        return [check_vector(row.tolist(), dims) for row in encoded]

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self._identity.model!r})"


def _sentence_transformers() -> Any:
    try:
        return importlib.import_module("sentence_transformers")
    except ImportError as e:
        msg = (
            "Expected the sentence-transformers package for local embeddings, "
            "found it not installed (pip install sentence-transformers)"
        )
        raise EmbedderNotInstalledError(msg) from e
