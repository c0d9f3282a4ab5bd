"""Workspace confinement shared by the file tools.

Every path the model names is confined with :func:`policies.paths.confine_path`
against the workspace, resolving with :func:`os.path.realpath`; blocking file work
runs in a worker thread and its refusals and OS errors become failed outcomes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from turnledger.pipeline.tools._arguments import ArgumentError, failure, ok
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.paths import PathAllowed, PathRefused, confine_path


class PathError(Exception):
    """A path was refused or cannot be used; the message says why."""


NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
"""Refuse to open a final symlink (one swapped in after the check)."""


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


def inside(candidate: Path, real_root: str) -> str | None:
    """Return ``candidate`` relative to ``real_root`` when it is a file inside it.

    ``candidate`` is a path found by walking ``real_root`` (the resolved
    workspace); it is confined again so a symlink pointing out is dropped.
    """
    relative = candidate.relative_to(real_root).as_posix()
    decision = confine_path(relative, root=real_root, resolve=os.path.realpath)
    if isinstance(decision, PathRefused) or not Path(decision.path).is_file():
        return None
    return relative


async def attempt(function: Callable[..., str], *args: Any, what: str) -> ToolOutcome:
    """Run blocking file work in a thread; refusals and OS errors are outcomes."""
    try:
        return ok(await asyncio.to_thread(function, *args))
    except (PathError, ArgumentError) as e:
        return failure(str(e))
    except OSError as e:
        return failure(f"Failed to {what}: {e.strerror or e}")
