"""Issue #11 item 8 (and #17 item 1): the seed's config layout, and numbers in range.

Every bad layout names its culprit: the agent's alias and the key as the file
spelled it.
"""

from __future__ import annotations

import pytest

from turnledger.pipeline.cli import main
from turnledger.pipeline.config import ConfigError, parse_config

SEED = """
[agents.alpha.memory]
backend = "sqlite"

[agents.alpha.workspace]
read_memory_from = ["beta"]
path = "./alpha-workspace"

[agents.beta.memory]
backend = "sqlite"

[agents.gamma.memory]
backend = "postgres.shared"

[storage.postgres.shared]
url = "postgresql://postgres@127.0.0.1:5432/test"
"""


def test_the_seed_layout_is_accepted_as_adr_005_describes():
    """`[agents.<alias>.memory] backend` and `.workspace] read_memory_from` work."""
    config = parse_config(SEED)
    assert config.agent("alpha").memory == "sqlite"
    assert config.agent("alpha").read_memory_from == ("beta",)
    assert config.agent("alpha").workspace == "./alpha-workspace"
    assert config.scope("alpha").allowed == ("alpha", "beta")
    assert config.scope("gamma").backend == "postgres.shared"
    assert config.storage_for("postgres.shared").url.startswith("postgresql://")


def test_the_flat_keys_stay_a_compatible_spelling():
    """The flat layout gives the same configuration."""
    flat = parse_config(
        """
        [agents.alpha]
        memory = "sqlite"
        read_memory_from = ["beta"]
        workspace = "./alpha-workspace"

        [agents.beta]
        memory = "sqlite"
        """
    )
    seed = parse_config(SEED.split("[agents.gamma.memory]", maxsplit=1)[0])
    assert flat.agents == seed.agents


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[agents.alpha.memory]\nbackend = "mysql"\n',
            "agents.alpha.memory.backend: Expected a memory backend kind in",
        ),
        (
            (
                '[agents.alpha.memory]\nbackend = "sqlite"\n'
                '[agents.alpha.workspace]\nread_memory_from = ["ghost"]\n'
            ),
            (
                "agents.alpha.workspace.read_memory_from: Agent 'alpha' reads memory "
                "from 'ghost'; expected a configured agent"
            ),
        ),
        (
            '[agents.alpha.workspace]\nread_memory_from = ["alpha"]\n',
            "agents.alpha.workspace.read_memory_from: Agent 'alpha' lists itself",
        ),
        (
            (
                '[agents.alpha.memory]\nbackend = "sqlite"\n'
                '[agents.alpha.workspace]\nread_memory_from = ["beta"]\n'
                '[agents.beta.memory]\nbackend = "markdown"\n'
            ),
            (
                "agents.alpha.workspace.read_memory_from: Agent 'alpha' (backend "
                "'sqlite.default') reads memory from 'beta' (backend 'markdown.default')"
            ),
        ),
        (
            '[agents.alpha.memory]\nbackend = "postgres"\n',
            "agents.alpha.memory = 'postgres': expected storage.postgres.default.url",
        ),
        (
            "[agents.alpha.memory]\nbackend = 7\n",
            "<config>: agents.alpha.memory.backend: Expected `str | null`, got `int`",
        ),
        (
            '[agents.alpha.workspace]\nread_memory_from = ["b", 3]\n',
            "<config>: agents.alpha.workspace.read_memory_from[1]: Expected `str`",
        ),
        (
            '[agents.alpha.memory]\nbackend = "sqlite"\nkind = "x"\n',
            (
                "<config>: agents.alpha.memory.kind: expected one of ['backend'], "
                "found an unknown key"
            ),
        ),
        (
            (
                '[agents.alpha]\nread_memory_from = ["b"]\n'
                '[agents.alpha.workspace]\nread_memory_from = ["b"]\n'
            ),
            (
                "<config>: agents.alpha.workspace.read_memory_from: expected it once, "
                "found it also as agents.alpha.read_memory_from"
            ),
        ),
        (
            '[agents.alpha]\nmemory = "sqlite"\ncolour = "red"\n',
            "<config>: agents.alpha: Object contains unknown field `colour`",
        ),
        (
            '[agents.alpha]\nread_memory_from = ["alpha"]\n',
            "agents.alpha.read_memory_from: Agent 'alpha' lists itself",
        ),
    ],
)
def test_every_bad_layout_names_the_alias_and_the_key(text, message):
    """Unknown backend, dangling peer, self-reference, other backend kind, types."""
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    assert str(raised.value).startswith(message), str(raised.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[runtime]\ncontext_budget_tokens = -5\n",
            "runtime.context_budget_tokens: expected 0..100000000, found -5",
        ),
        (
            "[runtime]\nmax_tool_result_chars = -1\n",
            "runtime.max_tool_result_chars: expected 0..100000000, found -1",
        ),
        (
            "[runtime]\nmax_tool_iterations = 0\n",
            "runtime.max_tool_iterations: expected 1..10000, found 0",
        ),
        (
            "[runtime]\ntool_concurrency = 100000\n",
            "runtime.tool_concurrency: expected 1..1024, found 100000",
        ),
        (
            "[recall]\nmin_relevance = 1.5\n",
            "recall.min_relevance: expected 0.0..1.0, found 1.5",
        ),
        (
            "[budgets]\ndaily_limit_usd = -1.0\n",
            "budgets.daily_limit_usd: expected 0.0..1000000000000.0, found -1.0",
        ),
        (
            '[providers.p]\nkind = "scripted"\ntimeout = 0\n',
            (
                "providers.p.timeout: expected more than 0 and at most 86400 seconds, "
                "found 0.0"
            ),
        ),
    ],
)
def test_negative_or_absurd_numbers_are_refused_naming_key_and_value(text, message):
    """Issue #17 item 1: the number and its key are in the message."""
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('ledger = ""\n', "ledger"),
        ('views = ""\n', "views"),
        ('data_dir = ""\n', "data_dir"),
        ('[agents.a.workspace]\npath = ""\n', "agents.a.workspace.path"),
        ('[agents.a]\nprovider = ""\n', "agents.a.provider"),
        ('[storage.sqlite.x]\npath = ""\n', "storage.sqlite.x.path"),
        ('[storage.qdrant.x]\nurl = ""\n', "storage.qdrant.x.url"),
        ('[storage.qdrant.x]\ncollection = ""\n', "storage.qdrant.x.collection"),
        ('[embedding]\nbase_url = ""\n', "embedding.base_url"),
        ('[embedding]\nmodel = ""\n', "embedding.model"),
        ('[embedding]\napi_key_env = ""\n', "embedding.api_key_env"),
        ('[providers.p]\nkind = "scripted"\nscript = ""\n', "providers.p.script"),
        (
            '[providers.p]\nkind = "openai-compatible"\nbase_url = ""\n',
            "providers.p.base_url",
        ),
        (
            '[providers.p]\nkind = "anthropic"\napi_key_env = ""\n',
            "providers.p.api_key_env",
        ),
        ('[telemetry]\notlp_endpoint = ""\n', "telemetry.otlp_endpoint"),
        ('[telemetry]\nservice_name = ""\n', "telemetry.service_name"),
    ],
)
def test_an_empty_text_is_refused_not_read_as_unset(text, key):
    """An empty ``ledger`` was the default ledger, an empty ``data_dir`` the
    working directory: each is refused, naming its key."""
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    assert str(raised.value).endswith(f" {key}: expected text, found an empty one")


