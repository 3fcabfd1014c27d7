"""The read path's faster code returns exactly what the plain code did.

Each function of the indexer's read path that was rewritten for speed
(docs/benchmarks.md, "What each lever bought") is compared here with a
plain version of itself: the code it replaced, or an obvious one written
from its definition. The index must hold the same texts, tokens and counts
whichever runs.
"""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall.text import tokens
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


@settings(deadline=None)
@given(TEXT)
def test_words_only_is_the_definition(text):
    assert words_only(text) == plain_words_only(text)


@settings(deadline=None)
@given(LONG_TEXT)
def test_words_only_of_a_long_text_is_the_definition(text):
    """The regex path (texts of at least tokens._LONG characters)."""
    assert words_only(text) == plain_words_only(text)


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
@given(TEXT)
def test_index_body_form_is_unchanged(text):
    assert index_body_form(text) == plain_index_body_form(text)
