"""Policies: the pure rules of the payload lifecycle.

Values in, frozen decision Structs out: no I/O, no clock, no randomness, no
logging. Everything variable (time, file existence, path resolution) is a
parameter.

This package exports the neutral message model and the one entry point of each
rule; everything else (constants, decision types, helpers) is imported from the
rule's own module, e.g. ``turnledger.policies.trimming``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnledger.policies.autosave import decide_autosave
    from turnledger.policies.bounding import bound_tool_result, make_result_bounder
    from turnledger.policies.errors import PolicyError
    from turnledger.policies.images import promote_image_paths
    from turnledger.policies.media import admit_media_file, media_kind
    from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message
    from turnledger.policies.pairing import audit_pairing
    from turnledger.policies.pairing_repair import repair_pairing
    from turnledger.policies.paths import confine_path, sanitize_session_key
    from turnledger.policies.pricing import price_usage
    from turnledger.policies.recall import inject_memory_context, make_recall_selector
    from turnledger.policies.repair import repair_interrupted_turn
    from turnledger.policies.scoping import build_agent_scope
    from turnledger.policies.scrubbing import scrub_text
    from turnledger.policies.structured_scrubbing import scrub_json
    from turnledger.policies.trimming import trim_after_overflow, trim_to_budget

# Each name loads its rule's module when first asked for, so importing one rule
# (``turnledger.policies.messages``) does not load them all.
_HOME: dict[str, str] = {
    "Message": "messages",
    "PolicyError": "errors",
    "ToolCall": "messages",
    "ToolResult": "messages",
    "admit_media_file": "media",
    "audit_pairing": "pairing",
    "bound_tool_result": "bounding",
    "build_agent_scope": "scoping",
    "confine_path": "paths",
    "decide_autosave": "autosave",
    "inject_memory_context": "recall",
    "make_message": "messages",
    "make_recall_selector": "recall",
    "make_result_bounder": "bounding",
    "media_kind": "media",
    "price_usage": "pricing",
    "promote_image_paths": "images",
    "repair_interrupted_turn": "repair",
    "repair_pairing": "pairing_repair",
    "sanitize_session_key": "paths",
    "scrub_json": "structured_scrubbing",
    "scrub_text": "scrubbing",
    "trim_after_overflow": "trimming",
    "trim_to_budget": "trimming",
}

__all__ = [
    "Message",
    "PolicyError",
    "ToolCall",
    "ToolResult",
    "admit_media_file",
    "audit_pairing",
    "bound_tool_result",
    "build_agent_scope",
    "confine_path",
    "decide_autosave",
    "inject_memory_context",
    "make_message",
    "make_recall_selector",
    "make_result_bounder",
    "media_kind",
    "price_usage",
    "promote_image_paths",
    "repair_interrupted_turn",
    "repair_pairing",
    "sanitize_session_key",
    "scrub_json",
    "scrub_text",
    "trim_after_overflow",
    "trim_to_budget",
]


def __getattr__(name: str) -> Any:
    """Load ``name`` from its rule's module on first use."""
    home = _HOME.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
