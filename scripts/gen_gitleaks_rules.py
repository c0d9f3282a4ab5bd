r"""Generate the scrubber's rule data and secret corpus from a gitleaks checkout.

gitleaks (https://github.com/gitleaks/gitleaks, MIT) keeps its default rules in
``config/gitleaks.toml`` (a regex, keywords, an entropy threshold and allowlists
per rule) and their true positives (``tps``) in
``cmd/generate/config/rules/*.go``. This script writes:

- ``policies/_gitleaks_rules.py``: every rule with a content regex, converted
  from Go (RE2) syntax to Python ``re`` syntax (see :func:`convert`), as data;
- ``tests/fixtures/secrets/gitleaks_tps.json``: the true positives of the Go
  rule files: their literal strings, and for a random
  ``secrets.NewSecret(<pattern>)`` sample one string generated from that
  pattern (seeded, so the file is reproducible), each with the secret the
  rule extracts from it.

Each true positive is checked against its converted rule with gitleaks'
semantics (secret group, entropy, allowlists); one that does not match is
reported and left out of the corpus. Run::

    git clone https://github.com/gitleaks/gitleaks /tmp/gitleaks
    .venv/bin/python scripts/gen_gitleaks_rules.py /tmp/gitleaks --commit <sha> \
        --version <git describe>
    .venv/bin/ruff format policies/_gitleaks_rules.py
"""

# ruff: noqa: INP001 - a script run by hand, not a package
from __future__ import annotations

import argparse
import ast
import json
import math
import random
import re
import string
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES_OUT = ROOT / "policies" / "_gitleaks_rules.py"
CORPUS_OUT = ROOT / "tests" / "fixtures" / "secrets" / "gitleaks_tps.json"
_IDENTIFIER_PREFIX = r"[\w.-]{0,50}?"


def _close_of(pattern: str, start: int, *, stop_at_bar: bool = False) -> int:  # noqa: C901 - one scanner
    """Index of the ``)`` closing the group open at ``start - 1`` (or the end).

    With ``stop_at_bar``, the index of the first ``|`` at that level if sooner.
    """
    depth = 0
    i = start
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return i
            depth -= 1
        elif char == "|" and depth == 0 and stop_at_bar:
            return i
        i += 1
    return len(pattern)


_INLINE_FLAGS = re.compile(r"\(\?([a-z]+)\)")


def _scope_inline_flags(pattern: str) -> str:
    """``a(?i)b`` (Go: flags to the end of the group) -> ``a(?i:b)``."""
    while True:
        found = next(
            (m for m in _INLINE_FLAGS.finditer(pattern) if m.start() > 0), None
        )
        if found is None:
            return pattern
        close = _close_of(pattern, found.end())
        # Go keeps the flag for the later alternatives of the group too.
        branches = _top_level_branches(pattern[found.end() : close])
        scoped = "|".join(f"(?{found.group(1)}:{branch})" for branch in branches)
        pattern = f"{pattern[: found.start()]}{scoped}{pattern[close:]}"


def _top_level_branches(pattern: str) -> list[str]:
    """``pattern`` split on its ``|`` outside groups and classes."""
    branches: list[str] = []
    start = 0
    while True:
        bar = _close_of(pattern + ")", start, stop_at_bar=True)
        if bar >= len(pattern):
            branches.append(pattern[start:])
            return branches
        branches.append(pattern[start:bar])
        start = bar + 1


