"""Recall end to end (contract sections 4, 5, 7, 8 and 9): real canonical logs,
a real index, the public API `Index.recall` / `Index.recall_more`, and the
`recall` command in a subprocess.

Failures are hinted envelopes with distinct statuses; pages are disjoint and
in order; the per-session quota and its second pass; passages, their budgets
and materials; partial matches; questions in Chinese and English; role
weights, ties and the optional re-ranks; the session scan and its budget;
redaction in both output modes, and no secret in any output."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import math
import re
from collections import Counter

import pytest

from session_recall import Index
from session_recall.model import Envelope
from session_recall.query import passages as P
from session_recall.query.gates import Scope
from session_recall.query.rank import Ranking
from session_recall.query.retrieve import Run, literal_prefilter
from session_recall.text.redact import KINDS, find_secret
from tests.secret_samples import SECRETS

# One sample per secret kind of the redactor (tests/secret_samples.py): (text
# to plant, the secret itself, which must never come out).


def test_every_secret_kind_has_a_sample():
    assert set(SECRETS) == set(KINDS)
    for kind, (text, _) in SECRETS.items():
        assert find_secret(text) == kind, kind


# --- helpers ----------------------------------------------------------------------


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


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


# --- failures are hinted envelopes ------------------------------------------------


def test_every_failure_class_has_its_own_status_and_a_hint(tmp_path, proj, corpus):
    from conftest import Corpus

    s = corpus.session("s1", proj, title="Fonts")
    s.say("m1", "Which font for the résumé?")
    s.say("m2", "Garamond, at 11 pt.", role="assistant")
    ix = corpus.open()
    void = Corpus(tmp_path / "void")  # an index that holds nothing
    try:
        empty = void.open()
        denied = corpus.open(all_projects="deny")
        page = ix.recall("font", cwd=str(proj), limit=1)
        s.say("m3", "Another font: Inter.", role="assistant", turn="t2")
        assert page.next_cursor is None  # one hit turn: no second page, so make a cursor elsewhere
        s2 = corpus.session("s2", proj)
        s2.say("m1", "font sizes again", turn="a")
        s2.say("m2", "font weights", turn="b")
        corpus.sync(ix)
        first = ix.recall("font", cwd=str(proj), limit=1)
        assert first.next_cursor
        failures = {
            "empty_query": ix.recall("", cwd=str(proj)),
            "empty_index": empty.recall("font", cwd=str(proj)),
            "refused": ix.recall("sk-ant-api03-Zq8xVw2LmN4pRt6y", cwd=str(proj)),
            "denied": denied.recall("font", cwd=str(proj), all_projects=True),
            "unknown_session": ix.recall("font", cwd=str(proj), session_id="no-such-session"),
            "unknown_anchor": ix.recall_more("no-such-anchor", cwd=str(proj)),
            "stale_cursor": ix.recall("garamond", cwd=str(proj), limit=1, cursor=first.next_cursor),
        }
        no_match = ix.recall("typewriter", cwd=str(proj))
    finally:
        void.close()
    for status, env in failures.items():
        assert env.status == status, (status, env.status, env.hint)
        assert env.results == [] and env.next_cursor is None, status
        assert env.hint.strip() and "Traceback" not in env.hint, status
        assert Envelope.model_validate_json(env.model_dump_json()) == env
    assert len({env.status for env in failures.values()}) == len(failures)
    # an empty answer and an unsearched corpus are distinguishable
    assert no_match.status == "no_match" and no_match.results == []
    assert no_match.status not in {env.status for env in failures.values()}
    assert no_match.hint != failures["empty_index"].hint
    assert "index" in failures["empty_index"].hint.lower()


@pytest.mark.parametrize("query", ["", "   ", '""', '" "', "\t\n"])
def test_an_empty_query_without_a_question_asks_for_one(proj, corpus, query):
    corpus.session("s1", proj).say("m1", "anything")
    env = corpus.open().recall(query, cwd=str(proj))
    assert env.status == "empty_query" and env.results == [] and env.hint


def test_a_project_with_nothing_indexed_says_so(tmp_path, proj, corpus):
    """No session of the caller's project is indexed: not the same as `we
    searched your sessions and found nothing`."""
    corpus.session("s1", proj).say("m1", "font talk")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ix = corpus.open()
    searched = ix.recall("typewriter", cwd=str(proj))
    unsearched = ix.recall("font", cwd=str(elsewhere))
    assert searched.status == unsearched.status == "no_match"
    assert "scope" not in searched.gaps
    assert "scope" in unsearched.gaps
    assert "no session" in unsearched.hint.lower() and unsearched.hint != searched.hint


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_credential_shaped_query_is_refused_before_any_corpus_is_touched(proj, corpus, kind):
    sample, fragment = SECRETS[kind]
    corpus.session("s1", proj).say("m1", f"we deployed with {sample}")
    ix = corpus.open()
    statements: list[str] = []

    def trace(cursor, sql, bindings):
        statements.append(sql)
        return True

    ix.store.conn.exec_trace = ix.store.reader.exec_trace = trace  # the write path and the queries'
    try:
        envs = [ix.recall(sample, cwd=str(proj)), ix.recall(f"deployed {sample}", cwd=str(proj)),
                ix.recall("", question=f"what was {sample} for?", cwd=str(proj)),
                ix.recall(sample, cwd=str(proj), all_projects=True)]
    finally:
        ix.store.conn.exec_trace = ix.store.reader.exec_trace = None
    touched = [q for q in statements if "messages" in q or "message_fts" in q or "sessions" in q]
    assert touched == [], touched
    for env in envs:
        assert env.status == "refused" and env.results == [] and env.hint
        assert kind in env.hint
        out = env.model_dump_json()
        assert fragment not in out and sample not in out


def test_an_unknown_session_is_a_hint(proj, corpus):
    corpus.session("s1", proj).say("m1", "font")
    env = corpus.open().recall("font", cwd=str(proj), session_id="s9")
    assert env.status == "unknown_session" and "s9" in env.hint and env.results == []


def test_cursors_of_another_query_or_garbage_are_stale(proj, corpus):
    for i in range(6):
        corpus.session(f"s{i}", proj).say("m1", f"invoice number {i} and receipt")
    ix = corpus.open()
    first = ix.recall("invoice", cwd=str(proj), limit=2)
    assert first.next_cursor
    for kw in ({"query": "receipt"}, {"query": "invoice", "limit": 3}, {"query": "invoice", "all_projects": True},
               {"query": "invoice", "session_id": "s1"}, {"query": "invoice", "question": "which invoice?"}):
        q = kw.pop("query")
        env = ix.recall(q, cwd=str(proj), **{"limit": 2, **kw}, cursor=first.next_cursor)
        assert env.status == "stale_cursor" and env.results == [] and env.hint, kw
    for garbage in ("x", "!!!", "eyJrIjoxfQ", "bm90IGpzb24"):
        env = ix.recall("invoice", cwd=str(proj), limit=2, cursor=garbage)
        assert env.status == "stale_cursor" and env.results == [], garbage
    # the right cursor pages
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "ok"


def test_a_cursor_made_before_a_sync_added_messages_is_stale(proj, corpus):
    sessions = [corpus.session(f"s{i}", proj) for i in range(5)]
    for i, s in enumerate(sessions):
        s.say("m1", f"invoice {i}")
    ix = corpus.open()
    first = ix.recall("invoice", cwd=str(proj), limit=2)
    assert ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor).status == "ok"
    sessions[0].say("m2", "a new invoice arrived", turn="t2")
    corpus.sync(ix)
    env = ix.recall("invoice", cwd=str(proj), limit=2, cursor=first.next_cursor)
    assert env.status == "stale_cursor" and env.results == []
    assert "without a cursor" in env.hint
    # repeating the query pages the new state
    pages = all_pages(ix, "invoice", cwd=str(proj), limit=2)
    assert sum(len(p.results) for p in pages) == 6


# --- paging and the per-session quota -------------------------------------------------


def test_pages_are_disjoint_and_in_the_order_of_one_big_page(proj, corpus):
    """Each session holds at most ceil(limit/3) hits, so the quota does not
    bind and one big page is the same ranking."""
    for i in range(11):
        s = corpus.session(f"s{i:02d}", proj, started_at=f"2026-10-{i + 1:02d}T08:00:00Z")
        s.say("m1", "invoice " + "filler " * (i % 4) + f"number {i}", turn="t1")
        if i % 3 == 0:
            s.say("m2", "invoice invoice " + "other " * i, turn="t2")
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


@pytest.mark.parametrize("first_page", [1, 2, 5])
def test_a_term_query_read_in_two_fts_queries_equals_one(proj, corpus, monkeypatch, first_page):
    """A term query sorts only its best FTS_FIRST_PAGE candidates first and
    reads the rest from a second query when selection needs more (many hits
    in one turn, the per-session quota, a later page): the hits, their order
    and scores must be those of one query over every candidate."""
    heavy = corpus.session("heavy", proj, started_at="2026-11-01T08:00:00Z")
    for t in range(3):
        for m in range(4):  # hits that collapse into one passage per turn
            heavy.say(f"t{t}m{m}", "ledger " * (m + 1) + f"entry {t} {m}", turn=f"t{t}")
    for i in range(6):
        corpus.session(f"s{i}", proj).say("m1", f"the ledger was closed on day {i} " + "pad " * i)
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
        s.say("m1", "the ledger " * (1 + i % 3) + f"was closed on day {i}")
        s.say("m2", "reconcile the ledger entries" if i % 2 else "nothing to see", role="assistant")
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
        corpus.session(f"s{i}", proj).say("m1", f"简历 draft {i}").say("m2", f"模板 number {i}")
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
    assert scans(seen) == 5  # the fallback visited the five sessions


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
            s.say(f"m{m}", " ".join(rng.choices(words, k=rng.randint(1, 60))), turn=f"t{m // 2}", ts=ts,
                  role=rng.choice(["user", "assistant", "tool_call", "tool_result", "system"]))
    ties = corpus.session("ties", cwds[1])  # equal bm25: the newest first, whichever FTS5 takes
    for m in range(8):
        ties.say(f"m{m}", "ledger entry closed", ts=(now - dt.timedelta(days=m % 3)).isoformat().replace("+00:00", "Z"))
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
                    kinds = [fts_kind(sql) for sql, _ in seen if "message_fts MATCH" in sql]
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
        corpus.session(f"s{i}", a if i < 3 else b).say("m1", f"the ledger of day {i}")
    ix = corpus.open()

    def first_statement(**kw):
        with statements(ix) as seen:
            assert len(ix.recall("ledger", limit=3, **kw).results) == 3
        kind, bindings = next((fts_kind(sql), b) for sql, b in seen if "message_fts MATCH" in sql)
        return kind, (bindings[1] if kind == "top" else None)

    assert first_statement(all_projects=True) == ("top", ranking.ranked_page * 64)
    assert first_statement(cwd=str(b)) == ("top", math.ceil(ranking.ranked_page * 64 * 9 / 6))
    assert first_statement(cwd=str(a)) == ("page", None)
    recent = corpus.open(recency_half_life_days=7)
    with statements(recent) as seen:
        recent.recall("ledger", all_projects=True, limit=3)
    assert [fts_kind(sql) for sql, _ in seen if "message_fts MATCH" in sql] == ["page"]


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
        tools.say(f"r{i}", "ledger ledger ledger", role="tool_result", turn=f"t{i}")
    for i in range(6):
        corpus.session(f"u{i}", proj).say("m1", f"we closed the ledger on day {i} " + "pad " * i)
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=2)
    with statements(ix) as seen:
        env = ix.recall("ledger", cwd=str(proj), limit=4)
    fts = [(fts_kind(sql), b) for sql, b in seen if "message_fts MATCH" in sql]
    assert [k for k, _ in fts][:3] == ["top", "top", "page"]
    assert [fts[0][1][1], fts[1][1][1]] == [ranking.ranked_page * 2, ranking.ranked_page * ranking.ranked_growth * 2]
    assert list(fts[2][1][-2:]) == [2, 0]  # LIMIT 2 OFFSET 0: none proven
    set_ranking(monkeypatch, ix, ranked_first_share=2.0)  # the joined query alone
    assert anchors(ix.recall("ledger", cwd=str(proj), limit=4)) == anchors(env)


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
        corpus.session(f"s{i}", proj).say("m1", f"the ledger of day {i} " + "pad " * i)
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=1)
    # The ranked page takes the best 4 of the 6 matches and proves the 3 that
    # score below the 4th; limit 5 needs all 6 (one more than the limit): the
    # page again, 8 times larger, takes them all.
    for limit, queries in ((1, ["top"]), (5, ["top", "top"])):
        with statements(ix) as seen:
            env = ix.recall("ledger", cwd=str(proj), limit=limit)
        assert [fts_kind(sql) for sql, _ in seen if "message_fts MATCH" in sql] == queries
        assert len(env.results) == limit


def test_a_recall_reads_one_snapshot_while_a_writer_commits(proj, corpus, monkeypatch):
    """Between recall's first FTS page and the rest, another process commits
    a matching message: the rest must come from the snapshot the first page
    saw, or the two queries would not add up to one (a row read twice, or
    one that the first page's order never had)."""
    for i in range(6):
        corpus.session(f"s{i}", proj).say("m1", f"the ledger of day {i}")
    ix = corpus.open()
    set_ranking(monkeypatch, ix, fts_first_page=1)  # the ranked page takes 4 of the 6
    before = anchors(ix.recall("ledger", cwd=str(proj), limit=10))
    assert len(before) == 6
    late = corpus.session("late", proj)
    late.say("m1", "a ledger entry written while recall reads, " + "long padding " * 30)
    written = []
    fts = []

    def write_between_the_pages(sql: str) -> None:
        if "message_fts MATCH" in sql:
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
    ("㐂㐄", "SELECT s.id FROM sessions s", "COVERING INDEX messages_recency"),  # the scans' session order
])
def test_recall_reads_through_its_indexes(proj, corpus, query, statement, index):
    for i in range(3):
        corpus.session(f"s{i}", proj).say("m1", f"the ledger of day {i}")
    ix = corpus.open()
    with statements(ix) as seen:
        ix.recall(query, cwd=str(proj), limit=5)
    runs = [(sql, b) for sql, b in seen if statement in sql]
    assert runs
    for sql, bindings in runs:
        plan = " / ".join(row[3] for row in ix.store.reader.execute("EXPLAIN QUERY PLAN " + sql, bindings))
        assert index in plan, plan


def test_paging_covers_every_hit_once_when_the_quota_binds(proj, corpus):
    heavy = corpus.session("heavy", proj, started_at="2026-11-01T08:00:00Z")
    for t in range(8):
        heavy.say(f"m{t}", "receipt", turn=f"t{t}")  # short: scores best
    for i in range(3):
        corpus.session(f"light{i}", proj).say("m1", "the receipt was lost somewhere in the mail " * 3)
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
        a.say(f"m{t}", "quota", turn=f"t{t}")  # the strongest hits
    for name in ("b", "c"):
        s = corpus.session(name, proj, started_at="2026-11-01T08:00:00Z")
        for t in range(5):
            s.say(f"m{t}", "a long message that mentions the quota only once among many words", turn=f"t{t}")
    ix = corpus.open()
    env = ix.recall("quota", cwd=str(proj), limit=limit)
    per = Counter(r.session_id for r in env.results)
    assert len(env.results) == limit
    assert max(per.values()) <= math.ceil(limit / 3), per
    assert env.results[0].session_id == "a"


def test_the_second_pass_fills_unused_slots(proj, corpus):
    a = corpus.session("a", proj)
    for t in range(10):
        a.say(f"m{t}", "quota", turn=f"t{t}")
    ix = corpus.open()
    env = ix.recall("quota", cwd=str(proj), limit=6)
    assert [r.session_id for r in env.results] == ["a"] * 6  # only one session matches
    b = corpus.session("b", proj)
    b.say("m1", "quota mentioned once in a much longer message about other things", turn="t1")
    corpus.sync(ix)
    env = ix.recall("quota", cwd=str(proj), limit=6)
    per = Counter(r.session_id for r in env.results)
    assert per == {"a": 5, "b": 1}  # b's one passage, and a fills the rest
    assert len(set(anchors(env))) == 6


# --- passages ---------------------------------------------------------------------------


def test_hits_in_one_turn_collapse_into_one_passage(proj, corpus):
    s = corpus.session("s1", proj)
    s.say("u1", "Which font should the résumé use?", turn="t1")
    s.say("c1", '{"command": "fc-list :family"}', role="tool_call", tool_name="Bash", turn="t1")
    s.say("r1", "DejaVu Sans\nNoto Serif\nInter", role="tool_result", turn="t1")
    s.say("a1", "The font is Garamond, the others look too plain.", role="assistant", turn="t1")
    s.say("u2", "Thanks! And the colour?", turn="t2")
    s.say("a2", "A dark blue for the headings; the font stays.", role="assistant", turn="t2")
    ix = corpus.open()
    env = ix.recall("font", cwd=str(proj))
    assert len(env.results) == 2  # two turns, two passages
    by_turn = {r.passage.turn_id: r.passage for r in env.results}
    p1 = by_turn["t1"]
    assert [m.message_id for m in p1.messages] == ["u1", "c1", "a1"]  # the tool_result is no hit: left out
    assert [m.is_hit for m in p1.messages] == [True, False, True]
    assert sum(m.is_anchor for m in p1.messages) == 1
    assert all(m.is_hit for m in p1.messages if m.is_anchor)
    p2 = by_turn["t2"]
    assert [(m.message_id, m.is_hit) for m in p2.messages] == [("u2", False), ("a2", True)]


def test_a_tool_result_enters_only_as_a_hit_and_hard_truncated(proj, corpus):
    log = "\n".join(f"line {i}: ok" for i in range(20000))
    s = corpus.session("s1", proj)
    s.say("u1", "Run the test suite and look for the segfault.", turn="t1")
    s.say("c1", '{"command": "pytest -x"}', role="tool_call", tool_name="Bash", turn="t1")
    s.say("r1", log + "\nFatal: segfault in parser.c:212\n" + log, role="tool_result", turn="t1")
    s.say("r2", log, role="tool_result", turn="t1")  # no hit: never shown
    s.say("a1", "The segfault is in parser.c, line 212.", role="assistant", turn="t1")
    s2 = corpus.session("s2", proj)
    s2.say("r9", log + "\nonly-here: stacktrace-7731\n" + log, role="tool_result", turn="t1")
    ix = corpus.open()
    env = ix.recall("segfault", cwd=str(proj))
    assert len(env.results) == 1
    msgs = {m.message_id: m for m in env.results[0].passage.messages}
    assert "r2" not in msgs
    r1 = msgs["r1"]
    assert r1.is_hit and r1.truncated
    assert len(r1.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES
    assert "segfault" in r1.text  # cut around the hit
    # a tool_result as the anchor, and widened: still hard-truncated
    env = ix.recall("stacktrace-7731", cwd=str(proj))
    (r,) = env.results
    (m,) = r.passage.messages
    assert m.is_anchor and m.role == "tool_result" and m.truncated
    assert len(m.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES and "stacktrace-7731" in m.text
    more = ix.recall_more(r.passage.anchor_id, cwd=str(proj))
    for m in more.results[0].passage.messages:
        if m.role == "tool_result":
            assert len(m.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES
    widened = ix.recall_more(ix.recall("segfault", cwd=str(proj)).results[0].passage.anchor_id, cwd=str(proj))
    ids = [m.message_id for m in widened.results[0].passage.messages]
    assert "r2" not in ids and "u1" in ids and "a1" in ids


def test_passage_and_response_budgets_hold_on_huge_messages(proj, corpus):
    filler = "lorem ipsum " * 2500  # 30 KB, twenty times the budget of a hit
    for i in range(12):
        s = corpus.session(f"s{i:02d}", proj)
        for j in range(6):
            s.say(f"m{j}", f"budget {filler}", role="assistant" if j % 2 else "user", turn="t1")
        s.say("short", "budget", role="assistant", turn="t1")  # the best hit, in the middle of the turn
        for j in range(6, 9):
            s.say(f"m{j}", f"budget {filler}", role="assistant", turn="t1")
    ix = corpus.open()
    env = ix.recall("budget", cwd=str(proj), limit=12)
    assert env.status == "ok" and env.results
    for r in env.results:
        assert passage_bytes(r) <= P.PASSAGE_BYTES, passage_bytes(r)
        for m in r.passage.messages:
            limit = P.HIT_BYTES if m.is_hit else P.NEIGHBOUR_BYTES
            assert len(m.text.encode("utf-8")) <= limit
            assert m.text == "" or "budget" in m.text.casefold() or not m.is_hit
    total = sum(passage_bytes(r) for r in env.results)
    assert total <= P.RESPONSE_BYTES
    assert len(env.results) < 12 and "response_budget" in env.gaps and env.next_cursor
    rest = all_pages(ix, "budget", cwd=str(proj), limit=12, cursor=env.next_cursor)
    seen = anchors(env) + [a for p in rest for a in anchors(p)]
    assert len(seen) == len(set(seen)) == 12
    for p in rest:
        assert sum(passage_bytes(r) for r in p.results) <= P.RESPONSE_BYTES
    more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj))
    assert passage_bytes(more.results[0]) <= P.MORE_PASSAGE_BYTES
    assert len(json.dumps(more.model_dump())) < 4 * P.MORE_PASSAGE_BYTES


@pytest.mark.parametrize(
    ("query", "question", "planted", "seen"),
    [
        ("garamond", None, "we chose GARAMOND for the body", "GARAMOND"),
        ("font", None, "the ＦＯＮＴ is garamond", "ＦＯＮＴ"),  # full-width in the text
        ('"source serif"', None, "we chose Source\n   Serif for the body", "Serif"),  # a phrase over a line break
        ("strasse", None, "the office in the Große Straße was closed", "Straße"),  # ß folds to ss
        ("", "我们选了什么字体？", "最后我们选了思源宋体作为正文字体", "字体"),  # question mode
    ],
)
def test_a_long_message_is_cut_around_its_hit(proj, corpus, query, question, planted, seen):
    filler = "ß lorem ipsum dolor " * 800  # 16 KB, with a character whose folding is longer
    corpus.session("s1", proj).say("m1", f"{filler} {planted} {filler}", role="assistant")
    ix = corpus.open()
    env = ix.recall(query, question=question, cwd=str(proj))
    assert env.status == "ok", env.hint
    (m,) = env.results[0].passage.messages
    assert m.truncated and len(m.text.encode("utf-8")) <= P.HIT_BYTES
    assert seen in m.text


def test_materials(proj, corpus, tmp_path):
    def att(i, name, mime, size=1000):
        return {"id": f"att_{i}", "name": name, "mime_type": mime, "bytes": size}

    atts = [
        att(1, "screenshot.png", "image/png"),
        att(2, "notes.txt", "text/plain"),
        att(3, "invoice.pdf", "application/pdf"),
        att(4, "dump.bin", "application/octet-stream"),
        {"id": "bad id with spaces", "name": "x", "mime_type": "image/png", "bytes": 1},  # malformed
        {"name": "no-id.png", "mime_type": "image/png", "bytes": 1},  # malformed
        att(5, "config.json", "application/json"),
        {"id": "att_x", "name": "neg.png", "mime_type": "image/png", "bytes": -5},  # malformed
        att(6, "photo.JPG", "IMAGE/JPEG"),
        att(7, "archive.zip", "application/zip"),
        att(8, "readme.md", "text/markdown"),
        att(9, "ninth.png", "image/png"),
        att(10, "tenth.png", "image/png"),
    ]
    s = corpus.session("sess-1", proj)
    s.say("m1", "here are the materials for the layout", attachments=atts)
    s.say("m2", "", attachments=[att(11, "checkout-bug.png", "image/png")], turn="t2")  # a pasted screenshot
    other = tmp_path / "other"
    other.mkdir()
    # the same session id in another project
    corpus.session("sess-1", other).say("m1", "materials elsewhere", attachments=[att(1, "theirs.png", "image/png")])
    ix = corpus.open()

    env = ix.recall("materials", cwd=str(proj), caller_session="sess-1")
    (msg,) = env.results[0].passage.messages
    mats = msg.materials
    assert [m.name for m in mats] == ["screenshot.png", "notes.txt", "invoice.pdf", "dump.bin", "config.json",
                                      "photo.JPG", "archive.zip", "readme.md"]  # 8, counted after filtering
    kinds = {m.name: m.kind for m in mats}
    assert kinds == {"screenshot.png": "image", "notes.txt": "text", "invoice.pdf": "pdf", "dump.bin": "binary",
                     "config.json": "text", "photo.JPG": "image", "archive.zip": "binary", "readme.md": "text"}
    for m in mats:
        assert m.name and m.mime_type and m.bytes == 1000
        if m.kind in ("image", "text"):
            assert m.resource and "sess-1" in m.resource
        else:
            assert m.resource is None, m
    assert "null" not in json.dumps([m.model_dump(exclude={"resource"}) for m in mats])

    # another caller, or none: metadata only
    for caller in (None, "sess-2"):
        env = ix.recall("materials", cwd=str(proj), caller_session=caller)
        assert all(m.resource is None for m in env.results[0].passage.messages[0].materials)
        more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj), caller_session=caller)
        assert all(m.resource is None for m in more.results[0].passage.messages[0].materials)
    more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj), caller_session="sess-1")
    assert sum(m.resource is not None for m in more.results[0].passage.messages[0].materials) == 5

    # the twin session of another project is not the caller's session
    env = ix.recall("materials", cwd=str(proj), all_projects=True, caller_session="sess-1")
    by_cwd = {r.cwd: r.passage.messages[0].materials for r in env.results}
    assert any(m.resource for m in by_cwd[str(proj)])
    assert [m.resource for m in by_cwd[str(other)]] == [None]

    # a message with no text of its own is found by its file name
    env = ix.recall("checkout", cwd=str(proj), caller_session="sess-1")
    (msg,) = env.results[0].passage.messages
    assert msg.text == "" and [m.name for m in msg.materials] == ["checkout-bug.png"]
    assert msg.materials[0].resource


# --- partial matches, questions -----------------------------------------------------------


def test_two_terms_never_together_give_marked_partial_matches(proj, corpus):
    corpus.session("s1", proj).say("m1", "the alpha release is out")
    corpus.session("s2", proj).say("m1", "beta testers signed up")
    corpus.session("s3", proj).say("m1", "alpha and gamma, but not the other one")
    ix = corpus.open()
    env = ix.recall("alpha beta", cwd=str(proj))
    assert env.status == "partial"
    assert env.results and all(r.partial for r in env.results)
    assert "partial" in env.hint and "'alpha'" in env.hint and "'beta'" in env.hint
    assert {tuple(r.matched_terms) for r in env.results} == {("alpha",), ("beta",)}
    env = ix.recall("alpha beta gamma", cwd=str(proj))
    assert env.status == "partial"
    assert env.results[0].session_id == "s3" and sorted(env.results[0].matched_terms) == ["alpha", "gamma"]
    # when the terms do meet, nothing is partial
    env = ix.recall("alpha gamma", cwd=str(proj))
    assert env.status == "ok" and [r.partial for r in env.results] == [False]
    assert "partial" not in env.hint


def test_a_question_alone_finds_the_right_session_in_chinese_and_english(proj, corpus):
    zh = corpus.session("zh", proj, title="简历模板的字体", started_at="2026-11-24T14:02:00Z")
    zh.say("u1", "上周给简历选的什么字体？我想把中文部分也统一一下。")
    zh.say("a1", "上周我们给简历正文选了 Source Serif 4，中文部分建议用思源宋体。", role="assistant")
    en = corpus.session("en", proj, title="Résumé layout", started_at="2026-11-20T09:12:00Z")
    en.say("u1", "Which font should we use for the résumé? It has to print well.")
    en.say("a1", "Let's pick Source Serif 4 for the body and Inter for headings.", role="assistant")
    noise = corpus.session("noise", proj, started_at="2026-11-28T10:00:00Z")
    noise.say("u1", "简历的页边距再调小一点", turn="t1")
    noise.say("u2", "The checkout button needs a bigger font-size.", turn="t2")
    noise.say("u3", "字体文件太大了，压缩一下", turn="t3")
    ix = corpus.open()
    env = ix.recall(query="", question="上周给简历选的什么字体？", cwd=str(proj))
    assert env.status == "ok", env.hint
    assert env.results[0].session_id == "zh"
    assert {"简历", "字体"} <= set(env.diagnostics.terms)
    assert any(m.is_hit for m in env.results[0].passage.messages)
    env = ix.recall(query="", question="Which font did we pick for the résumé last week?", cwd=str(proj))
    assert env.status == "ok", env.hint
    assert env.results[0].session_id == "en"
    assert "font" in env.diagnostics.terms and "résumé" in env.diagnostics.terms
    # a question with a query: the query still filters (AND), the question ranks
    env = ix.recall("serif", question="上周给简历选的什么字体？", cwd=str(proj))
    assert {r.session_id for r in env.results} == {"zh", "en"}
    assert env.results[0].session_id == "zh"


# --- ranking --------------------------------------------------------------------------------


def test_an_answer_outranks_a_tool_result_that_lists_the_keyword(proj, corpus):
    listing = corpus.session("listing", proj, started_at="2026-11-25T08:00:00Z")
    listing.say("c1", '{"command": "ls fonts/"}', role="tool_call", tool_name="Bash")
    # a directory listing that names the keyword four times among other files
    listing.say("r1", "garamond-regular.ttf\ninter.ttf\ngaramond-bold.ttf\nroboto.ttf\ngaramond-italic.ttf\n"
                      "lato.ttf\ngaramond-bolditalic.ttf\nsource-serif.ttf", role="tool_result")
    answer = corpus.session("answer", proj, started_at="2026-11-20T08:00:00Z")
    answer.say("a1", "We settled on garamond for the body text of the résumé, with Inter for the headings "
                     "because the two pair well in print.", role="assistant")
    # the rest of the corpus is shaped like real logs: tool output is long
    other = corpus.session("other", proj, started_at="2026-11-18T08:00:00Z")
    for i in range(6):
        other.say(f"u{i}", f"run the checkout tests again, step {i}", turn=f"t{i}")
        other.say(f"r{i}", "\n".join(f"tests/test_checkout.py::test_case_{j} PASSED [{j}%]" for j in range(40)),
                  role="tool_result", turn=f"t{i}")
        other.say(f"a{i}", f"All forty checkout tests pass in step {i}; nothing else changed.", role="assistant",
                  turn=f"t{i}")
    ix = corpus.open()
    # without the weights the listing would lead: check that this corpus shows something
    raw = dict(ix.store.conn.execute(
        "SELECT m.message_id, bm25(message_fts) FROM message_fts JOIN messages m ON m.id = message_fts.rowid "
        "WHERE message_fts MATCH 'garamond'"))
    assert raw["r1"] < raw["a1"], raw  # lower is better: unweighted, the listing wins
    env = ix.recall("garamond", cwd=str(proj))
    assert [r.session_id for r in env.results] == ["answer", "listing"]
    assert env.results[0].passage.messages[0].role == "assistant"


def test_ties_break_newer_first_then_by_id(proj, corpus):
    # the newer session is written (and indexed) first, so ids alone would put it last
    new = corpus.session("new", proj, started_at="2026-11-20T09:00:00Z")
    new.say("m1", "the tie breaker")
    old = corpus.session("old", proj, started_at="2026-11-10T09:00:00Z")
    old.say("m1", "the tie breaker")
    same_a = corpus.session("same-a", proj, started_at="2026-11-01T09:00:00Z")
    same_a.say("m1", "the tie breaker", ts="2026-11-01T09:00:01Z")
    same_b = corpus.session("same-b", proj, started_at="2026-11-01T09:00:00Z")
    same_b.say("m1", "the tie breaker", ts="2026-11-01T09:00:01Z")
    ix = corpus.open()
    env = ix.recall("breaker", cwd=str(proj))
    assert len({r.score for r in env.results}) == 1
    assert [r.session_id for r in env.results] == ["new", "old", "same-b", "same-a"]
    assert [r.session_id for r in ix.recall("breaker", cwd=str(proj)).results] == [
        r.session_id for r in env.results]  # deterministic


def test_recency_half_life_reorders_and_is_reported(proj, corpus):
    corpus.session("old", proj, started_at=ago(200)).say("m1", "kerning kerning notes", ts=ago(200))
    corpus.session("new", proj, started_at=ago(1)).say("m1", "kerning came up again today", ts=ago(1))
    plain = corpus.open()
    env = plain.recall("kerning", cwd=str(proj))
    assert [r.session_id for r in env.results] == ["old", "new"]
    assert env.diagnostics.reranked == []
    recent = corpus.open(recency_half_life_days=7)
    env = recent.recall("kerning", cwd=str(proj))
    assert [r.session_id for r in env.results] == ["new", "old"]
    assert env.diagnostics.reranked == ["recency_half_life_days=7"]


def test_pinned_cwds_come_first_and_are_reported(tmp_path, corpus):
    a, b = tmp_path / "a", tmp_path / "b"
    corpus.session("sa", a).say("m1", "ligature ligature")
    corpus.session("sb", b).say("m1", "we talked about the ligature settings for a long while today")
    plain = corpus.open()
    env = plain.recall("ligature", all_projects=True)
    assert [r.session_id for r in env.results] == ["sa", "sb"] and env.diagnostics.reranked == []
    pinned = corpus.open(pinned_cwds=[str(b) + "/"])
    env = pinned.recall("ligature", all_projects=True)
    assert [r.session_id for r in env.results] == ["sb", "sa"]
    assert "pinned_cwds" in env.diagnostics.reranked
    # the scan path honours the pin too
    corpus.session("sa2", a, started_at="2026-12-01T00:00:00Z").say("m1", "x->y")
    corpus.session("sb2", b, started_at="2026-11-01T00:00:00Z").say("m1", "x->y")
    corpus.sync(pinned)
    env = pinned.recall("->", all_projects=True)
    assert env.diagnostics.engine == "session-scan"
    assert [r.session_id for r in env.results] == ["sb2", "sa2"]
    assert "pinned_cwds" in env.diagnostics.reranked


# --- the session scan ------------------------------------------------------------------------


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
        s.say(mid, text, turn=mid)
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
        s.say(mid, text, turn=mid)
    # the pair in an attachment's name only, then apart in both the text and a name
    s.say("m8", "see the file", turn="m8", attachments=[{"id": "a1", "name": "人地.txt", "bytes": 9}])
    s.say("m9", "人, 地", turn="m9", attachments=[{"id": "a2", "name": "人 地.txt", "bytes": 9}])
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
    s.say("m1", "call price->round() in 简历")
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
        s.say("m1", f"call price->round() in step {i}")
        s.say("m2", "nothing to see", turn="t2")
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


# --- redaction ---------------------------------------------------------------------------------


def test_redaction_mask_and_hash(proj, corpus):
    gh, _ = SECRETS["github_token"]
    sk, _ = SECRETS["openai_key"]
    corpus.session("s1", proj, title=f"rotate {gh}").say(
        "m1", f"rotate the token {gh} now; the old {gh} and {sk} are dead")
    mask = corpus.open(redaction="mask")
    env = mask.recall("rotate", cwd=str(proj))
    text = env.results[0].passage.messages[0].text
    assert text == ("rotate the token [redacted:github_token] now; the old [redacted:github_token] and "
                    "[redacted:openai_key] are dead")
    assert env.results[0].title == "rotate [redacted:github_token]"
    assert env.redacted == 4  # three in the text, one in the title
    hashed = corpus.open(redaction="hash")
    env = hashed.recall("rotate", cwd=str(proj))
    text = env.results[0].passage.messages[0].text
    marks = re.findall(r"#[0-9a-f]{8}\b", text)
    assert len(marks) == 3
    assert marks[0] == marks[1] != marks[2]  # two mentions of one secret compare equal
    assert env.results[0].title == f"rotate {marks[0]}"
    assert env.redacted == 4
    assert "redacted" not in text
    # nothing to redact: the count is zero
    corpus.session("s2", proj).say("m1", "plain words")
    corpus.sync(hashed)
    assert hashed.recall("plain", cwd=str(proj)).redacted == 0


def test_no_planted_secret_appears_in_any_output(tmp_path, proj, corpus, run_recall):
    other = tmp_path / "other"
    other.mkdir()
    for n, (kind, (sample, _)) in enumerate(SECRETS.items()):
        cwd = proj if n % 2 else other
        s = corpus.session(f"s-{kind}", cwd, title=f"deploy notes {sample}", started_at=f"2026-11-{n % 28 + 1:02d}T{8 + n // 28:02d}:00:00Z")
        s.say("u1", f"deploy with {sample} please")
        s.say("c1", json.dumps({"command": f"curl -H '{sample}' https://api.example.com/deploy"}),
              role="tool_call", tool_name="Bash")
        s.say("r1", json.dumps({"output": f"deploy ok\\n{sample}\\nsymbols a->b"}), role="tool_result")
        s.say("a1", f"done: deploy used {sample}, a->b", role="assistant",
              attachments=[{"id": f"f{n}", "name": f"deploy {sample}.txt", "mime_type": "text/plain", "bytes": 9}])
    outputs: list[str] = []
    for mode in ("mask", "hash"):
        ix = corpus.open(redaction=mode)
        envs = []
        for kw in ({"query": "deploy"}, {"query": "deploy ok"}, {"query": "->"}, {"query": "curl"},
                   {"query": "", "question": "how did we deploy?"}, {"query": "deploy", "question": "what key?"},
                   {"query": "example"}, {"query": "api"}, {"query": "com"}, {"query": "redacted"}):
            for scope in ({"cwd": str(proj)}, {"all_projects": True}):
                env = ix.recall(limit=50, caller_session="s-email", **kw, **scope)
                envs.append(env)
                envs += [ix.recall_more(a, all_projects=True, caller_session="s-email") for a in anchors(env)]
        assert any(e.redacted for e in envs)
        outputs += [e.model_dump_json() for e in envs]
        outputs += [json.dumps(hit.text) + json.dumps(sess) for hit, sess in ix.search("deploy", limit=100)]
    for args in (["search", "deploy", "--all-projects"], ["search", "deploy", "--all-projects", "--json"],
                 ["search", "--question", "how did we deploy?", "--cwd", str(proj)]):
        done = run_recall("--db", corpus.db, *args)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    blob = "\n".join(outputs)
    assert "deploy" in blob
    for kind, (sample, fragment) in SECRETS.items():
        assert fragment not in blob, kind
        assert json.dumps(fragment)[1:-1] not in blob, kind


# --- the command ---------------------------------------------------------------------------------


def test_recall_schema_prints_the_envelope_json_schema(run_recall):
    done = run_recall("schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["type"] == "object" and schema["title"] == "Envelope"
    for key in ("query", "results", "next_cursor", "hint", "gaps", "diagnostics", "redacted", "status"):
        assert key in schema["properties"], key
    assert {"Result", "Passage", "PassageMessage", "Material", "Diagnostics"} <= set(schema["$defs"])
    assert set(schema["required"]) >= {"query", "hint", "diagnostics", "status"}


def test_recall_search_and_more_on_the_command_line(proj, corpus, run_recall):
    s = corpus.session("s1", proj, title="Résumé layout", started_at="2026-11-20T09:12:00Z")
    s.say("u1", "Which font should we use for the résumé?")
    s.say("a1", "Let's pick Source Serif 4 for the body.", role="assistant")
    corpus.open().close()
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Résumé layout" in out and "2026-11-20" in out and str(proj) in out
    assert "Source Serif 4 for the body" in out and "Which font should we use" in out
    assert "1 passage from 1 session" in out
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj, "--json")
    env = Envelope.model_validate_json(done.stdout)
    assert env.status == "ok" and env.results[0].title == "Résumé layout"
    done = run_recall("--db", corpus.db, "more", env.results[0].passage.anchor_id, "--cwd", proj, "--json")
    assert done.returncode == 0, done.stderr
    more = Envelope.model_validate_json(done.stdout)
    assert more.status == "ok" and [m.message_id for m in more.results[0].passage.messages] == ["u1", "a1"]
    # failures print their hint, not a traceback, and exit normally
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj, "--session", "nope")
    assert done.returncode == 0 and "nope" in done.stdout and "Traceback" not in done.stderr
    done = run_recall("--db", corpus.db, "search", "sk-ant-api03-Zq8xVw2LmN4pRt6y", "--cwd", proj, "--json")
    assert json.loads(done.stdout)["status"] == "refused"
    assert "Zq8xVw2LmN4pRt6y" not in done.stdout
