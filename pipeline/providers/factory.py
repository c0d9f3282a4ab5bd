"""Build a provider from its settings (``[providers.<name>]`` in the config).

Keys are read from the environment variable the settings name, never from the
settings themselves, and errors name the variable, never its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias, get_args

import httpx

from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES
from turnledger.pipeline.providers._http import ProviderConfigError
from turnledger.pipeline.providers.anthropic import (
    DEFAULT_BASE_URL as ANTHROPIC_BASE_URL,
)
from turnledger.pipeline.providers.anthropic import AnthropicProvider
from turnledger.pipeline.providers.base import Provider
from turnledger.pipeline.providers.openai_compatible import OpenAICompatibleProvider
from turnledger.pipeline.providers.scripted import ScriptedProvider

__all__ = [
    "OPENAI_BASE_URL",
    "PROVIDER_KINDS",
    "MissingApiKeyError",
    "ProviderConfigError",
    "ProviderKind",
    "make_provider",
]

ProviderKind: TypeAlias = Literal["scripted", "openai-compatible", "anthropic"]
"""The providers :func:`make_provider` builds."""

PROVIDER_KINDS: Final[tuple[str, ...]] = get_args(ProviderKind)

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
"""The default base URL of the ``openai-compatible`` kind."""

_DEFAULT_KEY_ENV: Final = {
    "openai-compatible": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


class MissingApiKeyError(ProviderConfigError):
    """The environment variable that should hold a key is unset or empty.

    Attributes:
        variable: The variable's name.
    """

    def __init__(self, variable: str, kind: str) -> None:
        self.variable = variable
        super().__init__(
            f"Expected the {kind} API key in the environment variable {variable},"
            " found it unset or empty"
        )


def make_provider(
    kind: str,
    *,
    model: str = "",
    base_url: str | None = None,
    api_key_env: str | None = None,
    script: str | None = None,
    timeout: float = 60.0,
    environ: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> Provider:
    """Build a provider.

    Args:
        kind: ``scripted``, ``openai-compatible`` or ``anthropic``.
        model: The model (required for the HTTP kinds; for ``scripted`` it
            overrides the script's).
        base_url: The server; defaults to OpenAI's or Anthropic's API.
        api_key_env: The environment variable holding the key. Defaults to
            ``OPENAI_API_KEY`` for api.openai.com and ``ANTHROPIC_API_KEY`` for
            ``anthropic``; other OpenAI-compatible servers need none.
        script: The script file of the ``scripted`` kind.
        timeout: Seconds per request (HTTP kinds).
        environ: Where keys are read (default: ``os.environ``).
        max_bytes: The largest script file read (``[runtime] max_input_bytes``).

    Returns:
        The provider.

    Raises:
        MissingApiKeyError: A key is needed (Anthropic, api.openai.com, or a
            variable was named) and its variable is unset or empty.
        ProviderConfigError: The kind is unknown, or a setting it needs is
            missing or invalid.
        ScriptFormatError: The script file does not follow the format.
    """
    env = os.environ if environ is None else environ
    if kind == "scripted":
        if not script:
            msg = "Expected a script file for the scripted provider, found none"
            raise ProviderConfigError(msg)
        return ScriptedProvider.from_file(
            script, model=model or None, max_bytes=max_bytes
        )
    if kind not in _DEFAULT_KEY_ENV:
        msg = f"Expected a provider kind in {list(PROVIDER_KINDS)}, found {kind!r}"
        raise ProviderConfigError(msg)
    if not model:
        msg = f"Expected a model name for the {kind} provider, found none"
        raise ProviderConfigError(msg)
    if kind == "anthropic":
        key = _api_key(kind, api_key_env, env, required=True)
        return AnthropicProvider(
            base_url or ANTHROPIC_BASE_URL, model=model, api_key=key, timeout=timeout
        )
    url = base_url or OPENAI_BASE_URL
    key = _api_key(kind, api_key_env, env, required=_is_openai(url))
    return OpenAICompatibleProvider(url, model, api_key=key, timeout=timeout)


def _is_openai(base_url: str) -> bool:
    try:
        return httpx.URL(base_url).host == "api.openai.com"
    except httpx.InvalidURL:
        return False


def _api_key(
    kind: str, variable: str | None, env: Mapping[str, str], *, required: bool
) -> str | None:
    # A named variable is always expected to be set: an unset one is a mistake
    # better reported here than as a 401 from the server.
    if variable is None and not required:
        return None
    name = variable or _DEFAULT_KEY_ENV[kind]
    key = env.get(name, "").strip()
    if not key:
        raise MissingApiKeyError(name, kind)
    return key
