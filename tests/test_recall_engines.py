"""How recall reads the index: the FTS statements (the ranked first page, the
joined query, the top-N sort), reading them in pieces equals reading them
whole, one snapshot while a writer commits, the indexes the statements use,
and the session scan with its prefilter."""

from __future__ import annotations

import contextlib
import datetime as dt
import math

import pytest

from session_recall import Index
from session_recall.query.gates import Scope
from session_recall.query.rank import Ranking
from session_recall.query.retrieve import Run, literal_prefilter
from tests.helpers import all_pages, anchors, set_ranking


@pytest.mark.parametrize("first_page", [1, 2, 5])
def test_a_term_query_read_in_two_fts_queries_equals_one(proj, corpus, monkeypatch, first_page):
    """A term query sorts only its best FTS_FIRST_PAGE candidates first and
    reads the rest from a second query when selection needs more (many hits
    in one turn, the per-session quota, a later page): the hits, their order
    and scores must be those of one query over every candidate."""
    heavy = corpus.session("heavy", proj, started_at="2026-11-01T08:00:00Z")
    for t in range(3):
        for m in range(4):  # hits that collapse into one passage per turn
            heavy.message(f"t{t}m{m}", "ledger " * (m + 1) + f"entry {t} {m}", turn_id=f"t{t}")
    for i in range(6):
        corpus.session(f"s{i}", proj).message("m1", f"the ledger was closed on day {i} " + "pad " * i)
    ix = corpus.open()

    def answers():
        out = []
        for limit in (1, 4, 10):
            pages = all_pages(ix, "ledger", cwd=str(proj), limit=limit)
            out.append([(a, r.score) for p in pages for a, r in zip(anchors(p), p.results)])
        return out

    set_ranking(monkeypatch, ix, fts_first_page=10**9)
    whole = answers()
    assert len(whole[-1]) == 9  # three turns of heavy, six other sessions
    set_ranking(monkeypatch, ix, fts_first_page=first_page)
    assert answers() == whole


@pytest.mark.parametrize("first_page", [1, 3])
def test_a_question_read_in_two_fts_queries_equals_one(proj, corpus, monkeypatch, first_page):
    """Question mode reads its candidates through a top-N sort of
    QUESTION_FIRST_PAGE and the rest from a second query: its answer (which
    messages, in which order, with which scores) is that of one query."""
    ranking = Ranking()
    for i in range(8):
        s = corpus.session(f"q{i}", proj, started_at=f"2026-11-0{i + 1}T08:00:00Z")
        s.message("m1", "the ledger " * (1 + i % 3) + f"was closed on day {i}")
        s.message("m2", "reconcile the ledger entries" if i % 2 else "nothing to see", role="assistant")
    ix = corpus.open()

    def answers():
        out = []
        for limit in (1, 4, 10):
            pages = [ix.recall(question="when was the ledger closed and reconciled?", cwd=str(proj), limit=limit)]
            while pages[-1].next_cursor:
                pages.append(ix.recall(question="when was the ledger closed and reconciled?", cwd=str(proj),
                                       limit=limit, cursor=pages[-1].next_cursor))
            out.append([(a, r.score, r.matched_terms) for p in pages for a, r in zip(anchors(p), p.results)])
        return out

    set_ranking(monkeypatch, ix, question_first_page=10**9)
    whole = answers()
    assert len(whole[-1]) == 8  # one passage per session: each turn holds both its messages
    set_ranking(monkeypatch, ix, question_first_page=first_page)
    with statements(ix) as seen:
        assert answers() == whole
    tops = [b[1] for sql, b in seen if fts_kind(sql) == "top"]
    page, growth = ranking.ranked_page, ranking.ranked_growth
    assert tops and {page * first_page, page * growth * first_page} >= set(tops)
    # some recall read on past its first page: the page again, larger, or the joined query
    assert max(tops) > ranking.ranked_page * first_page or any(fts_kind(sql) in ("page", "rest") for sql, _ in seen)


def test_no_fallback_scan_for_an_and_with_a_word_no_message_holds(proj, corpus):
    """`简历 qzxjvkwy`: the AND finds nothing, and the index vouches that no
    message holds `qzxjvkwy` (no candidate anywhere), so the CJK fallback
    does not scan the stored text for it; the partial matches are what they
    were. `简历 模板` (CJK only, both present but never together) still scans."""
    for i in range(5):
        corpus.session(f"s{i}", proj).message("m1", f"简历 draft {i}").message("m2", f"模板 number {i}")
    ix = corpus.open()

    def scans(seen) -> int:
        return sum("0.0 FROM messages WHERE session = ?" in sql for sql, _ in seen)  # _scan, per session

    with statements(ix) as seen:
        env = ix.recall("简历 qzxjvkwy", cwd=str(proj), limit=10)
    assert env.status == "partial" and len(env.results) == 5
    assert all(r.matched_terms == ["简历"] for r in env.results)
    assert scans(seen) == 0
    with statements(ix) as seen:
        env = ix.recall("简历 模板", cwd=str(proj), limit=10)
    assert env.status == "partial" and len(env.results) == 5  # a passage per turn: both its messages
    # The fallback served, and scanned nothing: an index cut by this
    # tokenizer holds every CJK match of every stored message.
    assert scans(seen) == 0


