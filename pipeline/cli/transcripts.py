"""Transcript commands: import, audit, export, replay, history."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    count,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli.rerun import (
    add_rerun_arguments,
    cmd_rerun,
    refuse_rerun_options,
)
from turnledger.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from uuid import UUID

    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.audit import AuditReport
    from turnledger.pipeline.import_files import FileImport
    from turnledger.pipeline.sessions import SessionRef
    from turnledger.pipeline.timetravel.pointintime import PointInTime


def cmd_import(args: argparse.Namespace) -> int:
    """Import transcript files into the ledger: one session per conversation.

    FILE may be several files or directories (searched for .json, .jsonl,
    .eval, .har, .yaml, .yml and .db files, the ledger itself left out; an
    empty name is refused); each file is imported on its own
    and a per-file summary is printed (a progress bar on stderr when it is a
    terminal). Formats: auto (detected), openai-chat, openai-responses,
    anthropic, gemini, langchain, pydantic-ai, claude-code, codex, cassette,
    adk, openai-agents, inspect-ai (.json or zipped .eval), openhands, har,
    otlp (OpenTelemetry GenAI spans, or their log events, in OTLP JSON, one
    request or one per line, one signal a file, recorded as `turnledger
    collect` records them; agent: each span's service.name unless --agent
    names another). System and developer messages
    are kept (system_prompt.set); the usage a file reports for a model
    response (langchain usage_metadata, pydantic-ai usage, adk usageMetadata,
    claude-code message.usage) is a model.called event of its model and
    tokens, priced with [pricing].
    Unknown item types are skipped and counted;
    malformed lines are reported with their line numbers; with auto, a file
    whose detected reader recognised too little is refused (naming the
    formats considered; --format reads it anyway).

    Session keys default to each conversation's in-file id and the first 8
    hex digits of the file's SHA-256 (`1-3fa2b9c0`); importing the same file
    again writes nothing and says `already_imported`. A file that fails
    writes nothing: a session key holding another source's events is
    refused naming the session (--session KEY imports it under another key);
    the other files are still imported, and the exit code is 2 at the end.
    With --json: format, sessions (session, agent, stream, events,
    conversation, outcome), skipped, problems (line, message, file), written,
    coverage (records read, mapped, accounted, by kind and reason, summed over
    the files read; an OTLP file's records are its spans or log records), and
    files (file, outcome: imported|already_imported|failed, format, sha256,
    sessions, skipped, problems, written, error, coverage).

    Example: turnledger import session.jsonl --agent ops --json
    """
    from turnledger.pipeline.import_files import transcript_files

    files = transcript_files(args.file, ledger=target(args))
    if args.session is not None and len(files) != 1:
        msg = f"Expected one file with --session, found {len(files)}"
        raise UsageError(msg)
    if not files:
        msg = (
            "Expected transcript files (.json, .jsonl, .eval, .har, .yaml, .yml,"
            f" .db) under {', '.join(args.file)[:200]}, found none"
        )
        raise UsageError(msg)
    if len(files) == 1:
        return _import_one(args, files[0])
    return _import_many(args, files)


def _import_one(args: argparse.Namespace, file: str) -> int:
    """One file: its failure is the command's (exit 2, one line, nothing written)."""
    from turnledger.pipeline.inputs import looks_like_otlp

    if args.format == "otlp" or (args.format == "auto" and looks_like_otlp(file)):
        return _import_otlp(args, file)
    from turnledger.pipeline.formats.read import read_transcript_source
    from turnledger.pipeline.import_files import FileImport
    from turnledger.pipeline.importer import import_transcript
    from turnledger.policies.paths import sanitize_session_key

    if args.session is not None and not sanitize_session_key(args.session):
        msg = f"Expected a non-empty --session key, found {args.session!r}"
        raise UsageError(msg)
    cfg = config(args)
    parsed, digest = read_transcript_source(
        Path(file), format=args.format, max_bytes=cfg.runtime.max_input_bytes
    )
    with open_ledger(args) as store:
        report = import_transcript(
            store,
            parsed,
            agent=args.agent,
            session=args.session,
            source=digest,
            pricing=cfg.pricing,
        )
    _print_imports(args, [FileImport.of(file, report)])
    return 0


def _import_otlp(args: argparse.Namespace, file: str) -> int:
    """An OTLP JSON file: its spans or log records recorded as ``collect`` would.

    Sessions are the spans' conversations or traces, so ``--session`` is
    refused; the agent is each span's ``service.name`` unless ``--agent``
    names another than its default.
    """
    from turnledger.pipeline.cli.collect import DEFAULT_IMPORT_AGENT
    from turnledger.pipeline.import_files import import_otlp_file

    if args.session is not None:
        msg = (
            "Expected no --session for an OTLP file (its sessions are its "
            f"conversations and traces), found {args.session[:200]!r}"
        )
        raise UsageError(msg)
    cfg = config(args)
    with open_ledger(args) as store:
        done = import_otlp_file(
            store,
            file,
            agent=None if args.agent == DEFAULT_IMPORT_AGENT else args.agent,
            max_bytes=cfg.runtime.max_input_bytes,
            pricing=cfg.pricing,
        )
    _print_imports(args, [done])
    return 0


def _import_many(args: argparse.Namespace, files: list[str]) -> int:
    """Several files: each imported or failed alone; exit 2 at the end if one failed."""
    import sys

    from turnledger.pipeline.cli.collect import DEFAULT_IMPORT_AGENT
    from turnledger.pipeline.import_files import import_file

    cfg = config(args)
    otlp_agent = None if args.agent == DEFAULT_IMPORT_AGENT else args.agent
    bar = sys.stderr.isatty()
    done = []
    with open_ledger(args) as store:
        for index, file in enumerate(files):
            if bar:
                name = file if len(file) <= 50 else "\u2026" + file[-49:]
                sys.stderr.write(f"\r\x1b[K[{index + 1}/{len(files)}] {name}")
                sys.stderr.flush()
            done.append(
                import_file(
                    store,
                    file,
                    format=args.format,
                    agent=args.agent,
                    otlp_agent=otlp_agent,
                    max_bytes=cfg.runtime.max_input_bytes,
                    pricing=cfg.pricing,
                )
            )
    if bar:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
    _print_imports(args, done)
    failed = [d for d in done if d.outcome == "failed"]
    if failed:
        first = failed[0]
        msg = (
            f"Expected every file imported, found {len(failed)} of {len(done)} not"
            f" imported (nothing of them written); {first.file}: {first.error}"
        )
        raise ImportFailedError(msg)
    return 0


class ImportFailedError(PipelineError):
    """Some of the files named could not be imported (the others were)."""


def _print_imports(args: argparse.Namespace, done: list[FileImport]) -> None:
    """The per-file summary: JSON (one object) or one line per file and session."""
    if args.json:
        from turnledger.pipeline.formats import total_coverage

        formats = {d.format for d in done if d.format}
        print_json(
            {
                "format": formats.pop() if len(formats) == 1 else "mixed",
                "sessions": [s for d in done for s in d.sessions],
                "skipped": _summed(d.skipped for d in done),
                "problems": [
                    {"line": line, "message": m, "file": d.file}
                    for d in done
                    for line, m in d.problems
                ],
                "written": sum(d.written for d in done),
                "coverage": total_coverage(d.coverage for d in done if d.coverage),
                "files": done,
            }
        )
        return
    several = len(done) > 1
    for d in done:
        prefix = f"{d.file}: " if several else ""
        if d.outcome == "failed":
            print(f"{prefix}not imported (nothing written): {d.error}")
            continue
        for s in d.sessions:
            if s.outcome == "already_imported":
                print(
                    f"{prefix}already imported {s.session} (agent {s.agent}):"
                    f" {s.events} events, nothing written"
                )
            else:
                print(
                    f"{prefix}imported {s.session} (agent {s.agent}): {s.events} events"
                )
        for kind, n in d.skipped.items():
            print(f"{prefix}skipped {n} x {kind}")
        for line, message in d.problems:
            print(f"{prefix}line {line}: {message}")
    if several:
        counts = {o: sum(d.outcome == o for d in done) for o in _OUTCOMES}
        print(
            f"{len(done)} files: {counts['imported']} imported,"
            f" {counts['already_imported']} already imported,"
            f" {counts['failed']} not imported;"
            f" {sum(d.written for d in done)} events written"
        )


_OUTCOMES: Final = ("imported", "already_imported", "failed")


def _summed(tables: Iterable[dict[str, int]]) -> dict[str, int]:
    from collections import Counter

    total: Counter[str] = Counter()
    for table in tables:
        total.update(table)
    return dict(sorted(total.items()))


def _ledger_audit(
    store: EventStore, target: str | None, agent: str | None
) -> AuditReport:
    from turnledger.pipeline.audit import audit_sessions
    from turnledger.pipeline.sessions import list_sessions, resolve_session

    if target is None:
        sessions = [s for s in list_sessions(store) if agent in (None, s.agent)]
    else:
        sessions = [resolve_session(store, target, agent=agent)]
    return audit_sessions(store, sessions)


def _refuse_unmapped(report: AuditReport, *, strict: bool) -> None:
    """With --strict, refuse a file in which a record was not mapped."""
    coverage = report.coverage
    if strict and coverage is not None and coverage.accounted:
        from turnledger.pipeline.formats import TranscriptError

        msg = (
            f"Expected every record mapped (--strict), found {coverage.accounted}"
            f" of {coverage.read} not mapped, first {coverage.first}"
        )
        raise TranscriptError(msg)


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit tool-call pairing of ledger sessions (all when no target) or of a file.

    Counts follow the documented pairing rule of each format. Exit 0 when nothing
    is unpaired, 1 when a call or result is unpaired (with --strict also when a
    stricter placement check warns), 2 when the input is unreadable. A file
    holding model traffic no reader understands (a request to a model API no
    shape knows, a message or tool call of an unknown schema) is refused: exit
    2, naming the first such record. With --strict a file is also refused when
    any record was not mapped (unrecognised, malformed, not a model request).
    With --json: format, conversations, tool_calls, tool_results,
    unpaired_calls, unpaired_results, violations and warnings (kind, id,
    conversation, position), skipped (item kinds with counts), problems
    (line, message) and coverage (read, mapped, accounted, kinds, reasons,
    first, refused; null for ledger sessions). An OTLP JSON span or log file
    (detected, or --format otlp) is audited as import would record it: its
    sessions are the conversations, its spans or log records the records (a
    span of no known shape holding model traffic refuses it). Ledger sessions count
    collected spans without content under skipped (conversation not recorded).

    Example: turnledger audit transcript.jsonl --json
    """
    from turnledger.pipeline.audit import audit_file
    from turnledger.pipeline.inputs import looks_like_otlp

    target = args.target
    if target is not None and Path(target).is_file():
        limit = config(args).runtime.max_input_bytes
        if args.format == "otlp" or (args.format == "auto" and looks_like_otlp(target)):
            from turnledger.pipeline.collect.files import audit_otlp_file

            report = audit_otlp_file(target, max_bytes=limit)
        else:
            report = audit_file(Path(target), fmt=args.format, max_bytes=limit)
        _refuse_unmapped(report, strict=args.strict)
    else:
        with open_ledger(args) as store:
            report = _ledger_audit(store, target, args.agent)
    if args.json:
        print_json(report)
    else:
        print(
            f"{report.format}: {report.conversations} conversation(s), "
            f"{report.tool_calls} calls, {report.tool_results} results, "
            f"{report.unpaired_calls} unpaired calls, "
            f"{report.unpaired_results} unpaired results, "
            f"{len(report.warnings)} warnings"
        )
        for v in report.violations:
            print(f"  {v.kind} {v.id} in {v.conversation} at {v.position}")
        for v in report.warnings:
            print(f"  warning: {v.kind} {v.id} in {v.conversation} at {v.position}")
        for kind, n in report.skipped.items():
            print(f"  skipped {n} x {kind}")
        coverage = report.coverage
        if coverage is not None and coverage.accounted:
            print(
                f"  {coverage.accounted} of {coverage.read} records not mapped,"
                f" first {coverage.first}"
            )
    return report.exit_code(strict=args.strict)


def cmd_export(args: argparse.Namespace) -> int:
    """Print a session as a payload of --format (JSON).

    Formats: openai-chat, openai-responses, anthropic, gemini, langchain,
    pydantic-ai, adk; the system prompt goes where the format wants it (ADK
    events have no place for one), and langchain, pydantic-ai and adk carry
    each model response's recorded usage and model (the other four are
    request payloads, with no place for it). Trimmed to --budget-tokens
    (system first, then one breadcrumb), pairing-repaired, tool results bounded to
    --max-tool-result-chars (a result bounded when recorded is not bounded
    again), with the memory context injected when --memory-query is given;
    always pairing-valid.

    Example: turnledger export demo-1 --format anthropic --budget-tokens 8000
    """
    from turnledger.pipeline.export import (
        ExportOptions,
        prepare_history,
        recorded_usage,
        render,
    )
    from turnledger.pipeline.memory import MemoryService
    from turnledger.pipeline.sessions import load_history, resolve_session
    from turnledger.projections.history.read import provider_messages
    from turnledger.projections.lineage import lineage

    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        state = load_history(store, ref.stream_id)
        usage = recorded_usage(lineage(store, ref.stream_id), state.entries)
        block = None
        if args.memory_query is not None:
            memory = MemoryService(store, config(args), ledger_url=target(args))
            try:
                block = (
                    memory.context_block(ref.agent, args.memory_query, session=ref.key)
                    or None
                )
            finally:
                memory.close()
    if args.budget_tokens < 0 or args.max_tool_result_chars < 0:
        msg = "Expected --budget-tokens and --max-tool-result-chars >= 0"
        raise UsageError(msg)
    prepared = prepare_history(
        provider_messages(state),
        ExportOptions(
            budget_tokens=args.budget_tokens,
            max_tool_result_chars=args.max_tool_result_chars,
            memory_block=block,
        ),
    )
    print_json(render(prepared.messages, args.format, usage))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a session as of a point; re-derive and check recorded digests.

    --at takes a global position, a turn id or an ISO time; with it the
    replay also shows the provider-visible history then, the session's costs
    up to then, the agent's memory keys then, and the recall the next turn was
    given (its keys as recorded, its [Memory context] block rebuilt from the
    memory as it was then). Exit 1 when a recorded digest differs from the one
    re-derived. --json adds history, costs, memory and next_recall.

    --rerun re-runs the session offline through the engine (recorded model
    outputs and tool results, a scratch ledger) under the configured policies,
    or --budget-tokens / --max-tool-result-chars, and prints a per-turn diff;
    with --check it exits 1 when any turn differs.

    Example: turnledger replay demo-1 --at 12 --json
    """
    from turnledger.pipeline.sessions import resolve_session
    from turnledger.pipeline.timetravel.replay import replay_session

    if args.rerun:
        return cmd_rerun(args)
    refuse_rerun_options(args)
    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        at = _at(store, ref.stream_id, args.at)
        report = replay_session(store, ref.stream_id, at=at)
        then = _then(store, args, ref, at)
    if args.json:
        extra = {} if then is None else _as_dict(then)
        extra.pop("position", None)
        print_json({**_as_dict(report), **extra, "ok": report.ok})
    else:
        print(
            f"session {ref.agent}/{ref.key} at position {report.at}: {report.events} "
            f"events, {report.messages} messages, {report.turns_completed} turns"
        )
        for name, value in report.projections.items():
            print(f"  {name} digest {value}")
        for check in report.checks:
            state = "ok" if check.ok else f"DIFFERS (recorded {check.recorded})"
            print(f"  {check.kind} {check.turn_id} at {check.position}: {state}")
        if then is not None:
            _print_then(then)
    return 0 if report.ok else 1


