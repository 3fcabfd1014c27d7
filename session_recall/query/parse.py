"""From what the user typed to terms, and the one escaping function for FTS5."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..text.fold import WHITE_SPACE_CLASS, match_text
from ..text.tokens import TermTokens, term_tokens

_TERM = re.compile(f'"([^"]*)"?|([^{WHITE_SPACE_CLASS}]+)')


@dataclass(frozen=True)
class Term:
    raw: str
    folded: str
    tokens: TermTokens


def split_terms(query: str) -> list[str]:
    """Whitespace separates terms; "double quotes" make one term of several
    words (an unclosed quote runs to the end). Empty terms are dropped."""
    out = []
    for m in _TERM.finditer(query):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        if match_text(raw).strip(" "):
            out.append(raw)
    return out


def fts_quote(text: str) -> str:
    """The only way user-derived text enters an FTS5 expression: as a string."""
    return '"' + text.replace('"', '""') + '"'


def fts_phrase(tokens: TermTokens) -> str:
    return fts_quote(" ".join(tokens.tokens)) + ("*" if tokens.prefix else "")


def fts_query(terms: list[Term], any_term: bool = False) -> str:
    """The FTS5 expression of the terms that have index tokens: their phrases
    ANDed (ORed for `any_term`)."""
    return (" OR " if any_term else " AND ").join(fts_phrase(t.tokens) for t in terms if t.tokens.tokens)


def parse(query: str, word_tokens) -> list[Term]:
    terms = []
    seen = set()
    for raw in split_terms(query):
        folded = match_text(raw).strip(" ")
        if not folded or folded in seen:
            continue
        seen.add(folded)
        terms.append(Term(raw, folded, term_tokens(folded, word_tokens)))
    return terms
