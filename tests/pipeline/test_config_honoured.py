"""Every configuration key that is parsed is read somewhere (never silently ignored).

A static check: each field of every ``msgspec.Struct`` in ``pipeline/config/__init__.py`` and
``pipeline/config/sections.py`` must be read (``.name``) or named (``"name"``) by a
module of the packages other than the config modules themselves (``config.py``,
``config/sections.py``, ``config/layout.py``), or be translated by a config module into
policy settings (``name=section.name``). A key nothing reads fails here with its section and name.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from turnledger.pipeline import config as config_module
from turnledger.pipeline.config import sections as config_sections

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "policies", "projections", "pipeline", "adapters")


def _config_fields() -> list[tuple[str, str]]:
    fields = set()
    for module in (config_module, config_sections):
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == module.__name__
            ):
                fields.update((name, field) for field in value.__struct_fields__)
    return sorted(fields)


def _sources(*, leave_out: tuple[str, ...] = ()) -> tuple[str, str]:
    config_paths = (
        ROOT / "pipeline" / "config" / "__init__.py",
        ROOT / "pipeline" / "config" / "sections.py",
    )
    skipped = {*config_paths, ROOT / "pipeline" / "config" / "layout.py"}
    skipped |= {ROOT / name for name in leave_out}
    others = "\n".join(
        path.read_text()
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path not in skipped
    )
    return others, "\n".join(path.read_text() for path in config_paths)


def _ignored(others: str, own: str) -> list[str]:
    return [
        f"{section}.{field}"
        for section, field in _config_fields()
        if not re.search(rf"\.{field}\b|[\"']{field}[\"']", others)
        and not re.search(rf"\b\w+=\w+\.{field}\b", own)
    ]


def test_there_are_config_fields():
    assert len(_config_fields()) > 30


def test_every_config_key_is_read():
    """No key of ``Config`` is parsed and then ignored."""
    assert _ignored(*_sources()) == []


def test_the_check_sees_a_key_nobody_reads():
    """Leaving out the one module that reads ``max_media_bytes`` names that key."""
    others, own = _sources(leave_out=("pipeline/bootstrap.py",))
    assert "RuntimeConfig.max_media_bytes" in _ignored(others, own)
