"""How much of a labelled set any ranking of the question's keywords can answer.

    python -m bench.quality.ceiling [--set c3,dream] [--limit-questions N]

Question mode returns only messages that hold one of the question's keywords
(docs/quality.md), so an ask is out of its reach when the question has no
keyword left after the stop words, or when no gold session holds any of them.
For the rest, this counts how the gold session stands on keyword evidence
alone: each session's coverage is the idf weight (over sessions) of the
keywords it holds, and the gold session is either the only one with the most,
tied for the most, or out-covered by 1 to 4 or by 5 or more sessions. A
ranking can still order sessions of equal coverage by how often and where
they hold the keywords (bm25, turns, titles), so the ties and the close
cases are what ranking work can win; an ask out-covered by five sessions
needs words the question does not say (paraphrase).

With PyStemmer installed (`pip install PyStemmer`), an English set also gets
`stem rescues`: the asks whose gold session holds none of the keywords but
holds a word of the same Snowball stem as one of them (what stemming could
at most add to the reach).

Matching is the index's own: folded text (`match_text`) and whole-word
occurrence (`occurs`), the keywords of `keywords.keywords`. Read-only; no
index is built.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict

from bench.quality import datasets as D
from session_recall.query import keywords as K
from session_recall.query.match import occurs
from session_recall.text.fold import match_text

CLASSES = ("no keywords", "gold holds none", "5+ hold more", "1-4 hold more", "gold ties for most",
           "gold alone holds most")
WORD = re.compile(r"[a-z]+")


def _stemmer():
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


class Evidence:
    """Which sessions hold each keyword (memoised: thousands of asks share
    their keywords), and each keyword's idf over sessions."""

    def __init__(self, ds: D.Dataset):
        self.texts = {s.session_id: match_text("\n".join(m.text for m in s.messages)) for s in ds.sessions}
        self.n = len(self.texts)
        self._holding: dict[str, frozenset[str]] = {}
        self._stems: dict[str, set[str]] | None = None

    def holding(self, keyword: str) -> frozenset[str]:
        if keyword not in self._holding:
            self._holding[keyword] = frozenset(sid for sid, t in self.texts.items() if occurs(keyword, t))
        return self._holding[keyword]

    def idf(self, keyword: str) -> float:
        n = len(self.holding(keyword))
        return math.log(1 + (self.n - n + 0.5) / (n + 0.5))

    def stem_holds(self, stemmer, sid: str, keywords: list[str]) -> bool:
        """Whether session `sid` holds a word of the same stem as a keyword."""
        if self._stems is None:
            self._stems = {s: set(stemmer.stemWords(WORD.findall(t))) for s, t in self.texts.items()}
        return bool(self._stems[sid] & set(stemmer.stemWords(keywords)))

    def classify(self, question: D.Question) -> str:
        keywords = [k for k in (match_text(w).strip() for w in K.keywords(question.text)) if k]
        if not keywords:
            return "no keywords"
        coverage: Counter[str] = Counter()
        for k in keywords:
            w = self.idf(k)
            for sid in self.holding(k):
                coverage[sid] += w
        gold = max((coverage[g] for g in question.gold_sessions), default=0.0)
        if gold == 0:
            return "gold holds none"
        above = sum(1 for sid, c in coverage.items() if sid not in question.gold_sessions and c > gold + 1e-9)
        level = sum(1 for sid, c in coverage.items() if sid not in question.gold_sessions and abs(c - gold) <= 1e-9)
        if above >= 5:
            return "5+ hold more"
        if above:
            return "1-4 hold more"
        return "gold ties for most" if level else "gold alone holds most"


def run(name: str, limit: int | None) -> list[str]:
    ds = D.SETS[name]()
    ev = Evidence(ds)
    stemmer = _stemmer() if all(q.script == "en" for q in ds.questions) else None
    questions = ds.questions[:limit] if limit else ds.questions
    by_slice: dict[str, Counter[str]] = defaultdict(Counter)
    for q in questions:
        cls = ev.classify(q)
        for sl in ("all", *((q.slice,) if q.slice else ())):
            by_slice[sl][cls] += 1
            if stemmer and cls == "gold holds none":
                kws = [match_text(w).strip() for w in K.keywords(q.text)]
                if any(ev.stem_holds(stemmer, g, kws) for g in q.gold_sessions):
                    by_slice[sl]["stem rescues"] += 1
    rows = []
    for sl, counts in sorted(by_slice.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        n = sum(counts[c] for c in CLASSES)
        cells = " | ".join(f"{counts[c] / n:.1%}" for c in CLASSES)
        stem = f"{counts['stem rescues'] / n:.1%}" if stemmer else "-"
        rows.append(f"| {name} | {sl} | {n:,} | {cells} | {stem} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="c3,dream", help="comma-separated sets (default c3,dream)")
    ap.add_argument("--limit-questions", type=int, default=None)
    args = ap.parse_args(argv)
    names = args.set.split(",")
    if unknown := [n for n in names if n not in D.SETS]:
        ap.error(f"unknown set(s): {', '.join(unknown)}")
    print("| set | slice | asks | " + " | ".join(CLASSES) + " | stem rescues |")
    print("|---|---|---:|" + "---:|" * (len(CLASSES) + 1))
    try:
        for name in names:
            for row in run(name, args.limit_questions):
                print(row, flush=True)
    except D.DataMissing as e:
        print(f"skipped: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
