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
# jieba's precise mode (jieba.cut) rather than its search mode
# (cut_for_search, which adds the dictionary words inside a long word as
# keywords of their own, so that one long word counts several times).
CJK_SEGMENTATION = "precise"
# Join the characters that jieba leaves outside its dictionary (names it
# splits into single characters or glues to a neighbour: 津|蓟, 尚恩有) into
# one keyword whose bigrams are its variants (津蓟; 尚恩有 or 尚恩 or 恩有).
JOIN_UNKNOWN = True
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
        return []

    for p in pieces:
        if len(p) >= 2 and _in_dictionary(p):
            yield from flush()
            yield (p,)
        elif len(p) == 1 and p in STOP_ZH:
            yield from flush()
        else:
            unknown.append(p)
    yield from flush()


def _word_groups(text: str):
    """The words of a stretch of text without CJK, each its own group; a
    name made of words joined by one of `._-/` with nothing between
    (`hello.py`, `registry.ts`, `auto-summarize`, `src/app`) first as one
    keyword of its own (COMPOUNDS)."""
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
        if run and not (a - run[-1][1] == 1 and text[run[-1][1]] in "._-/"):
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
    limit = limit or KEYWORD_LIMIT
    out: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for group in _groups(fold(question)):
        w = group[0].strip()
        if not w or w in seen:
            continue
        if not any(is_word_char(c) or HAS_CJK.match(c) for c in w):
            continue  # punctuation
        if HAS_CJK.match(w[0]):
            if len(w) < 2 or w in STOP_ZH:
                continue
        elif w in STOP_EN or len(w) < 2:
            continue
        variants = tuple(v for v in group[1:] if v not in seen)
        seen.add(w)
        seen.update(variants)
        out.append((w, *variants))
        if len(out) >= limit:
            break
    return out


def keywords(question: str, limit: int | None = None) -> list[str]:
    """The keywords of a question (each group's first word)."""
    return [g[0] for g in keyword_groups(question, limit)]
