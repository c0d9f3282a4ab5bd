"""Loading YAML safely, including against alias cycles and alias bombs.

YAML aliases let one node appear many times: a node may contain itself (a
cycle, which makes comparisons recurse forever) or nest references that expand
exponentially ("billion laughs"). Recorders do not write either, so a document
with a cycle, or one that would expand past :data:`MAX_NODES`, is refused.
"""

from __future__ import annotations

from typing import cast

from turnledger.pipeline.formats.model import TranscriptError

MAX_NODES = 5_000_000
"""The most nodes a document may have once its aliases are expanded."""

_IN_PROGRESS = 1
_DONE = 2


def load_yaml(data: bytes, *, expected: str) -> object:
    """Parse YAML with the safe loader, refusing cycles and alias bombs.

    Args:
        data: The document's bytes.
        expected: What the format expects, for the error message.

    Returns:
        The loaded document.

    Raises:
        TranscriptError: The data is not YAML, nests too deeply, or uses aliases
            to form a cycle or to expand past :data:`MAX_NODES` nodes.
    """
    # Loaded here: only cassettes are YAML, and detecting the other formats
    # (``turnledger audit`` of a JSON file) need not load PyYAML.
    import yaml  # noqa: PLC0415

    # The safe loader, libyaml's when PyYAML was built with it.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        document = yaml.load(data, Loader=loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        msg = f"Expected {expected}, found invalid YAML: {first}"
        raise TranscriptError(msg) from error
    except RecursionError as error:
        msg = f"Expected {expected}, found YAML nested too deeply to read"
        raise TranscriptError(msg) from error
    problem = _alias_problem(document)
    if problem:
        msg = f"Expected {expected}, found YAML aliases that {problem}"
        raise TranscriptError(msg)
    return document


def _children(node: object) -> list[object] | None:
    if isinstance(node, dict):
        return list(cast("dict[object, object]", node).values())
    if isinstance(node, list):
        return cast("list[object]", node)
    return None


def _alias_problem(root: object) -> str:
    """Walk the node graph once (no recursion); describe a cycle or a bomb."""
    sizes: dict[int, int] = {}
    state: dict[int, int] = {}
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        children = _children(node)
        if children is None:
            continue
        key = id(node)
        if leaving:
            sizes[key] = 1 + sum(sizes.get(id(child), 1) for child in children)
            state[key] = _DONE
            if sizes[key] > MAX_NODES:
                return f"expand to more than {MAX_NODES:,} nodes"
        elif state.get(key) == _IN_PROGRESS:
            return "form a cycle"
        elif state.get(key) != _DONE:
            state[key] = _IN_PROGRESS
            stack.append((node, True))
            stack.extend((child, False) for child in children)
    return ""
