"""Workspace confinement shared by the file tools.

Every path the model names is confined with :func:`policies.paths.confine_path`
against the workspace, resolving with :func:`os.path.realpath`; blocking file work
runs in a worker thread and its refusals and OS errors become failed outcomes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, Final

from turnledger.pipeline.tools._arguments import ArgumentError, failure, ok
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.paths import PathAllowed, PathRefused, confine_path


class PathError(Exception):
    """A path was refused or cannot be used; the message says why."""


SHOWN_CHARS: Final = 200
"""An error quotes at most this many characters of a caller's path or pattern."""


def shown(value: str) -> str:
    """Return ``repr`` of ``value``, cut to :data:`SHOWN_CHARS` characters."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return repr(value[:SHOWN_CHARS]) + f"\u2026 ({len(value)} characters)"


def workspace_root(context: ToolContext) -> str:
    """Return the agent's workspace as an absolute path."""
    return os.path.abspath(context.workspace)  # noqa: PTH100 - the policy takes str


def confine(path: str, root: str) -> PathAllowed:
    """Confine ``path`` to ``root`` (resolving symlinks with ``os.path.realpath``).

    Raises:
        PathError: The path is refused; the message gives the reason.
    """
    decision = confine_path(path, root=root, resolve=os.path.realpath)
    if isinstance(decision, PathRefused):
        msg = f"Path refused ({decision.reason}): {decision.detail}"
        raise PathError(msg)
    return decision


async def attempt(function: Callable[..., str], *args: Any, what: str) -> ToolOutcome:
    """Run blocking file work in a thread; refusals and OS errors are outcomes."""
    try:
        return ok(await asyncio.to_thread(function, *args))
    except (PathError, ArgumentError) as e:
        return failure(str(e))
    except OSError as e:
        return failure(f"Failed to {what}: {e.strerror or e}")
