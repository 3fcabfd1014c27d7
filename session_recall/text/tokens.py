"""CJK bigram tokens on top of SQLite's C unicode61 tokenizer.

The index does not register a Python tokenizer (measured at ~4 MB/s); instead
the indexer rewrites the folded text before it reaches FTS5: every CJK run
becomes its overlapping bigrams followed by a unigram of its last character,
separated by spaces, and everything else is left for unicode61 to cut into
words. `显示Miso` becomes `显示 示 miso`.

Before that, every character that is not a letter, digit, mark or private-use
character becomes a space. unicode61 classifies characters by its own, older
Unicode table, in which code points assigned since (most emoji, ₽, U+2066)
and unassigned ones count as token characters: it would index `thanks🥰` as
one token, and `thanks` could never be found in it. After the rewrite,
unicode61's tokens are exactly the runs of word characters and the CJK grams.

Why the trailing unigram: every occurrence of a CJK character is then the first
character of some token (a bigram, or the last-character unigram), so a one
character query `示` is answered exactly by the FTS5 prefix query `"示"*`.

term_tokens() turns one folded query term into the token list (and whether the
last one is a prefix) that every matching message must contain consecutively.
That is the superset half of exact matching; verification against match_text()
decides the rest (docs/matching.md).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from .fold import CJK_RUN, blank_placeholders, fold_form

TOKENIZER_VERSION = 2
# unicode61 must not strip diacritics or split on marks, so that its tokens are
# exactly the words of the folded text (see fold.is_word_char).
FTS_TOKENIZER_ARGS = ["remove_diacritics", "0", "categories", "L* N* Co M*"]
FTS_TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


def _bigrams(run: str, *, closed: bool) -> list[str]:
    """Tokens of one CJK run; `closed` adds the last-character unigram."""
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    if closed:
        grams.append(run[-1])
    return grams


class _Separators(dict):
    """A str.translate table filled as characters are met: a character that is
    not a letter, digit, mark or private-use character (a word character, or a
    CJK one) maps to a space."""

    def __missing__(self, cp: int) -> int:
        cat = unicodedata.category(chr(cp))
        value = cp if cat[0] in "LNM" or cat == "Co" else 0x20
        self[cp] = value
        return value


_SEPARATORS = _Separators()


def words_only(folded: str) -> str:
    """`folded` with every character that is not a letter, digit, mark or
    private-use character turned into a space (one for one, so positions are
    kept): symbols, punctuation, emoji, controls, unassigned code points, and
    the CJK punctuation `・` `゠` as well, which unicode61 drops from a bigram
    (a term `・` then has no tokens and is answered by a scan, like `->`).
    ASCII needs no table: unicode61 already cuts it at exactly those characters."""
    if folded.isascii():
        return folded
    if len(folded) < _LONG:
        return folded.translate(_SEPARATORS)
    # A long text: the separators of the Basic Multilingual Plane by one
    # regex substitution, in C (str.translate looks up every character in a
    # dict: 2-3x slower on the bench's corpora), then the rare characters
    # beyond it by the table. The same string either way (a property test
    # compares the two).
    text = _bmp_separators().sub(" ", folded)
    if _ASTRAL.search(text):
        text = _ASTRAL.sub(_astral_words, text)
    return text


# Texts at least this long take the regex path of words_only. Its class is
# built once a process, at the first such text (25 ms: the category of every
# character of the BMP); query terms are shorter and never pay for it.
_LONG = 64
# (a class first, then its repeat: searched by a fast scan, as fold.CJK_RUN is)
_ASTRAL = re.compile("[\U00010000-\U0010ffff][\U00010000-\U0010ffff]*")


def _astral_words(m: re.Match[str]) -> str:
    return m.group().translate(_SEPARATORS)


@lru_cache(maxsize=1)
def _bmp_separators() -> re.Pattern[str]:
    """One character of the BMP that _SEPARATORS turns into a space, other
    than the space itself (a match per space would cost more than the table):
    a class the regex engine keeps as a bitmap."""
    cats = list(map(unicodedata.category, map(chr, range(0x10000))))
    sep = {c: "0" if c[0] in "LNM" or c == "Co" else "1" for c in set(cats)}
    flags = "".join(map(sep.__getitem__, cats))
    flags = flags[:0x20] + "0" + flags[0x21:]  # (the space)
    ranges = [(m.start(), m.end() - 1) for m in re.finditer("1+", flags)]
    return re.compile("[" + "".join(_range(a, b) for a, b in ranges) + "]")


def _range(a: int, b: int) -> str:
    return re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"


def index_body(text: str) -> str:
    """The string handed to FTS5 for one stored field of a message."""
    return index_body_form(text)[0]


def index_body_form(text: str) -> tuple[str, bool]:
    """index_body(text), and whether `text` is in NFKC already (placeholders
    are: private-use characters and ASCII)."""
    folded, nfkc = fold_form(blank_placeholders(text))
    return _grams(words_only(folded)), nfkc


# The bytes unicode61 cuts an index body at: every ASCII byte but letters and
# digits (words_only has already turned every other separator into a space;
# the bytes of a multibyte character are all >= 0x80). Each becomes a space
# here, and every other byte an `a`.
_TOKEN_BYTES = bytes(97 if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b >= 128) else 32 for b in range(256))


def body_tokens(body: str) -> int:
    """How many tokens FTS5 indexes for `body` (an index_body result), as its
    docsize records them, at a few percent of the cost of tokenizing again.
    (A letter newer than SQLite's Unicode table is the one case it may miss.)
    A token starts at an `a` after a space, or at the start: counted in C,
    without a bytes object per token (as split() made)."""
    marks = body.encode("utf-8", "surrogatepass").translate(_TOKEN_BYTES)
    return marks.count(b" a") + marks.startswith(b"a")


# A CJK run (fold.CJK_RUN, written for the regex engine's fast scan), captured,
# for re.split.
_CJK_SPLIT = re.compile(f"({CJK_RUN.pattern})")
# In _grams' layout, where one run ends and the next begins (below).
_RUN_BOUNDARY = re.compile("\x00 \x00[^ ] ")
_SPACE32 = " ".encode("utf-32-le")


def _grams(folded: str) -> str:
    """`folded` with each CJK run replaced by its bigrams and the unigram of
    its last character, spaced: `ab显示器cd` becomes `ab 显示 示器 器 cd`.

    Every step runs in C, whatever the number of runs (a Python loop per run
    cost 5 microseconds, most of the rewrite): the text is split at its runs,
    the runs are laid out together (_layout), and the pieces go back between
    the text's other parts, joined by single spaces."""
    parts = _CJK_SPLIT.split(folded)
    if len(parts) == 1:
        return folded
    runs = parts[1::2]
    if len(folded) <= _LAYOUT_CHARS:
        parts[1::2] = _layout(runs)
    else:  # a long text: its runs a slice at a time, so the layout's memory stays bounded
        ends = list(accumulate(map(len, runs)))
        pieces: list[str] = []
        i = 0
        while i < len(runs):
            j = max(i + 1, bisect_right(ends, (ends[i - 1] if i else 0) + _LAYOUT_CHARS))
            pieces += _layout(runs[i:j])
            i = j
        parts[1::2] = pieces
    return " ".join(parts)


# Characters of runs laid out at once: the layout takes about 30 bytes a
# character (its code units, three per character, and the decoded string).
_LAYOUT_CHARS = 1 << 18


def _layout(runs: list[str]) -> list[str]:
    """The bigrams of each run (see _grams), spaced, one string a run.

    The runs, joined by NUL (which no run holds), are laid out as UTF-32
    code units, three per character c_i: c_i, c_(i+1), space; written by
    three strided copies of memoryviews. A run `abc` then reads
    `ab bc c<NUL> `; between two runs, `...c<NUL> <NUL>d de ...`, whose
    `<NUL> <NUL>d ` (the next run's first character after a NUL) is where
    re.split cuts."""
    src = memoryview("\x00".join(runs).encode("utf-32-le")).cast("I")
    n = len(src)
    out = bytearray(_SPACE32 * (3 * n))
    view = memoryview(out).cast("I")
    view[0::3] = src
    view[1 : 3 * n - 3 : 3] = src[1:]
    view[3 * n - 2] = 0  # after the last character: a NUL, as after every run's last
    view.release()
    pieces = _RUN_BOUNDARY.split(out.decode("utf-32-le"))
    pieces[-1] = pieces[-1][:-2]  # the last run's `<NUL> `
    return pieces


@dataclass(frozen=True)
class TermTokens:
    """What FTS5 must find for one term: `tokens` at consecutive positions, the
    last one as a prefix when `prefix` is set. Empty `tokens` means the index
    cannot vouch for this term (symbols or emoji only) and a scan must."""

    tokens: tuple[str, ...]
    prefix: bool


def term_tokens(folded_term: str, word_tokens) -> TermTokens:
    """Tokens of a folded term. `word_tokens(str) -> list[str]` is unicode61 run
    on the non-CJK parts, so that the query is cut exactly as the index was."""
    folded_term = words_only(folded_term)
    toks: list[str] = []
    prefix = False
    pos = 0
    runs = list(CJK_RUN.finditer(folded_term))
    for i, m in enumerate(runs):
        toks.extend(word_tokens(folded_term[pos : m.start()]))
        run = m.group()
        # A run that ends inside the term also ends in every matching text
        # (the next character is not CJK), so its unigram is there. A run at
        # the end of the term may continue in the text: no unigram, and a
        # single character becomes a prefix token.
        ends_term = m.end() == len(folded_term)
        if ends_term and len(run) == 1:
            toks.append(run)
            prefix = True
        else:
            toks.extend(_bigrams(run, closed=not ends_term))
        pos = m.end()
    toks.extend(word_tokens(folded_term[pos:]))
    return TermTokens(tuple(toks), prefix)
