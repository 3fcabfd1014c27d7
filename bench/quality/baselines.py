"""The baselines, run on the same messages as session-recall (read back from
the index it built, so both see the same, redacted, projected text).

- ``porter``: a plain FTS5 table with the Porter stemmer (``porter
  unicode61``) over the raw text; the question's words, English stop words
  removed, ORed, ranked by bm25. The usual English full-text setup.
- ``peer``: what the strongest lexical peer ships: the Porter stemmer over
  the same CJK-bigram rewrite as session-recall's index (so both scripts are
  searchable), the question's tokens without English stop words ORed, and
  the best 200 by bm25 re-ordered by bm25 x 1.3 for a user's turn x an age
  factor 1 + 0.5 x 2^(-age / 30 days) (age counted from the newest message).
- ``unicode61``: a plain FTS5 table with the default ``unicode61`` tokenizer
  over the raw text; the question's words (as unicode61 cuts them) ORed,
  ranked by bm25. What one gets from FTS5 out of the box. CJK text has no
  spaces, so unicode61 makes one token of each run between punctuation: a
  Chinese question matches almost nothing.
- ``bigram``: the same CJK-bigram rewrite as session-recall's index
  (``index_body``, same tokenizer arguments), and every token of the question
  (each CJK bigram and each word, no stop words, no segmentation) ORed, ranked
  by bm25. The naive way to use a bigram index.
- ``scan``: what an exact scan that stops at the limit gives: sessions visited
  newest first, a message taken when it contains any of the question's words
  (jieba's segmentation for CJK, words elsewhere, single characters and
  punctuation dropped, no stop words), until the limit. No ranking at all.

Each returns, per question, up to `limit` (session_id, message_id) pairs in
rank order.
"""

from __future__ import annotations

import datetime as dt
import logging

import apsw

from session_recall.query.keywords import STOP_EN
from session_recall.query.match import occurs
from session_recall.text.fold import CJK_RUN, HAS_CJK, fold, is_word_char, match_text
from session_recall.text.tokens import FTS_TOKENIZE, index_body


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


class Baselines:
    def __init__(self, index_conn: apsw.Connection):
        rows = list(index_conn.execute(
            "SELECT m.id, s.session_id, m.message_id, m.ts, m.text, m.role FROM messages m "
            "JOIN sessions s ON s.id = m.session ORDER BY m.id"))
        self.ids = {r[0]: (r[1], r[2]) for r in rows}
        self.db = apsw.Connection(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE plain USING fts5(body, tokenize='unicode61')")
        self.db.execute("CREATE VIRTUAL TABLE porter USING fts5(body, tokenize='porter unicode61')")
        self.db.execute(f"CREATE VIRTUAL TABLE bigram USING fts5(body, tokenize=\"{FTS_TOKENIZE}\")")
        self.db.execute(f"CREATE VIRTUAL TABLE peer USING fts5(body, tokenize=\"porter {FTS_TOKENIZE}\")")
        with self.db:
            for table in ("plain", "porter"):
                self.db.executemany(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", [(r[0], r[4]) for r in rows])
            for table in ("bigram", "peer"):
                self.db.executemany(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)",
                                    [(r[0], index_body(r[4])) for r in rows])
        self._plain_tok = self.db.fts5_tokenizer("unicode61", [])
        # The peer's multipliers: 1.3 for a user's turn, and the age factor.
        stamps = {r[0]: _epoch(r[3]) for r in rows}
        newest = max((t for t in stamps.values() if t is not None), default=0.0)
        self.peer_weight = {
            r[0]: (1.3 if r[5] == "user" else 1.0)
            * (1 + 0.5 * 2 ** (-max(0.0, newest - (stamps[r[0]] or newest)) / (30 * 86400)))
            for r in rows}
        # For the scan: sessions newest first (by their newest message), messages newest first.
        by_session: dict[str, list[tuple[str, str, str]]] = {}
        newest: dict[str, str] = {}
        for _rid, sid, mid, ts, text, _role in rows:
            by_session.setdefault(sid, []).append((ts or "", mid, match_text(text)))
            newest[sid] = max(newest.get(sid, ""), ts or "")
        self.scan_order = sorted(by_session, key=lambda s: (newest[s], s), reverse=True)
        for msgs in by_session.values():
            msgs.sort(reverse=True)
        self.by_session = by_session

    def _bm25(self, table: str, tokens: list[str], limit: int) -> list[tuple[str, str]]:
        tokens = list(dict.fromkeys(t for t in tokens if t))
        if not tokens:
            return []
        expr = " OR ".join(_quote(t) for t in tokens)
        rows = self.db.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}), rowid "
                               "LIMIT ?", (expr, limit))
        return [self.ids[r[0]] for r in rows]

    def _words(self, question: str) -> list[str]:
        return [t[2] for t in self._plain_tok(question.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)]

    def porter(self, question: str, limit: int) -> list[tuple[str, str]]:
        return self._bm25("porter", [w for w in self._words(question) if w.lower() not in STOP_EN], limit)

    def peer(self, question: str, limit: int) -> list[tuple[str, str]]:
        tokens = list(dict.fromkeys(t for t in index_body(question).split() if t.lower() not in STOP_EN))
        if not tokens:
            return []
        rows = self.db.execute("SELECT rowid, bm25(peer) FROM peer WHERE peer MATCH ? ORDER BY bm25(peer), rowid "
                               "LIMIT 200", (" OR ".join(_quote(t) for t in tokens),)).fetchall()
        rows.sort(key=lambda r: (r[1] * self.peer_weight[r[0]], r[0]))
        return [self.ids[r[0]] for r in rows[:limit]]

    def unicode61(self, question: str, limit: int) -> list[tuple[str, str]]:
        return self._bm25("plain", self._words(question), limit)

    def bigram(self, question: str, limit: int) -> list[tuple[str, str]]:
        return self._bm25("bigram", index_body(question).split(), limit)

    def scan(self, question: str, limit: int) -> list[tuple[str, str]]:
        words = naive_words(question)
        out: list[tuple[str, str]] = []
        if not words:
            return out
        for sid in self.scan_order:
            for _ts, mid, text in self.by_session[sid]:
                if any(occurs(w, text) for w in words):
                    out.append((sid, mid))
                    if len(out) >= limit:
                        return out
        return out


def _epoch(ts: str | None) -> float | None:
    try:
        return dt.datetime.fromisoformat((ts or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_jieba = None


def naive_words(question: str) -> list[str]:
    """The question's words: jieba.cut on CJK runs, word characters elsewhere;
    single characters and punctuation dropped, nothing else."""
    global _jieba
    if _jieba is None:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        _jieba = jieba
    text = fold(question)
    out: list[str] = []
    pos = 0
    for m in list(CJK_RUN.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        word = ""
        for ch in text[pos:end] + " ":
            if is_word_char(ch):
                word += ch
            else:
                if len(word) > 1:
                    out.append(word)
                word = ""
        if m:
            out.extend(w for w in _jieba.cut(m.group()) if len(w) > 1 and HAS_CJK.match(w))
            pos = m.end()
    return list(dict.fromkeys(out))
