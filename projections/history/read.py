"""Reading a session-history state out: what a provider is sent, and its digest.

:func:`visible_messages` is the provider-visible history (a breadcrumb standing
for what trims hid, then the kept messages), :func:`provider_messages` the same
with the recorded system prompts in place, :func:`current_instructions` the
system prompt in effect, and :func:`history_digest` the digest a prompt records
for its history section (replay re-derives it and compares). They read a
:class:`~turnledger.projections.history.state.SessionHistoryState` and never
change it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import msgspec

from turnledger.policies.messages import BREADCRUMB_TEXT, Message, make_message
from turnledger.projections.history.state import SessionHistoryState


def visible_messages(state: SessionHistoryState) -> list[Message]:
    """Return the provider-visible history: a breadcrumb for trims, then the rest."""
    kept = [e.message for e in state.entries if e.version > state.trimmed_through]
    if state.trimmed_entries:
        return [make_message("user", BREADCRUMB_TEXT, kind="breadcrumb"), *kept]
    return kept


def current_instructions(state: SessionHistoryState) -> str | None:
    """Return the system prompt in effect (the last one recorded), if any."""
    return state.instructions[-1].message.text if state.instructions else None


def provider_messages(state: SessionHistoryState) -> list[Message]:
    """Return the history as a provider is sent it: system prompts included.

    The recorded system prompts older than the first visible message come first
    (oldest first; a trim never drops them), then the breadcrumb when trims hid
    messages, then the visible messages with any later system prompt in place.
    """
    visible = visible_messages(state)
    if not state.instructions:
        return visible
    kept = [e for e in state.entries if e.version > state.trimmed_through]
    first = kept[0].version if kept else state.last_version + state.version_offset + 1
    lead = [i.message for i in state.instructions if i.version < first]
    later = [i for i in state.instructions if i.version >= first]
    crumb = visible[: len(visible) - len(kept)]
    body: list[Message] = []
    waiting = 0
    for entry in kept:
        while waiting < len(later) and later[waiting].version < entry.version:
            body.append(later[waiting].message)
            waiting += 1
        body.append(entry.message)
    body.extend(i.message for i in later[waiting:])
    return [*lead, *crumb, *body]


_DIGEST_ENCODER: Final = msgspec.json.Encoder()


def history_digest(messages: Sequence[Message]) -> str:
    """Return the digest a prompt records for its history section.

    The turn engine records it when it assembles a prompt; replay re-derives it
    from the ledger and compares.
    """
    return hashlib.sha256(_DIGEST_ENCODER.encode(tuple(messages))).hexdigest()
