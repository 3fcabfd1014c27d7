"""Small helpers shared by tests: the anchors of an envelope, a Ranking
override, passage sizes, every page of a query, timestamps ago; what an index
holds and finds, and writing a log."""

from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from session_recall import Index
from session_recall.model import Envelope


def anchors(env: Envelope) -> list[str]:
    return [r.passage.anchor_id for r in env.results]


def set_ranking(monkeypatch, ix: Index, **values) -> None:
    """`ix` ranks with these values of its Ranking for the rest of the test."""
    monkeypatch.setattr(ix.engine, "ranking", dataclasses.replace(ix.engine.ranking, **values))


def passage_bytes(result) -> int:
    return sum(len(m.text.encode("utf-8")) for m in result.passage.messages)


def all_pages(ix: Index, query: str, **kw) -> list[Envelope]:
    pages = [ix.recall(query, **kw)]
    while pages[-1].next_cursor:
        assert len(pages) < 100, "paging does not end"
        pages.append(ix.recall(query, cursor=pages[-1].next_cursor, **kw))
    return pages


def ago(days: float) -> str:
    t = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def messages(ix: Index) -> dict[tuple[str, str], tuple[str, int]]:
    """Every indexed message: (session_id, message_id) -> (text, settled).

    Also checks that the database, FTS5 index included, is consistent, and
    that each message has exactly one FTS5 row."""
    conn = ix.store.conn
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    n_fts = conn.execute("SELECT count(*) FROM message_fts").fetchone()[0]
    assert n_fts == conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    return {
        (sid, mid): (text, settled)
        for sid, mid, text, settled in ix.store.conn.execute(
            "SELECT s.session_id, m.message_id, m.text, m.settled FROM messages m JOIN sessions s ON s.id = m.session"
        )
    }


def found(ix: Index, query: str) -> list[tuple[str, str]]:
    """(session_id, message_id) of every message the query finds, sorted."""
    return sorted((s["session_id"], h.message_id) for h, s in ix.search(query, limit=10_000))


def write(path: Path, *chunks: bytes) -> int:
    data = b"".join(chunks)
    path.write_bytes(data)
    return len(data)


def run_all(run_recall, *argvs: list) -> list:
    """Each argv run as `recall ...` (the run_recall fixture), side by side:
    each start of the command costs most of a second."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda argv: run_recall(*argv), argvs))
