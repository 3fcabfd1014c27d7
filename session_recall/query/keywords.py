"""Natural-language questions to keywords, with jieba (query side only: it cuts
~0.8 MB/s, far too slow for the write path, and is loaded once, lazily).

A question becomes keyword groups: each group is a keyword and, for a name
jieba does not know, its bigrams as variants (the group counts once when any
of them occurs). Every keyword and variant is an exact term of the match
predicate (docs/matching.md); in question mode they are ORed and rank
(rank.Ranking.coverage_power). The choices below were measured with
bench/quality/evaluate.py; docs/quality.md has the numbers.
"""

from __future__ import annotations

import logging
import threading
import unicodedata

from ..text.fold import CJK_RUN, HAS_CJK, fold, is_word_char

_lock = threading.Lock()
_jieba = None

STOP_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just last let me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves week day yesterday today ago pick picked use used
    did tell remember recall said say""".split()
    # What a contraction leaves once its apostrophe cuts it ("didn't" is
    # didn + t, "we've" is we + ve), as NLTK's English list has them; `won`
    # is left out of it (who won?).
    + """ain aren couldn didn doesn don hadn hasn haven isn ll ma mightn mustn needn re shan shouldn ve
    wasn weren wouldn""".split()
    # Words naming the participants of a conversation ("what does the man
    # suggest", "the two speakers"): every conversation has them, and a log
    # may write them as speaker marks in every turn (DREAM's "Man:"), so they
    # tell no session from another. docs/quality.md: +1.6 points of session
    # hit@1 on DREAM's tuning half, no change on C3's.
    + """man woman men women boy girl speaker speakers conversation dialogue""".split()
)
STOP_ZH = frozenset(
    """的 了 是 在 我 你 他 她 它 们 我们 你们 他们 这 那 这个 那个 哪个 什么 怎么 怎样 为什么 吗 呢 吧 啊
    和 与 或 就 都 也 还 又 把 被 给 让 对 从 到 向 上 下 里 中 之 以 及 一个 一下 有 没有 没 不 很 会 能
    可以 要 想 说 过 着 得 地 上周 昨天 今天 前天 最近 之前 以前 当时 那次 那天 时候 哪 谁 多少 几 所以 因为
    如果 但是 然后 已经 还是 是不是 一些 这些 那些 选 用""".split()
    + """男 女 男的 女的 男人 女人 说话人 对话 谈话""".split()
    # Interrogatives (what English's wh-words are above) and the frame of a
    # question about what was said (根据, 关于, 意思): a conversation uses them
    # as freely as the question does. +0.8 points of session hit@1 on C3's
    # tuning half, +3 on the coding set's Chinese questions.
    + """哪种 哪些 哪里 哪儿 哪位 哪家 哪天 哪年 什么样 怎么样 怎样 如何 为何 几个 多久 多长 多少 是否 是什么
    干什么 做什么 啥 根据 关于 下列 哪项 正确 可能 知道 意思 说明 主要""".split()
)
# The frame of a question about what was said: words that ask how, not what
# ("what does the man mean", "what can we infer", "女的对男的态度怎么样", "他们在谈论
# 什么"). A conversation rarely says them, so each is a rare word that the
# question shares with turns that happen to hold it, not with the one meant.
# Kept apart from STOP_EN, which is the ordinary English list the baselines
# use too. docs/quality.md: +0.4 points of session hit@1 on DREAM's tuning
# half, +0.1 on C3's, the other sets the same.
STOP_FRAME = frozenset(
    """mean means meant imply implies implied infer inferred learn probably probable likely mainly
    according following mentioned talking opinion attitude suggest suggests suggested conclude topic""".split()
    + """认为 觉得 下面 发生 谈论 态度 说话 语气 口气 说法 看法 观点 原因 方面 提到 特点 对于 哪句 这件 这家
    一项 得知 推测 判断 最有""".split()
)
# A single CJK character is a keyword of its own (买, 车, 钱, 药: jieba leaves
# a one-character word alone, and a short Chinese question may have no other:
# "男的想买什么？" held none before), unless it is a function character below or
# the question has CJK_CHARS_BELOW or more keywords of two or more characters,
# or a word in another script (an identifier names what is asked about, as
# Ranking.latin_in_cjk says): a one-character keyword is weak evidence, and a
# common one fills the question's pool with turns holding it (on the coding
# set's tuning questions it cost 7 points of session hit@1 without the bound).
# docs/quality.md: +2.2 points of session hit@1 on C3's tuning half (+2.7 with
# its answer), CMRC +0.6.
CJK_CHARS = True
CJK_CHARS_BELOW = 4
STOP_ZH_CHAR = frozenset(
    """呀 哦 嗯 啦 嘛 么 个 些 儿 去 来 做 看 才 再 等 人 好 事 样 多 少 大 小 一 二 两 三 点 怎 为 当 将 而
    但 却 并 太 最 更 挺 真 跟 同 比 您 咱 自 己 请 行 对 错 次 种 件 本 位 啥""".split()
)
# Whether a function character of STOP_ZH_CHAR that jieba leaves alone joins
# its unknown neighbours (去|看 as 去看) or breaks the run as STOP_ZH's do.
STOP_CHARS_JOIN = True
# A dictionary word of three or more characters has the dictionary words
# inside it as variants of its group (飞机票: 飞机, 机票; 产品质量: 产品, 质量): a
# conversation often says the shorter word ("机票打折") where the question
# says the longer one. The group counts once however many of them a message
# holds (jieba's search mode instead made each a keyword of its own: CMRC
# -0.4). docs/quality.md: +0.3 points on C3's tuning half.
CJK_SUBWORDS = True
# jieba's precise mode (jieba.cut) rather than its search mode
# (cut_for_search, which adds the dictionary words inside a long word as
# keywords of their own, so that one long word counts several times).
CJK_SEGMENTATION = "precise"
# Join the characters that jieba leaves outside its dictionary (names it
# splits into single characters or glues to a neighbour: 津|蓟, 尚恩有) into
# one keyword whose bigrams are its variants (津蓟; 尚恩有 or 尚恩 or 恩有).
JOIN_UNKNOWN = True
# At most this many variants a group (a run of kana or Hangul that jieba
# cuts into single characters is joined whole, and a long one would make
# every bigram of the sentence a term: a question of 999 Hangul syllables,
# 998 variants, took 57-65 ms warm on an index of a few sessions, 3-4 ms with
# the limit). The first ones are kept.
VARIANT_LIMIT = 32
# At most this many keyword groups a question (32 measured the same on the
# labelled sets: the keywords past the 12th of a long question are rarely what
# decides).
KEYWORD_LIMIT = 12
# A name made of words joined by `.`, `_`, `-` or `/` (a file, a path, an
# option: `hello.py`, `registry.ts`, `auto-summarize`) is a keyword of its
# own, before its words. An agent asks about files by name, and a turn naming
# the file is likelier the one meant than a turn holding its words apart.
# docs/quality.md: on the tuning halves DREAM and the coding set the same,
# Cranfield +0.4; the coding set's held half +3.9 (the name and its words as
# one group instead: no change anywhere).
COMPOUNDS = True


def _load():
    global _jieba
    with _lock:
        if _jieba is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
    return _jieba


def _in_dictionary(word: str) -> bool:
    return bool(_load().dt.FREQ.get(word))


def _bigrams(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)]


def _is_content(ch: str) -> bool:
    """A letter, digit or mark: word characters and CJK ones, not the
    punctuation that lives in the CJK blocks (・ ゠ 〜)."""
    return is_word_char(ch) or (bool(HAS_CJK.match(ch)) and unicodedata.category(ch)[0] in "LNM")


def _subwords(word: str) -> list[str]:
    """The dictionary words of two or more characters inside `word`, itself
    left out."""
    n = len(word)
    return [word[i:j] for i in range(n) for j in range(i + 2, n + 1)
            if j - i < n and _in_dictionary(word[i:j]) and word[i:j] not in STOP_ZH
            and word[i:j] not in STOP_FRAME]


def _cjk_groups(run: str):
    """Keyword groups of one CJK run (stop words are dropped by the caller)."""
    jieba = _load()
    pieces = list(jieba.cut(run) if CJK_SEGMENTATION == "precise" else jieba.cut_for_search(run))
    if not JOIN_UNKNOWN:
        for p in pieces:
            yield (p,)
        return
    unknown: list[str] = []

    def flush():
        text = "".join(unknown)
        unknown.clear()
        if len(text) >= 2 and text not in STOP_ZH:
            return [(text, *(_bigrams(text) if len(text) > 2 else ()))]
        if len(text) == 1 and CJK_CHARS and text not in STOP_ZH and text not in STOP_ZH_CHAR:
            return [(text,)]
        return []

    for p in pieces:
        if len(p) >= 2 and _in_dictionary(p):
            yield from flush()
            yield (p, *(_subwords(p) if CJK_SUBWORDS and len(p) > 2 else ()))
        elif (len(p) == 1 and (p in STOP_ZH or (not STOP_CHARS_JOIN and p in STOP_ZH_CHAR))
              or not any(map(_is_content, p))):
            yield from flush()
        else:
            unknown.append(p)
    yield from flush()


def _word_groups(text: str):
    """The words of a stretch of text without CJK, each its own group; a
    name made of words joined by `._-/` alone, nothing else between
    (`hello.py`, `registry.ts`, `auto-summarize`, `src/app`, `__init__.py`),
    first as one keyword of its own (COMPOUNDS)."""
    words: list[tuple[int, int]] = []  # spans of words
    start = None
    for i, ch in enumerate(text + " "):
        if is_word_char(ch):
            if start is None:
                start = i
        elif start is not None:
            words.append((start, i))
            start = None
    run: list[tuple[int, int]] = []

    def flush():
        if COMPOUNDS and len(run) > 1:
            yield (text[run[0][0]:run[-1][1]],)
        for a, b in run:
            yield (text[a:b],)
        run.clear()

    for a, b in words:
        if run and not all(c in "._-/" for c in text[run[-1][1]:a]):
            yield from flush()
        run.append((a, b))
    yield from flush()


def _groups(text: str):
    """jieba for CJK runs; whole words (word characters, as the predicate
    defines them) everywhere else, so `résumé` stays one word."""
    pos = 0
    for m in list(CJK_RUN.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        yield from _word_groups(text[pos:end])
        if m:
            yield from _cjk_groups(m.group())
            pos = m.end()


def keyword_groups(question: str, limit: int | None = None) -> list[tuple[str, ...]]:
    """The words of a question worth searching for, in order, folded; each with
    the variants that count as the same keyword."""
    limit = KEYWORD_LIMIT if limit is None else max(limit, 0)
    out: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for group in _groups(fold(question)):
        w = group[0].strip()
        if not w or w in seen or w in STOP_FRAME:
            continue
        if not any(map(_is_content, w)):
            continue  # punctuation
        if HAS_CJK.match(w[0]):
            if w in STOP_ZH:
                continue  # a lone character reaches here only as CJK_CHARS lets it
        elif w in STOP_EN or (len(w) < 2 and not w.isdigit()):
            continue  # a lone digit stays: a number names a thing ("5 dollars", "step 3")
        variants = tuple(dict.fromkeys(v for v in group[1:] if v not in seen and v != w))[:VARIANT_LIMIT]
        seen.add(w)
        seen.update(variants)
        out.append((w, *variants))
    longer = [g[0] for g in out if len(g[0]) > 1]
    # (a word in another script: one with a letter; `2024-05` or `3.14` is not)
    if len(longer) >= CJK_CHARS_BELOW or any(not HAS_CJK.match(w) and any(map(str.isalpha, w)) for w in longer):
        out = [g for g in out if len(g[0]) > 1 or not HAS_CJK.match(g[0])]
    return out[:limit]


def keywords(question: str, limit: int | None = None) -> list[str]:
    """The keywords of a question (each group's first word)."""
    return [g[0] for g in keyword_groups(question, limit)]
