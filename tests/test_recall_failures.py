"""Recall's failures are hinted envelopes (contract sections 4 and 8): each
failure class has its own status and a hint saying what to do next."""

from __future__ import annotations

import pytest

from session_recall.model import Envelope


def test_every_failure_class_has_its_own_status_and_a_hint(tmp_path, proj, corpus):
    from conftest import Corpus

    s = corpus.session("s1", proj, title="Fonts")
    s.message("m1", "Which font for the résumé?")
    s.message("m2", "Garamond, at 11 pt.", role="assistant")
    ix = corpus.open()
    void = Corpus(tmp_path / "void")  # an index that holds nothing
    try:
        empty = void.open()
        denied = corpus.open(all_projects="deny")
        page = ix.recall("font", cwd=str(proj), limit=1)
        s.message("m3", "Another font: Inter.", role="assistant", turn_id="t2")
        assert page.next_cursor is None  # one hit turn: no second page, so make a cursor elsewhere
        s2 = corpus.session("s2", proj)
        s2.message("m1", "font sizes again", turn_id="a")
        s2.message("m2", "font weights", turn_id="b")
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
    corpus.session("s1", proj).message("m1", "anything")
    env = corpus.open().recall(query, cwd=str(proj))
    assert env.status == "empty_query" and env.results == [] and env.hint


def test_a_project_with_nothing_indexed_says_so(tmp_path, proj, corpus):
    """No session of the caller's project is indexed: not the same as `we
    searched your sessions and found nothing`."""
    corpus.session("s1", proj).message("m1", "font talk")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ix = corpus.open()
    searched = ix.recall("typewriter", cwd=str(proj))
    unsearched = ix.recall("font", cwd=str(elsewhere))
    assert searched.status == unsearched.status == "no_match"
    assert "scope" not in searched.gaps
    assert "scope" in unsearched.gaps
    assert "no session" in unsearched.hint.lower() and unsearched.hint != searched.hint


def test_a_caller_below_a_project_without_git_is_pointed_to_it(tmp_path, corpus):
    """A user in a subfolder of a project that is no git work tree searches
    that subfolder: its hint names the nearest folder above it with sessions
    of its own, when the policy lets the caller search it without asking;
    under `deny` it names neither that folder nor all_projects (both would
    be refused)."""
    project = tmp_path / "work" / "project"
    deeper = project / "sub" / "deeper"
    deeper.mkdir(parents=True)
    corpus.session("s1", project).message("m1", "the font we picked is Inter")
    corpus.session("s2", tmp_path / "work" / "other").message("m1", "another project's font")
    env = corpus.open().recall("font", cwd=str(deeper))
    assert env.status == "no_match" and "scope" in env.gaps
    assert f"Sessions were indexed in {project}, above this folder" in env.hint and "all_projects" in env.hint
    assert corpus.open().recall("font", cwd=str(project)).results  # and that folder answers
    denied = corpus.open(all_projects="deny")
    env = denied.recall("font", cwd=str(deeper))
    assert "Sessions were indexed in" not in env.hint and "all_projects" not in env.hint, env.hint
    env = denied.recall("typewriter", cwd=str(project))
    assert env.status == "no_match" and "all_projects" not in env.hint, env.hint


def test_an_unknown_session_is_a_hint(proj, corpus):
    corpus.session("s1", proj).message("m1", "font")
    env = corpus.open().recall("font", cwd=str(proj), session_id="s9")
    assert env.status == "unknown_session" and "s9" in env.hint and env.results == []
    assert "without session_id" in env.hint
    # A lookup of the session itself (show) has no filter to drop.
    located = corpus.open().locate_session("zzzz", cwd=str(proj))
    assert located.status == "unknown_session" and "zzzz" in located.hint and "without" not in located.hint, located.hint


def test_a_hostile_cwd_is_named_in_a_hint_escaped_and_cut(tmp_path, proj, corpus):
    """A cwd with a NUL or a line break, or thousands of characters long, is
    named in the hint with its controls as escapes and cut in its middle."""
    corpus.session("s1", proj).message("m1", "font talk")
    ix = corpus.open()
    for cwd in (f"{tmp_path}/a\x00b\nc", f"{tmp_path}/" + "d" * 6000):
        env = ix.recall("font", cwd=cwd)
        assert env.status in ("no_match", "denied"), env.status
        text = env.hint + " ".join(env.gaps.values())
        assert "\x00" not in text and "\n" not in text and len(text) < 1200, text[:300]
