"""Credential scrubbing of text, JSON and summaries (§8.3)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.policies.strategies_memory import (
    json_values,
    planted_secrets,
    texts_with_secrets,
)
from turnledger.policies.messages import (
    ToolCall,
    ToolResult,
    make_message,
    measure_chars,
)
from turnledger.policies.scrubbing import (
    ELLIPSIS,
    ScrubberConfigError,
    looks_like_secret_key,
    make_scrubber,
    scrub_text,
    summarize,
)
from turnledger.policies.secret_shapes import (
    entropy_bits,
    high_entropy,
    scrub_secretish_values,
)
from turnledger.policies.structured_scrubbing import (
    scrub_json,
    scrub_json_text,
    scrub_message,
    scrub_tool_call,
)

# Pieces that interact with every pattern, for idempotence hunting.
_PIECES = st.sampled_from(
    [
        "token",
        "Authorization",
        "password",
        "api-key",
        "=",
        ":",
        " ",
        "\t",
        "\n",
        '"',
        "'",
        "\\",
        "abcdefgh",
        "1234",
        "Bearer ",
        "basic ",
        "https://x.io/p",
        "?",
        "#",
        "&q=1",
        "sk-",
        "ghp_",
        "AIza",
        "x",
        "*",
        "[REDACTED]",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "{",
        "}",
        ",",
        "é",
        ELLIPSIS,
        ".",
        "postgres://",
        "u:",
        "@",
        "/",
        "AKIA",
        "ABCDEFGHIJKLMNOP",
        "Q~",
        "abc8",
        "eyJ",
        "hooks.slack.com/services/",
        "STRIPE_KEY=",
        "Zx81kQ0aPz3mN7vW",
        "[REDACTED PRIVATE KEY]",
        "sk_live_",
        "npm_",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12",
    ]
)
adversarial_texts = st.one_of(
    st.lists(_PIECES, max_size=25).map("".join),
    st.text(max_size=60),
)


class TestReferenceExamples:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "token=QWxh+GRpbjpvcGVu/IHNlc2FtZQ== next=public",
                "token=QWxh*[REDACTED] next=public",
            ),
            ("api_key: abcdefghijk", "api_key: abcd*[REDACTED]"),
            ('"api_key": "abcdefghijk"', '"api_key": "abcd*[REDACTED]"'),
            ("password='hunter2hunter2'", "password='hunt*[REDACTED]'"),
            ('Secret="s3cr3t-value-9"', 'Secret="s3cr*[REDACTED]"'),
            ("user-key=abcdefgh", "user-key=abcd*[REDACTED]"),
            ("Set-Cookie: sessionid=abcdefgh1234", "Set-Cookie: sess*[REDACTED]"),
            ("credential = abcdefgh", "credential = abcd*[REDACTED]"),
            ("APIKEY=abcdefgh", "APIKEY=abcd*[REDACTED]"),
            ("token=abc1234 short", "token=abc1234 short"),
            ("the token: is missing", "the token: is missing"),
        ],
    )
    def test_key_value_pairs(self, text, expected):
        """Keys and the first 4 chars of values of >= 8 chars are kept."""
        assert scrub_text(text) == expected

    @pytest.mark.parametrize(
        "token",
        [
            "sk-proj-ABCDEFGH1234",
            "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
            "gho_abcdefgh12",
            "ghu_abcdefgh12",
            "github_pat_11ABCDEFG0123456789",
            "xoxb-1234-5678-abcdef",
            "xoxp-1234-5678-abcdef",
            "AIzaSyA1234567890abcdefg",
        ],
    )
    def test_bare_secret_prefixes(self, token):
        """Bare tokens with a known prefix are replaced whole."""
        assert scrub_text(f"use {token} now") == "use [REDACTED] now"
        assert scrub_text(f"({token})") == "([REDACTED])"

    @pytest.mark.parametrize(
        "text",
        ["task-force-alpha-team", "sk-short", "mask-abcdefghijk", "Ghp_ABCDEFGHIJKL"],
    )
    def test_prefix_needs_a_boundary_and_a_body(self, text):
        """A prefix inside a word, or followed by < 8 chars, is left alone."""
        assert scrub_text(text) == text

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "see https://x.com/cb?code=abc&state=1 now",
                "see https://x.com/cb now",
            ),
            ('{"u": "HTTPS://x.com/a?k=v"}', '{"u": "HTTPS://x.com/a"}'),
            ("https://x.com/#access_token=abc", "https://x.com/"),
            ("https://x.com/docs#section-2", "https://x.com/docs#section-2"),
            ("http://x.com/a?b#c=d", "http://x.com/a"),
        ],
    )
    def test_url_query_strings_removed(self, text, expected):
        """Query strings (and fragments carrying parameters) are deleted."""
        assert scrub_text(text) == expected

    @pytest.mark.parametrize(
        "header",
        [
            "RSA PRIVATE KEY",
            "PRIVATE KEY",
            "OPENSSH PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
        ],
    )
    def test_pem_blocks_removed(self, header):
        """PEM private-key blocks become one marker."""
        text = f"a\n-----BEGIN {header}-----\nMIIabc\n+/=\n-----END {header}-----\nb"
        assert scrub_text(text) == "a\n[REDACTED PRIVATE KEY]\nb"

    def test_cut_pem_block_removed_to_the_end(self):
        """A PEM block without its END line is removed to the end."""
        text = "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE"
        assert scrub_text(text) == "key:\n[REDACTED PRIVATE KEY]"

    def test_public_key_kept(self):
        """Public keys and certificates are not secrets."""
        text = "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"
        assert scrub_text(text) == text

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig",
                "Authorization: Bearer eyJh*[REDACTED]",
            ),
            ("authorization=Basic dXNlcjpwYXNz", "authorization=Basic dXNl*[REDACTED]"),
            ('curl -H "Bearer abcdefghijkl"', 'curl -H "Bearer abcd*[REDACTED]"'),
        ],
    )
    def test_authorization_schemes(self, text, expected):
        """The scheme word is kept and the token scrubbed (exceeds the reference)."""
        assert scrub_text(text) == expected

    def test_escaped_quote_keeps_json_text_valid(self):
        """An escape is never cut in half by the kept head."""
        text = '{"password": "ab\\"cdefghij"}'
        scrubbed = scrub_text(text)
        assert scrubbed == '{"password": "ab\\"c*[REDACTED]"}'
        assert msgspec.json.decode(scrubbed) == {"password": 'ab"c*[REDACTED]'}


class TestProperties:
    @settings(max_examples=150)
    @given(adversarial_texts)
    def test_scrub_text_idempotent(self, text):
        """Scrubbing scrubbed text changes nothing."""
        once = scrub_text(text)
        assert scrub_text(once) == once

    @settings(max_examples=100)
    @given(texts_with_secrets())
    def test_no_planted_secret_survives(self, planted):
        """Every planted secret (each kind) is gone from the output."""
        text, fragments = planted
        # Only the planted copy: random filler may not spell a secret itself.
        assume(all(text.count(fragment) == 1 for fragment in fragments))
        scrubbed = scrub_text(text)
        for fragment in fragments:
            assert fragment not in scrubbed
        assert scrub_text(scrubbed) == scrubbed

    @settings(max_examples=75)
    @given(json_values, st.lists(planted_secrets(), min_size=1, max_size=3))
    def test_json_secrets_removed_and_idempotent(self, value, secrets):
        """Secrets planted as JSON strings and secret-key values are removed."""
        assume(all(f not in msgspec.json.encode(value).decode() for _, f in secrets))
        document = {
            "payload": value,
            "notes": [planted for planted, _ in secrets],
            "apiKey": secrets[0][1],
        }
        scrubbed = scrub_json(document)
        encoded = msgspec.json.encode(scrubbed).decode()
        for _, fragment in secrets:
            assert fragment not in encoded
        assert scrub_json(scrubbed) == scrubbed
        text = scrub_json_text(msgspec.json.encode(document).decode())
        for _, fragment in secrets:
            assert fragment not in text
        assert scrub_json_text(text) == text

    @settings(max_examples=150)
    @given(adversarial_texts)
    def test_scrub_json_text_idempotent_on_any_text(self, text):
        """JSON or not, a second pass changes nothing."""
        once = scrub_json_text(text)
        assert scrub_json_text(once) == once

    @settings(max_examples=150)
    @given(adversarial_texts, st.integers(min_value=1, max_value=30))
    def test_summary_bounded_and_idempotent(self, text, limit):
        """A summary is <= limit chars plus the ellipsis, and stable."""
        summary = summarize(text, limit)
        assert len(summary) <= limit + 1
        assert summarize(summary, limit) == summary
        assert scrub_text(summary) == summary


class TestJson:
    @pytest.mark.parametrize(
        "key",
        [
            "password",
            "db_password",
            "apiKey",
            "x-api-key",
            "api_key",
            "access_token",
            "refreshToken",
            "token",
            "client_secret",
            "privateKey",
            "Set-Cookie",
            "Authorization",
            "auth",
            "credentials",
            "secret_name",
        ],
    )
    def test_secret_keys(self, key):
        """Secret-looking keys are recognised across naming styles."""
        assert looks_like_secret_key(key)

    @pytest.mark.parametrize(
        "key",
        [
            "max_tokens",
            "token_count",
            "input_tokens",
            "session_key",
            "keyboard",
            "",
            "__",
        ],
    )
    def test_ordinary_keys(self, key):
        """Token counts and other ordinary keys are kept."""
        assert not looks_like_secret_key(key)

    def test_scrub_json_walks_every_container(self):
        """Secret keys lose their whole value; strings are scrubbed as text."""
        value = {
            "password": {"nested": 1},
            "items": ["sk-abcdefghijkl", ("token=abcdefghij", 3)],
            "count": 2,
            "ok": True,
            "none": None,
            "ratio": 0.5,
        }
        assert scrub_json(value) == {
            "password": "[REDACTED]",
            "items": ["[REDACTED]", ("token=abcd*[REDACTED]", 3)],
            "count": 2,
            "ok": True,
            "none": None,
            "ratio": 0.5,
        }

    def test_scrub_json_text_reencodes_compactly(self):
        """Valid JSON is parsed, scrubbed and re-encoded."""
        text = '{"args": {"apiKey": 123, "max_tokens": 5, "q": "token=abcdefghij"}}'
        assert scrub_json_text(text) == (
            '{"args":{"apiKey":"[REDACTED]","max_tokens":5,"q":"token=abcd*[REDACTED]"}}'
        )

    def test_scrub_json_text_falls_back_to_text(self):
        """Text that is not JSON is scrubbed as text, formatting kept."""
        text = "not json: password = abcdefghij"
        assert scrub_json_text(text) == "not json: password = abcd*[REDACTED]"

    def test_scrub_json_text_with_lone_surrogate(self):
        """Text that cannot even be encoded is scrubbed as text."""
        assert scrub_json_text("\ud800 sk-abcdefghijk") == "\ud800 [REDACTED]"

    def test_text_that_becomes_json_takes_the_json_path(self):
        """A bad escape inside a redacted value makes the text JSON; redo as JSON."""
        text = '{"password": "abcdefgh\\q"}'
        assert scrub_json_text(text) == '{"password":"[REDACTED]"}'


class TestSummariesAndMessages:
    def test_summary_short_text_is_only_scrubbed(self):
        """Text under the limit is returned scrubbed, without an ellipsis."""
        assert summarize("find sk-abcdefghijkl") == "find [REDACTED]"

    def test_summary_cut_at_200(self):
        """Longer text keeps 200 chars, right-trimmed, plus the ellipsis."""
        assert summarize("x" * 300) == "x" * 200 + ELLIPSIS
        assert summarize("y" * 199 + " " + "z" * 10) == "y" * 199 + ELLIPSIS

    def test_summary_limit_must_be_positive(self):
        """A limit below 1 is a typed error."""
        with pytest.raises(ValueError, match="Expected a summary limit >= 1, found 0"):
            summarize("x", 0)

    def test_scrub_tool_call_arguments(self):
        """Tool-call arguments are scrubbed as JSON (ZeroClaw sends them raw)."""
        call = ToolCall(id="c1", name="http", arguments='{"token": "abcdefghijk"}')
        assert scrub_tool_call(call) == ToolCall(
            id="c1", name="http", arguments='{"token":"[REDACTED]"}'
        )

    def test_scrub_message_every_part(self):
        """Text, call arguments and results are scrubbed; chars re-measured."""
        message = make_message(
            "assistant",
            "key sk-abcdefghijkl",
            tool_calls=(ToolCall(id="c", name="n", arguments='{"password": "x"}'),),
            tool_results=(ToolResult(call_id="c", content="password=abcdefghij"),),
        )
        scrubbed = scrub_message(message)
        assert scrubbed.text == "key [REDACTED]"
        assert scrubbed.tool_calls[0].arguments == '{"password":"[REDACTED]"}'
        assert scrubbed.tool_results[0].content == "password=abcd*[REDACTED]"
        assert scrubbed.chars == measure_chars(
            scrubbed.text, scrubbed.tool_calls, scrubbed.tool_results
        )


class TestMakeScrubber:
    def test_known_secrets_removed_longest_first(self):
        """Configured secret values are removed wherever they appear."""
        scrub = make_scrubber(known_secrets=["hunter2-long", "hunter2-long-er"])
        assert (
            scrub("a hunter2-long-er b hunter2-long c") == "a [REDACTED] b [REDACTED] c"
        )

    def test_no_known_secrets_is_scrub_text(self):
        """Without configured secrets the scrubber is scrub_text."""
        assert make_scrubber() is scrub_text

    @pytest.mark.parametrize(
        "secret", ["short", "has space12", "star*12345", 'quo"te1234']
    )
    def test_bad_known_secrets(self, secret):
        """Unusable secrets are refused without echoing them."""
        with pytest.raises(ScrubberConfigError) as raised:
            make_scrubber(known_secrets=[secret])
        assert secret not in str(raised.value)

    @settings(max_examples=75)
    @given(
        adversarial_texts,
        st.text(alphabet="abcdefXYZ0189-_./:=+", min_size=8, max_size=12),
    )
    def test_known_secret_never_survives(self, text, secret):
        """A configured secret planted anywhere is gone; scrubbing is stable."""
        scrub = make_scrubber(known_secrets=[secret])
        planted = f"{text}{secret} {text}"
        once = scrub(planted)
        assert secret not in once
        assert scrub(once) == once


class TestSecretShapes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("postgres://app:pw@db/x", "postgres://app:[REDACTED]@db/x"),
            ("redis://:tok3n@cache:6379", "redis://:[REDACTED]@cache:6379"),
            ("https://u:p@ss@h.io/a", "https://u:[REDACTED]@h.io/a"),
            ("https://u:[REDACTED]@h.io", "https://u:[REDACTED]@h.io"),
            (
                "http://[::1]:8080/x and a://host:80/p",
                "http://[::1]:8080/x and a://host:80/p",
            ),
            ("no scheme user:pw@host", "no scheme user:pw@host"),
        ],
    )
    def test_url_passwords_in_any_scheme(self, text, expected):
        """The password of user:password@ goes, in every scheme; hosts stay."""
        assert scrub_text(text) == expected

    @pytest.mark.parametrize(
        "token",
        [
            "AKIAIOSFODNN7EXAMPL3",
            "ASIAY34FZKBOKMUTVV7A",
            "sk_live_51HxY2zAbCdEf",
            "rk_test_51HxY2zAbCdEf",
            "whsec_Mn0pQrStUvWx",
            "glpat-x9Y8w7V6u5T4s3R2q1P0",
            "ghs_abcdefgh12",
            "xapp-1-A0123456789",
            "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
            "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
            "pypi-AgEIcHlwaS5vcmcCJDAwMDAw",
            "SG.aB1cD2eF3gH4iJ5kL6.pQ8rS9tU0vW1xY2z",
            "GOCSPX-1a2B3c4D5e6F7g8H",
            "ya29.a0AfB_byC1x2Y3z4W5v6",
            "dop_v1_0a1b2c3d4e5f6a7b",
            "shpat_0a1b2c3d4e5f6a7b",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4fw",
            "abc8Q~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12",
        ],
    )
    def test_known_shapes_replaced_whole(self, token):
        """Cloud keys, provider tokens and JWTs become one marker."""
        assert scrub_text(f"use {token} now") == "use [REDACTED] now"
        assert scrub_text(f"({token})") == "([REDACTED])"

    @pytest.mark.parametrize(
        "text",
        [
            "3f786850e387550fdab836ed7e6dc881de23001b",  # a git digest
            "npm_config_registry_value",  # an npm variable, not a token
            "xAKIAIOSFODNN7EXAMPL3",  # inside a word
            "AKIAIOSFODNN7EXAMPL3X",  # too long for an id
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1",  # 40 chars, low entropy
            "src/Policies/Scrubbing/aaaaaaaaaaaaaaaaa",  # 40 chars, no digit
            "x~abc8Q~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc",  # no Azure boundary
            "abcdQ~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc",  # no digit before Q~
            "Q~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc",  # nothing before Q~
            "session_key=550e8400-e29b-41d4-a716-446655440000",
            "monkey=bananabananabanana1",
            "max_tokens=12345678901234567890",
        ],
    )
    def test_lookalikes_kept(self, text):
        """Digests, words, ordinary keys and low-entropy values are not secrets."""
        assert scrub_text(text) == text

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("STRIPE_KEY=Zx81kQ0aPz3mN7vW2yT5uR9s", "STRIPE_KEY=[REDACTED]"),
            ("db_pass: 'q8W3e7R2t6Y1u5I0'", "db_pass: '[REDACTED]'"),
            ("signingKey=Zx81kQ0aPz3mN7vW2yT5uR9s", "signingKey=[REDACTED]"),
            ("sig=Zx81kQ0aPz3mN7vW2yT5uR9s", "sig=[REDACTED]"),
            ("STRIPE_KEY \t= Zx81kQ0aPz3mN7vW2yT5uR9s", "STRIPE_KEY \t= [REDACTED]"),
            ("app_key=Zm9vYmFyYmF6cXV4Zm9vYmFy12==;x", "app_key=[REDACTED];x"),
            ("app_key=Zm9vYmFyYmF6cXV4Zm9vYmFy12===", "app_key=[REDACTED]="),
            ("api_key=abc~defghijklmnopq1", "api_key=[REDACTED]"),
            (
                "primary_key=Zx81kQ0aPz3mN7vW2yT5uR9s",
                "primary_key=Zx81kQ0aPz3mN7vW2yT5uR9s",
            ),
            ("layout=Zx81kQ0aPz3mN7vW2yT5uR9s", "layout=Zx81kQ0aPz3mN7vW2yT5uR9s"),
            # gitleaks' generic-api-key rule: "auth" in the key, high entropy
            ("oauth=Zx81kQ0aPz3mN7vW2yT5uR9s", "oauth=[REDACTED]"),
        ],
    )
    def test_high_entropy_values_under_secret_like_keys(self, text, expected):
        """A random value under a secret-like key goes whole; ordinary keys stay."""
        assert scrub_text(text) == expected

    def test_webhooks(self):
        """Slack and Discord webhook paths are secrets."""
        assert scrub_text("https://hooks.slack.com/services/T0/B0/XyZ") == (
            "https://hooks.slack.com/services/[REDACTED]"
        )
        assert scrub_text("https://discord.com/api/webhooks/123/abc-DEF") == (
            "https://discord.com/api/webhooks/[REDACTED]"
        )

    def test_redacted_values_are_not_rescrubbed_into_fragments(self):
        """A quoted marker stays a marker: no ``[RED*[REDACTED]``."""
        assert scrub_text('"password": "[REDACTED]"') == '"password": "[REDACTED]"'
        assert scrub_text("token: '[REDACTED] and more'") == "token: '[REDACTED]'"

    def test_json_high_entropy_under_secret_like_key(self):
        """JSON keys get the same rule; ordinary keys and low entropy stay."""
        value = {
            "AccountKey": "Zm9vYmFyYmF6cXV4Zm9vYmFy12==",
            "session_key": "550e8400-e29b-41d4-a716-446655440000",
            "stripe_key": "short",
            "other_key": 5,
        }
        assert scrub_json(value) == {**value, "AccountKey": "[REDACTED]"}

    def test_entropy(self):
        """Entropy is 0 for empty or constant text, log2(n) for n distinct chars."""
        assert entropy_bits("") == 0.0
        assert entropy_bits("aaaa") == 0.0
        assert entropy_bits("abcd") == 2.0
        assert not high_entropy("abcdefghijklmnop")
        assert high_entropy("Zx81kQ0aPz3mN7vW")


class TestDepth:
    def test_deep_json_never_raises(self):
        """Past the decoder's depth, JSON text is scrubbed as text; deep values bounded."""
        deep_text = "[" * 5000 + '"sk-abcdefghijkl"' + "]" * 5000
        assert "sk-abcdefghijkl" not in scrub_json_text(deep_text)
        value: object = "x"
        for _ in range(200):
            value = [value]
        scrubbed = scrub_json(value)
        assert "[nested too deep]" in msgspec.json.encode(scrubbed).decode()
        assert scrub_json(scrubbed) == scrubbed
        assert scrub_json({"a": ("b", [1])}) == {"a": ("b", [1])}


@pytest.mark.parametrize(
    "text",
    [
        "my_token   = Zx8Qm2Lp9Rt4Vb7Nc1Kd5",
        '"my_token" : Zx8Qm2Lp9Rt4Vb7Nc1Kd5',
        "my_token\t= Zx8Qm2Lp9Rt4Vb7Nc1Kd5",
    ],
)
def test_secretish_values_after_spaced_or_quoted_keys(text):
    """Spaces or a closing quote between the key and its separator still name the key."""
    scrubbed = scrub_secretish_values(text, lambda key: "token" in key)
    assert scrubbed.endswith("[REDACTED]")
    assert "Zx8Qm2Lp9Rt4Vb7Nc1Kd5" not in scrubbed
