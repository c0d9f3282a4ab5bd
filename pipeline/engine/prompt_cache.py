"""Incremental prompt assembly: what :func:`assemble_prompt` returns, in O(new).

A session's provider-visible history only grows between trims, yet a prompt
is made from all of it: bounded, the memory block injected, trimmed to the
budget, pairing-repaired, digested and fingerprinted. :class:`PromptCache`
(one per session cursor) keeps that work for the messages before the current
turn's user message, the *prefix*, which no later prompt changes until a trim
or any other rewrite of the history:

- its bounded messages (the bounding policy, through
  :func:`~turnledger.pipeline.export.prepare_history`);
- running SHA-256 states over the JSON of the visible history (the history
  digest) and of the system message plus the bounded prefix (the
  fingerprint), so a prompt hashes only what is new;
- the token estimate and the call ids of the prefix, and whether it pairs
  cleanly.

Each prompt then shapes only the *suffix* (the current turn: its user message,
where the block goes, and what followed it) with the same policies, and takes
the fast answer only when the policies would change nothing beyond it: the
budget holds (no trim), the prefix and the suffix each pair cleanly, and no
call id of the suffix is one of the prefix's. A clean history whose calls are
all answered stays clean when a clean part with other ids follows it, and the
repair is the identity on a clean history, so the messages, the events and
every digest are the ones :func:`assemble_prompt` returns (a property test
holds the two equal). Anything else (a trim due, a pairing to repair, a
history that was not extended but rewritten, which identity of the entries
shows, an empty system prompt) is :func:`assemble_prompt` itself.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from turnledger.ledger.events import (
    Event,
    PromptAssembled,
    PromptSection,
    SystemPromptSet,
)
from turnledger.pipeline.config.sections import RuntimeConfig
from turnledger.pipeline.engine.prompting import (
    AssembledPrompt,
    assemble_prompt,
    sha256_hex,
)
from turnledger.pipeline.export import ExportOptions, prepare_history
from turnledger.policies.messages import (
    BREADCRUMB_TEXT,
    Message,
    make_message,
    starts_turn,
)
from turnledger.policies.token_estimates import estimate_history_tokens
from turnledger.projections.history import HistoryEntry, SessionHistoryState
from turnledger.projections.history.read import current_instructions

if TYPE_CHECKING:
    from hashlib import _Hash

_ENCODER: Final = msgspec.json.Encoder()
_CRUMB: Final = make_message("user", BREADCRUMB_TEXT, kind="breadcrumb")


def _call_ids(messages: Sequence[Message]) -> set[str]:
    """Every id a message's calls or results name."""
    ids = {call.id for m in messages for call in m.tool_calls}
    ids.update(result.call_id for m in messages for result in m.tool_results)
    return ids