def _at(store: EventStore, stream: UUID, text: str | None) -> int | None:
    """Resolve ``--at`` (a position, a turn id or an ISO time) for a session."""
    from turnledger.pipeline.timetravel.pointintime import resolve_at
    from turnledger.projections.lineage import lineage

    return None if text is None else resolve_at(lineage(store, stream), text)


def _then(
    store: EventStore, args: argparse.Namespace, ref: SessionRef, at: int | None
) -> PointInTime | None:
    """Return the session as of ``at``; sealed memory opened by the key store."""
    from turnledger.pipeline.memory import MemoryService
    from turnledger.pipeline.timetravel.pointintime import point_in_time
    from turnledger.projections.memory.shred import FORGOTTEN, is_sealed

    if at is None:
        return None
    memory = MemoryService(store, config(args), ledger_url=target(args))
    try:
        if memory.keys_path.exists():
            return point_in_time(store, ref, at, opener=memory.keys().open)
        return point_in_time(
            store, ref, at, opener=lambda c: FORGOTTEN if is_sealed(c) else c
        )
    finally:
        memory.close()


def _print_then(then: PointInTime) -> None:
    costs = then.costs
    print(
        f"  history: {len(then.history)} messages; costs so far: {costs.calls} "
        f"calls, {costs.input_tokens + costs.output_tokens} tokens, "
        f"${costs.cost_usd:.6f}"
    )
    for m in then.history:
        text = m.text or "".join(r.content for r in m.tool_results)
        print(f"    [{m.role}] {text[:120]}")
    print(f"  memory then: {', '.join(then.memory) or 'none'}")
    upcoming = then.next_recall
    if upcoming is None:
        print("  next turn: none recorded")
        return
    keys = ", ".join(upcoming.keys) or "none"
    print(f"  next turn {upcoming.turn_id} was given: {keys}")
    if upcoming.block:
        print(upcoming.block.rstrip())


