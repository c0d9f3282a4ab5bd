"""The per-turn comparison of a recorded session with its offline re-run.

For each turn, the facts both ledgers record are compared: the prompt sections
of every model call (name, chars, messages, digest, from ``prompt.assembled``)
and its estimated tokens, the trims (reason, dropped turns and messages, kept
turns, tokens before and after), the recall (the entries' keys, the injected
size), the bounding of each result (call id, tool, original and kept chars) and
how the turn ended. Each recorded model output is also checked against the
prompt the re-run gave it: pairing-valid when every tool result in that prompt
answers a call that precedes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from turnledger.ledger.events import (
    HistoryTrimmed,
    MemoryRecalled,
    PromptAssembled,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
)

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded
    from turnledger.pipeline.config.sections import RuntimeConfig
    from turnledger.pipeline.sessions import SessionRef

__all__ = ["RerunReport", "TurnDiff", "TurnFacts", "compare", "facts"]


class SectionFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt section as recorded: name, size and digest."""

    name: str
    chars: int
    messages: int
    digest: str


class PromptFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One assembled prompt: its iteration, sections and estimated tokens."""

    iteration: int
    sections: tuple[SectionFacts, ...]
    estimated_tokens: int


class TrimFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One trim: what it dropped and the tokens before and after."""

    reason: str
    dropped_turns: int
    dropped_messages: int
    kept_turns: int
    tokens_before: int
    tokens_after: int


class RecallFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's recall: the entries' keys, in order, and the injected size."""

    keys: tuple[str, ...]
    injected_chars: int


class BoundFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One tool result's bounding: original and kept characters."""

    call_id: str
    tool: str
    original_chars: int
    kept_chars: int


class TurnFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a turn recorded that a policy decides."""

    prompts: tuple[PromptFacts, ...] = ()
    trims: tuple[TrimFacts, ...] = ()
    recall: RecallFacts | None = None
    bounding: tuple[BoundFacts, ...] = ()
    outcome: str = "open"


class TurnDiff(msgspec.Struct, frozen=True, kw_only=True):
    """One turn, recorded and re-run, and how they differ.

    Attributes:
        turn: The turn's number in the session (1-based).
        turn_id: The recorded turn id.
        identical: Whether nothing differs.
        pairing_valid: Whether every recorded model output was given a
            pairing-valid prompt in the re-run.
        differences: One line per difference.
        recorded: The recorded facts.
        rerun: The re-run's facts.
    """

    turn: int
    turn_id: str
    identical: bool
    pairing_valid: bool
    differences: tuple[str, ...]
    recorded: TurnFacts
    rerun: TurnFacts


class RerunReport(msgspec.Struct, frozen=True, kw_only=True):
    """A session re-run offline: the policies used and the per-turn diff."""

    session: str
    agent: str
    turns: int
    budget_tokens: int
    max_tool_result_chars: int
    identical: bool
    differing_turns: int
    diff: tuple[TurnDiff, ...]


def facts(events: list[Recorded]) -> TurnFacts:
    """Collect a turn's policy facts from its events (``turn.started`` excluded)."""
    prompts: list[PromptFacts] = []
    trims: list[TrimFacts] = []
    bounding: list[BoundFacts] = []
    recall: RecallFacts | None = None
    outcome = "open"
    for recorded in events:
        e = recorded.event
        if isinstance(e, PromptAssembled):
            sections = tuple(
                SectionFacts(
                    name=s.name, chars=s.chars, messages=s.messages, digest=s.digest
                )
                for s in e.sections
            )
            prompts.append(
                PromptFacts(
                    iteration=e.iteration,
                    sections=sections,
                    estimated_tokens=e.estimated_tokens,
                )
            )
        elif isinstance(e, HistoryTrimmed):
            trims.append(
                TrimFacts(
                    reason=e.reason,
                    dropped_turns=e.dropped_turns,
                    dropped_messages=e.dropped_messages,
                    kept_turns=e.kept_turns,
                    tokens_before=e.tokens_before,
                    tokens_after=e.tokens_after,
                )
            )
        elif isinstance(e, MemoryRecalled):
            keys = tuple(r.key for r in e.entries)
            recall = RecallFacts(keys=keys, injected_chars=e.injected_chars)
        elif isinstance(e, ToolResultRecorded):
            bounding.append(
                BoundFacts(
                    call_id=e.call_id,
                    tool=e.tool,
                    original_chars=e.original_chars,
                    kept_chars=e.kept_chars,
                )
            )
        elif isinstance(e, TurnCompleted):
            outcome = "completed"
        elif isinstance(e, TurnFailed):
            outcome = f"failed: {e.kind}"
    return TurnFacts(
        prompts=tuple(prompts),
        trims=tuple(trims),
        recall=recall,
        bounding=tuple(bounding),
        outcome=outcome,
    )


