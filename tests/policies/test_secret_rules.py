"""gitleaks' maintained rule set, unknown tokens and the issue #26 shapes."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.secret_corpus import GITLEAKS_FIXTURE, gitleaks_cases
from turnledger.policies import _gitleaks_rules, scrubbing, secret_rules
from turnledger.policies.scrubbing import ELLIPSIS, scrub_text, summarize
from turnledger.policies.secret_rules import (
    UPSTREAM,
    CompiledRule,
    _Allow,
    _findings,
    _rules_present,
    rule_findings,
    rule_set,
    scrub_rule_matches,
)
from turnledger.policies.secret_shapes import (
    UNKNOWN_TOKEN_BITS,
    UNKNOWN_TOKEN_CHARS,
    UNKNOWN_TOKEN_OFFSETS,
    entropy_bits,
    scrub_unknown_tokens,
)
from turnledger.policies.structured_scrubbing import scrub_json_text

CASES = gitleaks_cases()
CASE_PARAMS = [
    pytest.param(text, secret, id=f"{rule}-{i}")
    for i, (rule, text, secret) in enumerate(CASES)
]
# 40 characters of a random base64 token (about 4.9 bits per character).
TOKEN_40 = "Xq9Wv8Ut7Sr6Qp5Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Z"  # noqa: S105 - a fake


class TestRuleSetData:
    def test_upstream_named_with_its_license(self):
        """The rules say where they come from: repository, commit, MIT."""
        assert UPSTREAM["repository"] == "https://github.com/gitleaks/gitleaks"
        assert re.fullmatch(r"[0-9a-f]{40}", UPSTREAM["commit"])
        assert UPSTREAM["license"] == "MIT"
        assert "MIT License" in (_gitleaks_rules.__doc__ or "")
        assert len(_gitleaks_rules.RULES) >= 200

    def test_compiled_once(self):
        """The rules compile on first use, once; every one compiles."""
        assert rule_set() is rule_set()
        assert len(rule_set().rules) == len(_gitleaks_rules.RULES)
        # Most rules start with a keyword: tried only where one occurs.
        assert sum(rule.anchored for rule in rule_set().rules) >= 150

    def test_fixture_provenance_and_size(self):
        """At least 100 shapes from the rule set's own fixtures, with provenance."""
        data = json.loads(GITLEAKS_FIXTURE.read_text(encoding="utf-8"))
        provenance = data["provenance"]
        assert provenance["license"] == "MIT"
        assert provenance["commit"] == UPSTREAM["commit"]
        assert "cmd/generate/config/rules" in provenance["path"]
        assert len(CASES) >= 100
        assert len({rule for rule, _, _ in CASES}) >= 200


@pytest.mark.parametrize(("text", "secret"), CASE_PARAMS)
def test_every_fixture_secret_is_scrubbed(text, secret):
    """The rules alone, the whole scrubber and a summary drop every secret."""
    assert secret not in scrub_rule_matches(text)
    once = scrub_text(text)
    assert secret not in once
    assert scrub_text(once) == once
    assert secret not in summarize(text, 10_000)
    as_json = json.dumps({"arguments": json.dumps({"q": text})})
    assert secret not in scrub_json_text(as_json)


_FILLER = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "the deploy ran at 09:14; ",
        'level=info msg="turn done" tokens=812 ',
        '{"user": "ops", "retries": 2}',
        "key",
        "token: ",
        "password=",
        "https://example.com/a?b=c ",
        "[REDACTED]",
        "abcd*[REDACTED]",
        "=",
        '"',
        "'",
        "\\",
    ]
)


