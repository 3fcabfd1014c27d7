"""Partial matches and questions: two terms never together give marked partial
matches; a question alone finds the right session in Chinese and English."""

from __future__ import annotations

from tests.helpers import write


def test_two_terms_never_together_give_marked_partial_matches(proj, corpus):
    corpus.session("s1", proj).message("m1", "the alpha release is out")
    corpus.session("s2", proj).message("m1", "beta testers signed up")
    corpus.session("s3", proj).message("m1", "alpha and gamma, but not the other one")
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
    zh.message("u1", "上周给简历选的什么字体？我想把中文部分也统一一下。")
    zh.message("a1", "上周我们给简历正文选了 Source Serif 4，中文部分建议用思源宋体。", role="assistant")
    en = corpus.session("en", proj, title="Résumé layout", started_at="2026-11-20T09:12:00Z")
    en.message("u1", "Which font should we use for the résumé? It has to print well.")
    en.message("a1", "Let's pick Source Serif 4 for the body and Inter for headings.", role="assistant")
    noise = corpus.session("noise", proj, started_at="2026-11-28T10:00:00Z")
    noise.message("u1", "简历的页边距再调小一点", turn_id="t1")
    noise.message("u2", "The checkout button needs a bigger font-size.", turn_id="t2")
    noise.message("u3", "字体文件太大了，压缩一下", turn_id="t3")
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


def test_a_question_re_scores_at_most_the_question_pool(index, logs_dir, canonical):
    """Question mode verifies and re-scores only the first QUESTION_POOL hits
    in bm25 order (docs/recall.md), however many messages hold a keyword."""
    from session_recall.query.rank import Ranking

    QUESTION_POOL = Ranking().question_pool

    a = canonical("sess-pool")
    lines = [a.session()] + [a.message(f"m{i}", f"the kerning table number {i}") for i in range(QUESTION_POOL + 50)]
    write(logs_dir / "a.jsonl", *lines)
    index.sync([str(logs_dir)], kind="canonical")
    env = index.recall("", question="what about kerning?", all_projects=True)
    assert env.status == "ok" and env.diagnostics.candidates == QUESTION_POOL


def test_a_question_over_long_texts_pools_fewer_hits(index, logs_dir, canonical):
    """Past its first question_pool_min hits, the pool ends once its texts
    hold question_chars characters: 2,000-character messages fill 100,000
    at the 50th; messages of about 28,000 characters stop at the minimum;
    the hits not pooled are not read (candidates)."""
    import dataclasses

    from session_recall.query.rank import Ranking

    r = Ranking()
    assert r.question_chars == 100_000 and r.question_pool_min == 20
    filler = " ".join(f"word{j}" for j in range(400))
    a = canonical("sess-long")
    b = canonical("sess-longer")
    lines = [a.session()] + [a.message(f"m{i}", f"kerning table {i} {filler}"[:2000]) for i in range(120)]
    write(logs_dir / "a.jsonl", *lines)
    lines = [b.session()] + [b.message(f"n{i}", f"kerning chart {i} " + filler * 9) for i in range(60)]
    write(logs_dir / "b.jsonl", *lines)
    index.sync([str(logs_dir)], kind="canonical")

    def candidates(question: str) -> int:
        env = index.recall("", question=question, all_projects=True)
        assert env.status == "ok" and env.results
        return env.diagnostics.candidates

    assert candidates("the kerning table?") == 50
    assert candidates("the kerning chart?") == 20
    index.engine.ranking = dataclasses.replace(r, question_chars=None)
    assert candidates("the kerning table?") == r.question_pool


def _order(ix, question: str, proj, **ranking) -> list[str]:
    from dataclasses import replace

    saved = ix.engine.ranking
    ix.engine.ranking = replace(saved, **ranking)
    try:
        return [r.session_id for r in ix.recall("", question=question, cwd=str(proj)).results]
    finally:
        ix.engine.ranking = saved