class PromptCache:
    """The incremental prompt state of one session (see the module docstring)."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._entries: list[HistoryEntry] = []
        self._system = ""
        self._system_digest = ""
        self._reset()

    def _reset(self) -> None:
        self._entries = []
        self._seen = 0  # visible messages digested
        self._chars = 0
        self._digest: _Hash = hashlib.sha256(b"[")
        self._prefix: list[Message] = []  # bounded, before the current turn
        self._fingerprint: _Hash | None = None
        self._tokens = 0
        self._ids: set[str] = set()
        self._clean = True

    def assemble(
        self,
        state: SessionHistoryState,
        *,
        turn_id: str,
        iteration: int,
        system: str,
        memory_block: str,
        runtime: RuntimeConfig,
    ) -> AssembledPrompt:
        """Return exactly what :func:`assemble_prompt` returns for these arguments."""
        fast = self._fast(
            state,
            turn_id=turn_id,
            iteration=iteration,
            system=system,
            memory_block=memory_block,
            runtime=runtime,
        )
        if fast is not None:
            return fast
        return assemble_prompt(
            state,
            turn_id=turn_id,
            iteration=iteration,
            system=system,
            memory_block=memory_block,
            runtime=runtime,
        )

    def _fast(
        self,
        state: SessionHistoryState,
        *,
        turn_id: str,
        iteration: int,
        system: str,
        memory_block: str,
        runtime: RuntimeConfig,
    ) -> AssembledPrompt | None:
        budget = runtime.context_budget_tokens
        if not system or budget < 0:
            return None
        visible = self._extend(state, system, runtime.max_tool_result_chars)
        last = next(
            (i for i in range(len(visible) - 1, -1, -1) if starts_turn(visible[i])),
            None,
        )
        if last is None or not self._grow_prefix(visible, last, runtime):
            return None
        suffix = prepare_history(
            visible[last:],
            ExportOptions(
                max_tool_result_chars=runtime.max_tool_result_chars,
                memory_block=memory_block or None,
            ),
        )
        tail = suffix.messages
        tokens = self._tokens + estimate_history_tokens(tail)
        if suffix.repair.changed or (budget and tokens > budget):
            return None
        if not self._ids.isdisjoint(_call_ids(tail)):
            return None
        assert self._fingerprint is not None  # noqa: S101 - set by _grow_prefix
        fingerprint = self._fingerprint.copy()
        for message in tail:
            fingerprint.update(b"," + _ENCODER.encode(message))
        fingerprint.update(b"]")
        digest = self._digest.copy()
        digest.update(b"]")
        sections = [
            PromptSection(
                name="system",
                chars=len(system),
                messages=1,
                digest=self._system_digest,
            ),
            PromptSection(
                name="history",
                chars=self._chars,
                messages=len(visible),
                digest=digest.hexdigest(),
            ),
        ]
        if memory_block:
            sections.append(
                PromptSection(
                    name="memory",
                    chars=len(memory_block),
                    messages=0,
                    digest=sha256_hex(memory_block),
                )
            )
        events: list[Event] = []
        if current_instructions(state) != system:
            events.append(SystemPromptSet.of(system, turn_id=turn_id))
        events.append(
            PromptAssembled(
                turn_id=turn_id,
                iteration=iteration,
                sections=tuple(sections),
                fingerprint=fingerprint.hexdigest(),
                estimated_tokens=tokens,
            )
        )
        messages = (make_message("system", system), *self._prefix, *tail)
        return AssembledPrompt(messages=messages, events=tuple(events))

    def _extend(
        self, state: SessionHistoryState, system: str, max_chars: int
    ) -> list[Message]:
        """Bring the digest up to the visible history; start over if rewritten."""
        through = state.trimmed_through
        entries = [e for e in state.entries if e.version > through]
        key = (through, bool(state.trimmed_entries), system, max_chars)
        cached = self._entries
        if (
            key != self._key
            or len(entries) < len(cached)
            or not all(map(operator.is_, cached, entries))
        ):
            self._key = key
            self._reset()
            if system != self._system:
                self._system, self._system_digest = system, sha256_hex(system)
        crumb = [_CRUMB] if state.trimmed_entries else []
        visible = [*crumb, *(e.message for e in entries)]
        for message in visible[self._seen :]:
            self._digest.update(
                (b"," if self._seen else b"") + _ENCODER.encode(message)
            )
            self._chars += message.chars
            self._seen += 1
        self._entries = entries
        return visible

    def _grow_prefix(
        self, visible: list[Message], last: int, runtime: RuntimeConfig
    ) -> bool:
        """Bound and hash the messages before the current turn; whether clean."""
        done = len(self._prefix)
        if self._fingerprint is None:
            system = make_message("system", self._system)
            self._fingerprint = hashlib.sha256(b"[" + _ENCODER.encode(system))
            self._tokens = estimate_history_tokens([system])
        if last < done:  # the current turn starts inside the prefix: rewritten
            return False
        if last > done and self._clean:
            chunk = prepare_history(
                visible[done:last],
                ExportOptions(max_tool_result_chars=runtime.max_tool_result_chars),
            )
            bounded = chunk.messages
            ids = _call_ids(bounded)
            self._clean = not chunk.repair.changed and self._ids.isdisjoint(ids)
            self._ids |= ids
            self._prefix.extend(bounded)
            self._tokens += estimate_history_tokens(bounded)
            for message in bounded:
                self._fingerprint.update(b"," + _ENCODER.encode(message))
        return self._clean and len(self._prefix) == last
