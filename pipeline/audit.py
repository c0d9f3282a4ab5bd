"""Pairing audits of transcript files and of ledger sessions.

Counts follow the corpus rule (``EXPECTED.tsv``): every call is answered by exactly
one later result with its id, every result answers exactly one earlier call. The
violations list each problem with its kind, id, conversation and position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from turnledger.pipeline.formats import (
    ParsedTranscript,
    count_messages,
    read_transcript,
)
from turnledger.pipeline.formats.read import FormatChoice
from turnledger.policies.messages import Message
from turnledger.policies.pairing import audit_pairing


class AuditViolation(msgspec.Struct, frozen=True, kw_only=True):
    """One pairing problem.

    Attributes:
        kind: ``orphan_call``, ``orphan_result``, ``duplicate_result``,
            ``result_before_call`` (and the audit policy's finer kinds).
        id: The call id.
        conversation: The conversation (file) or session (ledger) it is in.
        position: The index of the message holding it.
    """

    kind: str
    id: str
    conversation: str
    position: int


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The pairing audit of a file or of ledger sessions."""

    format: str
    conversations: int
    tool_calls: int
    tool_results: int
    unpaired_calls: int
    unpaired_results: int
    violations: tuple[AuditViolation, ...]

    @property
    def clean(self) -> bool:
        """Whether nothing is unpaired or misplaced."""
        return not (self.violations or self.unpaired_calls or self.unpaired_results)


def audit_conversations(
    fmt: str, conversations: Iterable[tuple[str, Sequence[Message]]]
) -> AuditReport:
    """Audit named conversations (each a message list)."""
    totals = [0, 0, 0, 0, 0]
    violations: list[AuditViolation] = []
    for name, messages in conversations:
        counts = count_messages(messages)
        totals[0] += counts.conversations
        totals[1] += counts.tool_calls
        totals[2] += counts.tool_results
        totals[3] += counts.unpaired_calls
        totals[4] += counts.unpaired_results
        violations.extend(
            AuditViolation(
                kind=v.kind, id=v.call_id, conversation=name, position=v.position
            )
            for v in audit_pairing(messages).violations
        )
    return AuditReport(
        format=fmt,
        conversations=totals[0],
        tool_calls=totals[1],
        tool_results=totals[2],
        unpaired_calls=totals[3],
        unpaired_results=totals[4],
        violations=tuple(violations),
    )


def audit_parsed(parsed: ParsedTranscript) -> AuditReport:
    """Audit every conversation of a parsed transcript."""
    return audit_conversations(
        parsed.format, ((c.id, c.messages) for c in parsed.conversations)
    )


def audit_file(path: Path, *, fmt: FormatChoice = "auto") -> AuditReport:
    """Read a transcript file and audit it.

    Raises:
        TranscriptError: The file cannot be read as that format.
        OSError: The file cannot be read.
    """
    return audit_parsed(read_transcript(path, format=fmt))