def test_the_cjk_fallback_scans_what_the_index_cannot_vouch_for(proj, corpus):
    """A zero-hit CJK query scans the stored text only where the index's
    tokens are not this tokenizer's (an index waiting for its rebuild):
    there, the five sessions; the scan finds the match the stale tokens miss."""
    for i in range(5):
        corpus.session(f"s{i}", proj).message("m1", f"简历 draft {i}")
    ix = corpus.open()
    env = ix.recall("简历模板", cwd=str(proj))
    d = env.diagnostics
    assert (env.status, d.engine, d.sessions_scanned, d.scan_budget) == ("no_match", "cjk-fallback", 0, 200)
    assert "scan" not in env.gaps
    # An index whose tokens are not those of its text (built by another
    # tokenizer, before the rebuild): the text says 简历模板, the tokens do not.
    with ix.store.atomic():
        ix.store.conn.execute("UPDATE meta SET value = '1' WHERE key = 'tokenizer_version'")
        ix.store.conn.execute("UPDATE messages SET text = '简历模板 draft' WHERE id = (SELECT min(id) FROM messages)")
    with statements(ix) as seen:
        env = ix.recall("简历模板", cwd=str(proj))
    assert (env.status, env.diagnostics.engine, env.diagnostics.sessions_scanned) == ("ok", "cjk-fallback", 5)
    assert sum("0.0 FROM messages WHERE session = ?" in sql for sql, _ in seen) == 5


@pytest.mark.parametrize("ranked_first", [True, False])
@pytest.mark.parametrize("settings", [{}, {"recency_half_life_days": 7}, {"pinned_cwds": ["PIN"]},
                                      {"recency_half_life_days": 3, "pinned_cwds": ["PIN"]}])
def test_the_first_page_and_the_rest_are_the_one_query(tmp_path, corpus, monkeypatch, settings, ranked_first):
    """The first page either starts from the best matches by plain bm25 and
    yields those it proves ahead of every other match (role weights of
    0.5-1), or goes straight to the top-N sort of the joined query (a narrow
    scope, or a re-rank: a recency boost, pinned sessions first); the rest
    come from one query past them. Across roles, lengths, ages, ties, scopes
    and page sizes, the rows must be those of one query over every match, in
    its order."""
    import random

    from session_recall.query.parse import fts_query

    ranked = ranked_first and not settings

    rng = random.Random(7)
    words = ["ledger", "entry", "closed", "ledger entry"] + [f"pad{i}" for i in range(30)]
    cwds = [tmp_path / name for name in ("pin", "a", "b")]
    now = dt.datetime.now(dt.timezone.utc)
    for i in range(24):
        s = corpus.session(f"s{i}", rng.choice(cwds))
        for m in range(rng.randint(3, 12)):
            ts = (now - dt.timedelta(days=rng.uniform(0, 30))).isoformat().replace("+00:00", "Z")
            s.message(f"m{m}", " ".join(rng.choices(words, k=rng.randint(1, 60))), turn_id=f"t{m // 2}", ts=ts,
                      role=rng.choice(["user", "assistant", "tool_call", "tool_result", "system"]))
    ties = corpus.session("ties", cwds[1])  # equal bm25: the newest first, whichever FTS5 takes
    for m in range(8):
        ties.message(f"m{m}", "ledger entry closed",
                     ts=(now - dt.timedelta(days=m % 3)).isoformat().replace("+00:00", "Z"))
    settings = {k: [str(cwds[0]) + "/"] if v == ["PIN"] else v for k, v in settings.items()}
    ix = corpus.open(**settings)
    set_ranking(monkeypatch, ix, ranked_first_share=0.0 if ranked_first else 2.0)
    engine = ix.engine
    scopes = [Scope("all", "/"), Scope("project", str(cwds[1])), Scope("project", str(cwds[0])),
              Scope("all", "/", session_id="ties")]
    proven = rests = 0
    for query in ["ledger", "entry", "closed", "ledger entry", "\"ledger entry\""]:
        expr = fts_query(engine.tokenizer.parse(query))
        for scope in scopes:
            scope_sql, params = engine.retriever.scope_sql(scope)
            with ix.store.reader:  # one snapshot, as recall reads
                whole = list(engine.retriever.fts(expr, scope_sql, params, Run(), first=None))
                assert whole
                for first in (1, 2, 5, 16, 10**6):
                    with statements(ix) as seen:
                        assert list(engine.retriever.fts(expr, scope_sql, params, Run(), first=first)) == whole
                    kinds = [fts_kind(sql) for sql, _ in seen if ranking_statement(sql)]
                    assert (kinds[0] == "top") == ranked
                    if first == 10**6:  # the first statement took every match: nothing more to read
                        assert kinds == ["top" if ranked else "page"]
                    proven += sum(b[-1] for sql, b in seen if fts_kind(sql) == "page")
                    rests += kinds.count("rest")
    assert rests > 0 and (proven > 0) == ranked  # rows proven by the ranked page, and the rest read