def test_a_session_holding_more_of_the_question_comes_first(proj, corpus):
    """The question in one turn, the answer in the next: the session whose
    turns hold more of the question's keywords leads (Ranking.session_weight),
    where a message alone ties."""
    for sid, started, answer in (("talk", "2026-11-10T09:00:00Z", "Yes, stick with it: glazing comes next month."),
                                 ("other", "2026-11-20T09:00:00Z", "Noted, I updated the calendar entry.")):
        s = corpus.session(sid, proj, started_at=started)  # "other" is newer: a tie goes to it
        s.message("u1", "Should I keep going to the pottery class on Thursdays?", turn_id="t1", ts=started)
        s.message("a1", answer, role="assistant", turn_id="t2", ts=started)
    for i in range(10):  # other talk, so that the keywords are rare
        corpus.session(f"noise{i}", proj).message("m1", f"The build {i} passed on the second try.")
    ix = corpus.open()
    question = "what did we say about the pottery class and glazing"
    assert _order(ix, question, proj)[0] == "talk"
    assert _order(ix, question, proj, session_weight=0.0)[0] == "other"  # the lever is what decides


def test_in_a_chinese_question_an_identifier_outweighs_the_words_around_it(proj, corpus):
    """上次 compaction 改了哪些文件: `compaction` names the thing asked about; the
    CJK words are the question's frame (Ranking.latin_in_cjk)."""
    gold = corpus.session("gold", proj, started_at="2026-11-10T09:00:00Z")
    gold.message("a1", "I changed the compaction threshold in two plugins; the defaults now live in one module "
                       "that both import, and the tests cover the new value.", role="assistant")
    frame = corpus.session("frame", proj, started_at="2026-11-20T09:00:00Z")
    frame.message("a1", "上次改的文件都在这里。", role="assistant")
    for i in range(6):  # compaction is rarer than the frame's words
        corpus.session(f"noise{i}", proj).message("m1", f"文件 {i} 已保存")
    ix = corpus.open()
    question = "上次 compaction 改了哪些文件"
    assert _order(ix, question, proj)[0] == "gold"
    assert _order(ix, question, proj, latin_in_cjk=1.0)[0] == "frame"


def test_a_question_ranks_every_candidate_however_many_it_has(proj, corpus, monkeypatch):
    """The plan by match count ranks a frequent term query's newest window
    first; a question is not windowed (docs/recall.md): its keywords are
    ORed, so over a long history nearly every question has more candidates
    than a window, and the old message that holds all of its keywords must
    still come first."""
    from tests.helpers import set_ranking

    old = corpus.session("old", proj, started_at="2026-01-05T09:00:00Z")
    old.message("u1", "we fixed the flaky deploy script by pinning the rsync version")
    for i in range(12):  # newer sessions holding one keyword each
        s = corpus.session(f"new{i:02d}", proj, started_at=f"2026-11-{i + 1:02d}T09:00:00Z")
        s.message("u1", f"the deploy went out on day {i}")
        s.message("u2", f"rsync copied the files again {i}")
    ix = corpus.open()
    set_ranking(monkeypatch, ix, plan_window=4, plan_growth=2, plan_max_window=8, question_pool=4,
                question_first_page=8)
    env = ix.recall(query="", question="how did we fix the flaky deploy script with rsync?", cwd=str(proj))
    assert env.status == "ok", env.hint
    assert env.results[0].session_id == "old"
    assert env.diagnostics.ranked_of is None  # every candidate ranked at once
    # a term query over the same index is windowed: its newest candidates first
    env = ix.recall("deploy", cwd=str(proj))
    assert env.diagnostics.ranked_of == 13 and env.results[0].session_id != "old"


def test_a_file_name_in_a_question_is_one_keyword_as_well_as_its_words(proj, corpus, monkeypatch):
    """`hello.py` in a question is a keyword of its own beside `hello` and
    `py` (keywords.COMPOUNDS): the turn that names the file comes before one
    that holds its words apart."""
    import session_recall.query.keywords as K

    corpus.session("apart", proj, started_at="2026-11-20T09:00:00Z").message(
        "u1", "write hello in the py launcher")
    corpus.session("named", proj, started_at="2026-11-10T09:00:00Z").message("u1", "add a comment to hello.py")
    for i in range(3):  # `write` is a common word here; the file name is not
        corpus.session(f"other{i}", proj).message("u1", f"write the changelog again ({i})")
    ix = corpus.open()
    question = "what did we write in hello.py?"
    assert ("hello.py",) in K.keyword_groups(question)
    env = ix.recall(query="", question=question, cwd=str(proj))
    assert [r.session_id for r in env.results][:2] == ["named", "apart"]
    monkeypatch.setattr(K, "COMPOUNDS", False)  # the words alone: the other turn holds more of them
    env = ix.recall(query="", question=question, cwd=str(proj))
    assert [r.session_id for r in env.results][:2] == ["apart", "named"]


