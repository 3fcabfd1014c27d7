"""The read path's faster code returns exactly what the plain code did.

Each function of the indexer's read path that was rewritten for speed
(docs/benchmarks.md, "What each lever bought") is compared here with a
plain version of itself: the code it replaced, or an obvious one written
from its definition. The index must hold the same texts, tokens and counts
whichever runs.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall import Index
from session_recall.text import redact, tokens
from session_recall.text.fold import CJK_RUN, blank_placeholders, fold_form
from session_recall.text.tokens import index_body_form, words_only

# --- the plain versions ------------------------------------------------------


def plain_words_only(folded: str) -> str:
    """Every character that is not a letter, digit, mark or private-use
    character becomes a space (the definition, one character at a time)."""
    if folded.isascii():
        return folded
    return "".join(c if (cat := unicodedata.category(c))[0] in "LNM" or cat == "Co" else " " for c in folded)


def plain_grams(folded: str) -> str:
    """The bigram rewrite as it was: a loop over the CJK runs."""
    out: list[str] = []
    pos = 0
    for m in CJK_RUN.finditer(folded):
        run = m.group()
        grams = [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]
        out += (folded[pos : m.start()], " " + " ".join(grams) + " ")
        pos = m.end()
    out.append(folded[pos:])
    return "".join(out)


def plain_index_body_form(text: str) -> tuple[str, bool]:
    folded, nfkc = fold_form(blank_placeholders(text))
    return plain_grams(plain_words_only(folded)), nfkc


_CUTS = bytes(b if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b >= 128) else 32 for b in range(256))


def plain_body_tokens(body: str) -> int:
    """The count as it was: the body cut where unicode61 cuts it, split into tokens."""
    return len(body.encode("utf-8", "surrogatepass").translate(_CUTS).split())


def plain_has_trigger(text: str) -> bool:
    low = redact._lower(text)
    return any(t in low for t in redact._TRIGGERS if t != "\n")


def plain_trigger_hits(low: str) -> dict[str, list[int]]:
    """Every start of every trigger in `low`, overlapping ones too (a
    provider's name of `vendor_keyed` only in a text that holds `=` or `:`)."""
    separated = "=" in low or ":" in low
    out = {t: [p for p in range(len(low)) if low.startswith(t, p)] for t in redact._TRIGGERS
           if t != "\n" and (separated or t not in redact._SEPARATED)}
    out = {t: hits for t, hits in out.items() if hits}
    if "\n" in low:
        out["\n"] = []
    return out


# --- texts -------------------------------------------------------------------

# Characters at the edges of the CJK class and of the separators' table
# (kana punctuation, iteration marks, Hangul tone marks, an ideograph
# beyond the BMP, unassigned code points inside the class), with words,
# marks, emoji, controls, private-use characters and white space around them.
_EDGES = list(
    "简历模板显示器字体の、。，「」・゠ー々〆〇〪〮〯ぁゟ゠ァヿㄱㆎᄀᇿꥠ꥿가힣ힰퟻ豈﫿"
    "\U00020000\U0002a6df\U0003134a\U0001b000\U0001aff0\U0001b16f\u9fff\u4dbf"
    "ab Z9_-./é\u0301\u0300 \t\n\x00\x1f\x7f😀🥰₽\u2066\ue000\uf8ff\U000f0000\ufffd\u00a0\u3000"
)
TEXT = st.text(alphabet=st.sampled_from(_EDGES) | st.characters(), max_size=60)
LONG_TEXT = st.builds(lambda a, b: a + "字" * tokens._LONG + b, TEXT, TEXT)


# Each rewrite, its plain definition, and the texts they are compared on (a
# long text takes words_only's regex path: at least tokens._LONG characters).
DEFINITIONS = {
    "words_only": (words_only, plain_words_only, TEXT),
    "words_only of a long text": (words_only, plain_words_only, LONG_TEXT),
    "index_body_form": (index_body_form, plain_index_body_form, TEXT),
}


@pytest.mark.parametrize("name", DEFINITIONS)
@settings(deadline=None)
@given(data=st.data())
def test_each_rewrite_is_its_definition(name, data):
    fast, plain, texts = DEFINITIONS[name]
    text = data.draw(texts)
    assert fast(text) == plain(text)


def test_words_only_knows_every_character_of_the_bmp():
    every = "".join(map(chr, range(0x10000)))
    assert words_only(every) == plain_words_only(every)


@settings(deadline=None)
@given(TEXT)
def test_grams_are_the_loop_over_runs(text):
    folded = words_only(text)
    assert tokens._grams(folded) == plain_grams(folded)


@settings(deadline=None)
@given(st.lists(st.sampled_from(["字", "体显示", "あ", "\U00020000", " ", "ab", "、", "\u3005"]), max_size=40))
def test_grams_of_runs_side_by_side(pieces):
    """Runs of one character, runs split by a separator or by nothing CJK."""
    folded = words_only("".join(pieces))
    assert tokens._grams(folded) == plain_grams(folded)


@settings(deadline=None)
@given(st.lists(st.sampled_from(["字", "体显示", "あ", "\U00020000", " ", "ab", "、"]), max_size=40),
       st.integers(1, 8))
def test_grams_of_a_long_text_are_laid_out_a_slice_of_runs_at_a_time(pieces, chars):
    """A text longer than tokens._LAYOUT_CHARS: its runs go in slices of
    about that many characters (here a few), a run longer than that alone."""
    folded = words_only("".join(pieces))
    saved, tokens._LAYOUT_CHARS = tokens._LAYOUT_CHARS, chars
    try:
        assert tokens._grams(folded) == plain_grams(folded)
    finally:
        tokens._LAYOUT_CHARS = saved


@settings(deadline=None)
@given(TEXT)
def test_body_tokens_is_the_split_count(text):
    for body in (text, tokens.index_body(text)):
        assert tokens.body_tokens(body) == plain_body_tokens(body)


# Pieces of words a stream's last word may hold: every trigger, its halves,
# and what surrounds one.
_TRIGGER_PIECES = sorted({p for t in redact._TRIGGERS for p in (t, t[: len(t) // 2], t[len(t) // 2 :])}
                         | {"İ", "K", "SK-", " ", "é", "字"})


@settings(deadline=None)
@given(st.lists(st.sampled_from(_TRIGGER_PIECES) | st.text(max_size=3), max_size=6).map("".join))
def test_has_trigger_is_an_in_test_per_trigger(word):
    assert redact.has_trigger(word) == plain_has_trigger(word)


def test_a_session_named_by_two_spellings_of_its_cwd_is_one_session(tmp_path, canonical, isolated_settings):
    """The writer caches sessions by the cwd as written, beside the cwd as
    stored: a spelling met first, or second, still names the one session."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, cwd in (("a", "/home/ada/p/../p/"), ("b", "/home/ada/p"), ("c", "//home/ada/p/.")):
        log = canonical("s1", cwd=cwd)
        (logs / f"{name}.jsonl").write_bytes(log.session() + log.message(f"m-{name}", f"hello {name}"))
    with Index.open(tmp_path / "recall.db") as ix:
        ix.sync([str(logs)], kind="canonical")
        rows = ix.store.conn.execute("SELECT s.cwd, count(*) FROM messages m JOIN sessions s ON s.id = m.session "
                                     "GROUP BY s.id").fetchall()
    assert rows == [("/home/ada/p", 3)]


def plain_last_word(text: str):
    """What redact._last_word stands for: the pattern searched from 8 KiB before the end."""
    return redact._LAST_WORD.search(text, max(0, len(text) - 8192))


_WORD_PIECES = [*redact._HEAD_WORDS, "PASSWORD", "Bearer", "token", "-P", "-p", "--pass", "=", ":", '"', "'", "\\",
                " ", "  ", "\t", "\n", "\x1c", "\u3000", "İ", "ı", "ſ", "\u212a", "x", "Zz9", "字体", "é"]


@settings(deadline=None)
@given(st.lists(st.sampled_from(_WORD_PIECES) | st.text(max_size=4), max_size=30).map("".join),
       st.sampled_from([0, 60, 4090, 4100]))
def test_last_word_is_the_pattern_searched_near_the_end(text, pad):
    """A stream's held tail: heads (a key, `Bearer`, a flag) near the last
    word or not, white space of every kind, last words near 4,096
    characters long."""
    for t in (text, "y " * 40 + text, text + "-" * pad):
        got, want = redact._last_word(t), plain_last_word(t)
        assert (got and got.span()) == (want and want.span())


def test_case_insensitive_matching_takes_only_these_for_a_head_words_letters():
    """_may_hold_head lowers İ ı ſ and the Kelvin sign: re's case-insensitive
    matching takes no other character for a letter of a head word."""
    import re

    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    letters = sorted(set("".join(redact._HEAD_WORDS)) - {"-"})
    taken = set(re.findall("(?i)[" + "".join(letters) + "]", every))
    assert taken - set(letters) - set("".join(letters).upper()) == {"\u0130", "\u0131", "\u017f", "\u212a"}
    # and each of them, in any head word, is lowered to its letter
    others = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}
    for w in redact._HEAD_WORDS:
        for i, c in enumerate(w):
            for o in others.get(c, "") + c.upper():
                variant = "x" + w[:i] + o + w[i + 1 :] + "x"
                assert redact._may_hold_head(variant), variant


@settings(deadline=None)
@given(st.lists(st.sampled_from(_TRIGGER_PIECES) | st.text(max_size=3), max_size=12).map("".join))
def test_trigger_hits_are_every_start_of_every_trigger(text):
    low = redact._lower(text)
    assert redact._trigger_hits(low) == plain_trigger_hits(low)


def test_trigger_hits_of_each_trigger_alone_and_twice():
    for t in redact._TRIGGERS:
        for low in (t, t + t, "x" + t + "x"):
            assert redact._trigger_hits(low) == plain_trigger_hits(low), low