def _trim_text(trims: tuple[TrimFacts, ...]) -> str:
    if not trims:
        return "none"
    return "; ".join(
        f"{t.reason}: dropped {t.dropped_turns} turns ({t.dropped_messages} "
        f"messages), kept {t.kept_turns}, {t.tokens_before} -> {t.tokens_after} tokens"
        for t in trims
    )


def _prompt_lines(
    old: tuple[PromptFacts, ...], new: tuple[PromptFacts, ...]
) -> list[str]:
    lines: list[str] = []
    if len(old) != len(new):
        lines.append(f"prompts: {len(old)} recorded, {len(new)} re-run")
    for o, n in zip(old, new, strict=False):
        if o.estimated_tokens != n.estimated_tokens:
            lines.append(
                f"prompt {o.iteration}: estimated tokens "
                f"{o.estimated_tokens} -> {n.estimated_tokens}"
            )
        before = {s.name: s for s in o.sections}
        after = {s.name: s for s in n.sections}
        for name in dict.fromkeys([*before, *after]):
            a, b = before.get(name), after.get(name)
            if a == b:
                continue
            if a is None or b is None:
                lines.append(
                    f"prompt {o.iteration} section {name}: "
                    f"{'only re-run' if a is None else 'only recorded'}"
                )
                continue
            lines.append(
                f"prompt {o.iteration} section {name}: {a.chars} -> {b.chars} chars, "
                f"{a.messages} -> {b.messages} messages, digest "
                f"{a.digest[:12]} -> {b.digest[:12]}"
            )
    return lines


def _differences(old: TurnFacts, new: TurnFacts, pairing_ok: bool) -> list[str]:
    lines = _prompt_lines(old.prompts, new.prompts)
    if old.trims != new.trims:
        lines.append(
            f"trim: recorded {_trim_text(old.trims)}; re-run {_trim_text(new.trims)}"
        )
    if old.recall != new.recall:

        def shown(r: RecallFacts | None) -> str:
            return (
                "none"
                if r is None
                else f"[{', '.join(r.keys)}] {r.injected_chars} chars"
            )

        lines.append(
            f"recall: recorded {shown(old.recall)}; re-run {shown(new.recall)}"
        )
    if old.bounding != new.bounding:

        def bound(b: tuple[BoundFacts, ...]) -> str:
            return (
                ", ".join(f"{x.call_id} {x.original_chars}->{x.kept_chars}" for x in b)
                or "none"
            )

        lines.append(
            f"bounding: recorded {bound(old.bounding)}; re-run {bound(new.bounding)}"
        )
    if old.outcome != new.outcome:
        lines.append(f"outcome: recorded {old.outcome}; re-run {new.outcome}")
    if not pairing_ok:
        lines.append(
            "pairing: a recorded model output got a prompt that is not pairing-valid"
        )
    return lines


def compare(
    ref: SessionRef,
    *,
    recorded: list[TurnFacts],
    turn_ids: list[str],
    rerun: list[TurnFacts],
    pairing: list[list[bool]],
    runtime: RuntimeConfig,
) -> RerunReport:
    """Compare the recorded turns with the re-run's, turn by turn."""
    diffs: list[TurnDiff] = []
    for index, old in enumerate(recorded):
        new = rerun[index] if index < len(rerun) else TurnFacts(outcome="not re-run")
        pairing_ok = all(pairing[index]) if index < len(pairing) else False
        lines = _differences(old, new, pairing_ok)
        diffs.append(
            TurnDiff(
                turn=index + 1,
                turn_id=turn_ids[index],
                identical=not lines,
                pairing_valid=pairing_ok,
                differences=tuple(lines),
                recorded=old,
                rerun=new,
            )
        )
    differing = sum(1 for d in diffs if not d.identical)
    return RerunReport(
        session=ref.key,
        agent=ref.agent,
        turns=len(diffs),
        budget_tokens=runtime.context_budget_tokens,
        max_tool_result_chars=runtime.max_tool_result_chars,
        identical=differing == 0,
        differing_turns=differing,
        diff=tuple(diffs),
    )
