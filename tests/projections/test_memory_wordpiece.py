"""The pure-Python BERT tokenizer gives the ids of the Hugging Face one.

Compared with the ``tokenizers`` package over all-MiniLM-L6-v2's own
``tokenizer.json`` (a dev dependency): every line of the repository's test
fixtures and of the shared corpus, unicode edge cases, and arbitrary text.
"""

# ruff: noqa: RUF001 - look-alike characters are the point of the edge cases
from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.projections.memory.embedding.static import DATA, VOCAB_FILE
from turnledger.projections.memory.embedding.wordpiece import (
    MAX_WORD_CHARS,
    TokenizerError,
    Tokens,
    WordPieceTokenizer,
    read_vocabulary,
)

tokenizers = pytest.importorskip("tokenizers")
local = pytest.importorskip("turnledger.projections.memory.embedding.local")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture(scope="module")
def reference() -> object:
    found = tokenizers.Tokenizer.from_file(
        str(local.packaged_model_path() / "tokenizer.json")
    )
    found.no_truncation()
    found.no_padding()
    return found


@pytest.fixture(scope="module")
def ours() -> WordPieceTokenizer:
    return WordPieceTokenizer(read_vocabulary(DATA / VOCAB_FILE))


def _lines(folder: Path) -> Iterator[str]:
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        yield from (line for line in text.split("\n") if line.strip())


def _assert_same(texts: list[str], ours, reference, offsets_every: int = 1) -> None:
    encodings = reference.encode_batch(texts, add_special_tokens=False)
    for index, (text, encoding) in enumerate(zip(texts, encodings, strict=True)):
        assert ours.ids(text) == encoding.ids, text[:200]
        if index % offsets_every == 0:
            offsets = [tuple(o) for o in encoding.offsets]
            assert ours.offsets(text) == offsets, text[:200]


@pytest.mark.parametrize(
    "folder", [ROOT / "tests" / "fixtures", CORPUS], ids=["fixtures", "corpus"]
)
def test_real_texts_give_the_same_ids(folder, ours, reference):
    if not folder.is_dir():
        pytest.skip(f"no folder {folder.name}")
    texts = list(_lines(folder))
    assert len(texts) > 1000
    _assert_same(texts, ours, reference, offsets_every=10)


EDGES = [
    "",
    "   \t\n\r ",
    "Héllo Wörld! Ça va? naïve café RÉSUMÉ",
    "ΟΔΥΣΣΕΥΣ ΣΟΦΟΣ",  # final sigma
    "İstanbul ǅemal ß ﬁ ŉ",
    "中文字符和日本語のテキスト 한국어 텍스트",
    "𠀀𪜀 emoji 🙂👍🏽 flags 🇫🇷",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft",
    "nul\x00del\x7fbell\x07vt\x0bff\x0cfs\x1cnel\x85",
    "line\u2028para\u2029nbsp\u00a0ideo\u3000space",
    "replacement \ufffd private \ue000 unassigned \u0378",
    "dollar$ plus+ lt< eq= gt> caret^ backtick` pipe| tilde~",
    "«quotes» „low“ ‘single’ — dash – ‐ …",
    "x" * MAX_WORD_CHARS,
    "x" * (MAX_WORD_CHARS + 1),
    "é" * (MAX_WORD_CHARS + 1),
    "unaffable antidisestablishmentarianism supercalifragilistic",
    "snake_case camelCase kebab-case path/to/file.py v1.2.3 3.14159",
    "e\u0301 a\u0300\u0316 cafe\u0301",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "Ⅻ ① ² ¼ ™ © ° µ Å Ω",
    "तमिल தமிழ் বাংলা العربية עברית ไทย",
]


@pytest.mark.parametrize("text", EDGES)
def test_unicode_edge_cases_give_the_same_ids(text, ours, reference):
    _assert_same([text], ours, reference)


def _known_to_both(char: str) -> bool:
    """Not a character Unicode assigned or recategorised after 3.2.

    The ``tokenizers`` package's tables are older than Python's: the module
    docstring names the difference.
    """
    return unicodedata.ucd_3_2_0.category(char) == unicodedata.category(char)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        st.characters(blacklist_categories=("Cs",)).filter(_known_to_both), max_size=60
    )
)
def test_any_text_gives_the_same_ids(text, ours, reference):
    assert ours.ids(text) == reference.encode(text, add_special_tokens=False).ids


def test_characters_newer_than_the_reference_tables_are_few(ours, reference):
    differ = [
        code
        for code in range(0x3000)
        if ours.ids(f"a{chr(code)}b")
        != reference.encode(f"a{chr(code)}b", add_special_tokens=False).ids
    ]
    assert all(not _known_to_both(chr(code)) for code in differ)
    assert len(differ) < 200


def test_a_long_word_is_one_unknown_and_words_are_cached(ours):
    unknown = read_vocabulary(DATA / VOCAB_FILE)["[UNK]"]
    assert ours.ids("a" + "b" * MAX_WORD_CHARS) == [unknown]
    assert ours.ids("b" * MAX_WORD_CHARS) != [unknown]
    assert ours.word_ids("hello") is ours.word_ids("hello")


def test_a_vocabulary_without_unknown_is_refused(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\nhello\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"Expected \[UNK\] in the vocabulary"):
        read_vocabulary(path)
    with pytest.raises(TokenizerError, match="Expected a readable UTF-8"):
        read_vocabulary(tmp_path / "missing.txt")


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=80))
def test_ascii_offsets_are_the_general_ones_and_the_references(text, ours, reference):
    # ASCII without dropped controls takes the fast path; with them, the general.
    fast, general = Tokens([], [], []), Tokens([], [], [])
    ours._ascii_tokens(text.translate(DROPPED), 3, fast)
    ours._general_tokens(text.translate(DROPPED), 3, general)
    assert fast == general
    encoded = reference.encode(text, add_special_tokens=False)
    assert ours.offsets(text) == [tuple(o) for o in encoded.offsets]
    assert ours.tokens(text).ids == encoded.ids


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=60),
        st.lists(
            st.sampled_from(["unbelievably", "tokenization", "x", "[CLS]", "é", "中"]),
            max_size=12,
        ).map(" ".join),
    ),
    cut=st.data(),
)
def test_a_slice_at_word_starts_has_the_tokens_ids(text, cut, ours):
    """What windows rely on (``StaticEmbedder.windowed``): re-tokenising the
    text between two tokens that begin words gives the ids between them."""
    tokens = ours.tokens(text)
    assert tokens.ids == ours.ids(text)
    assert tokens.offsets == ours.offsets(text)
    begins = [i for i, start in enumerate(tokens.starts) if start]
    assert not tokens.ids or begins[0] == 0
    if not begins:
        return
    a = cut.draw(st.sampled_from(begins))
    b = cut.draw(st.sampled_from([*(i for i in begins if i > a), len(tokens.ids)]))
    piece = text[tokens.offsets[a][0] : tokens.offsets[b - 1][1]]
    assert ours.ids(piece) == tokens.ids[a:b]


DROPPED = dict.fromkeys([*range(9), 11, 12, *range(14, 32), 127], " ")
"""The controls normalising drops, made spaces (so the fast path applies)."""
