"""Memory service wiring: where an agent's memory lives and how it is opened.

Backends come from the configuration (one install-wide instance per backend
reference; Markdown per agent). Default files sit beside a SQLite ledger; for
any other ledger (PostgreSQL) they sit in the ledger's own home under the
configuration's ``data_dir`` (:func:`memory_home`), so two ledgers never share
a memory database or key store.

Given the ledger (``store``), every memory store is tied to it at open
(``bind``): a SQLite database, a PostgreSQL schema or a Qdrant collection of
another ledger, or past this ledger's end, is emptied and caught up again from
this ledger's memory events; Markdown files (which the user may edit) are
refused in one line naming the file instead. The key store records the ledger's id:
a key store of another ledger cannot be rebuilt from this one (its keys are
not in the ledger), so it is refused in one line naming the file.

With a cipher key, the SQLite memory databases and the key store are opened
with the ledger's key (``ledger.file_keys.cipher_key_of``): SQLCipher files,
each keyed with its own derived key.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import parse_qsl, urlsplit

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.file_keys import cipher_key_of, file_key
from turnledger.ledger.location import sqlite_path
from turnledger.ledger.sqlite.encrypted import connect_file
from turnledger.pipeline.config import Config, is_static
from turnledger.pipeline.errors import PipelineError
from turnledger.policies.scoping import normalize_backend
from turnledger.projections.memory.embedding import (
    Embedder,
    EmbedderError,
    NoEmbedder,
    OpenAICompatibleEmbedder,
)
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.memory.shred import CLEAR_KEYS_REMEDY, KeyStore

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.projections.memory.sqlite import SearchMode

HOME_DIR: Final = "memory"
"""The folder under ``data_dir`` holding one home per non-file ledger."""

LEGACY_KEYS: Final = Path("turnledger.keys.db")
"""Where a non-file ledger's key store used to be (the working directory)."""

_NOT_IDENTITY: Final = frozenset(
    {"password", "user", "sslpassword", "connect_timeout", "application_name"}
)


class _Bindable(Protocol):
    """A memory store that records the ledger it derives from."""

    def bind(self, ledger_id: str | None, head: int | Callable[[], int]) -> bool: ...

    def close(self) -> None: ...


class MemoryAccessError(PipelineError, ValueError):
    """A memory operation is refused (scope) or cannot be served."""


