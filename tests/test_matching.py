"""Every example of docs/matching.md, one test each, against the product
(`Index.search`: all matching messages, no scope, no limit).

Each case indexes one message (text, and attachment names where the example
needs them) in a session titled "Résumé layout", and asks one query.
"""

from __future__ import annotations

import re
import unicodedata

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall.text.fold import _IDEOGRAPH, fold, fold_form, literal_forms, literal_pairs, match_text
from session_recall.text.tokens import FTS_TOKENIZER_ARGS, index_body, term_tokens
from tests.secret_samples import SECRETS

SECRET, SECRET_BODY = SECRETS["anthropic_key"]  # the one table of secret samples
CWD = "/home/ada/resume"

CASES = [
    # 1. folding: NFKC, then full case folding, on both sides
    ("font", "Ｆｏｎｔ", True),
    ("Ｆｏｎｔ", "font", True),
    ("file", "ﬁle", True),
    ("strasse", "Straße", True),
    ("1", "①", True),
    ("カタカナ", "ｶﾀｶﾅ", True),
    # 2. terms: white space separates, quotes make a phrase, an unclosed quote runs to the end
    ('"source serif"', "Let's pick Source Serif 4", True),
    ('"source serif"', "serif, not source", False),
    ("source serif", "serif, not source", True),
    ('"source serif', "Source Serif 4", True),
    ('"source serif', "serif, not source", False),
    ("font font", "font", True),
    ('"" font', "font", True),
    # 2. quotes are the only syntax: these are plain text
    ("font*", "fonts", False),
    ("font*", "the font* rule", True),
    ("%", "100% off", True),
    ("%", "100 off", False),
    ("_", "__init__", True),
    ("_", "ab", False),
    ("^", "x^2", True),
    (":", "key: value", True),
    ("(", "f(x)", True),
    ("-serif", "sans-serif", True),
    ("-serif", "serif", False),
    ("font AND serif", "font and serif", True),
    ("font AND serif", "font serif", False),
    ("font OR serif", "font", False),
    ("font NOT serif", "font not serif", True),
    ("font NOT serif", "font", False),
    ("NEAR(font serif)", "near(font serif)", True),
    ("NEAR(font serif)", "font serif", False),
    # 3. Latin and digits match whole words; no prefix matching
    ("font", "Which font?", True),
    ("font", "font-size", True),
    ("font", "fonts", False),
    ("font", "typeface", False),
    ("10", "100", False),
    ("10", "at 10 pt", True),
    # 3. CJK matches anywhere, any length, one character included
    ("显示", "浮窗现在只显示Miso", True),
    ("示", "浮窗现在只显示Miso", True),
    ("简历模板", "我的简历模板", True),
    ("简历 模板", "我的简历模板", True),
    ("简历 模板", "简历模板", True),
    # 3. a CJK end of a term needs nothing of its neighbour
    ("miso", "只显示Miso，", True),
    # 3. mixed terms match as written
    ("修改youer服务端", "先修改youer服务端的配置", True),
    ("修改youer服务端", "修改 youer 服务端", False),
    ("youer", "先修改youer服务端的配置", True),
    ("youer", "修改 youer 服务端", True),
    # 3. symbols are ordinary characters, never wildcards
    ("100%", "a 100% discount", True),
    ("100%", "a 1000% discount", False),
    ("C++", "in C++ pricing", True),
    ("C++", "abc++", False),
    ("a->b", "then a->b works", True),
    ("a->b", "then a-b works", False),
    ("price->round()", "Found it: price->round() truncates", True),
    ("src/pricing/total.cc", "rounding in src/pricing/total.cc.", True),
    ("src/pricing/total.cc", "rounding in src/pricing/total.c", False),
    ("->", "then a->b works", True),
    ("🎉", "done 🎉!", True),
    ("🎉", "done!", False),
    # 3. phrases: white space collapsed on both sides
    ('"source serif 4"', "Source  Serif\n4", True),
    ('"source serif 4"', "Source Serif 45", False),
    # 3. folding applies to both sides; accents are kept
    ("RÉSUMÉ", "résumé", True),
    ("ｆｏｎｔ", "font", True),
    ("resume", "résumé", False),
]