def test_a_one_character_chinese_word_is_a_keyword_of_a_short_question(proj, corpus, monkeypatch):
    """男的想买什么？ holds one word jieba leaves alone, 买 (keywords.CJK_CHARS):
    the turn about buying is found, where the question had no keyword at all
    before; a question with enough longer words drops its lone characters."""
    import session_recall.query.keywords as K

    corpus.session("buy", proj).message("u1", "我想买一双跑鞋，周末去商场看看。")
    corpus.session("other", proj).message("u1", "明天下午开会，别忘了带电脑。")
    ix = corpus.open()
    assert K.keywords("男的想买什么？") == ["买"]
    env = ix.recall(query="", question="男的想买什么？", cwd=str(proj))
    assert env.status == "ok", env.hint
    assert [r.session_id for r in env.results] == ["buy"]
    assert env.diagnostics.terms == ["买"]
    # a function character is never one (去, 看: in every other sentence)
    assert K.keywords("女的要去哪儿看？") == []
    # with four words of two or more characters the lone ones go (车 here)
    assert "车" in K.keywords("他的车怎么了？")
    assert "车" not in K.keywords("他的车昨天在公司门口被警察拖走了")
    # ...and so do they beside a word in another script, which names the thing
    assert K.keywords("部署 docker 的车呢") == ["部署", "docker"]
    monkeypatch.setattr(K, "CJK_CHARS", False)
    assert K.keywords("男的想买什么？") == []
    assert ix.recall(query="", question="男的想买什么？", cwd=str(proj)).results == []


def test_a_long_chinese_word_finds_the_shorter_word_inside_it(proj, corpus, monkeypatch):
    """飞机票 in the question, 机票 in the conversation (keywords.CJK_SUBWORDS):
    the dictionary words inside a long word are variants of its group."""
    import session_recall.query.keywords as K

    corpus.session("gold", proj).message("u1", "听说现在机票打折打得很厉害。")
    corpus.session("other", proj).message("u1", "火车站离这儿不远。")
    ix = corpus.open()
    assert ("飞机票", "飞机", "机票") in K.keyword_groups("飞机票贵不贵？")
    env = ix.recall(query="", question="飞机票贵不贵？", cwd=str(proj))
    assert [r.session_id for r in env.results] == ["gold"]
    monkeypatch.setattr(K, "CJK_SUBWORDS", False)
    assert ix.recall(query="", question="飞机票贵不贵？", cwd=str(proj)).results == []


def test_the_frame_of_a_question_about_a_conversation_is_not_a_keyword(proj, corpus, monkeypatch):
    """"What does the man mean about the parcel?": `mean` asks how, not what
    (keywords.STOP_FRAME); a turn that happens to say it must not outrank the
    one about the parcel."""
    import session_recall.query.keywords as K

    corpus.session("gold", proj, started_at="2026-11-10T09:00:00Z").message(
        "u1", "The parcel came wet.")
    corpus.session("frame", proj, started_at="2026-11-20T09:00:00Z").message(
        "u1", "I mean, the parcel thing again: we talked about it for an hour and nobody agreed on anything.")
    for i in range(4):  # parcel is common here, mean is not
        corpus.session(f"noise{i}", proj).message("u1", f"another parcel for the office downstairs, number {i}")
    ix = corpus.open()
    question = "What does the man mean about the parcel?"
    assert K.keywords(question) == ["parcel"]
    assert ix.recall(query="", question=question, cwd=str(proj)).results[0].session_id == "gold"
    monkeypatch.setattr(K, "STOP_FRAME", frozenset())
    assert ix.recall(query="", question=question, cwd=str(proj)).results[0].session_id == "frame"
