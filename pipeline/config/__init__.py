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

An agent that names no backend takes the install-wide one (ADR-005)::

    [memory]
    backend = "postgres.shared"

or with the flat keys, which stay a compatible spelling::

    [agents.ops]
    memory = "sqlite"
    read_memory_from = ["research"]

    [storage.postgres.shared]
    url = "postgresql://postgres@127.0.0.1:5432/test"

This module holds :class:`Config` (the whole file), its cross-key validation
(number ranges included) and its loading; each table's Struct is in
:mod:`pipeline.config.sections`, the seed's layout in :mod:`pipeline.config.layout`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Final

import msgspec

from turnledger.ledger.location import DEFAULT_PATH
from turnledger.pipeline.config.layout import (
    LayoutError,
    check_entries,
    located,
    memory_table,
    seed_layout,
)
from turnledger.pipeline.config.sections import (
    MEMORY_SEARCH_MODES,
    REWIND_MEMORY_RULES,
    AgentConfig,
    BudgetConfig,
    EmbeddingConfig,
    MemoryConfig,
    PrivacyConfig,
    ProviderConfig,
    RecallConfig,
    RuntimeConfig,
    StorageConfig,
    TelemetryConfig,
    Text,
    recall_tuning,
)
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.inputs import (
    InputFileError,
    read_input_text,
)
from turnledger.policies.pricing import ModelPrice, PricingError, check_price
from turnledger.policies.recall import make_recall_selector
from turnledger.policies.recall_scope import RecallConfigError
from turnledger.policies.recall_tuning import make_recall_tuner
from turnledger.policies.retention import RetentionConfigError
from turnledger.policies.scoping import (
    AgentMemoryConfig,
    AgentScope,
    ScopeConfigError,
    build_agent_scope,
    normalize_backend,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
    "Config",
    "ConfigError",
    "load_config",
    "parse_config",
    "validate",
]

CONFIG_NAME: Final = "turnledger.toml"
CONFIG_ENV: Final = "TURNLEDGER_CONFIG"


class ConfigError(PipelineError, ValueError):
    """The configuration file is invalid; the message names the key."""


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole configuration."""

    ledger: Text | None = None
    views: Text | None = None
    data_dir: Text = "./turnledger-data"
    agents: dict[str, AgentConfig] = {}
    storage: dict[str, dict[str, StorageConfig]] = {}
    runtime: RuntimeConfig = RuntimeConfig()
    recall: RecallConfig = RecallConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    memory: MemoryConfig = MemoryConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    providers: dict[str, ProviderConfig] = {}
    pricing: dict[str, ModelPrice] = {}
    budgets: BudgetConfig = BudgetConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    source: str | None = None

    def ledger_url(self) -> str:
        """The ledger: the file's ``ledger`` key, else the default path."""
        return self.ledger or DEFAULT_PATH

    def agent(self, alias: str) -> AgentConfig:
        """Return an agent's settings (defaults for an unconfigured agent).

        Its ``memory`` is always set: the agent's own, else ``[memory] backend``.
        """
        agent = self.agents.get(alias, AgentConfig())
        if agent.memory is None:
            return msgspec.structs.replace(agent, memory=self.memory.backend)
        return agent

    def backend_of(self, alias: str) -> str:
        """Return an agent's backend reference: its own, else ``[memory] backend``."""
        agent = self.agents.get(alias)
        if agent is None or agent.memory is None:
            return self.memory.backend
        return agent.memory

    def scope(self, alias: str) -> AgentScope:
        """Return an agent's memory scope (own rows plus configured peers)."""
        if alias not in self.agents:
            backend = normalize_backend(self.memory.backend)
            return AgentScope(agent=alias, backend=backend, allowed=(alias,))
        return build_agent_scope(alias, _memory_configs(self))

    def storage_for(self, backend_ref: str) -> StorageConfig:
        """Return the storage settings of a ``kind.alias`` backend reference."""
        kind, _, alias = normalize_backend(backend_ref).partition(".")
        return self.storage.get(kind, {}).get(alias, StorageConfig())


