"""Folding and the character classes the match predicate is written in.

fold() is applied to stored text and to query terms alike: Unicode NFKC, then
full case folding. match_text() is what the predicate (docs/matching.md) reads:
the folded text with redaction placeholders blanked out (so nothing inside a
placeholder can ever match) and every run of white space collapsed to one space.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

# Han (with extensions and compatibility ideographs), kana, Hangul, and the
# iteration/zero marks that live among them. These characters form "CJK runs":
# they are indexed as overlapping bigrams and match as exact substrings.
CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005\u3006\u3007"  # 々 〆 〇
    "\u302e\u302f"  # Hangul tone marks
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U0001aff0-\U0001b16f"  # kana extended B, kana supplement, kana extended A, small kana extension
    "\U00020000-\U0003ffff"  # CJK extensions B and later
)
# (`[c][c]*`, not `[c]+`: the same runs, but a pattern that starts with a
# class is searched by a fast scan for that class, a repeat by a match
# attempt at every position: 1.4-1.6x faster on the bench's corpora.)
CJK_RUN = re.compile(f"[{CJK_CLASS}][{CJK_CLASS}]*")
HAS_CJK = re.compile(f"[{CJK_CLASS}]")

# Redaction placeholders as stored: PLACEHOLDER_OPEN kind ":" hash PLACEHOLDER_CLOSE.
# Private-use characters never come out of a log (ingest replaces them), so a
# placeholder cannot be forged by the text around it.
PLACEHOLDER_OPEN = "\ue000"
PLACEHOLDER_CLOSE = "\ue001"
PLACEHOLDER = re.compile("\ue000([a-z0-9_]+):([0-9a-f]{8})\ue001")

# White space as docs/matching.md means it (a regex class): the Unicode
# White_Space property. Not Python's \s (str.isspace), which also takes the
# information separators U+001C..U+001F: control characters, not spaces.
WHITE_SPACE_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WS = re.compile(f"[{WHITE_SPACE_CLASS}]+")


# Full-width ASCII and the ideographic space: the characters NFKC changes that
# Chinese and Japanese text is full of (，：；！？（）). unicodedata.normalize
# returns at once a string its quick check finds in NFKC, and is slow on one
# it must rebuild; replacing these first by their NFKC forms (a str.replace
# per distinct character present) leaves most text passing the quick check:
# 4x faster on the bench's mixed corpus. It is exact: NFKC(s) == NFKC(s with
# any character c replaced by NFKC(c)), since both have the same compatibility
# decomposition, and the normalization that follows still composes and
# reorders what it must.
_WIDE = re.compile("[\u3000\uff01-\uff5e]")
_WIDE_TABLE = {chr(cp): unicodedata.normalize("NFKC", chr(cp)) for cp in [0x3000, *range(0xFF01, 0xFF5F)]}


# CPython puts combining marks in canonical order with an insertion sort:
# quadratic in a run of marks out of order (measured: 40,000 of one accent
# then 40,000 of another after one letter take 25 s, half as many 5 s). In a
# long text, long runs of marks are put in order first, in O(n log n): each
# mark decomposed on its own, then a stable sort by combining class, which is
# what canonical ordering is; the normalization that follows then finds them
# in order (linear) and composes exactly as it would have. Only marks whose
# whole decomposition is marks are taken, so no run is cut or joined.
_LONG_TEXT = 4096
_MARK_RUN_MIN = 32


@lru_cache(maxsize=1)
def _mark_ranges() -> tuple[tuple[int, int], ...]:
    """The code points of the marks a run is made of, as ranges."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0x110000):
        ch = chr(cp)
        if unicodedata.combining(ch) and all(unicodedata.combining(x) for x in unicodedata.normalize("NFKD", ch)):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return tuple(ranges)


@lru_cache(maxsize=1)
def _mark_run() -> re.Pattern[str]:
    cls = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                  for a, b in _mark_ranges())
    return re.compile(f"[{cls}]{{{_MARK_RUN_MIN},}}")


@lru_cache(maxsize=1)
def _mark_run_coarse() -> re.Pattern[str]:
    """A run of at least as many marks of the Basic Multilingual Plane or
    characters beyond it: a necessary condition for _mark_run, tested
    first. The exact class (ranges beyond the BMP among them) is tested
    range by range, about a microsecond a character; this one,
    which the regex engine keeps as a bitmap and one range, about 20 ns."""
    bmp = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                  for a, b in _mark_ranges() if b < 0x10000)
    return re.compile(f"[{bmp}\U00010000-\U0010ffff]{{{_MARK_RUN_MIN},}}")