def cmd_history(args: argparse.Namespace) -> int:
    """Print a session's provider-visible history (now, or as of --at).

    --at takes a global position, a turn id (the history as that turn ended)
    or an ISO time. A fork shows its source's prefix, then its own turns;
    rewinds and trims are counted in the header, never silent.

    Example: turnledger history demo-1 --at 12
    """
    from turnledger.pipeline.sessions import load_history, resolve_session
    from turnledger.projections.history.read import provider_messages

    with open_ledger(args) as store:
        ref = resolve_session(store, args.session, agent=args.agent)
        at = _at(store, ref.stream_id, args.at)
        state = load_history(store, ref.stream_id, at=at)
    messages = provider_messages(state)
    if args.json:
        print_json(messages)
        return 0
    when = "" if at is None else f" at position {at}"
    notes = [f"fork of {state.fork_of}"] if state.fork_of else []
    notes += [f"{state.trims} trims"] if state.trims else []
    notes += [f"{state.rewinds} rewinds"] if state.rewinds else []
    extra = "".join(f", {n}" for n in notes)
    print(f"session {ref.agent}/{ref.key}{when} ({len(messages)} messages{extra})")
    for m in messages:
        for call in m.tool_calls:
            print(f"  [{m.role}] -> {call.name} {call.arguments}")
        for result in m.tool_results:
            print(f"  [tool {result.name or result.call_id}] {result.content[:200]}")
        if m.text:
            print(f"  [{m.role}] {m.text}")
    return 0


