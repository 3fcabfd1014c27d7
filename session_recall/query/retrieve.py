"""Retrieval: FTS5 candidates in bm25 order, verified one by one; a scan of the
stored text where the index cannot vouch for a term."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import apsw
import orjson

from ..text.tokens import FTS_TOKENIZER_ARGS
from .match import message_matches
from .parse import Term, fts_phrase, parse


@dataclass
class Hit:
    rowid: int
    session: int
    message_id: str
    role: str
    ts: str | None
    text: str
    attachments: list[dict]
    score: float


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

    def matches(self, terms: list[Term]) -> Iterator[Hit]:
        """Every message that matches all terms: in bm25 order when some term
        has tokens (engine `fts`), else in recency order by a scan."""
        folded = [t.folded for t in terms]
        indexed = [t for t in terms if t.tokens.tokens]
        if indexed:
            expr = " AND ".join(fts_phrase(t.tokens) for t in indexed)
            rows = self.conn.execute(
                "SELECT m.id, m.session, m.message_id, m.role, m.ts, m.text, m.attachments, bm25(message_fts) "
                "FROM message_fts JOIN messages m ON m.id = message_fts.rowid "
                "WHERE message_fts MATCH ? ORDER BY rank, m.id",
                (expr,),
            )
        else:
            rows = self.conn.execute(
                "SELECT id, session, message_id, role, ts, text, attachments, 0.0 FROM messages ORDER BY ts DESC, id DESC"
            )
        for rowid, session, mid, role, ts, text, atts, score in rows:
            items = orjson.loads(atts) if atts else []
            if message_matches(folded, text, [a["name"] for a in items]):
                yield Hit(rowid, session, mid, role, ts, text, items, score)
