"""The payload lifecycle table, generated from the code that owns each surface.

Projections declare themselves (:mod:`projections.catalog`); the surfaces the shell
owns (the ephemeral prompt, tool-result payloads, files, media, trimming) are
declared here. ``turnledger lifecycle`` prints the table and ``docs/lifecycle.md``
is generated from it (a test fails when they drift).
"""

from __future__ import annotations

from typing import Final

from turnledger.policies.lifecycle import LifecycleDeclaration, render_ownership_table
from turnledger.projections.catalog import declarations as projection_declarations

SHELL_SURFACES: Final[tuple[LifecycleDeclaration, ...]] = (
    LifecycleDeclaration(
        surface="Prompt context",
        owner="pipeline.engine (prompt assembly; only its fingerprint is recorded)",
        durability="turn",
        scope="session",
        reviewers_check=(
            "Recalled memory, current input, system prompt and tool results may be "
            "sent to the provider; that does not make them durable. The ledger "
            "keeps per-section sizes and digests, never the prompt."
        ),
    ),
    LifecycleDeclaration(
        surface="History trimming",
        owner="policies.trimming (decision) + history.trimmed events",
        durability="session",
        scope="session",
        reviewers_check=(
            "Trimming drops whole turns, keeps tool-call/result pairing, leaves one "
            "breadcrumb and records a history.trimmed event: loss is visible, "
            "never silent."
        ),
    ),
    LifecycleDeclaration(
        surface="Tool result payloads",
        owner="policies.bounding + tool_result.recorded events",
        durability="session",
        scope="session",
        reviewers_check=(
            "Results are bounded in characters (head 2/3 + tail 1/3, markers "
            "intact) with original/kept sizes recorded; image paths are promoted "
            "for producing tools only, never for path-listing tools."
        ),
    ),
    LifecycleDeclaration(
        surface="Files and workspaces",
        owner="policies.paths (per-agent workspace policy) + file tools",
        durability="filesystem",
        scope="workspace",
        reviewers_check=(
            "File content is not memory because a tool read it. Reads and writes "
            "stay inside the agent's workspace (no .. or symlink escape)."
        ),
    ),
    LifecycleDeclaration(
        surface="Media attachments",
        owner="policies.media + media.attached events (content-addressed files)",
        durability="session",
        scope="session",
        reviewers_check=(
            "Raw bytes stay bounded and path-validated; the ledger records name, "
            "MIME, kind, size, sha256 and a reference or summary, never the bytes, "
            "and nothing is copied into memory silently."
        ),
    ),
)
"""The surfaces the shell owns."""


AT_REST: Final[tuple[tuple[str, str, bool, str], ...]] = (
    (
        "Ledger",
        "turnledger.db, -wal, -shm (or the PostgreSQL events table)",
        True,
        (
            "Payloads are AES-GCM with TURNLEDGER_CIPHER_KEY; envelope fields (stream "
            "id, topic, version, position, time) stay clear."
        ),
    ),
    (
        "SQLite memory store",
        (
            "turnledger.memory.db, -wal, -shm (FTS5, vectors, embedding cache); "
            "the Lucid backend's turnledger.lucid.db"
        ),
        True,
        (
            "SQLCipher (the sqlcipher extra) with the key derived for memory; "
            "full-text and vector search run on the open database."
        ),
    ),
    (
        "Other memory backends",
        "Markdown files, PostgreSQL and Qdrant stores",
        False,
        (
            "Kept by their own storage (Markdown is meant to be read); memory "
            "--shred seals contents with per-entry keys instead."
        ),
    ),
    (
        "View databases",
        (
            "turnledger.views.db, -wal, -shm (session history, observer, costs, "
            "knowledge graph)"
        ),
        True,
        (
            "SQLCipher with the key derived for views; rebuildable projections "
            "the queries read."
        ),
    ),
    (
        "PostgreSQL view store",
        "the view tables in a PostgreSQL database",
        False,
        "Kept by the database server; encrypt its storage there.",
    ),
    (
        "Key store",
        "turnledger.keys.db",
        True,
        (
            "SQLCipher with the key derived for keys; holds only the per-entry "
            "keys memory --shred seals contents with; forget destroys them."
        ),
    ),
    (
        "Erasure key store",
        "turnledger.erasure-keys.db (beside a SQLite ledger)",
        True,
        (
            "SQLCipher with the key derived for erasure, its data keys wrapped "
            "under the cipher key too (a PostgreSQL ledger's key tables: wrapped)."
        ),
    ),
    (
        "Media files",
        "<data_dir>/media/ (content-addressed attachments)",
        False,
        (
            "Attachment bytes are kept as received; the ledger records only their "
            "references (hash, size, kind)."
        ),
    ),
)
"""Per durable surface: name, files, encrypted at rest with a cipher key, and why.

A test runs a turn with a key set and greps every file written for planted text:
it is found in exactly the files declared clear here and in no ledger file.
"""


def at_rest_markdown() -> str:
    """Return the encryption-at-rest table (with TURNLEDGER_CIPHER_KEY set)."""
    rows = "".join(
        f"| {name} | {files} | {'yes' if encrypted else 'no'} | {why} |\n"
        for name, files, encrypted, why in AT_REST
    )
    return (
        "\n## Encryption at rest (with TURNLEDGER_CIPHER_KEY set)\n\n"
        "| Surface | Files | Encrypted | Why |\n|---|---|---|---|\n" + rows
    )


def all_declarations() -> tuple[LifecycleDeclaration, ...]:
    """Return every surface's declaration."""
    return (*projection_declarations(), *SHELL_SURFACES)


def lifecycle_markdown() -> str:
    """Return ``docs/lifecycle.md``: a title, a sentence, and the generated table."""
    return (
        "# Payload lifecycle: who owns what\n\n"
        "Generated by `turnledger lifecycle` from the declarations in the code "
        "(`projections/catalog.py`, `pipeline/lifecycle.py`); do not edit by hand.\n\n"
        + render_ownership_table(all_declarations())
        + at_rest_markdown()
    )