class StaleEntryError(MemoryAccessError):
    """A compare-and-set store found the entry changed; nothing was written."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"Expected memory entry {key!r} unchanged since it was read, "
            "found it rewritten or removed by another writer"
        )


def ledger_digest(ledger_url: str) -> str:
    """A short, stable name for a non-file ledger, without its credentials.

    The digest covers the scheme, host, port, database and the query parameters
    that select data (``schema``...); user, password and connection tuning are
    left out, so the same ledger reached as another user has the same home.

    Returns:
        e.g. ``postgresql-1f2e3d4c5b6a`` (12 hex digits of SHA-256).
    """
    parts = urlsplit(ledger_url)
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in _NOT_IDENTITY
    )
    where = f"{parts.hostname or ''}:{parts.port or ''}{parts.path}"
    identity = f"{parts.scheme.lower()}://{where}?{query}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return f"{parts.scheme.lower() or 'ledger'}-{digest}"


def memory_home(ledger_url: str, data_dir: str | Path) -> Path:
    """The folder a non-file ledger's memory files live in.

    Returns:
        ``<data_dir>/memory/<ledger digest>`` (see :func:`ledger_digest`).
    """
    return Path(data_dir) / HOME_DIR / ledger_digest(ledger_url)


def is_file_ledger(ledger_url: str) -> bool:
    """Return whether the ledger is a SQLite file (memory files go beside it)."""
    return sqlite_path(ledger_url) is not None


def _base_paths(ledger_url: str, data_dir: str | Path) -> tuple[Path, str]:
    found = sqlite_path(ledger_url)
    if found is None:
        return memory_home(ledger_url, data_dir), "turnledger"
    path = Path(found)
    return path.parent, path.stem


class MemoryWiring:
    """The configuration's memory backends for one ledger, opened on first use.

    Args:
        config: The configuration (agents, storage, embedding, ``data_dir``).
        ledger_url: Where the ledger is (default files are put beside a SQLite
            ledger, else in :func:`memory_home`).
        shredding: Seal memory contents with per-entry keys (forget destroys
            them); ``None`` (the default) takes ``[memory] shredding``, so every
            writer (engine, autosave, tools, consolidation, import, CLI) honours it.
        keys_path: The key store file (default: ``<ledger stem>.keys.db`` beside
            the ledger, or ``turnledger.keys.db`` in the ledger's home; a key
            store left in the working directory by an earlier version is still
            used while the home has none, as copying keys would keep a copy
            that ``forget`` cannot destroy); a rebuild elsewhere passes the
            live one to decrypt.
        store: The ledger the memory derives from; given, every memory store
            and the key store are tied to its id (see the module).
    """

    def __init__(
        self,
        config: Config,
        *,
        ledger_url: str,
        shredding: bool | None = None,
        keys_path: str | Path | None = None,
        store: EventStore | None = None,
    ) -> None:
        self.config = config
        self._store = store
        self.ledger_url = ledger_url
        self.base, self.stem = _base_paths(ledger_url, config.data_dir)
        self.shredding = config.memory.shredding if shredding is None else shredding
        self.keys_path = Path(keys_path or self._default_keys_path())
        self._backends: dict[str, MemoryBackend] = {}
        self._embedder_made: Embedder | None = None
        self._keys: KeyStore | None = None

    def _default_keys_path(self) -> Path:
        home = self.base / f"{self.stem}.keys.db"
        if is_file_ledger(self.ledger_url) or home.exists():
            return home
        return LEGACY_KEYS if LEGACY_KEYS.exists() else home

    def keys(self) -> KeyStore:
        """The key store of sealed contents (opened on first use)."""
        if self._keys is None:
            self.keys_path.parent.mkdir(parents=True, exist_ok=True)
            if self._store is not None:
                _check_keys_ledger(
                    self.keys_path, self._store.backend.ledger_id, self._cipher_key()
                )
            self._keys = KeyStore(str(self.keys_path), cipher_key=self._cipher_key())
        return self._keys

    def _cipher_key(self) -> str | None:
        """The ledger's cipher key for the files beside it (None: the environment's)."""
        return None if self._store is None else cipher_key_of(self._store)

    def keys_exist(self) -> bool:
        """Whether there is a key store (open, or its file written earlier)."""
        return self._keys is not None or self.keys_path.exists()

    def backend_ref(self, agent: str) -> str:
        """The ``kind.alias`` of the backend an agent's memory lives in."""
        return normalize_backend(self.config.backend_of(agent))

    def embedder(self) -> Embedder:
        """The configured embedder, built once and shared by every backend."""
        if self._embedder_made is None:
            self._embedder_made = self._make_embedder()
        return self._embedder_made

    def _make_embedder(self) -> Embedder:
        settings = self.config.embedding
        if settings.provider == "none":
            return NoEmbedder()
        if is_static(settings):  # either spelling
            return _static_embedder(settings.dims)
        if settings.provider == "local":
            return _local_embedder(settings.model, settings.dims, settings.threads)
        import os  # noqa: PLC0415

        return OpenAICompatibleEmbedder(
            base_url=settings.base_url or "https://api.openai.com",
            model=settings.model or "text-embedding-3-small",
            dims=settings.dims or 1536,
            api_key=os.environ.get(settings.api_key_env),
        )

    def _vector_probes(self) -> int | None:
        """``[embedding] index``: None (exact) or the inverted lists a search scores."""
        settings = self.config.embedding
        if settings.index != "ivf":
            return None
        from turnledger.projections.memory.sqlite import DEFAULT_VECTOR_PROBES  # noqa: PLC0415

        return settings.probes or DEFAULT_VECTOR_PROBES

    def workspace(self, agent: str) -> Path:
        """The agent's workspace (its Markdown memory lives there)."""
        configured = self.config.agent(agent).workspace
        if configured:
            return Path(configured)
        return Path(self.config.data_dir) / "agents" / agent / "workspace"

    def sqlite_path(self, ref: str) -> Path:
        """The file of a ``sqlite.<alias>`` backend (configured or default)."""
        alias = ref.partition(".")[2] or "default"
        configured = self.config.storage_for(ref).path
        if configured:
            return Path(configured)
        if alias != "default":
            return self._home_file(f"{self.stem}.memory.{alias}.db")
        return self._home_file(f"{self.stem}.memory.db")

    def _home_file(self, name: str) -> Path:
        """A default file beside the ledger or in its home (created here)."""
        if not is_file_ledger(self.ledger_url):
            self.base.mkdir(parents=True, exist_ok=True)
        return self.base / name

    def _qdrant_default(self) -> Path:
        """``<data_dir>/qdrant`` for a SQLite ledger, else the ledger's home."""
        if is_file_ledger(self.ledger_url):
            return Path(self.config.data_dir) / "qdrant"
        return self._home_file("qdrant")

    def _open(self, ref: str, agent: str) -> MemoryBackend:
        kind = ref.partition(".")[0]
        storage = self.config.storage_for(ref)
        if kind == "sqlite":
            from turnledger.projections.memory.sqlite import SQLiteMemory  # noqa: PLC0415

            memory = SQLiteMemory(
                self.sqlite_path(ref),
                embedder=self.embedder(),
                vector_probes=self._vector_probes(),
                search_mode=_search_mode(self.config.memory.search_mode),
                cache_size=self.config.memory.embedding_cache_size,
                cipher_key=self._cipher_key(),
            )
            self._bind(memory)
            return memory
        if kind == "markdown":
            from turnledger.projections.memory.markdown import MarkdownMemory  # noqa: PLC0415
            from turnledger.projections.memory.markdown.peers import MarkdownPeers  # noqa: PLC0415

            own = MarkdownMemory(self.workspace(agent), agent=agent)
            self._bind(own)
            peers = self.markdown_peers(agent)
            if not peers:
                return own
            return MarkdownPeers(
                own,
                {p: MarkdownMemory(self.workspace(p), agent=p) for p in peers},
            )
        if kind == "postgres":
            from turnledger.projections.memory.postgres import PostgresMemory  # noqa: PLC0415

            pg_memory = PostgresMemory(str(storage.url), embedder=self.embedder())
            self._bind(pg_memory)
            return pg_memory
        if kind == "qdrant":
            from turnledger.projections.memory.qdrant import QdrantMemory  # noqa: PLC0415

            if self.config.embedding.provider == "none":
                msg = (
                    "Qdrant stores vectors only: expected an [embedding] provider "
                    '("static", "local" or "openai-compatible"), found none'
                )
                raise MemoryAccessError(msg)

            if storage.url:
                qdrant = QdrantMemory(url=storage.url, embedder=self.embedder())
            else:
                path = storage.path or str(self._qdrant_default())
                qdrant = QdrantMemory(path=path, embedder=self.embedder())
            self._bind(qdrant)
            return qdrant
        if kind == "lucid":
            from turnledger.projections.memory.lucid import LucidMemory  # noqa: PLC0415
            from turnledger.projections.memory.sqlite import SQLiteMemory  # noqa: PLC0415

            local = SQLiteMemory(
                self._home_file(f"{self.stem}.lucid.db"), cipher_key=self._cipher_key()
            )
            self._bind(local)
            return LucidMemory(local, list(storage.command))
        from turnledger.projections.memory.none import NoneMemory  # noqa: PLC0415

        return NoneMemory()

    def _bind(self, memory: _Bindable) -> None:
        """Tie a memory store to the ledger (closed if that fails)."""
        if self._store is None:
            return
        try:
            # read under the store's own lock (LedgerHead), not before it
            memory.bind(self._store.backend.ledger_id, self._store.max_position)
        except BaseException:
            memory.close()
            raise

    def served(self, agent: str) -> tuple[str, MemoryBackend]:
        """The ``kind.alias`` and backend of the agent's memory, opened on first use.

        The backend is as it was left (not caught up with the ledger); one
        install-wide instance per reference, a Markdown one per agent.

        Raises:
            MemoryAccessError: The backend cannot be opened (a memory store's
                typed :class:`~turnledger.ledger.errors.LedgerError` is raised
                as is).
        """
        ref = self.backend_ref(agent)
        cache_key = f"{ref}/{agent}" if ref.startswith("markdown.") else ref
        backend = self._backends.get(cache_key)
        if backend is None:
            try:
                backend = self._open(ref, agent)
            except LedgerError:
                raise  # a memory store's typed error (locked, full...) as is
            except Exception as e:
                detail = " ".join(str(e).split())
                msg = f"Cannot open the {ref} memory backend of {agent!r}: {detail}"
                raise MemoryAccessError(msg) from e
            self._backends[cache_key] = backend
        return ref, backend

    def markdown_peers(self, agent: str) -> tuple[str, ...]:
        """A Markdown agent's ``read_memory_from`` peers (none for other kinds)."""
        if not self.backend_ref(agent).startswith("markdown."):
            return ()
        return self.config.agent(agent).read_memory_from

    def close(self) -> None:
        """Close every backend and the key store."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
        if self._keys is not None:
            self._keys.close()
            self._keys = None


def _search_mode(mode: str) -> SearchMode:
    """``[memory] search_mode`` as the SQLite backend's mode (checked at load)."""
    if mode == "bm25":
        return "bm25"
    if mode == "embedding":
        return "embedding"
    return "hybrid"


