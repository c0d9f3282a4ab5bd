"""Importing several transcript files (or directories of them) into one ledger.

Each file is one import of its own
(:func:`turnledger.pipeline.importer.import_transcript` with the file's digest,
or the OTLP span import for an OTLP JSON file): it
writes all its sessions or nothing, and a file imported before writes nothing
again. A file that cannot be imported (unreadable, not a transcript, a session
clash) is reported with its reason and does not stop the others: nothing of it
is written. :func:`transcript_files` expands directories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.location import sqlite_path
from turnledger.ledger.store import EventStore
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.formats.model import Coverage
from turnledger.pipeline.importer import (
    ImportedSession,
    ImportReport,
    import_transcript,
)
from turnledger.pipeline.inputs import MissingInputFileError
from turnledger.policies.errors import PolicyError
from turnledger.policies.pricing import ModelPrice

__all__ = [
    "TRANSCRIPT_SUFFIXES",
    "FileImport",
    "FileOutcome",
    "describe",
    "import_file",
    "import_otlp_file",
    "transcript_files",
]

TRANSCRIPT_SUFFIXES: Final = (
    ".json",
    ".jsonl",
    ".eval",
    ".har",
    ".yaml",
    ".yml",
    ".db",
)
"""The files a directory is searched for (a file named itself is always read)."""

FileOutcome: TypeAlias = Literal["imported", "already_imported", "failed"]
"""What became of one file: written, found written before, or not imported."""

_FILE_ERRORS: Final = (LedgerError, PipelineError, PolicyError, OSError)


class FileImport(msgspec.Struct, frozen=True, kw_only=True):
    """One file's import.

    Attributes:
        file: The file, as named (or found under a named directory).
        outcome: ``imported`` (something written now), ``already_imported``
            (every session was written by an earlier import of the same
            file: nothing written) or ``failed`` (nothing written).
        format: The transcript's format (``""`` when it failed before it was read).
        sha256: The file's digest (``None`` for OTLP files and failed reads).
        sessions: Its sessions.
        skipped: What was left out, by kind, with counts.
        problems: Malformed lines, ``(line, message)``.
        written: The events written now.
        error: Why the file was not imported (one line), else ``None``.
        coverage: How every record of it ended (``None`` when it failed; an
            OTLP file's records are its spans).
    """

    file: str
    outcome: FileOutcome
    format: str = ""
    sha256: str | None = None
    sessions: tuple[ImportedSession, ...] = ()
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    problems: tuple[tuple[int, str], ...] = ()
    written: int = 0
    error: str | None = None
    coverage: Coverage | None = None

    @classmethod
    def of(cls, file: str, report: ImportReport) -> FileImport:
        """The import of ``file`` that ``report`` describes."""
        again = bool(report.sessions) and all(
            s.outcome == "already_imported" for s in report.sessions
        )
        return cls(
            file=file,
            outcome="already_imported" if again else "imported",
            format=report.format,
            sha256=report.source or None,
            sessions=report.sessions,
            skipped=report.skipped,
            problems=report.problems,
            written=report.written,
            coverage=report.coverage,
        )


def transcript_files(paths: Iterable[str], *, ledger: str | None = None) -> list[str]:
    """Return the files to import: each file named, and each directory's transcripts.

    A directory is searched recursively for files ending in one of
    :data:`TRANSCRIPT_SUFFIXES` (hidden files and folders left out, and the
    file ``ledger`` names: the ledger imported into is no transcript), in
    sorted order; anything else named is kept as it is (reading it reports
    what it is).

    Raises:
        MissingInputFileError: A name is empty (``Path("")`` would be the
            working directory, imported whole).
    """
    own = _existing(ledger)
    found: list[str] = []
    for name in paths:
        if not name:
            msg = "Expected a file or directory to import, found an empty name"
            raise MissingInputFileError(msg)
        path = Path(name)
        if not path.is_dir():
            found.append(name)
            continue
        found.extend(
            str(p)
            for p in sorted(path.rglob("*"))
            if p.suffix.lower() in TRANSCRIPT_SUFFIXES
            and p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
            and not (own is not None and p.resolve() == own)
        )
    return found


def _existing(ledger: str | None) -> Path | None:
    """The ledger's file, resolved, when it is a SQLite file that exists."""
    found = sqlite_path(ledger) if ledger else None
    if not found:
        return None
    path = Path(found)
    return path.resolve() if path.is_file() else None


def import_file(
    store: EventStore,
    file: str,
    *,
    format: str = "auto",  # noqa: A002 - the command's option
    agent: str = "imported",
    otlp_agent: str | None = None,
    max_bytes: int,
    pricing: Mapping[str, ModelPrice] | None = None,
) -> FileImport:
    """Import one file, reporting a failure instead of raising it.

    Args:
        store: The ledger.
        file: The file.
        format: Its format, or ``auto``; ``otlp`` (or an auto-detected OTLP
            JSON file) goes through the span import.
        agent: The agent of its sessions.
        otlp_agent: The agent of an OTLP file's sessions (``None``: each
            span's ``service.name``).
        max_bytes: The largest file read (``[runtime] max_input_bytes``).
        pricing: The rate sheet the file's model calls (OTLP spans, or the
            usage a transcript reports) are priced with.

    Returns:
        What became of it; a failed file wrote nothing.
    """
    try:
        if format == "otlp" or (format == "auto" and _looks_like_otlp(file)):
            return import_otlp_file(
                store, file, agent=otlp_agent, max_bytes=max_bytes, pricing=pricing
            )
        from turnledger.pipeline.formats.read import (  # noqa: PLC0415 - readers
            read_transcript_source,
        )

        parsed, digest = read_transcript_source(
            file, format=format, max_bytes=max_bytes
        )
        report = import_transcript(
            store, parsed, agent=agent, source=digest, pricing=pricing
        )
    except _FILE_ERRORS as error:
        return FileImport(file=file, outcome="failed", error=describe(error))
    except RecursionError:
        return FileImport(file=file, outcome="failed", error=_TOO_DEEP)
    return FileImport.of(file, report)


_TOO_DEEP: Final = (
    "Expected input nested less deeply, found nesting deeper than the"
    " interpreter's recursion limit"
)


def describe(error: BaseException) -> str:
    """One line saying why a file was not imported (as the CLI says it)."""
    if isinstance(error, OSError) and not isinstance(error, PipelineError):
        text = f"{error.strerror or error}: {error.filename or ''}".rstrip(": ")
    else:
        text = str(error)
    return " ".join(text.split())


def _looks_like_otlp(file: str) -> bool:
    from turnledger.pipeline.inputs import looks_like_otlp  # noqa: PLC0415

    return looks_like_otlp(file)


def import_otlp_file(
    store: EventStore,
    file: str,
    *,
    agent: str | None,
    max_bytes: int,
    pricing: Mapping[str, ModelPrice] | None = None,
) -> FileImport:
    """Import an OTLP JSON span or log file (the receiver's mapping, one append).

    Its ``coverage`` counts spans or log records
    (:func:`.collect.coverage.file_coverage`, :func:`.collect.coverage.logs_coverage`);
    it is ``already_imported`` when nothing was written and something of it
    was in the ledger before, and its sessions are those written now.

    Raises:
        CollectError: The file is not OTLP JSON, holds both signals, or a span
            of no known shape holds model traffic; nothing was written.
        InvalidEventError: A span cannot be recorded; nothing was written.
        InputFileError: The file is missing, not a regular file or too large.
    """
    from turnledger.pipeline.collect.files import (  # noqa: PLC0415
        import_otlp,
        read_otlp_file,
        skipped_of,
    )

    read = read_otlp_file(Path(file), max_bytes=max_bytes)
    report, coverage = import_otlp(store, read, agent=agent, pricing=pricing)
    sessions = tuple(
        ImportedSession(
            session=s.session,
            agent=s.agent,
            stream=s.stream,
            events=s.events,
            conversation=s.session,
        )
        for s in report.sessions
    )
    again = report.events == 0 and report.duplicates > 0
    return FileImport(
        file=file,
        outcome="already_imported" if again else "imported",
        format="otlp",
        sessions=sessions,
        skipped=skipped_of(report),
        written=report.events,
        coverage=coverage,
    )