@st.composite
def texts_with_fixture_secrets(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Filler around 1-3 fixture cases, and their secrets."""
    pieces = [draw(_FILLER)]
    secrets = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        _, text, secret = draw(st.sampled_from(CASES))
        # Whole lines: a secret glued to the next text is another text.
        pieces += ["\n", text, "\n", draw(_FILLER), draw(_FILLER)]
        secrets.append(secret)
    return "".join(pieces), secrets


class TestProperties:
    @settings(max_examples=150, deadline=None)
    @given(texts_with_fixture_secrets())
    def test_no_fixture_secret_survives_and_idempotent(self, planted):
        """Planted among filler, no secret survives; a second pass is a no-op."""
        text, secrets = planted
        once = scrub_text(text)
        for secret in secrets:
            assert secret not in once
        assert scrub_text(once) == once
        summary = summarize(text, 10_000)
        assert summarize(summary, 10_000) == summary

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(
            st.sampled_from([*"aZ9+/_-= .:\n", TOKEN_40, TOKEN_40[:20], "REDACTED"]),
            max_size=12,
        ).map("".join),
        st.integers(min_value=1, max_value=120),
    )
    def test_unknown_tokens_idempotent_and_cut_stable(self, text, limit):
        """Summaries of any cut stay stable: only a run's head is judged."""
        once = scrub_unknown_tokens(text)
        assert scrub_unknown_tokens(once) == once
        summary = summarize(text, limit)
        assert summarize(summary, limit) == summary
        assert TOKEN_40 not in summarize(text, 10_000)


_ADVERSARIAL = st.sampled_from(
    [
        '\\"',
        "\\n",
        "\\",
        '"',
        "'",
        " ",
        "\n",
        ":",
        "=",
        "password",
        "passwd: ",
        "Authorization: Api-Token ",
        "curl -u ",
        "curl --user ",
        "alice:Zx81kQ0a",
        "api_key",
        "token",
        "key-",
        "3a6f5d2c9b8e7f1a4c3d2e1f0a9b8c7d",
        "1//0",
        "123456789:AA",
        "HdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
        "ghp_",
        "Zx81kQ0aPz3mN7vW2yT5uR9sLp4Jh6Gf8Dd1",
        "[REDACTED]",
        "*",
        "hunter2",
        "SK",
        "0123456789abcdef0123456789ABCDEF",
        "eyJhbGciOiJIUzI1NiJ9",
        ".",
        "{",
        "}",
    ]
)


class TestAdversarial:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(_ADVERSARIAL, max_size=20).map("".join))
    def test_scrub_text_and_summaries_idempotent(self, text):
        """Escapes, schemes, short passwords and rule keywords: stable output."""
        once = scrub_text(text)
        assert scrub_text(once) == once
        summary = summarize(text, 10_000)
        assert summarize(summary, 10_000) == summary
        as_json = scrub_json_text(json.dumps({"a": text}))
        assert scrub_json_text(as_json) == as_json

    def test_rule_replacements_feed_the_earlier_steps_again(self, monkeypatch):
        """A token cut out of a longer run leaves an AWS-like 40: a second pass."""
        run = "password0123456789abcdef0123456789ABCDEF"
        text = f"{run}ghp_0123456789abcdef0123456789ABCDEFpasswd: "
        assert scrub_text(text) == "[REDACTED][REDACTED]wd: "
        monkeypatch.setattr(scrubbing, "MAX_PASSES", 1)
        assert scrub_text(text) == f"{run}[REDACTED]wd: "


class TestUnknownTokens:
    def test_threshold(self):
        """40+ mixed characters at >= 4.2 bits go; shorter or plainer stay."""
        assert entropy_bits(TOKEN_40) >= UNKNOWN_TOKEN_BITS
        assert len(TOKEN_40) == UNKNOWN_TOKEN_CHARS
        assert scrub_unknown_tokens(f"a {TOKEN_40}== b") == "a [REDACTED] b"
        assert scrub_unknown_tokens(f"a {TOKEN_40}xyz b") == "a [REDACTED] b"
        kept = [
            TOKEN_40[:39],  # too short
            "3f786850e387550fdab836ed7e6dc881de23001b",  # hex digest, no upper case
            "550e8400-e29b-41d4-a716-446655440000",  # a UUID
            "ProjectionsObserverItemsRenderTimeline1",  # camelCase words
            "aaaaaaaaaaaaaaaaaaaaBBBBBBBBBBBBBBBBBBBB12",  # low entropy
            "toolu_01D7FLrfh4GYq7yT1ULmeyFr",  # a provider's call id
        ]
        for text in kept:
            assert scrub_unknown_tokens(text) == text

    def test_glued_after_plain_text(self):
        """A token after plain characters in one run is found (first 1024 offsets)."""
        glued = "REDACTEDREDACTEDREDACTED" + TOKEN_40
        assert scrub_unknown_tokens(glued) == "[REDACTED]"
        far = "a" * (UNKNOWN_TOKEN_OFFSETS + UNKNOWN_TOKEN_CHARS) + TOKEN_40
        assert scrub_unknown_tokens(far) == far

    def test_a_cut_that_shapes_a_secret_is_scrubbed(self, monkeypatch):
        """A 45-character run cut to exactly 40 is an AWS secret's shape."""
        run = ("abcdeABCDE12345" * 3)[:45]  # about 3.9 bits: no unknown token
        assert summarize(run) == run
        assert summarize(run, 40) == "[REDACTED]" + ELLIPSIS
        monkeypatch.setattr(scrubbing, "MAX_PASSES", 1)
        assert summarize(run, 40) == "[REDACTED]" + ELLIPSIS

    def test_only_in_summaries(self):
        """scrub_text keeps unknown tokens (exact text); summaries drop them."""
        token = TOKEN_40 + "k3Jx"  # 44 characters: not an AWS secret's 40
        assert scrub_text(f"blob {token}") == f"blob {token}"
        assert summarize(f"blob {token}") == "blob [REDACTED]"


