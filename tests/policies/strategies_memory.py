"""Hypothesis strategies and fakes shared by the memory/payload policy tests."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from hypothesis import strategies as st

from turnledger.policies.recall_scope import RecallCandidate

ROOT = "/ws"

# ---------------------------------------------------------------------------
# A fake file system for path confinement: a map of symlinks, resolved the way
# os.path.realpath resolves them (component by component, ".." after links).
# ---------------------------------------------------------------------------


def make_resolve(links: dict[str, str]) -> Callable[[str], str]:
    """Return a realpath-like resolver over a map of absolute symlinks."""

    def resolve(path: str, depth: int = 0) -> str:
        current = "/"
        for part in path.split("/"):
            if part in {"", "."}:
                continue
            if part == "..":
                current = posixpath.dirname(current)
                continue
            candidate = posixpath.join(current, part)
            if candidate in links and depth < 16:
                target = links[candidate]
                if not target.startswith("/"):
                    target = posixpath.join(current, target)
                candidate = resolve(target, depth + 1)
            current = candidate
        return current

    return resolve


_NAMES = st.sampled_from(["a", "b", "link", "ws", "etc", "..", ".", "ws2", ""])

relative_paths = st.lists(_NAMES, min_size=1, max_size=6).map("/".join)
absolute_paths = st.lists(_NAMES, min_size=0, max_size=6).map(
    lambda parts: "/" + "/".join(parts)
)
adversarial_paths = st.one_of(
    relative_paths,
    absolute_paths,
    relative_paths.map(lambda path: f"{ROOT}/{path}"),
    relative_paths.map(lambda path: f"{ROOT}x/{path}"),
)

_LINK_SOURCES = st.sampled_from(
    [f"{ROOT}/link", f"{ROOT}/a", f"{ROOT}/a/link", "/etc", f"{ROOT}/b"]
)
_LINK_TARGETS = st.sampled_from(
    ["/etc", "/", ROOT, f"{ROOT}/b", f"{ROOT}2", "..", "../..", "b", "/ws/a/..", "link"]
)
symlink_maps = st.dictionaries(_LINK_SOURCES, _LINK_TARGETS, max_size=4)


# ---------------------------------------------------------------------------
# Recall candidates, including every kind of skip-set entry.
# ---------------------------------------------------------------------------

_KEYS = st.one_of(
    st.sampled_from(
        [
            "alpha",
            "beta",
            "user_msg",
            "user_msg_1",
            "USER_MSG_x",
            "assistant_resp_2",
            "chat_history",
            " notes_HISTORY ",
            "gamma",
        ]
    ),
    st.text(alphabet="abcxyz_", min_size=1, max_size=8),
)
_CONTENTS = st.one_of(
    st.text(max_size=1200),
    st.sampled_from(
        [
            "",
            "   ",
            "[cron:daily] run",
            "[Heartbeat task] ping",
            "[distilled_summary] x",
            "[memory context]\n- a: b",
            "x distilled_index_sig: 1",
            "look [IMAGE:/tmp/a.png]",
            "old <tool_result name='x'>y</tool_result>",
            "deploy target is prod-cluster-3",
        ]
    ),
)
_SCORES = st.one_of(
    st.none(), st.floats(min_value=0.0, max_value=1.0), st.just(float("nan"))
)

candidates = st.builds(
    RecallCandidate,
    id=st.text(alphabet="0123456789", min_size=1, max_size=4),
    key=_KEYS,
    content=_CONTENTS,
    category=st.sampled_from(["core", "daily", "conversation", "project"]),
    score=_SCORES,
    session=st.sampled_from([None, "s1", "s2"]),
    agent=st.sampled_from([None, "main", "peer"]),
)
candidate_lists = st.lists(candidates, max_size=12)


# ---------------------------------------------------------------------------
# Secrets to plant in text and JSON: (text to plant, fragment that must vanish).
# ---------------------------------------------------------------------------

_TOKEN_BODY = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    min_size=16,
    max_size=40,
)
_PREFIXES = st.sampled_from(
    ["sk-", "ghp_", "gho_", "ghu_", "github_pat_", "xoxb-", "xoxp-", "AIza"]
)
_CREDENTIAL_KEYS = st.sampled_from(
    [
        "authorization",
        "Token",
        "api_key",
        "API-KEY",
        "apikey",
        "password",
        "SECRET",
        "user_key",
        "user-key",
        "credential",
        "set_cookie",
        "Set-Cookie",
        "cookie",
        "access_token",
        "client_secret",
        "private_key",
    ]
)


@st.composite
def planted_secrets(draw: st.DrawFn) -> tuple[str, str]:
    """Return ``(planted text, secret fragment that must not survive)``."""
    body = draw(_TOKEN_BODY)
    kind = draw(st.sampled_from(["prefix", "kv", "quoted", "bearer", "url", "pem"]))
    if kind == "prefix":
        token = draw(_PREFIXES) + body
        return token, token
    if kind == "kv":
        key = draw(_CREDENTIAL_KEYS)
        sep = draw(st.sampled_from(["=", ": ", " = ", ":"]))
        return f"{key}{sep}{body}", body
    if kind == "quoted":
        key = draw(_CREDENTIAL_KEYS)
        quote = draw(st.sampled_from(['"', "'"]))
        return f"{quote}{key}{quote}: {quote}{body}{quote}", body
    if kind == "bearer":
        return f"Authorization: Bearer {body}", body
    if kind == "url":
        return f"https://api.example.com/v1/x?key={body}&a=1", body
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    return pem, body


filler = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40
)
separators = st.sampled_from([" ", "\n", "\t", ", ", " | "])


@st.composite
def texts_with_secrets(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Return random text with 1-4 planted secrets, and the secret fragments."""
    pieces: list[str] = [draw(filler)]
    fragments: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        planted, fragment = draw(planted_secrets())
        pieces += [draw(separators), planted, draw(separators), draw(filler)]
        fragments.append(fragment)
    return "".join(pieces), fragments


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=10), _CREDENTIAL_KEYS), children, max_size=4
        ),
    ),
    max_leaves=12,
)
