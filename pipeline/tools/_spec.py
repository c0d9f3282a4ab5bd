"""The JSON-schema tool spec every workspace file tool describes itself with.

Shared by :mod:`pipeline.tools.file_tools` (``file_read``, ``file_write``) and
:mod:`pipeline.tools.search_tools` (``glob_search``, ``content_search``): a
tool's parameters are one JSON object with named properties, some required.
"""

from __future__ import annotations

from typing import Any, Final

from turnledger.pipeline.providers.base import ToolSpec

KIB: Final = 1024
"""A kibibyte, the unit of the tools' byte bounds."""


def object_spec(
    name: str, description: str, properties: dict[str, Any], *required: str
) -> ToolSpec:
    """Return a spec whose parameters are an object of ``properties``."""
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": list(required),
        },
    )