def _escape_nested_brackets(pattern: str) -> str:
    """Escape a literal ``[`` inside a character class (Python warns on it)."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if char == "[":
                out.append("\\[")
                i += 1
                continue
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            out.append(char)
            i += 1
            for lead in "^]":
                if pattern[i : i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


def convert(pattern: str) -> str:
    r"""Convert a gitleaks (Go RE2) pattern to Python ``re`` (compiled ASCII).

    - ``[[:alnum:]]`` -> ``[a-zA-Z0-9]`` (the only POSIX class used);
    - ``\\z`` -> ``\\Z`` (end of text);
    - a flag group ``(?i)`` after the start, which Go applies to the end of its
      group, becomes a scoped ``(?i:...)`` around the rest of that group;
    - a literal ``[`` inside a class is escaped;
    - the leading identifier context ``[\\w.-]{0,50}?`` is dropped: it is lazy
      and optional, so the rule matches exactly where it matched before (only
      the span of the whole match starts later), and Python's engine would try
      it at every position of the text.
    """
    pattern = pattern.replace("[[:alnum:]]", "[a-zA-Z0-9]").replace(r"\z", r"\Z")
    if pattern.startswith("(?i)" + _IDENTIFIER_PREFIX):
        pattern = "(?i)" + pattern[len("(?i)" + _IDENTIFIER_PREFIX) :]
    elif pattern.startswith(_IDENTIFIER_PREFIX):
        pattern = pattern[len(_IDENTIFIER_PREFIX) :]
    return _escape_nested_brackets(_scope_inline_flags(pattern))


# --- anchoring: does every match start with one of the rule's keywords? ------

_P = re._parser  # noqa: SLF001 - the parser of re, to read a pattern's head
_C = re._constants  # noqa: SLF001
_LIMIT = 256


def _language(items: list[tuple[object, object]]) -> set[str] | None:  # noqa: C901, PLR0912 - one walk of the parse tree
    """Every string a finite, small sequence matches (None: not that)."""
    out = {""}
    for op, av in items:
        if op is _C.LITERAL:
            part = {chr(av)}  # type: ignore[call-overload]
        elif op is _C.IN:
            part = set()
            for o, a in av:  # type: ignore[attr-defined]
                if o is _C.LITERAL:
                    part.add(chr(a))
                elif o is _C.RANGE and a[1] - a[0] < 16:
                    part |= {chr(c) for c in range(a[0], a[1] + 1)}
                else:
                    return None
        elif op is _C.SUBPATTERN:
            inner = _language(av[3])  # type: ignore[index]
            if inner is None:
                return None
            part = inner
        elif op is _C.BRANCH:
            part = set()
            for branch in av[1]:  # type: ignore[index]
                inner = _language(branch)
                if inner is None:
                    return None
                part |= inner
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT) and av[1] <= 1:  # type: ignore[index]
            inner = _language(av[2])  # type: ignore[index]
            if inner is None:
                return None
            part = inner | ({""} if av[0] == 0 else set())  # type: ignore[index]
        else:
            return None
        out = {a + b for a in out for b in part}
        if len(out) > _LIMIT:
            return None
    return out


def _heads(items: list[tuple[object, object]]) -> set[str] | None:
    """The strings one of which starts every match (None: unknown)."""
    acc = {""}
    first = True
    for op, av in items:
        if op is _C.AT:  # \b and the like: zero-width
            continue
        language = _language([(op, av)])
        if language is None:
            if first and op is _C.SUBPATTERN:
                inner = _heads(av[3])  # type: ignore[index]
                if inner:
                    acc = {a + b for a in acc for b in inner}
            break
        first = False
        acc = {a + b for a in acc for b in language}
        if len(acc) > _LIMIT:
            return None
    return None if "" in acc else acc


def anchored(pattern: str, keywords: tuple[str, ...]) -> bool:
    """Whether every match, lower-cased, starts with one of ``keywords``."""
    heads = _heads(list(_P.parse(pattern, re.ASCII)))
    return heads is not None and all(
        any(head.lower().startswith(keyword) for keyword in keywords) for head in heads
    )


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (gitleaks' ``shannonEntropy``)."""
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


class Rule:
    """A converted rule and gitleaks' finding semantics, to validate the tps."""

    def __init__(self, raw: dict[str, object], global_allow: dict[str, object]) -> None:
        self.id = str(raw["id"])
        self.source = str(raw["regex"])
        self.regex = convert(self.source)
        # The dropped leading context, given back to the match for allowlists.
        self.context = 50 if _IDENTIFIER_PREFIX in self.source[:20] else 0
        self.compiled = re.compile(self.regex, re.ASCII)
        self.keywords = tuple(str(k).lower() for k in raw.get("keywords", []))  # type: ignore[attr-defined]
        self.anchored = anchored(self.regex, self.keywords)
        self.entropy = float(raw.get("entropy", 0.0))  # type: ignore[arg-type]
        self.group = int(raw.get("secretGroup", 0))  # type: ignore[call-overload]
        self.allowlists = [
            _allowlist(a)
            for a in raw.get("allowlists", [])  # type: ignore[attr-defined]
        ]
        self.allowlists = [a for a in self.allowlists if a is not None]
        self.global_regexes = [
            re.compile(convert(r), re.ASCII)
            for r in global_allow["regexes"]  # type: ignore[attr-defined]
        ]
        self.global_stopwords = [str(s).lower() for s in global_allow["stopwords"]]  # type: ignore[attr-defined]

    def secrets(self, text: str) -> list[str]:
        """The secrets this rule finds in ``text``."""
        lowered = text.lower()
        if self.keywords and not any(k in lowered for k in self.keywords):
            return []
        found = []
        for match in self.compiled.finditer(text):
            secret = _secret_of(match, self.group)
            if self.entropy and entropy(secret) <= self.entropy:
                continue
            if any(r.search(secret) for r in self.global_regexes) or any(
                s in secret.lower() for s in self.global_stopwords
            ):
                continue
            whole = _with_context(text, match, self.context)
            if any(
                _allowed(a, secret, whole, _line(text, match)) for a in self.allowlists
            ):
                continue
            found.append(secret)
        return found


_CONTEXT_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
)


