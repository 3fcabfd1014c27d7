"""Paging (contract section 5): cursors of another query, garbage or an older
index are stale; pages are disjoint and in the order of one big page; the
per-session quota and its second pass."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tests.helpers import all_pages, anchors


def test_cursors_of_another_query_or_garbage_are_stale(proj, corpus):
    for i in range(6):
        corpus.session(f"s{i}", proj).message("m1", f"invoice number {i} and receipt")
    ix = corpus.open()
    first = ix.recall("invoice", cwd=str(proj), limit=2)
    assert first.next_cursor
    for kw in ({"query": "receipt"}, {"query": "invoice", "limit": 3}, {"query": "invoice", "all_projects": True},
               {"query": "invoice", "session_id": "s1"}, {"query": "invoice", "question": "which invoice?"}):
        q = kw.pop("query")
        env = ix.recall(q, cwd=str(proj), **{"limit": 2, **kw}, cursor=first.next_cursor)
        assert env.status == "stale_cursor" and env.results == [] and "does not belong" in env.hint, kw
    for garbage in ("x", "!!!", "eyJrIjoxfQ", "bm90IGpzb24", first.next_cursor[:-3]):
        env = ix.recall("invoice", cwd=str(proj), limit=2, cursor=garbage)
        assert env.status == "stale_cursor" and env.results == [], garbage
        assert "could not be read" in env.hint, (garbage, env.hint)  # not "another query"
    # the right cursor pages
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "ok"


def test_a_cursor_made_before_a_sync_added_messages_is_stale(proj, corpus):
    sessions = [corpus.session(f"s{i}", proj) for i in range(5)]
    for i, s in enumerate(sessions):
        s.message("m1", f"invoice {i}")
    ix = corpus.open()
    first = ix.recall("invoice", cwd=str(proj), limit=2)
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "ok"
    sessions[0].message("m2", "a new invoice arrived", turn_id="t2")
    corpus.sync(ix)
    env = ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor)
    assert env.status == "stale_cursor" and env.results == []
    assert "without a cursor" in env.hint
    # repeating the query pages the new state
    pages = all_pages(ix, "invoice", cwd=str(proj), limit=2)
    assert sum(len(p.results) for p in pages) == 6


@pytest.mark.parametrize("settings", [{"deny_cwds": ["/srv/hidden"]}, {"all_projects": "deny"}])
def test_a_confined_callers_cursor_goes_stale_with_its_scope_only(proj, corpus, settings):
    """A confined caller's cursor is made over what it may search: a pass that
    writes only out of its reach leaves it paging (its staleness would say that
    something was written there), one that writes in its scope makes it stale."""
    sessions = [corpus.session(f"s{i}", proj) for i in range(5)]
    for i, s in enumerate(sessions):
        s.message("m1", f"invoice {i}")
    hidden = corpus.session("h1", "/srv/hidden")
    hidden.message("m1", "invoice hidden")
    ix = corpus.open(**settings)
    first = ix.recall("invoice", cwd=str(proj), limit=2)
    hidden.message("m2", "another hidden invoice", turn_id="t2")
    corpus.sync(ix)
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "ok"
    assert first.diagnostics.index_freshness["last_indexed_at"] is None  # a pass anywhere would move it
    sessions[0].message("m2", "a new invoice arrived", turn_id="t2")
    corpus.sync(ix)
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "stale_cursor"


def test_pages_are_disjoint_and_in_the_order_of_one_big_page(proj, corpus):
    """Each session holds at most ceil(limit/3) hits, so the quota does not
    bind and one big page is the same ranking."""
    for i in range(11):
        s = corpus.session(f"s{i:02d}", proj, started_at=f"2026-10-{i + 1:02d}T08:00:00Z")
        s.message("m1", "invoice " + "filler " * (i % 4) + f"number {i}", turn_id="t1")
        if i % 3 == 0:
            s.message("m2", "invoice invoice " + "other " * i, turn_id="t2")
    ix = corpus.open()
    big = ix.recall("invoice", cwd=str(proj), limit=50)
    assert big.next_cursor is None and len(big.results) == 15
    pages = all_pages(ix, "invoice", cwd=str(proj), limit=6)
    assert [len(p.results) for p in pages] == [6, 6, 3]
    assert all(p.status == "ok" for p in pages)
    paged = [a for p in pages for a in anchors(p)]
    assert len(set(paged)) == len(paged)
    assert paged == anchors(big)
    assert [r.score for p in pages for r in p.results] == [r.score for r in big.results]


def test_paging_covers_every_hit_once_when_the_quota_binds(proj, corpus):
    heavy = corpus.session("heavy", proj, started_at="2026-11-01T08:00:00Z")
    for t in range(8):
        heavy.message(f"m{t}", "receipt", turn_id=f"t{t}")  # short: scores best
    for i in range(3):
        corpus.session(f"light{i}", proj).message("m1", "the receipt was lost somewhere in the mail " * 3)
    ix = corpus.open()
    pages = all_pages(ix, "receipt", cwd=str(proj), limit=3)
    assert all(len(p.results) <= 3 for p in pages)
    paged = [a for p in pages for a in anchors(p)]
    assert len(paged) == len(set(paged)) == 11
    # the first page shows three sessions, not three turns of the best one
    assert len({r.session_id for r in pages[0].results}) == 3


@pytest.mark.parametrize("limit", range(1, 10))
def test_at_most_ceil_limit_over_3_passages_per_session_when_others_have_hits(proj, corpus, limit):
    a = corpus.session("a", proj, started_at="2026-11-03T08:00:00Z")
    for t in range(10):
        a.message(f"m{t}", "quota", turn_id=f"t{t}")  # the strongest hits
    for name in ("b", "c"):
        s = corpus.session(name, proj, started_at="2026-11-01T08:00:00Z")
        for t in range(5):
            s.message(f"m{t}", "a long message that mentions the quota only once among many words", turn_id=f"t{t}")
    ix = corpus.open()
    env = ix.recall("quota", cwd=str(proj), limit=limit)
    per = Counter(r.session_id for r in env.results)
    assert len(env.results) == limit
    assert max(per.values()) <= math.ceil(limit / 3), per
    assert env.results[0].session_id == "a"


def test_the_second_pass_fills_unused_slots(proj, corpus):
    a = corpus.session("a", proj)
    for t in range(10):
        a.message(f"m{t}", "quota", turn_id=f"t{t}")
    ix = corpus.open()
    env = ix.recall("quota", cwd=str(proj), limit=6)
    assert [r.session_id for r in env.results] == ["a"] * 6  # only one session matches
    b = corpus.session("b", proj)
    b.message("m1", "quota mentioned once in a much longer message about other things", turn_id="t1")
    corpus.sync(ix)
    env = ix.recall("quota", cwd=str(proj), limit=6)
    per = Counter(r.session_id for r in env.results)
    assert per == {"a": 5, "b": 1}  # b's one passage, and a fills the rest
    assert len(set(anchors(env))) == 6


def test_a_recall_works_its_scope_out_once_and_the_next_recall_anew(proj, corpus):
    """A confined caller's recall needs its scope several times (the cursor,
    the universe its statistics are counted over, the engines): the cwds are
    read once a recall, and a session indexed between two recalls is in the
    second one's scope."""
    corpus.session("s1", proj).message("m1", "invoice one")
    corpus.session("h1", "/srv/hidden").message("m1", "invoice hidden")
    ix = corpus.open(all_projects="deny")
    reads = []

    def trace(cursor, sql, bindings):
        if "SELECT DISTINCT cwd" in sql:
            reads.append(sql)
        return True

    ix.engine.conn.exec_trace = trace
    try:
        assert {r.session_id for r in ix.recall("invoice", cwd=str(proj)).results} == {"s1"}
        assert len(reads) == 1, reads
    finally:
        ix.engine.conn.exec_trace = None
    corpus.session("s2", proj).message("m1", "invoice two")
    corpus.sync(ix)
    assert {r.session_id for r in ix.recall("invoice", cwd=str(proj)).results} == {"s1", "s2"}
    assert ix.engine.retriever.scopes is None  # nothing kept between snapshots