def test_the_cli_refuses_a_bad_seed_layout_in_one_line(capsys, tmp_path):
    """At the CLI: one line on stderr naming alias and key, exit 2."""
    config = tmp_path / "turnledger.toml"
    config.write_text('[agents.alpha.workspace]\nread_memory_from = ["ghost"]\n')
    code = main(["--config", str(config), "memory", "list", "--agent", "alpha"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1
    assert "agents.alpha.workspace.read_memory_from" in err
    assert "'ghost'" in err


def test_the_example_configuration_loads():
    """examples/turnledger.toml (the seed layout) is valid."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "turnledger.toml"
    config = parse_config(example.read_text(), source=str(example))
    assert config.scope("ops").allowed == ("ops", "research")


def test_a_type_error_outside_the_agents_names_its_key():
    """Sections without aliases are named by msgspec's own path."""
    with pytest.raises(ConfigError) as raised:
        parse_config("[runtime]\ncontext_budget_tokens = 'lots'\n")
    assert str(raised.value) == (
        "<config>: runtime.context_budget_tokens: Expected `int`, got `str`"
    )
    with pytest.raises(ConfigError) as raised:
        parse_config('[providers.local]\nkind = "psychic"\n')
    assert (
        str(raised.value)
        == "<config>: providers.local.kind: Invalid enum value 'psychic'"
    )


def test_a_bad_storage_entry_names_kind_and_alias():
    """`[storage.<kind>.<alias>]` errors name both."""
    with pytest.raises(ConfigError) as raised:
        parse_config("[storage.postgres.shared]\nurl = 5\n")
    assert str(raised.value) == (
        "<config>: storage.postgres.shared.url: Expected `str | null`, got `int`"
    )
