"""What a ledger URL names: one reading, shared by every caller."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from turnledger.ledger.errors import ConfigurationError
from turnledger.ledger.location import SQLITE_SCHEME, sqlite_path
from turnledger.ledger.store import open_store
from turnledger.pipeline.memory.wiring import is_file_ledger

paths = st.text(max_size=40).filter(lambda text: "://" not in text)


@given(paths)
@example("")
@example("ledger.db")
@example("/srv/a b/ledger.db")
def test_a_path_and_its_sqlite_url_name_the_same_file(path: str) -> None:
    assert sqlite_path(path) == path
    assert sqlite_path(SQLITE_SCHEME + path) == path
    assert is_file_ledger(path)
    assert is_file_ledger(SQLITE_SCHEME + path)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1/test",
        "postgres://host/db",
        "sqlite:///x://y",
        "qdrant://host",
    ],
)
def test_a_server_url_names_no_file(url: str) -> None:
    assert sqlite_path(url) is None
    assert not is_file_ledger(url)


@pytest.mark.parametrize("url", ["sqlite:///x://y", "mysql://host/db", "sqlite:///"])
def test_the_store_refuses_what_names_no_file(url: str) -> None:
    with pytest.raises(ConfigurationError, match="Expected a SQLite file path"):
        open_store(url)
