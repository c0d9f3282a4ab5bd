"""Pairing audits of transcript files and of ledger sessions.

Counts and the exit code follow the corpus's documented rules
(``shared/corpus/README.md`` §2, see :mod:`pipeline.formats.counts`): every call
is answered by exactly one later result with its id inside the window of its
format (anywhere later for Responses, Codex, Claude Code and the ledger; before
the next assistant message for OpenAI Chat; in the next message for Anthropic and
Gemini). A result outside its call's window is unpaired both ways, and its
violation says ``misplaced_result``. ``violations`` lists exactly the unpaired
items; an audit is clean when nothing is unpaired.

Checks stricter than the documented rule go to ``warnings`` (the placement
providers enforce: OpenAI Chat and Anthropic want each result in the block right
after its call, see :func:`policies.pairing.audit_pairing`); they change the exit
code only with ``--strict``.

An OTLP JSON span file is audited by
:func:`pipeline.collect.files.audit_otlp_file`, through the import's mapping,
into this module's report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from turnledger.pipeline.collected import not_recorded
from turnledger.pipeline.formats import ParsedTranscript, read_transcript
from turnledger.pipeline.formats.counts import (
    PairingRule,
    match_messages,
    rule_for,
)
from turnledger.pipeline.formats.model import Coverage
from turnledger.pipeline.formats.read import FormatChoice
from turnledger.pipeline.sessions import SessionRef, load_history
from turnledger.policies.messages import Message
from turnledger.policies.pairing import audit_pairing

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore


class AuditViolation(msgspec.Struct, frozen=True, kw_only=True):
    """One pairing problem.

    Attributes:
        kind: ``orphan_call``, ``orphan_result``, ``duplicate_result``,
            ``result_before_call``, ``misplaced_result`` (and, among warnings,
            ``duplicate_call``).
        id: The call id.
        conversation: The conversation (file) or session (ledger) it is in.
        position: The index of the message holding it.
    """

    kind: str
    id: str
    conversation: str
    position: int


class Skip(msgspec.Struct, frozen=True, kw_only=True):
    """A malformed piece of input that was left out (``line`` 0: not line-based)."""

    line: int
    message: str


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The pairing audit of a file or of ledger sessions.

    Attributes:
        format: The format read (``ledger`` for sessions).
        conversations: Conversations audited.
        tool_calls: Calls counted.
        tool_results: Results counted.
        unpaired_calls: Calls the documented rule leaves unanswered.
        unpaired_results: Results the documented rule pairs with no call.
        violations: Exactly the unpaired calls and results.
        warnings: Stricter placement checks (they fail only with ``--strict``).
        skipped: Item kinds the reader left out, with counts.
        problems: Malformed pieces of input that were left out.
        coverage: How every record of the file ended, mapped or accounted
            for (``None`` for ledger sessions).
    """

    format: str
    conversations: int
    tool_calls: int
    tool_results: int
    unpaired_calls: int
    unpaired_results: int
    violations: tuple[AuditViolation, ...]
    warnings: tuple[AuditViolation, ...] = ()
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    problems: tuple[Skip, ...] = ()
    coverage: Coverage | None = None

    @property
    def clean(self) -> bool:
        """Whether nothing is unpaired under the documented rule."""
        return not (self.unpaired_calls or self.unpaired_results)

    def exit_code(self, *, strict: bool = False) -> int:
        """0 when clean (and, with ``strict``, without warnings), else 1."""
        return 0 if self.clean and not (strict and self.warnings) else 1


def audit_conversations(
    fmt: str,
    conversations: Iterable[tuple[str, Sequence[Message]]],
    *,
    rules: Iterable[PairingRule] | None = None,
) -> AuditReport:
    """Audit named conversations (each a message list).

    Args:
        fmt: The format name to report.
        conversations: ``(name, messages)`` pairs.
        rules: The pairing rule of each conversation (default: the format's).

    Returns:
        The report (without ``skipped`` and ``problems``).
    """
    totals = [0, 0, 0, 0, 0]
    violations: list[AuditViolation] = []
    warnings: list[AuditViolation] = []
    rule_list = list(rules) if rules is not None else None
    for number, (name, messages) in enumerate(conversations):
        rule = rule_list[number] if rule_list is not None else rule_for(fmt)
        matching = match_messages(messages, rule)
        counts = matching.counts
        totals[0] += counts.conversations
        totals[1] += counts.tool_calls
        totals[2] += counts.tool_results
        totals[3] += counts.unpaired_calls
        totals[4] += counts.unpaired_results
        found = [
            AuditViolation(
                kind=u.kind, id=u.call_id, conversation=name, position=u.position
            )
            for u in matching.unpaired
        ]
        violations.extend(found)
        seen = {(v.id, v.position) for v in found}
        warnings.extend(
            AuditViolation(
                kind=v.kind, id=v.call_id, conversation=name, position=v.position
            )
            for v in audit_pairing(messages).violations
            if (v.call_id, v.position) not in seen
        )
    return AuditReport(
        format=fmt,
        conversations=totals[0],
        tool_calls=totals[1],
        tool_results=totals[2],
        unpaired_calls=totals[3],
        unpaired_results=totals[4],
        violations=tuple(violations),
        warnings=tuple(warnings),
    )


def audit_sessions(store: EventStore, sessions: Iterable[SessionRef]) -> AuditReport:
    """Audit ledger sessions by the ledger's rule, each named ``agent/key``.

    Every recorded message of each session is audited (trimmed ones included,
    a fork's source prefix too), as :func:`pipeline.sessions.load_history`
    returns them. Spans collected without their content (OTLP model calls
    recorded as usage only, tool runs without their result) are counted under
    ``skipped`` as :data:`~pipeline.collected.NOT_RECORDED`: the
    conversation they held is not in the ledger; so are the message parts
    they held that are not text (an image, a reasoning part...), by type, as
    :data:`~pipeline.collected.PART_NOT_RECORDED`.
    """
    sessions = list(sessions)
    report = audit_conversations(
        "ledger",
        (
            (
                f"{s.agent}/{s.key}",
                [e.message for e in load_history(store, s.stream_id).entries],
            )
            for s in sessions
        ),
    )
    missing = not_recorded(store, (s.stream_id for s in sessions))
    if not missing:
        return report
    return msgspec.structs.replace(report, skipped=missing)


def audit_parsed(parsed: ParsedTranscript) -> AuditReport:
    """Audit every conversation of a parsed transcript by its format's rule."""
    report = audit_conversations(
        parsed.format,
        ((c.id, c.messages) for c in parsed.conversations),
        rules=[rule_for(parsed.format, c.api) for c in parsed.conversations],
    )
    return msgspec.structs.replace(
        report,
        skipped=dict(parsed.skipped),
        problems=tuple(Skip(line=p.line, message=p.message) for p in parsed.problems),
        coverage=parsed.coverage,
    )


def audit_file(
    path: Path, *, fmt: FormatChoice = "auto", max_bytes: int | None = None
) -> AuditReport:
    """Read a transcript file and audit it.

    ``max_bytes`` bounds the file read (``[runtime] max_input_bytes``; ``None``
    is the default bound).

    Raises:
        TranscriptError: The file cannot be read as that format.
        OSError: The file cannot be read.
    """
    if max_bytes is None:
        return audit_parsed(read_transcript(path, format=fmt))
    return audit_parsed(read_transcript(path, format=fmt, max_bytes=max_bytes))