class TestIssueShapes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "refresh 1//0gLq3xYz-Abc_DEF123456789abcdefghijkLMNOP ok",
                "refresh [REDACTED] ok",
            ),
            (
                "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1 ok",
                "bot [REDACTED] ok",
            ),
            ("twilio SK0123456789abcdef0123456789ABCDEF ok", "twilio [REDACTED] ok"),
            (
                "mailgun key-3a6f5d2c9b8e7f1a4c3d2e1f0a9b8c7d ok",
                "mailgun [REDACTED] ok",
            ),
            ("password: hunter2", "password: [REDACTED]"),
            ("PASSWD='abc1234'", "PASSWD='[REDACTED]'"),
            ('{\\"password\\": \\"hunter2\\"}', '{\\"password\\": \\"[REDACTED]\\"}'),
            (
                '{\\"password\\": \\"hunter2hunter2\\"}',
                '{\\"password\\": \\"hunt*[REDACTED]\\"}',
            ),
            ("the password: is", "the password: is"),
            (
                "execute_tool tool_sk_live_51HxY2zAbCdEfGhIjKlMnOpQr",
                "execute_tool tool_[REDACTED]",
            ),
            (
                "monkey-3a6f5d2c9b8e7f1a4c3d2e1f0a9b8c7d",
                "monkey-3a6f5d2c9b8e7f1a4c3d2e1f0a9b8c7d",
            ),
        ],
    )
    def test_shapes(self, text, expected):
        """The shapes the issue found missing are scrubbed; look-alikes stay."""
        assert scrub_text(text) == expected
        assert scrub_text(expected) == expected

    def test_password_in_json_escaped_tool_arguments(self):
        """A password in a JSON text inside a JSON string, as text and as JSON."""
        inner = json.dumps({"password": "hunter2"})
        arguments = json.dumps({"cmd": f"curl -d '{inner}' https://x.io"})
        assert "hunter2" not in scrub_text(arguments)
        assert "hunter2" not in scrub_json_text(arguments)


class TestEscapedText:
    def test_rules_read_json_escaped_lines_unescaped(self):
        """A rule that needs real quotes finds its secret in escaped JSON text."""
        value = "q8w3e7r2t6y1u5i0p9o8i7u6y5t4r3e2"
        text = f'{{"body": "{{\\"adafruit_io\\": \\"{value}\\"}}"}}'
        assert value not in scrub_rule_matches(text.replace("\\", ""))
        assert value in scrub_rule_matches(text)  # the raw text hides it
        scrubbed = scrub_text(text)
        assert value not in scrubbed
        assert scrub_text(scrubbed) == scrubbed

    def test_short_escaped_secrets_not_replaced_everywhere(self):
        """A secret under 8 characters found unescaped is not replaced by value."""
        text = '{"cmd": "curl -u \\"abc:\\" https://x.io"}'
        assert scrub_text(text) == text