def _memory_configs(config: Config) -> dict[str, AgentMemoryConfig]:
    return {
        alias: AgentMemoryConfig(
            backend=config.backend_of(alias), read_memory_from=a.read_memory_from
        )
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
    try:
        normalize_backend(config.memory.backend)
    except ScopeConfigError as e:
        raise ConfigError(f"memory.backend: {e}") from None
    for alias, agent in config.agents.items():
        if agent.memory is None:
            continue  # [memory] backend, checked above
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
    _check_numbers(config)
    for key, backend in _backend_keys(config):
        kind, _, storage_alias = normalize_backend(backend).partition(".")
        needed = _NEEDS.get(kind)
        storage = config.storage_for(backend)
        if needed and not getattr(storage, needed):
            msg = (
                f"{key} = {backend!r}: expected "
                f"storage.{kind}.{storage_alias}.{needed}, found none"
            )
            raise ConfigError(msg)
    for alias, agent in config.agents.items():
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
    _check_memory(config)
    if config.memory.rewind_memory not in REWIND_MEMORY_RULES:
        msg = (
            "memory.rewind_memory: expected one of "
            f"{', '.join(REWIND_MEMORY_RULES)}, found {config.memory.rewind_memory!r}"
        )
        raise ConfigError(msg)
    return config


def _backend_keys(config: Config) -> list[tuple[str, str]]:
    """Every backend the file selects, with its key: ``[memory]``'s, then agents'."""
    keys = [("memory.backend", config.memory.backend)]
    keys += [
        (f"agents.{alias}.memory", agent.memory)
        for alias, agent in config.agents.items()
        if agent.memory is not None
    ]
    return keys


def _check_memory(config: Config) -> None:
    """``[memory] search_mode`` one of the modes, ``embedding_cache_size`` >= 0."""
    memory = config.memory
    if memory.search_mode not in MEMORY_SEARCH_MODES:
        msg = (
            f"memory.search_mode: expected one of {', '.join(MEMORY_SEARCH_MODES)}, "
            f"found {memory.search_mode!r}"
        )
        raise ConfigError(msg)
    if not 0 <= memory.embedding_cache_size <= 100_000_000:
        msg = (
            "memory.embedding_cache_size: expected 0 (none) to 100000000 vectors, "
            f"found {memory.embedding_cache_size}"
        )
        raise ConfigError(msg)


RANGES: Final[tuple[tuple[str, str, float, float], ...]] = (
    ("runtime", "max_tool_result_chars", 0, 100_000_000),
    ("runtime", "context_budget_tokens", 0, 100_000_000),
    ("runtime", "max_tool_iterations", 1, 10_000),
    ("runtime", "tool_concurrency", 1, 1_024),
    ("runtime", "max_media_bytes", 0, 1 << 40),
    ("runtime", "max_input_bytes", 1, 1 << 40),
    ("runtime", "max_response_chars", 0, 1 << 30),
    ("recall", "limit", 0, 10_000),
    ("recall", "min_relevance", 0.0, 1.0),
    ("recall", "max_entries", 0, 10_000),
    ("recall", "entry_max_chars", 0, 10_000_000),
    ("recall", "max_total_chars", 0, 100_000_000),
    ("embedding", "dims", 1, 65_536),
    ("budgets", "daily_limit_usd", 0.0, 1e12),
    ("budgets", "monthly_limit_usd", 0.0, 1e12),
    ("budgets", "warn_at_percent", 0.0, 100.0),
)
"""Numbers with a range (inclusive): anything outside is refused at load."""

MAX_TIMEOUT_S: Final = 86_400.0
"""The longest provider timeout accepted (a day)."""


def _check_numbers(config: Config) -> None:
    """Refuse negative or absurd numbers, naming the key and the value."""
    for section, name, low, high in RANGES:
        value = getattr(getattr(config, section), name)
        if value is not None and not low <= value <= high:
            msg = f"{section}.{name}: expected {low}..{high}, found {value!r}"
            raise ConfigError(msg)
    for name, provider in config.providers.items():
        if not 0 < provider.timeout <= MAX_TIMEOUT_S:
            msg = (
                f"providers.{name}.timeout: expected more than 0 and at most "
                f"{MAX_TIMEOUT_S:g} seconds, found {provider.timeout!r}"
            )
            raise ConfigError(msg)


def _check_pricing(config: Config) -> None:
    """Every ``[pricing.<model>]`` rate finite and >= 0 (none silently zeroed)."""
    for model, price in config.pricing.items():
        try:
            check_price(price)
        except PricingError as e:
            raise ConfigError(f"pricing.{model}.{e}") from None


MAX_EMBEDDING_THREADS = 256
"""The most ``[embedding] threads`` may ask for (more is a typo, not a machine)."""


STATIC_MODEL: Final = "all-MiniLM-L6-v2-static"
"""The static model's name (the embedder's own, spelt here so that loading a
config imports no embedder; a test checks they agree)."""

MAX_STATIC_DIMS: Final = 128
"""The columns of the static model's shipped table."""


def is_static(embedding: EmbeddingConfig) -> bool:
    """Whether ``[embedding]`` names the shipped static model (either spelling)."""
    if embedding.provider == "static":
        return True
    return embedding.provider == "local" and embedding.model == STATIC_MODEL


def _check_static(embedding: EmbeddingConfig) -> None:
    """The static model: its one name, ``dims`` within its table, no threads."""
    if not is_static(embedding):
        return
    if embedding.model not in {None, STATIC_MODEL}:
        msg = (
            f'embedding.model: expected {STATIC_MODEL!r} with provider = "static" '
            f'(or provider = "local" for another model), found {embedding.model!r}'
        )
        raise ConfigError(msg)
    if embedding.base_url is not None:
        msg = (
            'embedding.base_url: expected only with provider = "openai-compatible",'
            f" found it with {STATIC_MODEL!r}"
        )
        raise ConfigError(msg)
    if embedding.dims is not None and embedding.dims > MAX_STATIC_DIMS:
        msg = (
            f"embedding.dims: expected 1 to {MAX_STATIC_DIMS} for {STATIC_MODEL}, "
            f"found {embedding.dims}"
        )
        raise ConfigError(msg)
    if embedding.threads != 1:
        msg = (
            f"embedding.threads: expected 1 with model = {STATIC_MODEL!r} (it runs "
            f"no model at query time), found {embedding.threads}"
        )
        raise ConfigError(msg)


def _check_embedding(config: Config) -> None:
    if config.embedding.dims is not None and config.embedding.dims < 1:
        msg = f"embedding.dims: expected >= 1, found {config.embedding.dims}"
        raise ConfigError(msg)
    threads = config.embedding.threads
    if not 1 <= threads <= MAX_EMBEDDING_THREADS:
        msg = (
            f"embedding.threads: expected 1 to {MAX_EMBEDDING_THREADS}, found {threads}"
        )
        raise ConfigError(msg)
    if threads != 1 and config.embedding.provider != "local":
        msg = (
            'embedding.threads: expected only with provider = "local" (it sets '
            f"the local model's CPU threads), found provider = "
            f"{config.embedding.provider!r}"
        )
        raise ConfigError(msg)
    _check_static(config.embedding)
    _check_index(config)
    if config.embedding.provider != "none":
        return
    for key, backend in _backend_keys(config):
        if normalize_backend(backend).startswith("qdrant."):
            msg = (
                f"{key} = {backend!r}: Qdrant stores vectors "
                'only; expected an [embedding] provider ("static", "local" or '
                '"openai-compatible"), found none'
            )
            raise ConfigError(msg)


MAX_PROBES = 65_536
"""The most ``[embedding] probes`` may ask for (a million rows have 1,000 lists)."""


def _check_index(config: Config) -> None:
    """``index = "ivf"`` only with vectors; ``probes`` only with it, in range.

    It acts on SQLite memory (the default backend, also of any agent not
    listed); PostgreSQL and Qdrant search vectors their own way.
    """
    embedding = config.embedding
    if embedding.probes is not None and embedding.index != "ivf":
        msg = (
            'embedding.probes: expected only with index = "ivf" (it sets how '
            f"many inverted lists a search scores), found index = {embedding.index!r}"
        )
        raise ConfigError(msg)
    if embedding.probes is not None and not 1 <= embedding.probes <= MAX_PROBES:
        msg = f"embedding.probes: expected 1 to {MAX_PROBES}, found {embedding.probes}"
        raise ConfigError(msg)
    if embedding.index != "ivf":
        return
    if embedding.provider == "none":
        msg = (
            'embedding.index: expected "exact" with provider = "none" (there are '
            'no vectors to index), found "ivf"'
        )
        raise ConfigError(msg)


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
        flat, spelled = seed_layout(memory_table(raw))
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
