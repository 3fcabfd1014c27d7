"""From what the user typed to terms: the query tokenizer (user text cut
exactly as the index cut stored text), quoting, a question's keywords, and
the one escaping function for FTS5."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import apsw

from ..text.fold import WHITE_SPACE_CLASS, match_text
from ..text.tokens import FTS_TOKENIZER_ARGS, TermTokens, term_tokens

_TERM = re.compile(f'"([^"]*)"?|([^{WHITE_SPACE_CLASS}]+)')
# Keywords are taken from at most this many characters of a question: a
# question is a sentence or two, and segmenting a pasted 100 KB one takes seconds.
QUESTION_MAX_CHARS = 1000


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


def parse(query: str, word_tokens: Callable[[str], list[str]]) -> list[Term]:
    terms = []
    seen = set()
    for raw in split_terms(query):
        folded = match_text(raw).strip(" ")
        if not folded or folded in seen:
            continue
        seen.add(folded)
        terms.append(Term(raw, folded, term_tokens(folded, word_tokens)))
    return terms


def question_terms(question: str, terms: list[Term],
                   word_tokens: Callable[[str], list[str]]) -> tuple[list[Term], dict[str, int]]:
    """The keywords of a question (and their variants) that are not among
    `terms`, as terms, with each one's keyword group (by folded text)."""
    from .keywords import keyword_groups

    kw_terms: list[Term] = []
    kw_group: dict[str, int] = {}
    have = {t.folded for t in terms}
    for gi, group in enumerate(keyword_groups(question[:QUESTION_MAX_CHARS])):
        for kw in group:
            folded = match_text(kw).strip()
            if folded and folded not in have:
                have.add(folded)
                kw_group[folded] = gi
                kw_terms.append(Term(kw, folded, term_tokens(folded, word_tokens)))
    return kw_terms, kw_group


class QueryTokenizer:
    """The index's tokenizer (unicode61, same arguments) on a connection,
    cutting user text as the index cut stored text."""

    def __init__(self, conn: apsw.Connection):
        self.conn = conn

    @cached_property
    def _tokenizer(self):
        return self.conn.fts5_tokenizer("unicode61", FTS_TOKENIZER_ARGS)

    def word_tokens(self, text: str) -> list[str]:
        if not text.strip():
            return []
        data = text.encode("utf-8", "surrogatepass")
        return [tok[2] for tok in self._tokenizer(data, apsw.FTS5_TOKENIZE_QUERY, None)]

    def parse(self, query: str) -> list[Term]:
        """The terms of a query."""
        return parse(query, self.word_tokens)

    def question_terms(self, question: str, terms: list[Term]) -> tuple[list[Term], dict[str, int]]:
        """The keywords of a question not among `terms` (question_terms)."""
        return question_terms(question, terms, self.word_tokens)
