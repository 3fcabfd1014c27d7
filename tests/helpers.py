"""Small helpers shared by the recall tests: the anchors of an envelope, a
Ranking override, passage sizes, every page of a query, timestamps ago."""

from __future__ import annotations

import dataclasses
import datetime as dt

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
