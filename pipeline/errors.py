"""The root of the shell's errors (configuration, usage, transcripts, sessions).

Shell errors derive from :class:`PipelineError`; they never pose as the
ledger's :class:`~turnledger.ledger.errors.LedgerError`, so the command line
catches three roots: ``LedgerError``, ``PolicyError`` and ``PipelineError``.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Something the shell was asked to do cannot be done as asked."""