def _sorted_marks(m: re.Match[str]) -> str:
    decomposed = "".join(unicodedata.normalize("NFKD", ch) for ch in m.group())
    return "".join(sorted(decomposed, key=unicodedata.combining))


def _nfkc(text: str) -> str:
    for ch in set(_WIDE.findall(text)):
        text = text.replace(ch, _WIDE_TABLE[ch])
    if len(text) > _LONG_TEXT:
        # A long text in NFKC once its full-width forms are replaced (most
        # are) is its own answer: the quick check proves it in a pass over
        # the text (0.7 ms for a tool result of 281,000 characters), where
        # the mark-run search costs 6 ms. It cannot turn quadratic: marks out
        # of canonical order answer "no" at once, and a "maybe", which it
        # settles by normalizing, holds only marks in order.
        if unicodedata.is_normalized("NFKC", text):
            return text
        if _mark_run_coarse().search(text):
            text = _mark_run().sub(_sorted_marks, text)
    return unicodedata.normalize("NFKC", text)


def fold(text: str, nfkc: bool = False) -> str:
    """NFKC, then full case folding: the one normal form of text and queries.
    ASCII text is its own NFKC form and folds as lower(); isascii() costs
    nothing (CPython keeps the flag). `nfkc=True` says the text is known to be
    in NFKC already (the indexer records it per message: fold_form), which
    saves the normalization, the dearest step."""
    if text.isascii():
        return text.lower()
    return (text if nfkc else _nfkc(text)).casefold()


def fold_form(text: str) -> tuple[str, bool]:
    """fold(text), and whether `text` is in NFKC already."""
    if text.isascii():
        return text.lower(), True
    normal = _nfkc(text)
    return normal.casefold(), normal == text


def blank_placeholders(text: str) -> str:
    if PLACEHOLDER_OPEN not in text:
        return text
    return PLACEHOLDER.sub(" ", text)


# In a str, a lone surrogate (from a JSON escape, or from bytes that were not
# UTF-8 decoded with surrogateescape, as argv is) is not text: it cannot be
# encoded or stored. The indexer reads each as U+FFFD; so does the query side.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, as the indexer reads logs."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def match_text(text: str, collapse: bool = True, nfkc: bool = False) -> str:
    """The string the match predicate reads for one stored field.

    `collapse=False` leaves runs of white space as they are: a term without
    white space occurs, and has the same neighbours, either way (no white
    space is a word character), so only terms with a space need the collapse,
    which costs as much as the folding."""
    folded = fold(blank_placeholders(text), nfkc)
    return _WS.sub(" ", folded) if collapse else folded


# A long text is folded a piece at a time, so that a reader can stop once
# it found what it looks for (verification: every term). Pieces are cut just
# before an ASCII space or newline, which nothing reaches across: NFKC
# decomposes, reorders and composes nothing over a starter that is in no
# composition; case folding takes a character at a time; a placeholder
# holds no white space. So the pieces' match texts, end to end, are the
# text's.
PIECE_CHARS = 16384
_CUTS = (" ", "\n")


def match_text_pieces(text: str, nfkc: bool = False, size: int = PIECE_CHARS) -> Iterator[str]:
    """match_text(text, collapse=False, nfkc) in pieces of at least `size`
    characters (but the last), each cut before a space or a newline; their
    concatenation is the whole match text. A term holding neither occurs in
    the whole where it occurs in one piece: a cut character is in no such
    term and is no word character, so no occurrence spans a cut and one at
    a piece's end has white space after it."""
    start, n = 0, len(text)
    while start < n:
        cut = n
        if n - start > size:
            # (looked for in the next `size` characters first: a text without
            # newlines is not searched to its end for each piece)
            found = [i for i in (text.find(c, start + size, start + 2 * size) for c in _CUTS) if i >= 0] or [
                i for i in (text.find(c, start + size) for c in _CUTS) if i >= 0]
            if found:
                cut = min(found)
        yield match_text(text[start:cut], False, nfkc)
        start = cut


