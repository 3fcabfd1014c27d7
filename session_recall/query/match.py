"""Verification: does a folded term occur in a message (docs/matching.md)?

FTS5 returns candidates that contain a term's tokens in order; this decides.
A term matches a field where it occurs as a substring of the field's match
text, and, at each end of the term that is a word character, the text has no
word character right beside it (whole words for Latin and digits; CJK and
symbols match anywhere).
"""

from __future__ import annotations

from ..text.fold import PIECE_CHARS, is_word_char, match_text, match_text_pieces


def occurs(term: str, text: str) -> bool:
    """`term` is folded and stripped; `text` is a match text."""
    n = len(term)
    if not n:
        return False
    check_left = is_word_char(term[0])
    check_right = is_word_char(term[-1])
    start = text.find(term)
    while start != -1:
        end = start + n
        if (not check_left or start == 0 or not is_word_char(text[start - 1])) and (
            not check_right or end == len(text) or not is_word_char(text[end])
        ):
            return True
        start = text.find(term, start + 1)
    return False


def message_matches(terms: list[str], text: str, attachment_names: list[str], nfkc: bool = False) -> bool:
    """Every term occurs in the text or in one of the attachment names.
    `nfkc`: the text is known to be in NFKC (messages.nfkc), as verification
    reads it; the normalization, the dearest step of folding, is skipped."""
    collapse = needs_collapse(terms)
    names = [match_text(n, collapse) for n in attachment_names]
    return len(held(terms, text, names, collapse, nfkc, need_all=True)) == len(set(terms))


# A text this long is folded a piece at a time (fold.match_text_pieces).
LONG_TEXT = 2 * PIECE_CHARS


def held(terms: list[str], text: str, names: list[str], collapse: bool, nfkc: bool = False,
         need_all: bool = False) -> list[str]:
    """The terms, in order and each once, that occur in `text` (stored
    text; `nfkc` as for match_text) or in one of `names` (match texts).
    `need_all`: the caller needs every term, so the first one missing ends
    the search (a long query costs no more than it must). A long text, when
    no term holds a space or a newline, is folded a piece at a time and only
    until every term is found: a match near its start costs that much."""
    wanted = list(dict.fromkeys(terms))
    if collapse or len(text) <= LONG_TEXT or any(" " in t or "\n" in t for t in wanted):
        body = match_text(text, collapse, nfkc)
        out = []
        for t in wanted:
            if occurs(t, body) or any(occurs(t, n) for n in names):
                out.append(t)
            elif need_all:
                break
        return out
    found = {t for t in wanted if any(occurs(t, n) for n in names)}
    pending = [t for t in wanted if t not in found]
    for piece in match_text_pieces(text, nfkc):
        found.update(t for t in pending if occurs(t, piece))
        pending = [t for t in pending if t not in found]
        if not pending:
            break
    return [t for t in wanted if t in found]


def needs_collapse(terms: list[str]) -> bool:
    """Whether any folded term holds a space (the only white space a folded term has)."""
    return " " in "".join(terms)
