"""The sections of ``turnledger.toml``: one frozen Struct per table.

Each table of the file (``[agents.<alias>]``, ``[storage.<kind>.<alias>]``,
``[runtime]``, ``[recall]``, ``[embedding]``, ``[providers.<name>]``,
``[budgets]``, ``[telemetry]``, ``[memory]``) is a Struct here with its
defaults, refusing unknown keys; :class:`~pipeline.config.Config` gathers them
and :mod:`pipeline.config` checks the rules that span keys. :func:`recall_tuning`
turns the ``[recall]`` rerank keys into the policy's
:class:`~policies.recall_tuning.RecallTuning`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES
from turnledger.policies.recall_tuning import RecallTuning
from turnledger.policies.recordable import DEFAULT_MAX_RESPONSE_CHARS

Text = Annotated[str, msgspec.Meta(min_length=1)]
"""A key's text that may not be empty: an empty one is refused, never read as
unset (nor as the working directory, for a path)."""


class AgentConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[agents.<alias>]`` (the seed's sub-tables are flattened into it first).

    Attributes:
        memory: The backend (``[agents.<alias>.memory] backend``); None: the
            install-wide ``[memory] backend`` (see ``Config.backend_of``).
        read_memory_from: Peers whose memory this agent may recall
            (``[agents.<alias>.workspace] read_memory_from``).
        workspace: The workspace directory (``[agents.<alias>.workspace] path``).
        strategy: The memory strategy.
        autosave: Whether turns autosave.
        provider: The provider name.
    """

    memory: str | None = None
    read_memory_from: tuple[str, ...] = ()
    workspace: Text | None = None
    strategy: Literal["default", "none"] = "default"
    autosave: bool = True
    provider: Text | None = None


class StorageConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[storage.<kind>.<alias>]``: where a memory backend keeps its data."""

    path: Text | None = None
    url: Text | None = None
    collection: Text | None = None
    command: tuple[str, ...] = ()


class RuntimeConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[runtime]``: limits of the turn engine."""

    max_tool_result_chars: int = msgspec.field(default=50_000)
    context_budget_tokens: int = 32_000
    max_tool_iterations: int = 10
    tool_concurrency: int = 4
    max_media_bytes: int = 20 * 1024 * 1024
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS


class RecallConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[recall]``: memory injection settings (reference §4.1)."""

    limit: int = 5
    min_relevance: float = 0.4
    max_entries: int = 4
    entry_max_chars: int = 800
    max_total_chars: int = 4_000
    decay: bool = False
    importance_blend: bool = False
    mmr: bool = False
    half_life_days: float = 7.0
    importance_weight: float = 0.2
    recency_weight: float = 0.1
    mmr_lambda: float = 0.7


class EmbeddingConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[embedding]``: static (the default), none, local or an OpenAI-compatible API.

    ``static`` (the default) embeds with a token table that ships in the package
    (numpy only, no model runs): ``model`` is ``all-MiniLM-L6-v2-static`` (the
    only one; may be left out), ``dims`` 1 to 128 (default 128), ``threads``
    must stay 1; recall is then a hybrid of keywords and these vectors.
    ``none`` stores no vectors: recall is keyword-only.
    ``local`` runs a model whose weights ship in a package (no network; the
    ``local-embeddings`` extra): ``model`` is ``all-MiniLM-L6-v2`` (the default
    for ``local``) or a sentence-transformers folder; ``dims``, when set, must
    be the model's. ``provider = "local"`` with ``model =
    "all-MiniLM-L6-v2-static"`` is the older spelling of ``static``.
    ``openai-compatible`` defaults to ``text-embedding-3-small``, 1536 dims.
    ``threads`` (``local`` only): the CPU threads one query's model pass and
    vector screen use; 1 costs the least CPU per recall (the query is embedded,
    and the vectors searched, on a worker thread while the keyword leg runs), 2
    or more gives the lowest
    latency (each step of a recall then runs on every thread, one after another).
    ``index`` (SQLite memory): ``exact`` (the default) scores every row in
    scope; ``ivf`` partitions the vectors into inverted lists and scores only
    the rows of the query's ``probes`` nearest lists (default 32) once a scope
    holds 16,384 rows or more: faster, and approximate (a nearest row in an
    unprobed list is missed; scopes stay exact).
    """

    provider: Literal["static", "none", "openai-compatible", "local"] = "static"
    base_url: Text | None = None
    model: Text | None = None
    dims: int | None = None
    api_key_env: Text = "OPENAI_API_KEY"
    threads: int = 1
    index: Literal["exact", "ivf"] = "exact"
    probes: int | None = None


class ProviderConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[providers.<name>]``: a model endpoint (keys come from the environment)."""

    kind: Literal["scripted", "openai-compatible", "anthropic"]
    model: str = ""
    base_url: Text | None = None
    api_key_env: Text | None = None
    script: Text | None = None
    timeout: float = 60.0


class BudgetConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[budgets]``: spending limits in USD (reference §8.1)."""

    enabled: bool = False
    daily_limit_usd: float = 10.0
    monthly_limit_usd: float = 100.0
    warn_at_percent: float = 80.0


class TelemetryConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[telemetry]``: OpenTelemetry spans by the GenAI conventions (off by default).

    ``console`` prints spans to stdout; ``otlp_endpoint`` sends them over
    OTLP/HTTP; ``capture_content`` adds the scrubbed, bounded user input and
    answer to the spans (off: counts, models, tokens and ids only).
    """

    console: bool = False
    otlp_endpoint: Text | None = None
    capture_content: bool = False
    service_name: Text = "turnledger"


class PrivacyConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[privacy]``: erasure of a session, an agent, a user key, a memory key.

    ``erasable`` seals every event of a session and every memory entry under a
    data key of its own, which ``turnledger erase`` destroys (crypto-shredding,
    ``turnledger.ledger.erasable``); it is on whenever a cipher key is set,
    whatever this says. The command line and the runtime honour it; a library
    caller passes ``open_store(..., erasable=True)``.
    """

    erasable: bool = False


class MemoryConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[memory]``: install-wide memory settings.

    ``backend`` (ADR-005's install-wide selector, a ``kind`` or ``kind.alias``
    reference) is the backend of every agent that names none (an agent's own
    ``[agents.<alias>.memory] backend`` wins). ``search_mode`` (``hybrid``,
    ``bm25`` or ``embedding``) and ``embedding_cache_size`` (vectors kept by
    content, 0: none; the static model's stored rows skip it, computing them
    costs less than reading it) set the SQLite memory backend's recall stages
    and cache (``embedding`` runs no keyword leg: a row is found only once its
    vector is committed).
    ``auto_save`` is the reference's spelling of ``autosave`` (one of the two).
    ``rewind_memory`` is what ``turnledger rewind`` does with the long-term
    memory its rewound turns wrote: ``keep`` it, or ``supersede`` each live
    entry (``rewind --memory`` overrides it).
    """

    backend: str = "sqlite"
    shredding: bool = False
    autosave: bool = True
    hygiene_hours: float = 0.0
    rewind_memory: str = "keep"
    search_mode: str = "hybrid"
    embedding_cache_size: int = 10_000


REWIND_MEMORY_RULES: Final = ("keep", "supersede")
"""The values of ``[memory] rewind_memory``."""

MEMORY_SEARCH_MODES: Final = ("hybrid", "bm25", "embedding")
"""The values of ``[memory] search_mode``."""


def recall_tuning(recall: RecallConfig) -> RecallTuning:
    """Return the ``[recall]`` rerank stages (decay, importance, MMR) as a tuning."""
    return RecallTuning(
        decay=recall.decay,
        importance_blend=recall.importance_blend,
        mmr=recall.mmr,
        half_life_days=recall.half_life_days,
        importance_weight=recall.importance_weight,
        recency_weight=recall.recency_weight,
        mmr_lambda=recall.mmr_lambda,
    )