def _with_context(text: str, match: re.Match[str], context: int) -> str:
    start = match.start()
    while (
        start > 0
        and match.start() - start < context
        and text[start - 1] in _CONTEXT_CHARS
    ):
        start -= 1
    return text[start : match.end()]


def _line(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : len(text) if end == -1 else end]


def _secret_of(match: re.Match[str], group: int) -> str:
    if group:
        return match.group(group) or ""
    for value in match.groups():
        if value:
            return value
    return match.group(0)


def _allowlist(
    raw: dict[str, object],
) -> tuple[str, str, tuple[str, ...], tuple[str, ...]] | None:
    """(condition, target, regexes, stopwords), or None when it needs a path."""
    condition = str(raw.get("condition", "OR")).upper()
    regexes = tuple(convert(str(r)) for r in raw.get("regexes", []))  # type: ignore[attr-defined]
    stopwords = tuple(str(s).lower() for s in raw.get("stopwords", []))  # type: ignore[attr-defined]
    if raw.get("paths") and (condition == "AND" or not (regexes or stopwords)):
        return None  # applies only to files at some path: never to text
    if raw.get("commits"):
        return None
    return condition, str(raw.get("regexTarget", "secret")), regexes, stopwords


def _allowed(
    allow: tuple[str, str, tuple[str, ...], tuple[str, ...]],
    secret: str,
    match: str,
    line: str,
) -> bool:
    condition, target, regexes, stopwords = allow
    subject = {"match": match, "line": line}.get(target, secret)
    by_regex = any(re.search(r, subject, re.ASCII) for r in regexes)
    by_word = any(s in secret.lower() for s in stopwords)
    if condition == "AND":
        return all(
            check
            for check, present in ((by_regex, regexes), (by_word, stopwords))
            if present
        )
    return by_regex or by_word


# --- Go source: the literal true positives -----------------------------------

_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?\*/)"
    r"|(?P<raw>`[^`]*`)"
    r"|(?P<str>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<open>[({\[])|(?P<close>[)}\]])|(?P<comma>,)"
    r"|(?P<word>[A-Za-z_][\w.]*)|(?P<other>\S)",
    re.DOTALL,
)


