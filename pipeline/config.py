"""``turnledger.toml``: one file for the ledger, agents, storage, limits, providers.

Defaults work with no file at all: the ledger is ``./turnledger.db`` and any agent
name works on the default SQLite memory backend. Validation errors name the key
(with the agent's alias) and the problem (unknown backend, dangling peer, peer on
another backend kind, self-reference, missing URL, a number out of range).

An agent's memory is configured in the seed's layout (ADR-005, reference §3)::

    ledger = "./turnledger.db"

    [agents.ops.memory]
    backend = "sqlite"

    [agents.ops.workspace]
    read_memory_from = ["research"]

    [agents.research.memory]
    backend = "sqlite"

or with the flat keys, which stay a compatible spelling::

    [agents.ops]
    memory = "sqlite"
    read_memory_from = ["research"]

    [storage.postgres.shared]
    url = "postgresql://postgres@127.0.0.1:5432/test"
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Final, Literal

import msgspec

from turnledger.ledger.store import DEFAULT_PATH
from turnledger.pipeline.config_layout import (
    LayoutError,
    check_entries,
    check_numbers,
    located,
    seed_layout,
)
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    InputFileError,
    read_input_text,
)
from turnledger.policies.pricing import ModelPrice, PricingError, check_price
from turnledger.policies.recall import make_recall_selector
from turnledger.policies.recall_scope import RecallConfigError
from turnledger.policies.recall_tuning import RecallTuning, make_recall_tuner
from turnledger.policies.retention import RetentionConfigError
from turnledger.policies.scoping import (
    AgentMemoryConfig,
    AgentScope,
    ScopeConfigError,
    build_agent_scope,
    normalize_backend,
)

CONFIG_NAME: Final = "turnledger.toml"
CONFIG_ENV: Final = "TURNLEDGER_CONFIG"


class ConfigError(PipelineError, ValueError):
    """The configuration file is invalid; the message names the key."""


class AgentConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[agents.<alias>]`` (the seed's sub-tables are flattened into it first).

    Attributes:
        memory: The backend (``[agents.<alias>.memory] backend``).
        read_memory_from: Peers whose memory this agent may recall
            (``[agents.<alias>.workspace] read_memory_from``).
        workspace: The workspace directory (``[agents.<alias>.workspace] path``).
        strategy: The memory strategy.
        autosave: Whether turns autosave.
        provider: The provider name.
    """

    memory: str = "sqlite"
    read_memory_from: tuple[str, ...] = ()
    workspace: str | None = None
    strategy: Literal["default", "none"] = "default"
    autosave: bool = True
    provider: str | None = None


class StorageConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[storage.<kind>.<alias>]``: where a memory backend keeps its data."""

    path: str | None = None
    url: str | None = None
    collection: str | None = None
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
    """``[embedding]``: none (keyword only), local, or an OpenAI-compatible endpoint.

    ``local`` runs a model whose weights ship in a package (no network):
    ``model`` is ``all-MiniLM-L6-v2`` (the default for ``local``) or a
    sentence-transformers folder; ``dims``, when set, must be the model's.
    ``openai-compatible`` defaults to ``text-embedding-3-small``, 1536 dims.
    """

    provider: Literal["none", "openai-compatible", "local"] = "none"
    base_url: str | None = None
    model: str | None = None
    dims: int | None = None
    api_key_env: str = "OPENAI_API_KEY"


class ProviderConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[providers.<name>]``: a model endpoint (keys come from the environment)."""

    kind: Literal["scripted", "openai-compatible", "anthropic"]
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    script: str | None = None
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
    otlp_endpoint: str | None = None
    capture_content: bool = False
    service_name: str = "turnledger"


