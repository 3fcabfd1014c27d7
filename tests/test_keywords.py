"""The keywords a question gives (session_recall.query.keywords): what is not
content never becomes one, however a question spells it; a long run of
characters jieba does not know stays a bounded number of terms; and a caller's
bytes are a clear TypeError, not an error from inside parsing."""

from __future__ import annotations

import time

import pytest

import session_recall.query.keywords as K


@pytest.mark.parametrize("question", ["・・・", "゠", "〜〜", "…?", "x / y", "— ・ —"])
def test_punctuation_is_no_keyword_in_any_script(proj, corpus, question):
    """・ and ゠ live in the Katakana block, 〜 among the CJK symbols: a
    question made of them holds no keyword, and says so (empty_query)."""
    assert K.keyword_groups(question) == []
    ix = corpus.open()
    assert ix.recall(query="", question=question, cwd=str(proj)).status == "empty_query"


def test_a_middle_dot_between_two_words_parts_them():
    assert K.keywords("バグ・修正") == ["バグ", "修正"]


def test_what_a_contraction_leaves_is_no_keyword():
    """didn't is didn + t and we've is we + ve once the apostrophe cuts them
    (what NLTK's English list holds); `won` stays a word."""
    assert K.keywords("I didn't know we've been there, doesn't it?") == ["know"]
    assert K.keywords("who won the race?") == ["won", "race"]


def test_a_long_unknown_run_gives_a_bounded_number_of_terms(proj, corpus):
    """A run of kana that jieba cuts into single characters is joined whole;
    its bigrams are variants, at most VARIANT_LIMIT of them, each once."""
    kana = "".join(chr(c) for c in range(0x30A2, 0x30F3, 2))  # ア イ ウ ... : 41 distinct
    question = kana * 20  # 820 characters, every bigram but the seam distinct
    (group,) = K.keyword_groups(question)
    assert group[0] == question and len(group) == 1 + K.VARIANT_LIMIT
    assert len(set(group)) == len(group)
    assert K.keyword_groups("ありありあり") == [("ありありあり", "あり", "りあ")]  # each variant once
    s = corpus.session("s1", proj)
    s.message("u1", "the tail: " + kana[:2])  # the first bigram of the run
    ix = corpus.open()
    t0 = time.perf_counter()
    env = ix.recall(query="", question=question, cwd=str(proj))
    assert env.status == "ok" and len(env.diagnostics.terms) == 1 + K.VARIANT_LIMIT
    assert [r.session_id for r in env.results] == ["s1"]
    assert time.perf_counter() - t0 < 30  # a bound on a pathology, not a speed claim


def test_a_number_is_not_a_word_in_another_script():
    """A word in another script (an identifier) drops a question's lone
    CJK characters; a date or a number does not: it names the thing less."""
    assert K.keywords("2024-05 的车呢") == ["2024-05", "2024", "05", "车"]
    assert K.keywords("3.14 的车呢") == ["3.14", "3", "14", "车"]
    assert K.keywords("v2 的车呢") == ["v2"]


def test_a_name_joined_by_several_separators_is_one_keyword():
    assert K.keyword_groups("fix __init__.py") == [("fix",), ("init__.py",), ("init",), ("py",)]
    assert K.keywords("the a__b flag") == ["a__b", "flag"]
    assert K.keywords("foo - bar") == ["foo", "bar"]  # a spaced dash joins nothing


def test_the_frame_of_a_question_is_no_variant_either():
    """A long word whose dictionary words inside it include a frame word
    (态度 in 人生态度) keeps the frame word out of its variants."""
    assert "态度" in K.STOP_FRAME
    assert K.keyword_groups("他的人生态度很好") == [("人生态度", "人生", "生态")]
    assert K.keyword_groups("主观原因是什么") == [("主观原因", "主观")]


def test_a_limit_is_a_number_of_groups():
    question = "alpha beta gamma delta"
    assert K.keywords(question, 2) == ["alpha", "beta"]
    assert K.keywords(question, 0) == [] and K.keywords(question, -1) == []
    assert K.keywords(question) == ["alpha", "beta", "gamma", "delta"]


@pytest.mark.parametrize("arguments", [{"question": b"hello"}, {"query": b"hello"}, {"query": 5},
                                       {"query": "hello", "cwd": b"/srv"}])
def test_bytes_where_text_goes_are_a_clear_type_error(proj, corpus, arguments):
    ix = corpus.open()
    with pytest.raises(TypeError, match="must be a str or None, not (bytes|int)"):
        ix.recall(**arguments)