def _check_keys_ledger(
    path: Path, ledger_id: str | None, cipher_key: str | None
) -> None:
    """Record the ledger's id in its key store; refuse another ledger's.

    Raises:
        MemoryAccessError: The key store records another ledger's id.
        FileKeyError: The key store does not fit the cipher key.
    """
    if ledger_id is None:
        return
    db = connect_file(
        path,
        key=file_key("keys", cipher_key),
        what="memory key store",
        clear_remedy=CLEAR_KEYS_REMEDY,
    )
    try:
        row = _recorded_ledger(db)
        if row is None:  # a new key store, or one made before ids: it takes ours
            try:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS key_store_meta "
                    "(name TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                db.execute(
                    "INSERT OR IGNORE INTO key_store_meta VALUES ('ledger_id', ?)",
                    (ledger_id,),
                )
            except sqlite3.OperationalError:
                return  # locked or read-only: recorded at a later open
            row = _recorded_ledger(db)
    finally:
        db.close()
    if row is None:
        return
    if row != ledger_id:
        msg = (
            f"Expected the key store {str(path)!r} of ledger {ledger_id}, found "
            f"one of ledger {row}: its keys cannot be rebuilt from this "
            "ledger; move it away (contents it sealed stay unreadable)"
        )
        raise MemoryAccessError(msg)