@pytest.fixture
def one_message(corpus):
    """Index one message and return a function asking a query of it."""

    def ask(text: str, query: str, attachments: list[str] = ()) -> bool:
        extra = {}
        if attachments:
            extra["attachments"] = [{"id": f"a{i}", "name": n, "mime_type": "image/png", "bytes": 1}
                                    for i, n in enumerate(attachments)]
        corpus.session("s1", CWD, title="Résumé layout").message("m1", text, **extra)
        ix = corpus.open()
        found = ix.search(query, limit=10**9)
        assert [(s["session_id"], hit.message_id) for hit, s in found] in ([], [("s1", "m1")])
        return bool(found)

    return ask


@pytest.mark.parametrize(("query", "text", "expected"), CASES, ids=[f"{q}|{t}" for q, t, _ in CASES])
def test_example(one_message, query, text, expected):
    assert one_message(text, query) is expected


# 1, 2. attachment names are fields of their own; titles are not fields


@pytest.mark.parametrize(("query", "expected"), [
    ("截图", True),                # in the attachment name only
    ("浮窗 截图", True),           # two terms, two fields
    ('"浮窗 浮窗截图"', False),    # one term never spans two fields
    ("layout", False),            # the session title is not a field
])
def test_fields(one_message, query, expected):
    assert one_message("浮窗", query, attachments=["浮窗截图.png"]) is expected


# 4. secrets: a placeholder is one space; nothing inside it matches


@pytest.mark.parametrize(("query", "expected"), [
    ("deploy", True),
    ("now", True),
    ('"with now"', True),         # the placeholder is one space between them
    ("redacted", False),
    ("anthropic_key", False),
    (SECRET_BODY, False),
    ("ant", False),
])
def test_placeholder_is_one_space(one_message, query, expected):
    assert one_message(f"deploy with {SECRET} now", query) is expected


def test_placeholder_hash_matches_nothing(corpus):
    corpus.session("s1", CWD).message("m1", f"deploy with {SECRET} now")
    ix = corpus.open()
    stored = ix.store.conn.execute("SELECT text FROM messages").fetchone()[0]
    assert SECRET not in stored
    digest = re.search(r"anthropic_key:([0-9a-f]{8})", stored).group(1)
    assert ix.search(digest, limit=10**9) == []
    assert ix.search(f"anthropic_key:{digest}", limit=10**9) == []


def test_credential_shaped_query_is_refused(corpus):
    corpus.session("s1", CWD).message("m1", f"deploy with {SECRET} now")
    ix = corpus.open()
    env = ix.recall(SECRET, all_projects=True)
    assert env.status == "refused"
    assert SECRET not in env.model_dump_json()


# 3, 5. a term made only of symbols or emoji has no index tokens: a scan answers it


@pytest.mark.parametrize("query", ["->", "🎉", "%", "_"])
def test_symbol_only_terms_are_answered_by_a_scan(corpus, query):
    corpus.session("s1", CWD).message("m1", "a->b 🎉 100% __init__")
    ix = corpus.open()
    assert term_tokens(query, _unicode61).tokens == ()
    env = ix.recall(query, all_projects=True)
    assert env.status == "ok"
    assert env.diagnostics.engine == "session-scan"


# 5. how the index answers: bigrams plus the run's last character; a single
# CJK character at the end of a term is a prefix token


def _unicode61(text: str) -> list[str]:
    tok = apsw.Connection(":memory:").fts5_tokenizer("unicode61", FTS_TOKENIZER_ARGS)
    return [t[2] for t in tok(text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)]


def test_index_body_example():
    assert _unicode61(index_body("显示Miso")) == ["显示", "示", "miso"]


@pytest.mark.parametrize(("term", "tokens", "prefix"), [
    ("示", ("示",), True),                   # single CJK character at the end: "示"*
    ("显示", ("显示",), False),              # a run at the end may continue in the text: no unigram
    ("显示miso", ("显示", "示", "miso"), False),  # a run that ends inside the term is closed
    ("miso显", ("miso", "显"), True),
    ("->", (), False),                       # symbols only: no tokens, a scan answers
])
def test_term_tokens_examples(term, tokens, prefix):
    got = term_tokens(term, _unicode61)
    assert (got.tokens, got.prefix) == (tokens, prefix)