class TestRuleSemantics:
    def _rule(self, pattern: str, **kw: object) -> CompiledRule:
        fields: dict[str, object] = {
            "id": "t",
            "pattern": re.compile(pattern),
            "keywords": ("x",),
            "entropy": 0.0,
            "group": 0,
            "context": 0,
            "anchored": False,
            "allowlists": (),
        }
        fields.update(kw)
        return CompiledRule(**fields)  # type: ignore[arg-type]

    def _spans(self, rule: CompiledRule, text: str) -> list[tuple[int, int]]:
        allow = _Allow(every=False, target="secret", regexes=(), stopwords=())
        return [(start, end) for start, end, _ in _findings(rule, text, allow)]

    def test_secret_group_first_group_or_whole_match(self):
        """The secret group, else the first non-empty group, else the match."""
        assert self._spans(self._rule(r"x(a+)(b+)", group=2), "xaabb") == [(3, 5)]
        assert self._spans(self._rule(r"x(c*)(a+)"), "xaa") == [(1, 3)]
        assert self._spans(self._rule(r"x(c*)"), "xd") == [(0, 1)]
        assert self._spans(self._rule(r"xa+"), "xaa") == [(0, 3)]

    def test_empty_low_entropy_and_marker_secrets_kept(self):
        """An empty secret, a low-entropy one or a marker is not a finding."""
        assert self._spans(self._rule(r"x(c*)", group=1), "xd") == []
        rule = self._rule(r"x(\w+)", entropy=2.0)
        assert self._spans(rule, "xaaaa") == []
        assert self._spans(rule, "xabcdefg") == [(1, 8)]
        assert self._spans(self._rule(r"x(\S+)"), "x[REDACTED]") == []

    def test_allowlist_targets_and_conditions(self):
        """Secret, match (with its dropped context) and line targets; OR / AND."""
        on_match = _Allow(False, "match", (re.compile(r"^primary_x"),), ())
        rule = self._rule(r"x=(\w+)", context=50, allowlists=(on_match,))
        assert self._spans(rule, "primary_x=abc") == []
        assert self._spans(rule, "other_x=abc") == [(8, 11)]
        on_line = _Allow(False, "line", (re.compile(r"--mount"),), ())
        rule = self._rule(r"x=(\w+)", allowlists=(on_line,))
        assert self._spans(rule, "a\nrun --mount x=abc\nb") == []
        assert self._spans(rule, "a --mount\nx=abc") == [(12, 15)]
        both = _Allow(True, "secret", (re.compile(r"^a"),), ("bc",))
        rule = self._rule(r"x=(\w+)", allowlists=(both,))
        assert self._spans(rule, "x=abc") == []
        assert self._spans(rule, "x=axx") == [(2, 5)]
        words = _Allow(False, "secret", (), ("example",))
        rule = self._rule(r"x=(\w+)", allowlists=(words,))
        assert self._spans(rule, "x=myEXAMPLEkey") == []

    def test_global_allowlist(self):
        """gitleaks' global allowlist keeps placeholders such as ${VAR}."""
        assert scrub_rule_matches('github_token = "${GITHUB_TOKEN}"') == (
            'github_token = "${GITHUB_TOKEN}"'
        )

    def test_findings_and_merged_replacement(self):
        """Findings name their rule; overlapping findings become one marker."""
        text = "use ghp_Zx81kQ0aPz3mN7vW2yT5uR9sLp4Jh6Gf8Dd1 now"
        assert [rule for rule, _, _ in rule_findings(text)] == ["github-pat"]
        assert scrub_rule_matches(text) == "use [REDACTED] now"
        assert scrub_rule_matches("plain text") == "plain text"
        both = (
            'curl -H "Authorization: Bearer '
            "sk-ant-api03-abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-"
            '1234fghijklmnopby56aaaogaopaaaabc123xyzAA"'
        )
        found = rule_findings(both)
        assert len(found) >= 2
        scrubbed = scrub_rule_matches(both)
        assert scrubbed.count("[REDACTED]") == 1
        assert "abc123xyz" not in scrubbed

    def test_a_match_hiding_another_is_searched_again(self, monkeypatch):
        """A greedy match over two curl commands hides the first ``--user``."""
        text = (
            "curl https://a.io/token \\\n"
            "  --user c28wlsosanujy2z:qgsnai0xokrw4j1 --data x\n\n"
            "curl -u alice:Zx81kQ0aPz3mN7vW https://b.io\n"
        )
        scrubbed = scrub_rule_matches(text)
        assert scrubbed.count("[REDACTED]") == 2
        assert scrub_rule_matches(scrubbed) == scrubbed
        monkeypatch.setattr(secret_rules, "MAX_PASSES", 1)
        assert scrub_rule_matches(text).count("[REDACTED]") == 1

    @settings(max_examples=60, deadline=None)
    @given(texts_with_fixture_secrets())
    def test_anchored_rules_find_what_a_full_scan_finds(self, planted):
        """Trying an anchored rule only where its keywords start loses nothing."""
        text, _ = planted
        allow = rule_set().allow
        for rule, starts in _rules_present(text):
            full = list(_findings(rule, text, allow))
            assert list(_findings(rule, text, allow, starts=starts)) == full

    def test_keyword_prefilter(self):
        """A rule whose keywords are absent does not run."""
        assert rule_findings("ghp-like text without the prefix") == []

    @settings(max_examples=100, deadline=None)
    @given(st.text(max_size=80))
    def test_rules_idempotent_on_any_text(self, text):
        """A second pass of the rules changes nothing."""
        once = scrub_rule_matches(text)
        assume(once)
        assert scrub_rule_matches(once) == once
