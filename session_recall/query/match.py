"""Verification: does a folded term occur in a message (docs/matching.md)?

FTS5 returns candidates that contain a term's tokens in order; this decides.
A term matches a field where it occurs as a substring of the field's match
text, and, at each end of the term that is a word character, the text has no
word character right beside it (whole words for Latin and digits; CJK and
symbols match anywhere).
"""

from __future__ import annotations

from ..text.fold import is_word_char, match_text


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
    body = match_text(text, collapse, nfkc)
    names: list[str] | None = None  # folded when a term is not in the text
    for t in terms:
        if occurs(t, body):
            continue
        if names is None:
            names = [match_text(n, collapse) for n in attachment_names]
        if not any(occurs(t, n) for n in names):
            return False
    return True


def needs_collapse(terms: list[str]) -> bool:
    """Whether any folded term holds a space (the only white space a folded term has)."""
    return " " in "".join(terms)
