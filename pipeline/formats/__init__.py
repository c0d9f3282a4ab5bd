"""Transcript readers: provider and agent transcript files to neutral messages.

:func:`read_transcript` reads a file in any supported format (detected with
:func:`detect_format` when ``format="auto"``) into a :class:`ParsedTranscript`
of :class:`Conversation` values in the neutral model of
:mod:`policies.messages`. :func:`count_pairing` counts its tool calls, results
and unpaired items the way the corpus's ``EXPECTED.tsv`` does.
"""

from __future__ import annotations

from turnledger.pipeline.formats.counts import (
    PairingCounts,
    count_messages,
    count_pairing,
)
from turnledger.pipeline.formats.detect import detect_format
from turnledger.pipeline.formats.model import (
    FORMAT_NAMES,
    Conversation,
    Coverage,
    FormatName,
    ParsedTranscript,
    Problem,
    TranscriptError,
    total_coverage,
)
from turnledger.pipeline.formats.read import (
    FormatChoice,
    parse_transcript,
    read_transcript,
)

__all__ = [
    "FORMAT_NAMES",
    "Conversation",
    "Coverage",
    "FormatChoice",
    "FormatName",
    "PairingCounts",
    "ParsedTranscript",
    "Problem",
    "TranscriptError",
    "count_messages",
    "count_pairing",
    "detect_format",
    "parse_transcript",
    "read_transcript",
    "total_coverage",
]
