"""Natural-language questions to keywords, with jieba (query side only: it cuts
~0.8 MB/s, far too slow for the write path, and is loaded once, lazily)."""

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
)
STOP_ZH = frozenset(
    """的 了 是 在 我 你 他 她 它 们 我们 你们 他们 这 那 这个 那个 哪个 什么 怎么 怎样 为什么 吗 呢 吧 啊
    和 与 或 就 都 也 还 又 把 被 给 让 对 从 到 向 上 下 里 中 之 以 及 一个 一下 有 没有 没 不 很 会 能
    可以 要 想 说 过 着 得 地 上周 昨天 今天 前天 最近 之前 以前 当时 那次 那天 时候 哪 谁 多少 几 所以 因为
    如果 但是 然后 已经 还是 是不是 一些 这些 那些 选 用""".split()
)
STOP_ZH_QUESTION = frozenset(
    """哪些 哪个 哪支 哪几 哪几个 几个 哪里 哪儿 哪年 哪一 哪一年 哪一个 哪位 哪种 哪家 哪部 哪项 哪座 哪条 哪所 哪国
    何时 何地 如何 是否 多久 多长 多大 多少 什么样 怎么样 为何 何种 哪天 几年 几月 几次 几种 于 为 其 该 将 由 所 而 并
    等 则 即 亦 此 每 各 共 约""".split()
)


def _load():
    global _jieba
    with _lock:
        if _jieba is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
    return _jieba


# --- knobs under test (bench/quality) ---
CJK_MODE = "search"      # "search": jieba.cut_for_search; "precise": jieba.cut
CJK_RESIDUE = False      # join runs of characters jieba leaves outside its dictionary
INFLECT = 0              # 0 none, 1 plural/singular, 2 + -ed/-ing
KEYWORD_LIMIT = 12
ZH_QUESTION_STOPS = False
EN_QUESTION_STOPS = False
STOP_EN_QUESTION = frozenset(
    """anyone anybody someone papers paper article articles literature information available known
    exist exists existing dealing deal deals regarding concerning give given gives good basic any else
    way ways done""".split()
)


def _stop_zh(w: str) -> bool:
    return w in STOP_ZH or (ZH_QUESTION_STOPS and w in STOP_ZH_QUESTION)


def _in_dictionary(word: str) -> bool:
    return bool(_load().dt.FREQ.get(word))


def _bigrams(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)]


def _cjk_groups(run: str):
    jieba = _load()
    pieces = list(jieba.cut_for_search(run) if CJK_MODE == "search" else jieba.cut(run))
    if not CJK_RESIDUE:
        for p in pieces:
            yield (p,)
        return
    residue: list[str] = []

    def flush():
        text = "".join(residue)
        residue.clear()
        if len(text) >= 2 and not _stop_zh(text):
            return [(text, *(_bigrams(text) if len(text) > 2 else ()))]
        return []

    for p in pieces:
        if len(p) >= 2 and _in_dictionary(p):
            yield from flush()
            yield (p,)
        elif len(p) == 1 and _stop_zh(p):
            yield from flush()
        else:
            residue.append(p)
    yield from flush()


def _base_forms(word: str) -> set[str]:
    """Candidate uninflected forms of `word` (itself when it looks uninflected)."""
    if word.endswith("ies") and len(word) > 4:
        return {word[:-3] + "y"}
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return {word[:-2]}
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return {word[:-1]}
    if INFLECT >= 2:
        for suf in ("ed", "ing"):
            if word.endswith(suf) and len(word) - len(suf) >= 3:
                stem = word[: -len(suf)]
                bases = {stem, stem + "e"}
                if stem[-1] == stem[-2]:
                    bases.add(stem[:-1])
                return bases
    return {word}


def _forms(base: str) -> set[str]:
    forms = {base}
    if base.endswith("y") and len(base) > 2 and base[-2] not in "aeiou":
        forms.add(base[:-1] + "ies")
    elif base.endswith(("s", "x", "z", "ch", "sh")):
        forms.add(base + "es")
    else:
        forms.add(base + "s")
    if INFLECT >= 2:
        stem = base[:-1] if base.endswith("e") else base
        forms.update((stem + "ed", stem + "ing"))
    return forms


def inflections(word: str) -> list[str]:
    """Regular English inflections of a lower-case ASCII word (not itself)."""
    if INFLECT == 0 or not word.isascii() or not word.isalpha() or len(word) < 3:
        return []
    forms: set[str] = set()
    for base in _base_forms(word):
        forms |= _forms(base)
    forms.discard(word)
    return sorted(forms)


def _groups(text: str):
    """jieba for CJK runs; whole words (word characters, as the predicate
    defines them) everywhere else, so `résumé` stays one word."""
    pos = 0
    for m in list(CJK_RUN.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        word: list[str] = []
        for ch in text[pos:end] + " ":
            if is_word_char(ch):
                word.append(ch)
            elif word:
                w = "".join(word)
                yield (w, *inflections(w))
                word = []
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
            if len(w) < 2 or _stop_zh(w):
                continue
        elif w in STOP_EN or len(w) < 2 or (EN_QUESTION_STOPS and w in STOP_EN_QUESTION):
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
