"""Session keys refuse control characters, as every ledger identifier does.

``sanitize_session_key`` is the one form of a session key every store, scope
and recall uses: a key with a C0 control, DEL or a C1 control is refused with
a typed error naming the field and the position; every other key is returned
unchanged (issue #26, item 6).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnledger.ledger.errors import InvalidArgumentError, InvalidIdError
from turnledger.policies.paths import (
    MAX_PATH_CHARS,
    PathPolicyError,
    cli_session_key,
    confine_path,
    sanitize_session_key,
    session_scopes,
)

CONTROL = st.one_of(st.integers(0, 0x1F), st.just(0x7F), st.integers(0x80, 0x9F)).map(
    chr
)
VALID = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters=[chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))],
    ),
    max_size=40,
)


@given(head=VALID, bad=CONTROL, tail=VALID)
def test_a_key_with_a_control_character_is_refused(
    head: str, bad: str, tail: str
) -> None:
    with pytest.raises(InvalidIdError) as caught:
        sanitize_session_key(head + bad + tail)
    assert (caught.value.field, caught.value.position) == ("session_key", len(head))
    assert f"U+{ord(bad):04X} at character {len(head)}" in str(caught.value)


@given(VALID)
def test_a_key_without_one_stays_the_key(key: str) -> None:
    assert sanitize_session_key(key) == key


def test_scopes_and_cli_keys_go_through_the_same_check() -> None:
    assert session_scopes(["a", None, "", "a", "b c"]) == ("a", "b c")
    with pytest.raises(InvalidIdError):
        session_scopes(["a", "b\x00"])
    with pytest.raises(InvalidIdError):
        cli_session_key("/home/u/state\n")


def test_a_key_that_is_not_text_is_a_typed_error() -> None:
    with pytest.raises(InvalidArgumentError, match="session_key: expected str"):
        sanitize_session_key(None)  # type: ignore[arg-type]


def test_a_refusal_quotes_a_long_root_bounded() -> None:
    root = "relative/" + "r" * MAX_PATH_CHARS
    with pytest.raises(PathPolicyError, match=r"characters\)$") as caught:
        confine_path("a", root=root, resolve=lambda p: p)
    assert len(str(caught.value)) < 400