def test_the_ranked_page_serves_scopes_holding_half_the_sessions_and_grows_with_their_share(tmp_path, corpus):
    """With the default RANKED_FIRST_SHARE: all projects, and a project
    holding two thirds of the sessions, start from the ranked page, of
    RANKED_PAGE x 64 over the share; a project holding a third joins first
    (SQLite then scores only its matches); a re-rank always joins first."""
    ranking = Ranking()
    a, b = tmp_path / "a", tmp_path / "b"
    for i in range(9):
        corpus.session(f"s{i}", a if i < 3 else b).message("m1", f"the ledger of day {i}")
    ix = corpus.open()

    def first_statement(**kw):
        with statements(ix) as seen:
            assert len(ix.recall("ledger", limit=3, **kw).results) == 3
        kind, bindings = next((fts_kind(sql), b) for sql, b in seen if ranking_statement(sql))
        return kind, (bindings[1] if kind == "top" else None)

    assert first_statement(all_projects=True) == ("top", ranking.ranked_page * 64)
    assert first_statement(cwd=str(b)) == ("top", math.ceil(ranking.ranked_page * 64 * 9 / 6))
    assert first_statement(cwd=str(a)) == ("page", None)
    recent = corpus.open(recency_half_life_days=7)
    with statements(recent) as seen:
        recent.recall("ledger", all_projects=True, limit=3)
    assert [fts_kind(sql) for sql, _ in seen if ranking_statement(sql)] == ["page"]


def test_a_first_page_that_proves_too_little_goes_on_with_a_top_n_sort(proj, corpus, monkeypatch):
    """The best matches by plain bm25 are tool results (short, the term
    three times), weighted 0.5: a user message of a lower bm25 may outrank
    them, so the ranked page proves nothing; it is read again 8 times larger,
    and when that proves nothing either, the reading goes on with the joined
    query's top-N sort from the start, not with a sort of every match. The
    answer is the one the joined query gives alone."""
    ranking = Ranking()
    tools = corpus.session("tools", proj)
    for i in range(80):
        tools.message(f"r{i}", "ledger ledger ledger", role="tool_result", turn_id=f"t{i}")
    for i in range(6):
        corpus.session(f"u{i}", proj).message("m1", f"we closed the ledger on day {i} " + "pad " * i)
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=2)
    with statements(ix) as seen:
        env = ix.recall("ledger", cwd=str(proj), limit=4)
    fts = [(fts_kind(sql), b) for sql, b in seen if ranking_statement(sql)]
    assert [k for k, _ in fts][:3] == ["top", "top", "page"]
    assert [fts[0][1][1], fts[1][1][1]] == [ranking.ranked_page * 2, ranking.ranked_page * ranking.ranked_growth * 2]
    assert list(fts[2][1][-2:]) == [2, 0]  # LIMIT 2 OFFSET 0: none proven
    set_ranking(monkeypatch, ix, ranked_first_share=2.0)  # the joined query alone
    assert anchors(ix.recall("ledger", cwd=str(proj), limit=4)) == anchors(env)


def ranking_statement(sql: str) -> bool:
    """Whether `sql` is one of Retriever.fts's statements, not a count of
    the plan by match count (Retriever.candidates_bound, windowed)."""
    return "message_fts MATCH" in sql and not sql.startswith(("SELECT count(*) FROM (SELECT 1 FROM message_fts",
                                                             "SELECT min(rowid), count(*)"))