@lru_cache(maxsize=65536)
def is_word_char(ch: str) -> bool:
    """A letter, digit, mark or private-use character that is not CJK.

    SQLite's unicode61 tokenizer (configured with categories 'L* N* Co M*')
    keeps every such character inside a token, but also characters its older
    Unicode table does not know (emoji, new symbols, unassigned code points);
    tokens.words_only() turns those into spaces before it sees them, which is
    what keeps the FTS5 candidates a superset of the true matches.
    """
    if HAS_CJK.match(ch):
        return False
    cat = unicodedata.category(ch)
    return cat[0] in "LNM" or cat == "Co"


@lru_cache(maxsize=1)
def _fold_sources() -> dict[str, frozenset[str]]:
    """For every character that folding produces from some other character,
    those other characters (computed once, in about 0.2 s, by the first scan
    that asks): `金` from `⾦` (a Kangxi radical) and `金` (a compatibility
    ideograph), `f` from `F`, `Ｆ` and dozens of mathematical letters."""
    sources: dict[str, set[str]] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        if not unicodedata.decomposition(c) and c.casefold() == c:
            continue  # NFKC leaves a character without decomposition alone
        f = fold(c)
        if f != c:
            for x in set(f):
                sources.setdefault(x, set()).add(c)
    return {x: frozenset(cs) for x, cs in sources.items()}


# A character is looked for in at most this many forms (itself and what
# folds to it): `人` in three, `金` in five, `一` in six (`⼀㆒㈠㊀🈩`), a
# digit in 27, `日` in 35 (with the ideographic telegraph days); not a Latin
# letter (38 to 87: upper case, full width, dozens of mathematical forms).
LITERAL_FORMS = 36


def literal_forms(folded_term: str) -> dict[str, frozenset[str]]:
    """Characters of a folded term that every text whose fold holds the term
    holds literally in one of a few forms: the character itself or one of the
    characters that fold to it. Only characters that no composition makes
    (no decomposition; not a Hangul syllable, composed from jamo by an
    algorithm), that fold to themselves, and that have at most LITERAL_FORMS
    forms. A scan tests them before it folds anything (a necessary
    condition, so it stays exact): SQLite those of one form, Python the rest
    (query.retrieve.Literal)."""
    sources = _fold_sources()
    out: dict[str, frozenset[str]] = {}
    for c in set(folded_term):
        if unicodedata.decomposition(c) or "\uac00" <= c <= "\ud7a3" or fold(c) != c or c.isspace():
            continue
        forms = sources.get(c, frozenset()) | {c}
        if len(forms) <= LITERAL_FORMS:
            out[c] = forms
    return out


# Unified ideographs (extension A, the main block, extensions B and later):
# each is a starter in no canonical composition, first or second, and case
# folding makes none of them from any other character (tests/test_matching.py
# checks both over all of Unicode).
_IDEOGRAPH = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0003ffff]")


def literal_pairs(folded_term: str, forms: dict[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """For two adjacent ideographs `ab` of a folded term that both have
    `forms` (literal_forms of the term, or some of them), what a text whose
    fold holds `ab` holds literally: `ab` itself, or another form of `a` or
    of `b`. A group per such pair, `ab` first, for the scans to test before
    folding.

    Why: in fold(text) = casefold(NFKC(text)), `a` can only come from an `a`
    of the NFKC form (case folding makes no ideograph from anything else),
    and that `a` from a character of the text whose decomposition holds it
    (no composition makes or takes an ideograph); so does `b`. Nothing lies
    between them in the decomposition of the text: a mark there would stay
    (it composes with no ideograph, reordering does not move it past one,
    and no character folds to nothing) and would stand between them in the
    fold. So the text holds, side by side, a character whose decomposition
    ends in `a` and one whose decomposition starts with `b` (or one
    character holding both): forms of `a` and `b` (literal_forms). If both
    are `a` and `b` themselves, the text holds `ab`; if not, it holds
    another form of one of them."""
    out: list[tuple[str, ...]] = []
    for a, b in zip(folded_term, folded_term[1:]):
        if a in forms and b in forms and _IDEOGRAPH.match(a) and _IDEOGRAPH.match(b):
            group = tuple(dict.fromkeys((a + b, *sorted(forms[a] - {a}), *sorted(forms[b] - {b}))))
            if group not in out:
                out.append(group)
    return out