def _go_string(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    return ast.literal_eval(token)


def _tokens(source: str) -> list[tuple[str, str]]:
    return [
        (m.lastgroup or "", m.group(0))
        for m in _TOKEN.finditer(source)
        if m.lastgroup != "comment"
    ]


def literal_tps(source: str) -> list[tuple[str, str, str]]:
    """(rule id, text, how) of every true positive read from a Go rule file."""
    found: list[tuple[str, str, str]] = []
    for function in re.split(r"\nfunc ", source)[1:]:
        rule_id = re.search(r'RuleID:\s*"([^"]+)"', function)
        if rule_id is None:
            continue
        tokens = _tokens(function)
        for i, (kind, value) in enumerate(tokens):
            if kind != "word" or value != "tps":
                continue
            nxt = [v for _, v in tokens[i + 1 : i + 3]]
            if nxt[:1] not in ([":"], ["="]):
                continue
            found += [
                (rule_id.group(1), text, how)
                for text, how in _statement_literals(tokens, i, rule_id.group(1))
            ]
    return found


def _statement_literals(  # noqa: C901 - one token walk
    tokens: list[tuple[str, str]], start: int, rule_id: str
) -> list[tuple[str, str]]:
    """(text, how) of each true positive of the ``tps`` statement at ``start``."""
    out: list[tuple[str, str]] = []
    stack: list[str] = []  # "list" (a []string{ or append( ), "sample" or "call"
    i = start + 1
    while i < len(tokens):
        kind, value = tokens[i]
        if value == "[" and tokens[i + 1][1] == "]":  # the []string type
            i += 2
            continue
        if kind == "open":
            before = tokens[i - 1][1] if i else ""
            slice_literal = value == "{" and tokens[i - 2][1] == "]"
            if (slice_literal and before == "string") or (
                value == "(" and before == "append"
            ):
                stack.append("list")
            elif value == "(" and before.endswith("GenerateSampleSecrets"):
                stack.append("sample")
                out += _sample_literals(tokens, i, rule_id)
            else:
                stack.append("call")
        elif kind == "close":
            if not stack:
                break
            stack.pop()
            if not stack:
                break
        elif kind in ("raw", "str") and stack and stack[-1] == "list":
            prev, nxt = tokens[i - 1], tokens[i + 1]
            if prev[1] in ("{", "(", ",") and nxt[1] in (",", "}", ")"):
                out.append((_go_string(value), "literal"))
        i += 1
        if not stack and tokens[i - 1][0] == "close":
            break
    return out


# One context of utils.GenerateSampleSecrets per literal secret.
_SAMPLE_FORMS = ('{i}_token: "{s}"', "{I}_TOKEN={s}")


def _argument(tokens: list[tuple[str, str]], start: int) -> list[tuple[str, str]]:
    """The tokens of one call argument starting at ``tokens[start]``."""
    depth = 0
    out: list[tuple[str, str]] = []
    for kind, value in tokens[start:]:
        if depth == 0 and (kind == "comma" or (kind == "close" and value == ")")):
            return out
        depth += {"open": 1, "close": -1}.get(kind, 0)
        out.append((kind, value))
    return out


_UTILS = {
    "utils.Numeric": "[0-9]{%s}",
    "utils.Hex": "[a-f0-9]{%s}",
    "utils.AlphaNumeric": "[a-z0-9]{%s}",
    "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "utils.AlphaNumericExtended": "[a-z0-9=_\\-]{%s}",
    "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{%s}",
    "utils.Hex8_4_4_4_12": (
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    ),
}


def _evaluate(tokens: list[tuple[str, str]], rng: random.Random) -> str | None:
    """A Go string expression of literals, ``utils`` patterns and NewSecret."""
    parts: list[str] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind in ("str", "raw"):
            parts.append(_go_string(value))
            i += 1
        elif kind == "word" and value in _UTILS and tokens[i + 1][1] == "(":
            inner = _argument(tokens, i + 2)
            size = _evaluate(inner, rng) if inner else ""
            if size is None:
                return None
            parts.append(
                _UTILS[value] % size if "%s" in _UTILS[value] else _UTILS[value]
            )
            i += 3 + len(inner)
        elif (
            kind == "word" and value == "secrets.NewSecret" and tokens[i + 1][1] == "("
        ):
            inner = _argument(tokens, i + 2)
            pattern = _evaluate(inner, rng)
            if pattern is None:
                return None
            sample = generate(pattern, rng)
            if sample is None:
                return None
            parts.append(sample)
            i += 3 + len(inner)
        elif value == "+":
            i += 1
        else:
            return None
    return "".join(parts)


def _sample_literals(
    tokens: list[tuple[str, str]], open_at: int, rule_id: str
) -> list[tuple[str, str]]:
    """``GenerateSampleSecrets("id", <secret>)`` rendered: (text, how).

    A literal secret is rendered in two of the function's forms; a secret made
    by ``secrets.NewSecret(<pattern>)`` is generated (seeded by the rule id) and
    rendered in the first form.
    """
    first = _argument(tokens, open_at + 1)
    if [k for k, _ in first] not in (["str"], ["raw"]):
        return []
    identifier = _go_string(first[0][1])
    second = _argument(tokens, open_at + 2 + len(first))
    literal = [k for k, _ in second] in (["str"], ["raw"])
    secret = _evaluate(second, random.Random(f"{rule_id}:{open_at}"))  # noqa: S311 - test data
    if secret is None:
        return []
    forms = _SAMPLE_FORMS if literal else _SAMPLE_FORMS[:1]
    return [
        (
            form.replace("{i}", identifier)
            .replace("{I}", identifier.upper())
            .replace("{s}", secret),
            "literal sample" if literal else "generated sample",
        )
        for form in forms
    ]


_PRINTABLE = [chr(c) for c in range(33, 127)]


def generate(pattern: str, rng: random.Random) -> str | None:
    """A random string the (Go) pattern matches, or None when unsupported."""
    try:
        parsed = _P.parse(convert(pattern), re.ASCII)
    except re.error:
        return None
    return _generate(list(parsed), rng)


def _class(items: list[tuple[object, object]]) -> list[str] | None:
    chars: set[str] = set()
    negate = False
    for op, av in items:
        if op is _C.NEGATE:
            negate = True
        elif op is _C.LITERAL:
            chars.add(chr(av))  # type: ignore[call-overload]
        elif op is _C.RANGE:
            chars |= {chr(c) for c in range(av[0], av[1] + 1)}  # type: ignore[index]
        elif op is _C.CATEGORY:
            probe = {
                _C.CATEGORY_DIGIT: "0123456789",
                _C.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
                _C.CATEGORY_SPACE: " ",
            }.get(av)  # type: ignore[call-overload]
            if probe is None:
                return None
            chars |= set(probe)
        else:
            return None
    if negate:
        chars = set(_PRINTABLE) - chars
    return sorted(chars)


def _generate(items: list[tuple[object, object]], rng: random.Random) -> str | None:  # noqa: C901, PLR0912 - one walk of the parse tree
    out: list[str] = []
    for op, av in items:
        if op is _C.LITERAL:
            out.append(chr(av))  # type: ignore[call-overload]
        elif op is _C.IN:
            chars = _class(av)  # type: ignore[arg-type]
            if not chars:
                return None
            out.append(rng.choice(chars))
        elif op is _C.ANY:
            out.append(rng.choice(string.ascii_letters + string.digits))
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            low, high, sub = av  # type: ignore[misc]
            high = low + 8 if high is _C.MAXREPEAT else high
            for _ in range(rng.randint(low, high)):
                part = _generate(list(sub), rng)
                if part is None:
                    return None
                out.append(part)
        elif op is _C.SUBPATTERN:
            part = _generate(list(av[3]), rng)  # type: ignore[index]
            if part is None:
                return None
            out.append(part)
        elif op is _C.BRANCH:
            part = _generate(list(rng.choice(av[1])), rng)  # type: ignore[index]
            if part is None:
                return None
            out.append(part)
        elif op is _C.AT:
            continue
        else:
            return None
    return "".join(out)


# --- output -------------------------------------------------------------------

_HEADER = '''\
r"""The gitleaks default rules as data (generated: do not edit).

Generated by ``scripts/gen_gitleaks_rules.py`` from ``config/gitleaks.toml`` of
gitleaks {version} (https://github.com/gitleaks/gitleaks), commit
``{commit}``: {count} rules with a content regex ({skipped} path-only rule(s)
left out: {skipped_ids}). The patterns are converted from Go (RE2) syntax to
Python ``re`` syntax, compiled with ``re.ASCII``: ``[[:alnum:]]`` becomes
``[a-zA-Z0-9]``, ``\\z`` becomes ``\\Z``, a mid-pattern ``(?i)`` becomes a
scoped ``(?i:...)`` over the rest of its group, a literal ``[`` inside a class
is escaped, and the leading lazy context ``[\\w.-]{{0,50}}?`` is dropped (the
rule matches where it did; only its whole-match span starts later). Allowlists
that apply only to file paths or commits are left out (text has neither).
:mod:`policies.secret_rules` compiles and applies them.

gitleaks is distributed under the MIT License:

{license}
"""

# ruff: noqa: E501 - generated data: one rule per line

from __future__ import annotations

from typing import Final, TypeAlias

Allowlist: TypeAlias = tuple[str, str, tuple[str, ...], tuple[str, ...]]
"""(condition ``OR``/``AND``, target ``secret``/``match``/``line``, regexes,
lower-case stopwords)."""

Rule: TypeAlias = tuple[
    str, str, tuple[str, ...], float, int, int, bool, tuple[Allowlist, ...]
]
"""(id, Python regex, lower-case keywords, entropy threshold (0: none), secret
group (0: the first non-empty group), characters of dropped leading context
(word characters, ``.`` or ``-`` before the match, given back to it for a
``match`` allowlist), anchored (every match starts with one of the keywords,
so the rule is tried only where one occurs), allowlists)."""

UPSTREAM: Final = {upstream!r}
"""Where the rules come from."""

GLOBAL_REGEXES: Final[tuple[str, ...]] = {global_regexes!r}
"""The global allowlist: a secret one of these matches is not a finding."""

GLOBAL_STOPWORDS: Final[tuple[str, ...]] = {global_stopwords!r}
"""The global stopwords: a secret containing one is not a finding."""

RULES: Final[tuple[Rule, ...]] = (
'''


def _rule_data(rule: Rule) -> str:
    allowlists = tuple(rule.allowlists)
    return (
        f"    ({rule.id!r}, {rule.regex!r}, {rule.keywords!r}, {rule.entropy!r},"
        f" {rule.group!r}, {rule.context!r}, {rule.anchored!r}, {allowlists!r}),\n"
    )


def main() -> None:
    """Read a gitleaks checkout, write the rule module and the corpus."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a gitleaks checkout")
    parser.add_argument("--commit", required=True, help="its commit")
    parser.add_argument("--version", required=True, help="its git describe")
    args = parser.parse_args()
    config = tomllib.loads((args.checkout / "config/gitleaks.toml").read_text())
    license_text = (args.checkout / "LICENSE").read_text().strip()
    global_allow = config["allowlist"]
    rules = [Rule(raw, global_allow) for raw in config["rules"] if "regex" in raw]
    skipped = [raw["id"] for raw in config["rules"] if "regex" not in raw]
    upstream = {
        "repository": "https://github.com/gitleaks/gitleaks",
        "version": args.version,
        "commit": args.commit,
        "path": "config/gitleaks.toml",
        "license": "MIT",
    }
    body = _HEADER.format(
        version=args.version,
        commit=args.commit,
        count=len(rules),
        skipped=len(skipped),
        skipped_ids=", ".join(skipped),
        license="\n".join(f"    {line}".rstrip() for line in license_text.splitlines()),
        upstream=upstream,
        global_regexes=tuple(convert(r) for r in global_allow["regexes"]),
        global_stopwords=tuple(s.lower() for s in global_allow["stopwords"]),
    )
    body += "".join(_rule_data(rule) for rule in rules) + ")\n"
    RULES_OUT.write_text(body)

    by_id = {rule.id: rule for rule in rules}
    cases: list[dict[str, str]] = []
    missed: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path in sorted((args.checkout / "cmd/generate/config/rules").glob("*.go")):
        for rule_id, text, how in literal_tps(path.read_text()):
            rule = by_id.get(rule_id)
            if rule is None or text in seen:
                continue
            seen.add(text)
            secrets = rule.secrets(text)
            if not secrets:
                missed.append((rule_id, text[:80]))
                continue
            cases.append(
                {
                    "rule": rule_id,
                    "file": f"cmd/generate/config/rules/{path.name}",
                    "how": how,
                    "text": text,
                    "secret": max(secrets, key=len),
                }
            )
    CORPUS_OUT.parent.mkdir(parents=True, exist_ok=True)
    corpus = {
        "provenance": {
            **upstream,
            "path": "cmd/generate/config/rules/*.go (tps: literal true positives)",
            "copyright": "Copyright (c) 2019 Zachary Rice",
            "note": (
                "True positives of the gitleaks rule files. 'how': 'literal' is "
                "a literal tps string; 'literal sample' a literal secret passed "
                "to utils.GenerateSampleSecrets, rendered in two of its forms; "
                "'generated sample' a secret the file makes with "
                "secrets.NewSecret(<pattern>), generated here from that pattern "
                "(seeded by the rule id) and rendered in one form. 'secret' is "
                "what the rule extracts (its secret group, else its first "
                "non-empty group)."
            ),
        },
        "cases": cases,
    }
    CORPUS_OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(rules)} rules, {len(cases)} corpus cases", file=sys.stderr)  # noqa: T201
    for rule_id, text in missed:
        print(  # noqa: T201 - the script reports on stderr
            f"not matched by its converted rule: {rule_id}: {text!r}", file=sys.stderr
        )


if __name__ == "__main__":
    main()
