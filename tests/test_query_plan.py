"""The plan by match count (docs/recall.md, "The plan by match count"): a
frequent query ranks its newest candidates first, window by window, and
still reaches every match; row ids follow the order logs were written in."""

from __future__ import annotations

import os

from session_recall.query.gates import Scope
from session_recall.query.retrieve import Run
from tests.helpers import set_ranking


def _hits(ix, query: str, scope=None):
    run = Run()
    terms = ix.engine.tokenizer.parse(query)
    hits = list(ix.engine.retriever.hits(terms, scope or Scope("all", "/"), run,
                                         first=ix.engine.ranking.fts_first_page))
    return hits, run


def _ledgers(corpus, proj, other, n: int = 12) -> None:
    """`n` sessions, each later than the one before; the first few in
    `other`, so that project's matches are the oldest."""
    for i in range(n):
        s = corpus.session(f"s{i:02d}", other if i < 3 else proj, started_at=f"2026-10-{i + 1:02d}T08:00:00Z")
        s.message("m1", "ledger " * (1 + i % 4) + f"closed on day {i} " + "pad " * (i % 5))
        s.message("m2", f"nothing here {i}")
        s.message("m3", f"the ledger again {i}", role="assistant")


def test_a_frequent_term_ranks_its_newest_window_first_and_still_reaches_every_match(proj, tmp_path, corpus,
                                                                                      monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    _ledgers(corpus, proj, other)
    ix = corpus.open()
    whole, run = _hits(ix, "ledger")
    assert len(whole) == 24 and run.ranked_of is None  # 24 candidates: at most the window, all ranked
    set_ranking(monkeypatch, ix, plan_window=5, plan_growth=2, fts_first_page=2)
    hits, run = _hits(ix, "ledger")
    # exactly the same matches, with the same scores (bm25 of the whole table)
    assert sorted((h.rowid, h.score) for h in hits) == sorted((h.rowid, h.score) for h in whole)
    assert run.ranked_of == 24 and run.ranked == 24  # every window was read
    ids = [h.rowid for h in hits]
    newest = sorted(ids, reverse=True)
    # windows of 5, 10, then the 9 left, newest first; each ranked among itself as the whole plan ranks
    for window in (newest[:5], newest[5:15], newest[15:]):
        part, ids = ids[:len(window)], ids[len(window):]
        assert set(part) == set(window)
        assert part == [h.rowid for h in whole if h.rowid in set(window)]
    assert "ranking" in run.gaps


def test_the_count_of_a_frequent_query_stops_at_its_cap(proj, tmp_path, corpus, monkeypatch):
    """ranked_of is counted up to plan_count_cap rows a word (or the first
    window, if larger): past it the envelope says so (ranked_of_more) and the
    gap says that each word is in more messages; the matches are the same."""
    other = tmp_path / "other"
    other.mkdir()
    _ledgers(corpus, proj, other)
    ix = corpus.open()
    whole, _ = _hits(ix, "ledger")
    set_ranking(monkeypatch, ix, plan_window=5, plan_growth=2, fts_first_page=2, plan_count_cap=6)
    hits, run = _hits(ix, "ledger")
    assert sorted(h.rowid for h in hits) == sorted(h.rowid for h in whole)  # 24: every match still read
    assert (run.ranked_of, run.ranked_of_more, run.ranked) == (6, True, 24)
    assert "more than 6 messages" in run.gaps["ranking"]
    env = ix.recall("ledger", all_projects=True, limit=5)
    assert (env.diagnostics.ranked_of, env.diagnostics.ranked_of_more) == (6, True) and env.diagnostics.ranked >= 5
    # a cap below the first window counts up to the window: 5 of more than 5
    set_ranking(monkeypatch, ix, plan_window=5, plan_growth=2, fts_first_page=2, plan_count_cap=1)
    env = ix.recall("ledger", all_projects=True, limit=5)
    assert (env.diagnostics.ranked_of, env.diagnostics.ranked_of_more) == (5, True)
    # a cap the count does not reach: the count itself, as without one
    set_ranking(monkeypatch, ix, plan_window=5, plan_growth=2, fts_first_page=2, plan_count_cap=24)
    env = ix.recall("ledger", all_projects=True, limit=5)
    assert (env.diagnostics.ranked_of, env.diagnostics.ranked_of_more) == (24, False)
    assert "of at most 24 candidates" in env.gaps["ranking"]


def test_a_window_is_ranked_a_page_at_a_time(proj, tmp_path, corpus, monkeypatch):
    """A window's ranking statement asks for the first page (a top-N sort),
    not for every candidate of the window joined and sorted: a caller that
    reads a few hits reads a page of each window it opens. The rest of a
    window comes only to a caller that reads on, in the same order."""
    other = tmp_path / "other"
    other.mkdir()
    _ledgers(corpus, proj, other)
    ix = corpus.open()
    whole, _ = _hits(ix, "ledger")
    set_ranking(monkeypatch, ix, plan_window=8, plan_growth=2, fts_first_page=2)
    asked: list[tuple[str, tuple]] = []

    def trace(cursor, sql, bindings):
        if "message_fts.rowid >= ?" in sql:
            asked.append((sql, tuple(bindings or ())))
        return True

    conn = ix.engine.retriever.conn
    conn.exec_trace = trace
    try:
        run = Run()
        hits = ix.engine.retriever.hits(ix.engine.tokenizer.parse("ledger"), Scope("all", "/"), run, first=2)
        first_two = [next(hits), next(hits)]
    finally:
        conn.exec_trace = None
    assert asked and all(sql.endswith("LIMIT ? OFFSET ?") and b[-2:] == (2, 0) for sql, b in asked)
    newest = set(sorted((h.rowid for h in whole), reverse=True)[:8])
    assert [h.rowid for h in first_two] == [h.rowid for h in whole if h.rowid in newest][:2]


def test_the_first_window_widens_until_it_holds_a_page_in_scope(proj, tmp_path, corpus, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    _ledgers(corpus, proj, other)
    ix = corpus.open()
    scope = Scope("project", str(other), None, (str(other),))
    # `other` holds the three oldest sessions: six candidates among the 24
    set_ranking(monkeypatch, ix, plan_window=2, plan_growth=2, plan_max_window=64, fts_first_page=4)
    hits, run = _hits(ix, "ledger", scope)
    # the 2, 4, 8, 16 newest hold none of them; 32 holds every candidate: all ranked at once
    assert len(hits) == 6 and (run.ranked, run.ranked_of, run.gaps) == (0, None, {})
    env = ix.recall("ledger", cwd=str(other), limit=5)
    assert (env.diagnostics.ranked, env.diagnostics.ranked_of) == (None, None) and "ranking" not in env.gaps
    # a window that may not grow past 8: the bound is reached with none of them in it, and the next
    # windows (16, then what is left) still bring every match
    set_ranking(monkeypatch, ix, plan_window=2, plan_growth=2, plan_max_window=8, fts_first_page=4)
    bounded, run = _hits(ix, "ledger", scope)
    assert sorted(h.rowid for h in bounded) == sorted(h.rowid for h in hits)
    assert (run.ranked, run.ranked_of) == (24, 24) and "ranking" in run.gaps
    env = ix.recall("ledger", cwd=str(other), limit=5)
    assert (env.diagnostics.ranked, env.diagnostics.ranked_of) == (24, 24) and "8 most recently" in env.gaps["ranking"]


def test_the_bound_of_a_query_is_read_from_the_index_counts(proj, corpus):
    corpus.session("a", proj).message("m1", "是的 是 ledger ledger").message("m2", "他是 ledger entry")
    corpus.session("b", proj).message("m1", "ledger entry 是否")
    ix = corpus.open()
    r = ix.engine.retriever
    parse = ix.engine.tokenizer.parse
    with ix.store.reader:
        assert r.candidates_bound(parse("ledger"), False) == 3  # exact for one token
        assert r.candidates_bound(parse("entry"), False) == 2
        assert r.candidates_bound(parse("ledger entry"), False) == 2
        assert r.candidates_bound(parse("ledger entry"), True) == 5
        assert r.candidates_bound(parse('"ledger entry"'), False) == 2
        # `是`*: one row list in the table's one-character prefix index, so
        # exact: the 3 rows that hold 是 (in 是的, 是, 他是 and 是否); summing
        # fts5vocab's rows of each token beginning with 是 counted 4
        assert r.candidates_bound(parse("是"), False) == 3
        assert r.candidates_bound(parse("是"), False, cap=2) == 2
        assert r.candidates_bound(parse("qzxjvkwy"), False) == 0
        # counted up to a cap: enough to tell whether the bound exceeds it
        assert r.candidates_bound(parse("ledger"), False, cap=2) == 2
        assert r.candidates_bound(parse("ledger entry"), True, cap=2) == 4
        assert r.candidates_bound(parse("ledger entry"), False, cap=10) == 2


def test_row_ids_follow_the_time_logs_were_written_in(proj, corpus, tmp_path):
    """A first pass reads new logs oldest first (by modification time), so
    row ids follow it across files; an append gets the newest ids."""
    logs = [corpus.session(f"s{i}", proj).message("m1", f"ledger {i}").message("m2", f"entry {i}") for i in range(4)]
    # path order s0..s3, written order s2, s0, s3, s1
    for when, i in enumerate((2, 0, 3, 1)):
        os.utime(logs[i].path, (1_700_000_000 + when * 100, 1_700_000_000 + when * 100))
    ix = corpus.open()
    c = ix.store.reader

    def ids(session: str) -> list[int]:
        return [i for (i,) in c.execute("SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session "
                                        "WHERE s.session_id = ? ORDER BY m.seq", (session,))]
    order = [ids(f"s{i}") for i in (2, 0, 3, 1)]
    assert [x for part in order for x in part] == sorted(x for part in order for x in part)
    logs[0].message("m3", "ledger appended")  # the second oldest log grows
    corpus.sync(ix)
    assert ids("s0")[-1] == max(i for (i,) in c.execute("SELECT id FROM messages"))
    # a rebuild (another tokenizer's index) reads the logs again, oldest first
    os.utime(logs[0].path, (1_700_000_050, 1_700_000_050))  # s0 back between s2 and s3
    with ix.store.atomic():
        ix.store.conn.execute("UPDATE meta SET value = '1' WHERE key = 'tokenizer_version'")
    assert corpus.sync(ix).rebuilt
    order = [ids(f"s{i}") for i in (2, 0, 3, 1)]
    assert [x for part in order for x in part] == sorted(x for part in order for x in part)
    assert len(ids("s0")) == 3
