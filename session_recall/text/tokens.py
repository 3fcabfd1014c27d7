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

import unicodedata
from dataclasses import dataclass

from .fold import CJK_RUN, blank_placeholders, fold_form

# What the index's tokens and its FTS5 table are: an index built by another
# version is rebuilt on its next sync (indexer/sync.py, Sync.rebuild). 3: the
# FTS5 table has a one-character prefix index (migrations.create_fts).
TOKENIZER_VERSION = 3
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
    return folded if folded.isascii() else folded.translate(_SEPARATORS)


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
# the bytes of a multibyte character are all >= 0x80).
_CUTS = bytes(b if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b >= 128) else 32 for b in range(256))


def body_tokens(body: str) -> int:
    """How many tokens FTS5 indexes for `body` (an index_body result), as its
    docsize records them, at a few percent of the cost of tokenizing again.
    (A letter newer than SQLite's Unicode table is the one case it may miss.)"""
    return len(body.encode("utf-8", "surrogatepass").translate(_CUTS).split())


def _grams(folded: str) -> str:
    if not CJK_RUN.search(folded):
        return folded
    out: list[str] = []
    pos = 0
    for m in CJK_RUN.finditer(folded):
        out.append(folded[pos : m.start()])
        out.append(" " + " ".join(_bigrams(m.group(), closed=True)) + " ")
        pos = m.end()
    out.append(folded[pos:])
    return "".join(out)


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
