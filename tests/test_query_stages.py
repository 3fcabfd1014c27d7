"""The query side's stages, each alone (issue 17): parse without a database
beyond a connection's tokenizer, a Ranking as a plain value, selection and
the envelope's cursors and hints as pure functions, and an engine that ranks
with the Ranking it is given."""

from __future__ import annotations

import dataclasses

import apsw
import pytest

from session_recall.query import envelope as E
from session_recall.query.engine import Engine
from session_recall.query.gates import Scope
from session_recall.query.parse import QueryTokenizer, fts_query, split_terms
from session_recall.query.rank import Ranking, select
from session_recall.query.retrieve import Hit


def test_a_query_is_parsed_with_a_connections_tokenizer_alone():
    tokenizer = QueryTokenizer(apsw.Connection(":memory:"))
    terms = tokenizer.parse('Deploy "the ledger" deploy')
    assert [t.folded for t in terms] == ["deploy", "the ledger"]
    assert split_terms('a "b c') == ["a", "b c"]
    assert fts_query(terms) == '"deploy" AND "the ledger"'


def test_a_ranking_is_a_frozen_value_and_variants_are_built_with_replace():
    shipped = Ranking()
    with pytest.raises(dataclasses.FrozenInstanceError):
        shipped.title_weight = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        shipped.role_weight["user"] = 2.0  # type: ignore[index]
    variant = dataclasses.replace(shipped, title_weight=0.0)
    assert variant.title_weight == 0.0 and shipped.title_weight == 1.0
    assert shipped.max_role_weight == 1.0
    assert shipped.snapshot()["role_weight"]["tool_result"] == 0.5


def test_selection_keeps_one_passage_per_turn_and_a_quota_per_session_first():
    hits = [Hit(i, session, turn, 1.0 / (i + 1), None, ["x"])
            for i, (session, turn) in enumerate([(1, "a"), (1, "a"), (1, "b"), (1, "c"), (2, "a"), (3, "a")])]
    selected, more = select(iter(hits), limit=3, need=3, budget=5000)
    assert [(h.session, h.turn) for h in selected] == [(1, "a"), (2, "a"), (3, "a")]
    assert more  # the turns b and c of session 1 come on the next page


def test_a_cursor_pages_only_its_own_query_and_generation():
    key = E.cursor_key(q="ledger", l=5)
    cursor = E.read_cursor(E.make_cursor(key, 10, 3))
    assert cursor == {"k": key, "o": 10, "g": 3}
    assert E.cursor_hint(cursor, key, 3) is None
    assert E.cursor_hint(cursor, E.cursor_key(q="other", l=5), 3) == E.foreign_cursor_hint()
    assert E.cursor_hint(cursor, key, 4) == E.changed_index_hint()
    assert E.read_cursor("not a cursor") is None


def test_hints_quote_at_most_a_short_sentence_of_terms():
    assert len(E.quoted(["x" * 1000], ", ")) <= E.HINT_TERMS_CHARS + 1
    assert E.scope_words(Scope("all", "/", session_id="s1")) == "all projects, session s1"


def test_a_miss_under_a_wide_cwd_says_it_searched_every_project_below_it(tmp_path, monkeypatch):
    """`cwd: "/"` or `$HOME`, let through by the policy, is no project: the
    hint names what was searched, and under `/` does not offer all_projects
    as something wider."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    terms = QueryTokenizer(apsw.Connection(":memory:")).parse("zebraquantum")
    root, under_home, project = (Scope("project", c) for c in ("/", str(home), str(home / "proj")))
    assert E.no_match_hint(root, terms, [], all_projects=False) == (
        "No message in any project under / (the root directory /) matches 'zebraquantum'. "
        "Try fewer or other words, or a question.")
    assert E.no_match_hint(under_home, terms, [], all_projects=False) == (
        f"No message in any project under {home} (your home directory or a folder above it) matches "
        "'zebraquantum'. Try fewer or other words, a question, or all_projects.")
    assert E.scope_words(project) == f"the project {home / 'proj'}"
    # a question that found nothing is not told to try a question
    keywords = QueryTokenizer(apsw.Connection(":memory:")).parse("zebraquantum heronfish")
    assert E.no_match_hint(project, [], keywords, all_projects=False, filtered=["role"], asked=True) == (
        f"No message in the project {home / 'proj'} matches the question's keywords 'zebraquantum', "
        "'heronfish' among the messages its filters keep (role). Try other filters, fewer or other words, "
        "or all_projects.")


def test_an_engine_ranks_with_the_ranking_it_is_given(tmp_path, corpus):
    proj = tmp_path / "proj"
    proj.mkdir()
    corpus.session("s1", proj).message("m1", "the ledger was closed")
    ix = corpus.open()
    engine = Engine(ix.store.conn, ix.settings, Ranking(fts_first_page=1))
    assert engine.ranking.fts_first_page == 1
    assert engine.retriever.ranking is engine.ranker.ranking is engine.ranking
    engine.ranking = Ranking()
    assert engine.retriever.ranking is engine.ranker.ranking == Ranking()
    assert engine.recall("ledger", cwd=str(proj)).status == "ok"


def test_a_miss_suggests_a_question_only_when_none_was_asked(tmp_path, corpus):
    proj = tmp_path / "proj"
    proj.mkdir()
    corpus.session("s1", proj).message("m1", "the ledger was closed")
    ix = corpus.open()
    plain = ix.recall("zzqq", cwd=str(proj))
    # the question's one keyword is the query's word, so it adds no keyword of its own
    asked = ix.recall("zzqq", question="where is zzqq", cwd=str(proj))
    alone = ix.recall("", question="where is the zzqq", cwd=str(proj))
    assert plain.status == asked.status == alone.status == "no_match"
    assert "a question" in plain.hint
    assert "a question" not in asked.hint and "a question" not in alone.hint, (asked.hint, alone.hint)