def _recorded_ledger(db: sqlite3.Connection) -> str | None:
    """The ledger id a key store recorded (None: none yet)."""
    try:
        row = db.execute(
            "SELECT value FROM key_store_meta WHERE name = 'ledger_id'"
        ).fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise
    return None if row is None else str(row[0])


def _static_embedder(dims: int | None) -> Embedder:
    """``provider = "static"``: the table shipped in the package (numpy only).

    Raises:
        MemoryAccessError: The shipped table or vocabulary is damaged.
    """
    from turnledger.projections.memory.embedding.static import (  # noqa: PLC0415
        DEFAULT_STATIC_DIMS,
        StaticEmbedder,
    )

    try:  # config checked: dims in range, one thread
        return StaticEmbedder(dims or DEFAULT_STATIC_DIMS)
    except EmbedderError as e:
        raise MemoryAccessError(f"embedding: {e}") from e


def _local_embedder(model: str | None, dims: int | None, threads: int) -> Embedder:
    """``provider = "local"``: the packaged model or a folder.

    (``model = "all-MiniLM-L6-v2-static"``, the older spelling of ``provider =
    "static"``, never gets here: see :func:`~turnledger.pipeline.config.is_static`.)

    Raises:
        MemoryAccessError: ``dims`` is set and is not the model's, or the model
            cannot be loaded (packages missing, folder unreadable).
    """
    try:
        return _load_local(model, dims, threads)
    except EmbedderError as e:
        raise MemoryAccessError(f"embedding: {e}") from e


def _load_local(model: str | None, dims: int | None, threads: int) -> Embedder:
    from turnledger.projections.memory.embedding.local import (  # noqa: PLC0415
        PACKAGED_MODEL,
        LocalEmbedder,
    )

    local = LocalEmbedder(model or PACKAGED_MODEL, threads=threads)
    found = local.identity.dims
    if dims is not None and dims != found:
        msg = f"embedding.dims: expected {found}, found {dims}"
        raise MemoryAccessError(msg)
    return local