def fts_kind(sql: str) -> str:
    """Which of Retriever.fts's statements `sql` is."""
    if sql.startswith("WITH top"):
        return "top"  # the best matches by plain bm25, ranked
    if sql.endswith("LIMIT ? OFFSET ?"):
        return "page"  # a top-N sort of the joined query
    if sql.endswith("LIMIT -1 OFFSET ?"):
        return "rest"
    return "one"  # every match, in one query


@contextlib.contextmanager
def statements(ix: Index, on_statement=None):
    """The (sql, bindings) of every statement the index's connections (the
    write path's and the queries') run inside the block; `on_statement(sql)`
    is called before each runs."""
    seen: list[tuple[str, tuple]] = []

    def trace(cursor, sql, bindings):
        seen.append((sql, bindings))
        if on_statement:
            on_statement(sql)
        return True

    ix.store.conn.exec_trace = ix.store.reader.exec_trace = trace
    try:
        yield seen
    finally:
        ix.store.conn.exec_trace = ix.store.reader.exec_trace = None


def test_a_term_query_reads_past_its_first_fts_page_only_when_selection_needs_it(proj, corpus, monkeypatch):
    for i in range(6):
        corpus.session(f"s{i}", proj).message("m1", f"the ledger of day {i} " + "pad " * i)
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=1)
    # The ranked page takes the best 4 of the 6 matches and proves the 3 that
    # score below the 4th; limit 5 needs all 6 (one more than the limit): the
    # page again, 8 times larger, takes them all.
    for limit, queries in ((1, ["top"]), (5, ["top", "top"])):
        with statements(ix) as seen:
            env = ix.recall("ledger", cwd=str(proj), limit=limit)
        assert [fts_kind(sql) for sql, _ in seen if ranking_statement(sql)] == queries
        assert len(env.results) == limit


def test_a_recall_reads_one_snapshot_while_a_writer_commits(proj, corpus, monkeypatch):
    """Between recall's first FTS page and the rest, another process commits
    a matching message: the rest must come from the snapshot the first page
    saw, or the two queries would not add up to one (a row read twice, or
    one that the first page's order never had)."""
    for i in range(6):
        corpus.session(f"s{i}", proj).message("m1", f"the ledger of day {i}")
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=1)  # the ranked page takes 4 of the 6
    before = anchors(ix.recall("ledger", cwd=str(proj), limit=10))
    assert len(before) == 6
    late = corpus.session("late", proj)
    late.message("m1", "a ledger entry written while recall reads, " + "long padding " * 30)
    written = []
    fts = []

    def write_between_the_pages(sql: str) -> None:
        if ranking_statement(sql):
            fts.append(sql)
            if len(fts) == 2:  # the ranked page read again, larger
                with Index.open(corpus.db) as writer:
                    written.append(corpus.sync(writer).messages_added)

    with statements(ix, write_between_the_pages):
        during = anchors(ix.recall("ledger", cwd=str(proj), limit=10))
    assert written == [1]
    assert during == before
    assert len(anchors(ix.recall("ledger", cwd=str(proj), limit=10))) == 7  # the next recall sees it


@pytest.mark.parametrize("query, statement, index", [
    ("ledger", "message_fts MATCH", "COVERING INDEX messages_rank"),  # ranking the matches
    # the scans' session order (a term of symbols alone, which the index cannot represent)
    ("->", "SELECT s.id FROM sessions s", "COVERING INDEX messages_recency"),
])
def test_recall_reads_through_its_indexes(proj, corpus, query, statement, index):
    for i in range(3):
        corpus.session(f"s{i}", proj).message("m1", f"the ledger of day {i}")
    ix = corpus.open()
    with statements(ix) as seen:
        ix.recall(query, cwd=str(proj), limit=5)
    runs = [(sql, b) for sql, b in seen if statement in sql and (query != "ledger" or ranking_statement(sql))]
    assert runs
    for sql, bindings in runs:
        plan = " / ".join(row[3] for row in ix.store.reader.execute("EXPLAIN QUERY PLAN " + sql, bindings))
        assert index in plan, plan


def scanned(ix, query: str):
    """The scan's prefilter (retrieve.literal_prefilter) for `query`, the
    messages it lets through in every session, and those verification then
    finds among them (message ids, sorted)."""
    retriever = ix.engine.retriever
    terms = ix.engine.tokenizer.parse(query)
    literal = literal_prefilter(terms, any_term=False)
    scope_sql, params = retriever.scope_sql(Scope("all", "/"))
    names = dict(ix.store.conn.execute("SELECT id, message_id FROM messages"))
    passed = sorted(names[row[0]] for row in retriever.scan(scope_sql, params, Run(), literal))
    hits = retriever.verify(retriever.scan(scope_sql, params, Run(), literal), terms, need_all=True, run=Run())
    return literal, passed, sorted(names[h.rowid] for h in hits)


