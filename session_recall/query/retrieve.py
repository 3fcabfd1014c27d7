"""The query side's view of the tokenizer: user text cut exactly as the index
cut stored text (unicode61, same arguments), then parsed into terms."""

from __future__ import annotations

from functools import cached_property

import apsw

from ..text.tokens import FTS_TOKENIZER_ARGS
from .parse import Term, parse


class Retriever:
    def __init__(self, conn: apsw.Connection):
        self.conn = conn

    @cached_property
    def _tokenizer(self):
        return self.conn.fts5_tokenizer("unicode61", FTS_TOKENIZER_ARGS)

    def word_tokens(self, text: str) -> list[str]:
        if not text.strip():
            return []
        return [tok[2] for tok in self._tokenizer(text.encode("utf-8", "surrogatepass"), apsw.FTS5_TOKENIZE_QUERY, None)]

    def parse(self, query: str) -> list[Term]:
        return parse(query, self.word_tokens)
