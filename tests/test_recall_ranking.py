"""Ranking: role weights (an answer outranks a tool result listing the
keyword), ties newer first then by id, and the optional re-ranks (recency
half-life, pinned cwds), each reported in the envelope."""

from __future__ import annotations

from tests.helpers import ago


def test_an_answer_outranks_a_tool_result_that_lists_the_keyword(proj, corpus):
    listing = corpus.session("listing", proj, started_at="2026-11-25T08:00:00Z")
    listing.message("c1", '{"command": "ls fonts/"}', role="tool_call", tool_name="Bash")
    # a directory listing that names the keyword four times among other files
    listing.message("r1", "garamond-regular.ttf\ninter.ttf\ngaramond-bold.ttf\nroboto.ttf\ngaramond-italic.ttf\n"
                      "lato.ttf\ngaramond-bolditalic.ttf\nsource-serif.ttf", role="tool_result")
    answer = corpus.session("answer", proj, started_at="2026-11-20T08:00:00Z")
    answer.message("a1", "We settled on garamond for the body text of the résumé, with Inter for the headings "
                     "because the two pair well in print.", role="assistant")
    # the rest of the corpus is shaped like real logs: tool output is long
    other = corpus.session("other", proj, started_at="2026-11-18T08:00:00Z")
    for i in range(6):
        other.message(f"u{i}", f"run the checkout tests again, step {i}", turn_id=f"t{i}")
        other.message(f"r{i}", "\n".join(f"tests/test_checkout.py::test_case_{j} PASSED [{j}%]" for j in range(40)),
                      role="tool_result", turn_id=f"t{i}")
        other.message(f"a{i}", f"All forty checkout tests pass in step {i}; nothing else changed.", role="assistant",
                      turn_id=f"t{i}")
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
    new.message("m1", "the tie breaker")
    old = corpus.session("old", proj, started_at="2026-11-10T09:00:00Z")
    old.message("m1", "the tie breaker")
    same_a = corpus.session("same-a", proj, started_at="2026-11-01T09:00:00Z")
    same_a.message("m1", "the tie breaker", ts="2026-11-01T09:00:01Z")
    same_b = corpus.session("same-b", proj, started_at="2026-11-01T09:00:00Z")
    same_b.message("m1", "the tie breaker", ts="2026-11-01T09:00:01Z")
    ix = corpus.open()
    env = ix.recall("breaker", cwd=str(proj))
    assert len({r.score for r in env.results}) == 1
    assert [r.session_id for r in env.results] == ["new", "old", "same-b", "same-a"]
    assert [r.session_id for r in ix.recall("breaker", cwd=str(proj)).results] == [
        r.session_id for r in env.results]  # deterministic


def test_recency_half_life_reorders_and_is_reported(proj, corpus):
    corpus.session("old", proj, started_at=ago(200)).message("m1", "kerning kerning notes", ts=ago(200))
    corpus.session("new", proj, started_at=ago(1)).message("m1", "kerning came up again today", ts=ago(1))
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
    corpus.session("sa", a).message("m1", "ligature ligature")
    corpus.session("sb", b).message("m1", "we talked about the ligature settings for a long while today")
    plain = corpus.open()
    env = plain.recall("ligature", all_projects=True)
    assert [r.session_id for r in env.results] == ["sa", "sb"] and env.diagnostics.reranked == []
    pinned = corpus.open(pinned_cwds=[str(b) + "/"])
    env = pinned.recall("ligature", all_projects=True)
    assert [r.session_id for r in env.results] == ["sb", "sa"]
    assert "pinned_cwds" in env.diagnostics.reranked
    # the scan path honours the pin too
    corpus.session("sa2", a, started_at="2026-12-01T00:00:00Z").message("m1", "x->y")
    corpus.session("sb2", b, started_at="2026-11-01T00:00:00Z").message("m1", "x->y")
    corpus.sync(pinned)
    env = pinned.recall("->", all_projects=True)
    assert env.diagnostics.engine == "session-scan"
    assert [r.session_id for r in env.results] == ["sb2", "sa2"]
    assert "pinned_cwds" in env.diagnostics.reranked