def test_a_scan_folds_only_rows_holding_a_form_of_each_character(proj, corpus):
    """The scan's prefilter (retrieve.literal_prefilter): a character that others fold to
    (金 from ⾦, 金, ㈮ and ㊎) is looked for in each of its forms on a row's
    raw text before anything is folded. What passes holds the term in some
    form, and verification then finds exactly the messages whose fold holds it."""
    texts = {"m1": "合计\u2fa6額 100", "m2": "金额 200", "m3": "\u322e曜日", "m4": "a pasted \uf90a",
             "m5": "nothing here", "m6": "全额 300"}
    s = corpus.session("s1", proj)
    for mid, text in texts.items():
        s.message(mid, text, turn_id=mid)
    literal, passed, hits = scanned(corpus.open(), "金")
    assert literal.sql() == ("", [])  # no character of one form: nothing for SQLite to test
    assert passed == ["m1", "m2", "m3", "m4"]
    assert hits == passed


def test_a_scan_folds_only_rows_holding_two_ideographs_side_by_side_or_another_form(proj, corpus):
    """Two ideographs side by side in a term (fold.literal_pairs): a row must
    hold them side by side, or another form of one of them, before it is
    folded; a row holding both apart is not folded at all."""
    texts = {"m1": "人地 text", "m2": "\u2f08地", "m3": "人\u0301地", "m4": "地人", "m5": "人 和 地",
             "m6": "the 人\u319e", "m7": "nothing"}
    s = corpus.session("s1", proj)
    for mid, text in texts.items():
        s.message(mid, text, turn_id=mid)
    # the pair in an attachment's name only, then apart in both the text and a name
    s.message("m8", "see the file", turn_id="m8", attachments=[{"id": "a1", "name": "人地.txt", "bytes": 9}])
    s.message("m9", "人, 地", turn_id="m9", attachments=[{"id": "a2", "name": "人 地.txt", "bytes": 9}])
    literal, passed, hits = scanned(corpus.open(), "人地")
    assert literal.per_term == [[("人地", "\u2f08", "\u319f", "\u319e"), ("地", "\u319e"),
                                 ("人", "\u2f08", "\u319f")]]
    assert passed == ["m1", "m2", "m6", "m8"]
    assert hits == passed


def test_only_a_scan_works_out_the_scan_prefilter(proj, corpus, monkeypatch):
    """The prefilter's table of forms (fold.literal_forms; about 0.2 s to build
    in a new process) is worked out when a query scans, never for one the
    index answers: an MCP server's first recall does not pay for it."""
    from session_recall.query import retrieve

    s = corpus.session("s1", proj)
    s.message("m1", "call price->round() in 简历")
    ix = corpus.open()
    asked: list[str] = []
    real = retrieve.literal_forms
    monkeypatch.setattr(retrieve, "literal_forms", lambda term: asked.append(term) or real(term))
    assert ix.recall("price 简历", cwd=str(proj)).diagnostics.engine == "fts"
    assert asked == []
    assert ix.recall("->", cwd=str(proj)).diagnostics.engine == "session-scan"
    assert asked == ["->"]


def test_a_symbols_only_term_is_answered_by_the_session_scan(proj, corpus):
    for i in range(4):
        s = corpus.session(f"s{i}", proj, started_at=f"2026-11-{10 + i}T08:00:00Z")
        s.message("m1", f"call price->round() in step {i}")
        s.message("m2", "nothing to see", turn_id="t2")
    ix = corpus.open()
    env = ix.recall("->", cwd=str(proj), limit=10)
    assert env.status == "ok"
    assert env.diagnostics.engine == "session-scan"
    assert env.diagnostics.sessions_scanned == 4 and env.diagnostics.scan_budget == 200
    assert "scan" not in env.gaps
    assert [r.session_id for r in env.results] == ["s3", "s2", "s1", "s0"]  # most recent first
    tight = corpus.open(scan_budget_sessions=2)
    env = tight.recall("->", cwd=str(proj), limit=10)
    assert env.diagnostics.engine == "session-scan"
    assert env.diagnostics.sessions_scanned == 2 and env.diagnostics.scan_budget == 2
    assert [r.session_id for r in env.results] == ["s3", "s2"]
    assert "scan" in env.gaps and "2" in env.gaps["scan"]
    # an indexed query says fts and scans nothing
    env = tight.recall("price", cwd=str(proj), limit=10)
    assert env.diagnostics.engine == "fts" and env.diagnostics.sessions_scanned == 0
    assert env.diagnostics.scan_budget == 0 and env.gaps == {}
