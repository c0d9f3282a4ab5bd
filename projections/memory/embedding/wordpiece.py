"""A pure-Python BERT uncased tokenizer: the ids the Hugging Face one gives.

The static embedder (:mod:`.static`) needs token ids and nothing else from a
tokenizer, so it reads them with this module and the standard library instead
of the ``tokenizers`` package. It reproduces ``BertNormalizer`` (lowercase,
accents stripped), ``BertPreTokenizer`` and ``WordPiece`` as configured in
all-MiniLM-L6-v2's ``tokenizer.json``:

1. clean the text: drop NUL, U+FFFD and control characters (categories Cc, Cf
   and Co, except tab, newline and carriage return; unassigned ones stay);
   every other whitespace character becomes a space;
2. put spaces around each CJK ideograph;
3. strip accents (NFD, then drop the nonspacing marks, category Mn) and
   lowercase each character on its own (a final capital sigma becomes the medial small
   sigma, as there);
4. split on whitespace, and make each punctuation character (categories P*,
   and every ASCII punctuation character) a word of its own;
5. split each word into the longest pieces found in the vocabulary, greedily
   from the left, the pieces after the first spelt with ``##``; a word of more
   than 100 characters, or one with a part no piece covers, is ``[UNK]``.

The special tokens (``[CLS]``, ``[SEP]``, ``[UNK]``, ``[PAD]``, ``[MASK]``)
written in a text are matched as written, before all of this, as there.
Nothing is truncated and no ``[CLS]``/``[SEP]`` is added. The tests compare its
ids with the ``tokenizers`` package's over the repository's fixtures, the corpus
and unicode edge cases (and a Hypothesis property). The two differ on about 500
characters that Unicode assigned after the version of that package's tables
(Python's are newer: it knows them as punctuation, marks or format
characters, that package as unassigned letters).

Words seen before are answered from a cache (a whole word found in the
vocabulary, the common case, is one dictionary lookup).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Final, NamedTuple

MAX_WORD_CHARS: Final = 100
"""A longer word is ``[UNK]`` (WordPiece's ``max_input_chars_per_word``)."""

UNKNOWN: Final = "[UNK]"
"""The token of a word no piece covers."""

SPECIAL: Final = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""Tokens matched as they are written in the raw text, before normalisation."""

_SPECIAL: Final = re.compile("|".join(re.escape(token) for token in SPECIAL))

PREFIX: Final = "##"
"""How a piece that continues a word is spelt in the vocabulary."""

CACHE_WORDS: Final = 100_000
"""Words whose ids are kept; the cache is emptied when it holds more."""

_CJK: Final = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

_ASCII_PUNCTUATION: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")

_ASCII_WORDS: Final = re.compile(r"[^\s!-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")
"""An ASCII text's words: runs of other characters, or one punctuation mark."""

_ASCII_CLEAN: Final = {
    **{code: None for code in range(32) if chr(code) not in "\t\n\r"},
    0x7F: None,
    0x09: " ",
    0x0A: " ",
    0x0D: " ",
}
"""ASCII controls dropped, tab/newline/return made spaces (``str.translate``)."""

_ASCII_DROPPED: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII characters normalising drops (the others keep their places)."""

_WHITESPACE: Final = frozenset(
    "\t\n\r \x0b\x0c\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Unicode's White_Space property (what the Rust tokenizer splits on)."""


class TokenizerError(ValueError):
    """A vocabulary file could not be read or holds no ``[UNK]``."""


def read_vocabulary(path: Path) -> dict[str, int]:
    """Return ``token -> id`` from a ``vocab.txt`` (one token a line, ids from 0).

    Raises:
        TokenizerError: The file cannot be read, or it has no ``[UNK]``.
    """
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        msg = f"Expected a readable UTF-8 vocabulary at {path}, found {e}"
        raise TokenizerError(msg) from e
    if lines and not lines[-1]:
        lines.pop()
    vocabulary = {token: index for index, token in reversed(list(enumerate(lines)))}
    if UNKNOWN not in vocabulary:
        msg = f"Expected {UNKNOWN} in the vocabulary at {path}, found none"
        raise TokenizerError(msg)
    return vocabulary


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _normalized(char: str) -> str:
    """What one character becomes: removed, a space, isolated, or folded.

    Isolated characters (CJK, punctuation) come with a space on each side.
    """
    code = ord(char)
    if char in "\t\n\r":
        return " "
    if code in {0, 0xFFFD} or unicodedata.category(char) in {"Cc", "Cf", "Co"}:
        return ""  # before whitespace: vertical tab, form feed and NEL go
    if char in _WHITESPACE:
        return " "
    folded = "".join(
        lowered
        for kept in unicodedata.normalize("NFD", char)
        if unicodedata.category(kept) != "Mn"
        for lowered in kept.lower()
    )
    if _is_cjk(code):
        return f" {folded} "
    return "".join(f" {c} " if _is_punctuation(c) else c for c in folded)


class Tokens(NamedTuple):
    """A text's tokens (:meth:`WordPieceTokenizer.tokens`), one entry each.

    Attributes:
        ids: The vocabulary ids.
        offsets: The ``(start, end)`` characters each came from.
        starts: Whether each begins a word.
    """

    ids: list[int]
    offsets: list[tuple[int, int]]
    starts: list[bool]


class WordPieceTokenizer:
    """BERT uncased tokenization into ids (see the module docstring).

    Args:
        vocabulary: ``token -> id``, as :func:`read_vocabulary` returns.

    Raises:
        TokenizerError: The vocabulary has no ``[UNK]``.
    """

    def __init__(self, vocabulary: dict[str, int]) -> None:
        if UNKNOWN not in vocabulary:
            msg = f"Expected {UNKNOWN} in the vocabulary, found none"
            raise TokenizerError(msg)
        self._vocabulary = vocabulary
        # word -> (its ids, each piece's length in the word's characters)
        self._words: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._chars: dict[str, str] = {}

    def ids(self, text: str) -> list[int]:
        """Return the ids of ``text``'s tokens, in order (none for an empty text)."""
        found: list[int] = []
        for part, special in self._parts(text):
            if special:
                found.append(self._vocabulary[part])
                continue
            for word in self.words(part):
                found.extend(self.word_ids(word))
        return found

    def _parts(self, text: str) -> Iterable[tuple[str, bool]]:
        """``text`` cut around the special tokens written in it (``[CLS]``...)."""
        if "[" not in text:
            yield text, False
            return
        start = 0
        for match in _SPECIAL.finditer(text):
            if match.group() not in self._vocabulary:
                continue
            yield text[start : match.start()], False
            yield match.group(), True
            start = match.end()
        yield text[start:], False

    def words(self, text: str) -> list[str]:
        """Return ``text``'s words after normalisation and pre-tokenisation."""
        if text.isascii():
            return _ASCII_WORDS.findall(text.translate(_ASCII_CLEAN).lower())
        return "".join(map(self._char, text)).split()

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Return each token's ``(start, end)`` characters in ``text``, in order.

        A token spans the characters of ``text`` its normalised characters came
        from; a word of one token spans the whole word.
        """
        return self.tokens(text).offsets

    def tokens(self, text: str) -> Tokens:
        """Return ``text``'s ids, their offsets and which begin a word, in one pass.

        The ids are :meth:`ids`'s, the offsets :meth:`offsets`'s. A token that
        begins a word (a special token, or a word's first piece) starts where
        re-tokenising a slice of ``text`` would start it: the ids of
        ``text[offsets[a][0]:offsets[b - 1][1]]`` are ``ids[a:b]`` when tokens
        ``a`` and ``b`` (or the end) begin words.
        """
        found = Tokens([], [], [])
        base = 0
        for part, special in self._parts(text):
            if special:
                found.ids.append(self._vocabulary[part])
                found.offsets.append((base, base + len(part)))
                found.starts.append(True)
            elif part.isascii() and not _ASCII_DROPPED.search(part):
                self._ascii_tokens(part, base, found)
            else:
                self._general_tokens(part, base, found)
            base += len(part)
        return found

    def _general_tokens(self, text: str, base: int, found: Tokens) -> None:
        """:meth:`tokens` of a text without special tokens, from ``base`` on.

        Any text: per character, where it came from.
        """
        for word, origins in self._words_with_origins(text):
            ids, lengths = self._word(word)
            found.ids.extend(ids)
            start = 0
            for length in lengths:
                stop = start + length
                found.offsets.append(
                    (base + origins[start], base + origins[stop - 1] + 1)
                )
                found.starts.append(start == 0)
                start = stop

    def _ascii_tokens(self, text: str, base: int, found: Tokens) -> None:
        """:meth:`_general_tokens` for ASCII without dropped controls.

        Normalising such a text keeps every character in place (lowercase,
        tab/newline/return made spaces), so a word's characters are the text's
        where it is next found after the word before (only spaces lie between
        two words: every other character is a word or in one); its pieces'
        lengths come from the word cache.
        """
        normal = text.lower().translate(_ASCII_CLEAN)
        find = normal.find
        cache = self._words
        word_of = self._word
        ids, offsets, starts = found.ids, found.offsets, found.starts
        at = 0
        for word in _ASCII_WORDS.findall(normal):
            at = find(word, at)
            word_ids, lengths = cache.get(word) or word_of(word)
            if len(lengths) == 1:  # the common case: a whole word
                ids.append(word_ids[0])
                offsets.append((base + at, base + at + lengths[0]))
                starts.append(True)
                at += len(word)
                continue
            ids.extend(word_ids)
            first = True
            for length in lengths:
                offsets.append((base + at, base + at + length))
                starts.append(first)
                first = False
                at += length

    def word_ids(self, word: str) -> tuple[int, ...]:
        """Return one pre-tokenised word's ids (the word's pieces)."""
        return self._word(word)[0]

    def _word(self, word: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """A word's ids and its pieces' lengths in characters (cached)."""
        cached = self._words.get(word)
        if cached is not None:
            return cached
        whole = self._vocabulary.get(word)
        found: tuple[tuple[int, ...], tuple[int, ...]]
        if whole is not None and len(word) <= MAX_WORD_CHARS:
            found = (whole,), (len(word),)
        else:
            pieces = self._pieces(word)
            lengths = [
                len(word)
                if piece == UNKNOWN
                else len(piece) - (len(PREFIX) if i else 0)
                for i, piece in enumerate(pieces)
            ]
            found = tuple(self._vocabulary[piece] for piece in pieces), tuple(lengths)
        if len(self._words) >= CACHE_WORDS:
            self._words.clear()
        self._words[word] = found
        return found

    def _pieces(self, word: str) -> list[str]:
        """WordPiece: the longest known pieces from the left, or ``[UNK]``."""
        if len(word) > MAX_WORD_CHARS:
            return [UNKNOWN]
        if word in self._vocabulary:
            return [word]
        pieces: list[str] = []
        start = 0
        while start < len(word):
            stop = len(word)
            while stop > start:
                piece = word[start:stop] if start == 0 else PREFIX + word[start:stop]
                if piece in self._vocabulary:
                    pieces.append(piece)
                    break
                stop -= 1
            else:
                return [UNKNOWN]
            start = stop
        return pieces

    def _char(self, char: str) -> str:
        found = self._chars.get(char)
        if found is None:
            found = _normalized(char)
            self._chars[char] = found
        return found

    def _words_with_origins(self, text: str) -> Iterable[tuple[str, list[int]]]:
        """Each word with, per character, the index in ``text`` it came from."""
        word: list[str] = []
        origins: list[int] = []
        for index, char in enumerate(text):
            for normal in self._char(char):
                if normal == " ":
                    if word:
                        yield "".join(word), origins
                        word, origins = [], []
                    continue
                word.append(normal)
                origins.append(index)
        if word:
            yield "".join(word), origins