# --- the fast paths of folding, against the definition --------------------------

_FOLD_ALPHABET = st.sampled_from(
    list("aZß ﬁ①２Ｆｏ，：！？　。、人们㐂㐄右手⼿㊨가ᄀ\u1161ｶﾞ\u0301\u0316Ａé\ue000一⼀㊀\u91d1\u2fa6\uf90a㈮月⽉㋀日")
) | st.characters(blacklist_categories=("Cs",))


@settings(max_examples=400, deadline=None)
@given(st.text(_FOLD_ALPHABET, max_size=40))
def test_fold_equals_nfkc_then_casefold(text):
    want = unicodedata.normalize("NFKC", text).casefold()
    assert fold(text) == want
    folded, is_nfkc = fold_form(text)
    assert folded == want and is_nfkc == (unicodedata.normalize("NFKC", text) == text)
    if is_nfkc:
        assert fold(text, nfkc=True) == want


def pairs(folded_term: str) -> list[tuple[str, ...]]:
    return literal_pairs(folded_term, literal_forms(folded_term))


def literal_chars(folded_term: str) -> set[str]:
    """The characters of literal_forms that have no other form (no other
    character folds to them): the engine looks for the term itself when
    every character is one."""
    return {c for c, forms in literal_forms(folded_term).items() if len(forms) == 1}


@settings(max_examples=400, deadline=None)
@given(st.text(_FOLD_ALPHABET, max_size=20), st.text(_FOLD_ALPHABET, min_size=1, max_size=4),
       st.text(_FOLD_ALPHABET, max_size=20))
def test_literal_forms_are_a_necessary_condition(before, raw_term, after):
    """What the scans test before folding: a text whose fold holds a term
    holds, for each character of literal_forms, one of its forms (and the term
    itself when all of its characters have a single form and none is a
    combining mark)."""
    text = before + raw_term + after
    term = fold(raw_term)
    if term not in fold(text):
        return
    forms = literal_forms(term)
    assert all(any(f in text for f in fs) for fs in forms.values())
    assert all(any(f in text for f in group) for group in pairs(term))
    chars = literal_chars(term)
    if len(chars) > 1 and chars == set(term) and not any(map(unicodedata.combining, chars)):
        assert term in text


# Ideographs with other forms (Kangxi radicals, enclosed, compatibility,
# annotation marks) and without, among marks, jamo, full-width and
# placeholder characters, so that terms of two ideographs and their forms
# side by side, or apart, come up often.
_PAIR_ALPHABET = st.sampled_from(
    [*"人⼈㆟地㆞一⼀㈠㊀🈩金⾦金㈮㊎月⽉日⽇㋀基阳㐂㐄 á̖⃝゙︀가，",
     "\ue000api_key:0123abcd\ue001"]  # and a whole placeholder, which the match text blanks
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PAIR_ALPHABET, max_size=12).map("".join),
       st.lists(_PAIR_ALPHABET, min_size=2, max_size=4).map("".join),
       st.lists(_PAIR_ALPHABET, max_size=12).map("".join))
def test_two_ideographs_side_by_side_are_in_the_text_or_another_form_is(before, raw_term, after):
    """fold.literal_pairs: where the fold of a text holds two ideographs side
    by side, the text holds them side by side, or another form of one."""
    text = before + raw_term + after
    term = match_text(raw_term, collapse=False).strip(" ")
    if not term or term not in match_text(text, collapse=False):
        return
    for group in pairs(term):
        assert any(f in text for f in group), (text, term, group)


def test_literal_pairs_examples():
    assert pairs("true人地") == [("人地", "⼈", "㆟", "㆞")]
    assert pairs("师范学院") == [("师范",), ("范学", "㈻", "㊫"), ("学院", "㈻", "㊫")]
    assert pairs("人人") == [("人人", "⼈", "㆟")]
    assert pairs("人 地") == pairs("人a地") == []  # not side by side
    pair = pairs("点心")[0]  # 点 has 27 other forms (㍘ for 0点 ... 🉄), 心 none
    assert pair[0] == "点心" and len(pair) == 28 and "㍘" in pair
    assert pairs("カナ") == []  # kana: not ideographs (ｶﾞ folds to two characters)
    # a mark between them stays between them in the fold: no pair, and a text must not be taken for one
    assert fold("人́地") == "人́地"


