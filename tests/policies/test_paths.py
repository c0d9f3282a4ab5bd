"""Session keys (§1.5) and workspace path confinement."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.strategies_memory import (
    ROOT,
    adversarial_paths,
    make_resolve,
    symlink_maps,
)
from turnledger.policies.paths import (
    PathAllowed,
    PathPolicyError,
    PathRefused,
    channel_session_scopes,
    cli_session_key,
    confine_path,
    is_within,
    legacy_session_key,
    sanitize_session_key,
    session_scopes,
)

NO_LINKS = make_resolve({})


KEY_CHARS = st.characters(
    blacklist_characters=[chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))],
    blacklist_categories=("Cs",),
)
"""Any character a session key may hold: all but C0, DEL and C1 controls."""


class TestSanitizeSessionKey:
    @pytest.mark.parametrize(
        ("raw", "legacy"),
        [
            ("slack_C123_1.2_user one", "slack_C123_1_2_user_one"),
            ("../tenant\\user/channel", "___tenant_user_channel"),
            ("café-日本_٣", "café-日本_٣"),
            ("", ""),
            ("a:b@c", "a_b_c"),
        ],
    )
    def test_exact_key_and_the_legacy_rule(self, raw, legacy):
        """The canonical key is the key; the old rule mapped others to '_'."""
        assert sanitize_session_key(raw) == raw
        assert legacy_session_key(raw) == legacy

    @settings(max_examples=100)
    @given(st.text(KEY_CHARS), st.text(KEY_CHARS))
    def test_lossless_and_idempotent(self, a, b):
        """Distinct keys stay distinct; canonicalizing twice changes nothing.

        Keys with control characters are refused (tests/policies/test_session_key_ids.py).
        """
        assert sanitize_session_key(sanitize_session_key(a)) == sanitize_session_key(a)
        if a != b:
            assert sanitize_session_key(a) != sanitize_session_key(b)
        once = legacy_session_key(a)
        assert legacy_session_key(once) == once
        assert len(once) == len(a)
        assert all(char.isalnum() or char in "_-" for char in once)

    def test_cli_session_key(self):
        """The CLI scope is 'cli:' + the state file path, exactly."""
        assert cli_session_key("/home/u/.state.json") == "cli:/home/u/.state.json"


class TestSessionScopes:
    def test_drops_empty_and_duplicates_in_order(self):
        """Scopes are exact, de-duplicated, first first, None dropped."""
        assert session_scopes(["b c", None, "", "b_c", "a", "b c"]) == (
            "b c",
            "b_c",
            "a",
        )

    @pytest.mark.parametrize(
        ("reply_target", "expected"),
        [
            ("user-42", ("hist.1", "alice x")),
            ("12345@g.us", ("alice x", "hist.1")),
            ("group:team", ("alice x", "hist.1")),
        ],
    )
    def test_channel_scope_order(self, reply_target, expected):
        """A DM recalls history first; a group recalls the sender first."""
        assert channel_session_scopes("hist.1", "alice x", reply_target) == expected

    def test_channel_scope_same_keys_collapse(self):
        """Identical history key and sender give one scope."""
        assert channel_session_scopes("a", "a", "dm") == ("a",)


class TestConfinePath:
    @pytest.mark.parametrize(
        ("path", "relative"),
        [
            ("notes/a.txt", "notes/a.txt"),
            (f"{ROOT}/notes/a.txt", "notes/a.txt"),
            ("a/../b", "b"),
            (".", "."),
            (f"{ROOT}/", "."),
            ("/../ws/a", "a"),
        ],
    )
    def test_allows_paths_inside(self, path, relative):
        """Relative and absolute paths inside the root are allowed, resolved."""
        decision = confine_path(path, root=ROOT, resolve=NO_LINKS)
        assert decision == PathAllowed(
            path=posixpath.normpath(posixpath.join(ROOT, relative)), relative=relative
        )

    @pytest.mark.parametrize(
        ("path", "reason", "detail"),
        [
            ("", "empty", "Expected a path, found ''"),
            ("a\0b", "invalid", "Path 'a\\x00b' has a NUL byte"),
            (
                "a\ud800",
                "invalid",
                "Path 'a\\ud800' is not valid UTF-8 (a lone surrogate)",
            ),
            (
                "a/" * 300,
                "too_long",
                (
                    "Expected a path of at most 4096 characters and 256 components,"
                    " found 600 characters and 300 components"
                ),
            ),
            (
                "x" * 5000,
                "too_long",
                (
                    "Expected a path of at most 4096 characters and 256 components,"
                    " found 5000 characters and 1 components"
                ),
            ),
            (
                "/etc/passwd",
                "outside_root",
                "Path '/etc/passwd' is outside the root '/ws'",
            ),
            ("/wsx/a", "outside_root", "Path '/wsx/a' is outside the root '/ws'"),
            ("../x", "parent_escape", "Path '../x' is outside the root '/ws'"),
            (
                "a/../../x",
                "parent_escape",
                "Path 'a/../../x' is outside the root '/ws'",
            ),
        ],
    )
    def test_refusals_say_why(self, path, reason, detail):
        """Each lexical refusal carries its reason and a sentence."""
        decision = confine_path(path, root=ROOT, resolve=NO_LINKS)
        assert decision == PathRefused(reason=reason, detail=detail)

    def test_refusals_quote_a_bounded_prefix(self):
        """A 10,000-character path is quoted by its first 200 characters."""
        decision = confine_path("../" + "x" * 3000, root=ROOT, resolve=NO_LINKS)
        assert isinstance(decision, PathRefused)
        assert decision.detail == (
            f"Path {('../' + 'x' * 197)!r}\u2026 (3003 characters) is outside the"
            " root '/ws'"
        )

    def test_symlink_escape(self):
        """A path inside the root that resolves outside it is refused."""
        resolve = make_resolve({f"{ROOT}/link": "/etc"})
        decision = confine_path("link/passwd", root=ROOT, resolve=resolve)
        assert decision == PathRefused(
            reason="symlink_escape",
            detail="Path 'link/passwd' resolves to '/etc/passwd', outside '/ws'",
        )

    def test_dotdot_after_symlink_is_resolved_like_the_os(self):
        """'link/..' is the link target's parent, not the root."""
        resolve = make_resolve({f"{ROOT}/link": "/ws/a/b"})
        decision = confine_path("link/../c", root=ROOT, resolve=resolve)
        assert decision == PathAllowed(path="/ws/a/c", relative="a/c")

    def test_symlinked_root_is_resolved_too(self):
        """A root that is itself a symlink is compared in its resolved form."""
        resolve = make_resolve({"/ws": "/data/ws"})
        decision = confine_path("a", root=ROOT, resolve=resolve)
        assert decision == PathAllowed(path="/data/ws/a", relative="a")

    def test_filesystem_root_contains_everything(self):
        """With '/' as root every absolute path is inside."""
        decision = confine_path("/etc/x", root="/", resolve=NO_LINKS)
        assert decision == PathAllowed(path="/etc/x", relative="etc/x")

    def test_relative_root_is_a_typed_error(self):
        """A relative root is a configuration error naming what was found."""
        with pytest.raises(
            PathPolicyError, match="absolute workspace root, found 'ws'"
        ):
            confine_path("a", root="ws", resolve=NO_LINKS)

    def test_relative_resolution_is_a_typed_error(self):
        """A resolver that returns a relative path is rejected."""
        with pytest.raises(PathPolicyError, match="found 'x'"):
            confine_path("a", root=ROOT, resolve=lambda _path: "x")

    def test_is_within_is_component_wise(self):
        """'/rootx' is not inside '/root'; the root is inside itself."""
        assert is_within("/root", "/root")
        assert is_within("/root/a", "/root")
        assert not is_within("/rootx", "/root")
        assert is_within("/a", "/")

    @settings(max_examples=150)
    @given(adversarial_paths, symlink_maps)
    def test_never_admits_a_path_outside_the_root(self, path, links):
        """Whatever the path and symlinks, an allowed path resolves inside."""
        resolve = make_resolve(links)
        decision = confine_path(path, root=ROOT, resolve=resolve)
        if isinstance(decision, PathAllowed):
            real_root = resolve(ROOT)
            oracle = resolve(posixpath.join(ROOT, path))
            assert decision.path == oracle
            assert oracle == real_root or oracle.startswith(real_root.rstrip("/") + "/")

    @settings(max_examples=100)
    @given(
        st.lists(st.sampled_from(["a", "b", "c.txt", "d-1"]), min_size=1, max_size=5)
    )
    def test_plain_relative_paths_are_allowed(self, parts):
        """A relative path without '..' or links is always allowed."""
        path = "/".join(parts)
        assert confine_path(path, root=ROOT, resolve=NO_LINKS) == PathAllowed(
            path=f"{ROOT}/{path}", relative=path
        )