def _as_dict(value: object) -> dict[str, object]:
    import msgspec

    return msgspec.to_builtins(value)  # type: ignore[no-any-return]


COMMANDS: Final[dict[str, Command]] = {
    "import": cmd_import,
    "audit": cmd_audit,
    "export": cmd_export,
    "replay": cmd_replay,
    "history": cmd_history,
}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add a transcript command's options."""
    if name in ("import", "audit"):
        from turnledger.pipeline.formats.model import FORMAT_NAMES

        formats = ["auto", *FORMAT_NAMES]
    if name == "import":
        p.add_argument(
            "file", nargs="+", help="transcript files, or directories of them"
        )
        p.add_argument("--format", choices=[*formats, "otlp"], default="auto")
        p.add_argument(
            "--agent", default="imported", help="the agent the sessions belong to"
        )
        p.add_argument(
            "--session", default=None, help="the session key (default: derived)"
        )
    if name == "audit":
        p.add_argument(
            "target", nargs="?", default=None, help="a session or a transcript file"
        )
        p.add_argument("--format", choices=[*formats, "otlp"], default="auto")
        p.add_argument(
            "--strict",
            action="store_true",
            help=(
                "exit 1 on warnings too (placement a provider would reject); "
                "refuse a file (exit 2) in which a record was not mapped"
            ),
        )
    if name in ("export", "replay", "history"):
        p.add_argument("session", help="the session key or stream id")
    if name in ("audit", "export", "replay", "history"):
        p.add_argument("--agent", default=None, help="only sessions of this agent")
    if name == "export":
        from turnledger.pipeline.export import EXPORT_FORMATS

        p.add_argument("--format", choices=EXPORT_FORMATS, required=True)
        p.add_argument("--budget-tokens", type=count, default=0)
        p.add_argument("--max-tool-result-chars", type=count, default=50_000)
        p.add_argument("--memory-query", default=None)
    if name in ("replay", "history"):
        p.add_argument(
            "--at", default=None, help="a global position, a turn id or an ISO time"
        )
    if name == "replay":
        add_rerun_arguments(p)
    if name in ("import", "audit", "replay", "history"):
        p.add_argument("--json", action="store_true", help="print JSON")
