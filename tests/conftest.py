"""Shared fixtures: fresh ledger files, the real PostgreSQL server, seeded randomness."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import structlog
from hypothesis import settings

from turnledger.ledger.store import EventStore, open_store

POSTGRES_URL_ENV = "TURNLEDGER_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
IN_CI = os.environ.get("CI", "").lower() == "true"

# Speed is measured in benchmarks/, never asserted in a test: Hypothesis's
# per-example deadline (200 ms) is a timed assertion that a loaded machine fails.
settings.register_profile("turnledger", deadline=None)
settings.load_profile("turnledger")
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def postgres_base_url() -> str:
    """The server URL tests use (a schema per test is added to it)."""
    return os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)


def _postgres_answers(url: str) -> str | None:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return None
    except psycopg.Error as e:
        return str(e)


def require_postgres() -> str:
    """Return the server URL, or skip; under CI=true a missing server FAILS."""
    url = postgres_base_url()
    problem = _postgres_answers(url)
    if problem is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL must answer under CI=true at {url}: {problem}")
        pytest.skip(f"no PostgreSQL server at {url}: {problem}")
    return url


def fresh_schema_url(base: str) -> str:
    """Return ``base`` with a new, unique schema selected."""
    schema = f"tl_test_{uuid.uuid4().hex[:12]}"
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}schema={schema}"


def drop_schema(url: str) -> None:
    """Drop the schema a test URL selected."""
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(name="postgres_url")
def _postgres_url() -> Iterator[str]:
    """A URL selecting a fresh schema on the real server, dropped afterwards."""
    url = fresh_schema_url(require_postgres())
    yield url
    drop_schema(url)


@pytest.fixture(name="sqlite_path")
def _sqlite_path(tmp_path: Path) -> str:
    """A path for a new ledger file."""
    return str(tmp_path / "turnledger.db")


@pytest.fixture(name="sqlite_store")
def _sqlite_store(sqlite_path: str) -> Iterator[EventStore]:
    """A fresh SQLite ledger."""
    store = open_store(sqlite_path)
    yield store
    store.close()


@pytest.fixture(name="postgres_store")
def _postgres_store(postgres_url: str) -> Iterator[EventStore]:
    """A fresh PostgreSQL ledger in its own schema."""
    store = open_store(postgres_url)
    yield store
    store.close()


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts with structlog's defaults (the CLI configures it globally)."""
    yield
    structlog.reset_defaults()


class SeededRandom(random.Random):
    """A Random whose repr shows its seed, so a failing test names it."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.seed_value = seed

    def __repr__(self) -> str:
        return f"SeededRandom(seed={self.seed_value})"


@pytest.fixture(name="rand")
def _rand() -> SeededRandom:
    """Seeded randomness (TURNLEDGER_TEST_SEED to replay a failure)."""
    seed = int(os.environ.get("TURNLEDGER_TEST_SEED", random.randrange(2**32)))
    return SeededRandom(seed)
