"""The embedding cache: vectors by content hash, in SQLite, with an LRU cap.

The cache is keyed by the text only, so it is cleared whenever the embedding
identity changes (another model's vectors must never be served). Least recently
used entries beyond the capacity are evicted after each insert. Recency is a
counter, not a clock, so eviction order is deterministic.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

DEFAULT_CACHE_SIZE: Final = 10_000
"""How many vectors the cache keeps by default."""

CACHE_DDL: Final = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    hash TEXT PRIMARY KEY,
    vector BLOB NOT NULL,
    used INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS embedding_cache_used ON embedding_cache (used);
"""
"""The cache table: content hash, little-endian float32 vector, recency tick."""

_CHUNK: Final = 500  # stays under SQLite's bound-parameter limit


def content_hash(text: str) -> str:
    """Return the cache key of a text: its SHA-256, as 64 hex characters."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors by content hash, LRU-capped, in the memory database.

    The caller owns transactions: every method runs its statements on
    ``connection`` as they come, inside whatever transaction is open.

    Args:
        connection: The memory database (the table must exist: :data:`CACHE_DDL`).
        capacity: How many vectors to keep; 0 disables the cache.
    """

    def __init__(self, connection: sqlite3.Connection, capacity: int) -> None:
        if capacity < 0:
            msg = f"Expected a cache size >= 0, found {capacity}"
            raise ValueError(msg)
        self._db = connection
        self.capacity = capacity
        row = connection.execute("SELECT max(used) FROM embedding_cache").fetchone()
        self._tick = int(row[0] or 0)

    def get_many(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """Return the cached vectors among ``hashes`` and mark them used.

        Args:
            hashes: Content hashes (see :func:`content_hash`).

        Returns:
            The vectors found, by hash.
        """
        if not self.capacity or not hashes:
            return {}
        found: dict[str, bytes] = {}
        for chunk in _chunks(list(dict.fromkeys(hashes))):
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT hash, vector FROM embedding_cache WHERE hash IN ({marks})",
                chunk,
            )
            found.update((str(h), bytes(v)) for h, v in rows)
        self._touch(found)
        return found

    def put_many(self, vectors: Mapping[str, bytes]) -> None:
        """Insert or refresh vectors, then evict the least recently used extras.

        Args:
            vectors: Float32 vectors by content hash.
        """
        if not self.capacity or not vectors:
            return
        rows = [(h, v, self._next()) for h, v in vectors.items()]
        self._db.executemany(
            "INSERT OR REPLACE INTO embedding_cache (hash, vector, used) "
            "VALUES (?, ?, ?)",
            rows,
        )
        self._evict()

    def clear(self) -> None:
        """Forget every cached vector."""
        self._db.execute("DELETE FROM embedding_cache")

    def __len__(self) -> int:
        row = self._db.execute("SELECT count(*) FROM embedding_cache").fetchone()
        return int(row[0])

    def _touch(self, hashes: Iterable[str]) -> None:
        rows = [(self._next(), h) for h in hashes]
        if rows:
            self._db.executemany(
                "UPDATE embedding_cache SET used = ? WHERE hash = ?", rows
            )

    def _evict(self) -> None:
        extra = len(self) - self.capacity
        if extra > 0:
            self._db.execute(
                "DELETE FROM embedding_cache WHERE hash IN "
                "(SELECT hash FROM embedding_cache ORDER BY used LIMIT ?)",
                (extra,),
            )

    def _next(self) -> int:
        self._tick += 1
        return self._tick


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