class MemoryConfig(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``[memory]``: install-wide memory settings.

    ``rewind_memory`` is what ``turnledger rewind`` does with the long-term
    memory its rewound turns wrote: ``keep`` it, or ``supersede`` each live
    entry (``rewind --memory`` overrides it).
    """

    shredding: bool = False
    autosave: bool = True
    hygiene_hours: float = 0.0
    rewind_memory: str = "keep"


REWIND_MEMORY_RULES: Final = ("keep", "supersede")
"""The values of ``[memory] rewind_memory``."""


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole configuration."""

    ledger: str | None = None
    views: str | None = None
    data_dir: str = "./turnledger-data"
    agents: dict[str, AgentConfig] = {}
    storage: dict[str, dict[str, StorageConfig]] = {}
    runtime: RuntimeConfig = RuntimeConfig()
    recall: RecallConfig = RecallConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    memory: MemoryConfig = MemoryConfig()
    providers: dict[str, ProviderConfig] = {}
    pricing: dict[str, ModelPrice] = {}
    budgets: BudgetConfig = BudgetConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    source: str | None = None

    def ledger_url(self) -> str:
        """The ledger: the file's ``ledger`` key, else the default path."""
        return self.ledger or DEFAULT_PATH

    def agent(self, alias: str) -> AgentConfig:
        """Return an agent's settings (defaults for an unconfigured agent)."""
        return self.agents.get(alias, AgentConfig())

    def scope(self, alias: str) -> AgentScope:
        """Return an agent's memory scope (own rows plus configured peers)."""
        if alias not in self.agents:
            return AgentScope(agent=alias, backend="sqlite.default", allowed=(alias,))
        return build_agent_scope(alias, _memory_configs(self))

    def storage_for(self, backend_ref: str) -> StorageConfig:
        """Return the storage settings of a ``kind.alias`` backend reference."""
        kind, _, alias = normalize_backend(backend_ref).partition(".")
        return self.storage.get(kind, {}).get(alias, StorageConfig())


def _memory_configs(config: Config) -> dict[str, AgentMemoryConfig]:
    return {
        alias: AgentMemoryConfig(backend=a.memory, read_memory_from=a.read_memory_from)
        for alias, a in config.agents.items()
    }


_NEEDS: Final = {"postgres": "url", "lucid": "command"}
_NAMED: Final[tuple[tuple[str, type], ...]] = (
    ("agents", AgentConfig),
    ("providers", ProviderConfig),
    ("pricing", ModelPrice),
)


def _check_scopes(config: Config, spelled: dict[tuple[str, str], str]) -> None:
    """Every backend known, every peer valid; errors name the key as spelled."""
    for alias, agent in config.agents.items():
        try:
            normalize_backend(agent.memory)
        except ScopeConfigError as e:
            key = spelled.get((alias, "memory"), f"agents.{alias}.memory")
            raise ConfigError(f"{key}: {e}") from None
    memory = _memory_configs(config)
    for alias in config.agents:
        try:
            build_agent_scope(alias, memory)
        except ScopeConfigError as e:
            name = (alias, "read_memory_from")
            key = spelled.get(name, f"agents.{alias}.read_memory_from")
            raise ConfigError(f"{key}: {e}") from None


def validate(
    config: Config, *, spelled: dict[tuple[str, str], str] | None = None
) -> Config:
    """Check cross-key rules: backends, peers, storage settings, number ranges.

    Args:
        config: The parsed configuration.
        spelled: How the file spelled an agent's keys (``(alias, field)`` to
            ``agents.<alias>.memory.backend`` ...), for the messages.

    Raises:
        ConfigError: A rule is broken; the message names the key (and alias).
    """
    _check_scopes(config, spelled or {})
    try:
        check_numbers(config)
    except LayoutError as e:
        raise ConfigError(str(e)) from None
    for alias, agent in config.agents.items():
        kind, _, storage_alias = normalize_backend(agent.memory).partition(".")
        needed = _NEEDS.get(kind)
        storage = config.storage_for(agent.memory)
        if needed and not getattr(storage, needed):
            msg = (
                f"agents.{alias}.memory = {agent.memory!r}: expected "
                f"storage.{kind}.{storage_alias}.{needed}, found none"
            )
            raise ConfigError(msg)
        if agent.provider and agent.provider not in config.providers:
            msg = (
                f"agents.{alias}.provider: expected one of "
                f"{sorted(config.providers)}, found {agent.provider!r}"
            )
            raise ConfigError(msg)
    for kind in config.storage:
        try:
            normalize_backend(kind)
        except ScopeConfigError as e:
            raise ConfigError(f"storage.{kind}: {e}") from None
    _check_recall(config.recall)
    _check_embedding(config)
    _check_pricing(config)
    if not 0 <= config.memory.hygiene_hours <= 24 * 366:
        msg = (
            "memory.hygiene_hours: expected 0 (off) to 8784 hours, found "
            f"{config.memory.hygiene_hours}"
        )
        raise ConfigError(msg)
    if config.memory.rewind_memory not in REWIND_MEMORY_RULES:
        msg = (
            "memory.rewind_memory: expected one of "
            f"{', '.join(REWIND_MEMORY_RULES)}, found {config.memory.rewind_memory!r}"
        )
        raise ConfigError(msg)
    return config


def _check_pricing(config: Config) -> None:
    """Every ``[pricing.<model>]`` rate finite and >= 0 (none silently zeroed)."""
    for model, price in config.pricing.items():
        try:
            check_price(price)
        except PricingError as e:
            raise ConfigError(f"pricing.{model}.{e}") from None


def _check_embedding(config: Config) -> None:
    if config.embedding.dims is not None and config.embedding.dims < 1:
        msg = f"embedding.dims: expected >= 1, found {config.embedding.dims}"
        raise ConfigError(msg)
    if config.embedding.provider != "none":
        return
    for alias, agent in config.agents.items():
        if normalize_backend(agent.memory).startswith("qdrant."):
            msg = (
                f"agents.{alias}.memory = {agent.memory!r}: Qdrant stores vectors "
                'only; expected an [embedding] provider ("local" or '
                '"openai-compatible"), found none'
            )
            raise ConfigError(msg)


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


def _check_recall(recall: RecallConfig) -> None:
    try:
        make_recall_tuner(recall_tuning(recall))
        make_recall_selector(
            min_relevance_score=recall.min_relevance,
            max_entries=recall.max_entries,
            entry_max_chars=recall.entry_max_chars,
            max_total_chars=recall.max_total_chars,
        )
    except (RetentionConfigError, RecallConfigError) as e:
        raise ConfigError(f"recall: {e}") from None


def parse_config(text: str, *, source: str = "<config>") -> Config:
    """Parse and validate TOML text.

    Raises:
        ConfigError: The text is not TOML, or a key is invalid.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: expected TOML, {e}") from None
    try:
        flat, spelled = seed_layout(raw)
    except LayoutError as e:
        raise ConfigError(f"{source}: {e}") from None
    named = (*_NAMED, ("storage.*", StorageConfig))
    try:
        check_entries(flat, spelled, named)
    except LayoutError as e:
        raise ConfigError(f"{source}: {e}") from None
    try:
        config = msgspec.convert({**flat, "source": source}, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {located(str(e), '', spelled)}") from None
    return validate(config, spelled=spelled)


def load_config(path: str | None = None) -> Config:
    """Load ``path``, else ``$TURNLEDGER_CONFIG``, else ``./turnledger.toml``.

    A missing default file gives the defaults; a missing named file is an error.
    ``os.devnull`` names no configuration (the defaults), as it does for other
    tools; any other device, FIFO or folder is refused.

    Raises:
        ConfigError: The file is invalid, or a named file does not exist.
    """
    chosen = path or os.environ.get(CONFIG_ENV)
    file = Path(chosen) if chosen else Path(CONFIG_NAME)
    if chosen == os.devnull:
        return Config()
    if not file.exists():
        if chosen:
            raise ConfigError(f"Expected a configuration file at {file}, found none")
        return Config()
    # A regular file, bounded, never a FIFO read that blocks (issue #17). The
    # bound is DEFAULT_MAX_INPUT_BYTES, not [runtime] max_input_bytes: the
    # configuration is read before that key exists.
    try:
        text = read_input_text(file, what="configuration file")
    except InputFileError as e:
        raise ConfigError(str(e)) from None
    return parse_config(text, source=str(file))