def test_ideographs_are_in_no_composition_and_nothing_folds_to_them():
    """What literal_pairs rests on, over all of Unicode: every ideograph of
    its class without a decomposition is a starter, the first or second
    character of no canonical decomposition of two (the pairs composition
    works from), and its own case fold; no other character case folds to
    anything holding one; and no character folds to nothing (so nothing
    between two ideographs can vanish from between them)."""
    in_pairs: set[str] = set()
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        d = unicodedata.decomposition(c).split()
        if len(d) == 2 and not d[0].startswith("<"):
            in_pairs.update(chr(int(x, 16)) for x in d)
        folded = c.casefold()
        if folded != c:
            assert not _IDEOGRAPH.search(folded), c
        assert unicodedata.normalize("NFKC", c) and folded, hex(cp)
    for cp in [*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000), *range(0x20000, 0x40000)]:
        c = chr(cp)
        if unicodedata.decomposition(c):
            continue  # compatibility ideographs: literal_forms leaves them out
        assert unicodedata.combining(c) == 0 and c not in in_pairs and c.casefold() == c, hex(cp)


def test_literal_forms_examples():
    assert literal_chars("㐂㐄") == {"㐂", "㐄"}
    assert literal_forms("人") == {"人": frozenset("人⼈㆟")}  # a Kangxi radical and an annotation mark fold to it
    assert literal_chars("人") == set()
    # 金: a Kangxi radical, a compatibility ideograph and two enclosed forms fold to it
    assert literal_forms("\u91d1") == {"\u91d1": frozenset("\u91d1\u2fa6\uf90a\u322e\u328e")}
    assert literal_forms("font") == {}  # F, Ｆ and dozens of mathematical letters fold to f
    assert literal_forms("한") == {}  # composed from jamo


@pytest.mark.parametrize("text", [
    "a" + "\u0316\u0301" * 40 + " plain" * 1000,            # a long run of marks out of order
    "x" * 5000 + "e" + "\U0001d167\u0301" * 20,              # marks beyond the BMP among them
    "测试，失败了 " * 1000 + "\U0001f600" * 40,               # CJK, full-width commas, a run of emoji
    "\u3099\u302a" * 30 + "か" + "x" * 5000,                 # ideographic and kana marks
])
def test_long_texts_normalise_as_unicodedata_does(text: str) -> None:
    """The mark-run reordering of long texts (fold._nfkc), with its coarse
    first test, gives exactly NFKC."""
    from session_recall.text.fold import _nfkc

    assert _nfkc(text) == unicodedata.normalize("NFKC", text)


# Folding a long text a piece at a time (fold.match_text_pieces): what
# verification reads must be the same text, and a term must occur in it
# where it occurs in one piece. Characters that compose, reorder, expand or
# fold across a neighbour, placeholders, and white space of every kind.
_PIECE_SOUP = [" ", "\n", "\r", "\t", "\xa0", "\u3000", "a", "A", "e", "\u0301", "\u0316", "é", "ß", "İ", "ﬁ", "Ω",
               "\u2126", "ｆ", "，", "①", "\U0001d400", "か", "\u3099", "が", "\u1100", "\u1161", "\u11a8", "한", "中", "文",
               "\ue000secret:0123abcd\ue001", "1", "_", "-", "."]


@pytest.mark.parametrize("seed", range(4))
def test_a_long_text_folds_the_same_a_piece_at_a_time(seed: int) -> None:
    import random

    from session_recall.query.match import occurs
    from session_recall.text.fold import match_text_pieces

    rng = random.Random(seed)
    for _ in range(300):
        text = "".join(rng.choice(_PIECE_SOUP) for _ in range(rng.randint(0, 200)))
        whole = match_text(text, False)
        size = rng.choice([1, 2, 7, 31])
        pieces = list(match_text_pieces(text, False, size))
        assert "".join(pieces) == whole, (text, size)
        for _ in range(5):
            term = fold("".join(rng.choice(_PIECE_SOUP[6:]) for _ in range(rng.randint(1, 3)))).strip()
            if term and " " not in term and "\n" not in term:
                assert any(occurs(term, p) for p in pieces) == occurs(term, whole), (text, term, size)
