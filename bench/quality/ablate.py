"""What each ranking choice buys: session-recall on the labelled sets with one
choice undone at a time (the rest as shipped).

    python -m bench.quality.ablate [--set cmrc|cranfield|mixed|all] [--limit-questions N]

Each variant is a `Ranking(...)` the engine ranks with, or a choice of the
question's keyword extraction (module constants of session_recall.query.keywords,
set for the run); nothing is written. docs/quality.md shows the output.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.quality import datasets as D
from bench.quality import evaluate as E
from session_recall.query import keywords as K
from session_recall.query.rank import Ranking

# (label, the ranking, keyword choices as (name, value) of the keywords module)
VARIANTS: list[tuple[str, Ranking, list[tuple[str, object]]]] = [
    ("as shipped", Ranking(), []),
    ("no title boost (title_weight=0)", Ranking(title_weight=0.0), []),
    ("no coverage factor (coverage_power=0)", Ranking(coverage_power=0.0), []),
    ("coverage power 0.5 (shipped before the dialogue sets)", Ranking(coverage_power=0.5), []),
    ("no session evidence (session_weight=0)", Ranking(session_weight=0.0), []),
    ("no character bound on the question pool (question_chars=None)", Ranking(question_chars=None), []),
    ("no weight for identifiers in CJK questions (latin_in_cjk=1)", Ranking(latin_in_cjk=1.0), []),
    ("jieba search mode (cut_for_search)", Ranking(), [("CJK_SEGMENTATION", "search")]),
    ("unknown characters not joined", Ranking(), [("JOIN_UNKNOWN", False)]),
    ("at most 32 keywords (tried, not kept)", Ranking(), [("KEYWORD_LIMIT", 32)]),
    ("file names split into their words (COMPOUNDS off)", Ranking(), [("COMPOUNDS", False)]),
    ("function characters break unknown runs (tried, not kept)", Ranking(), [("STOP_CHARS_JOIN", False)]),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="all", choices=[*D.SETS, "all", "conversations"])
    ap.add_argument("--limit-questions", type=int, default=None)
    args = ap.parse_args(argv)
    names = E.set_names(args.set)
    print("| variant | set | s.hit@1 | s.hit@5 | s.MRR | m.hit@1 | m.MRR |")
    print("|---|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory(prefix="recall-ablate-") as tmp:
            for name in names:
                ds, ix, _, _ = E.prepare(name, Path(tmp))
                questions = ds.questions[:args.limit_questions] if args.limit_questions else ds.questions
                for label, ranking, choices in VARIANTS:
                    saved = [(attr, getattr(K, attr)) for attr, _ in choices]
                    for attr, value in choices:
                        setattr(K, attr, value)
                    ix.engine.ranking = ranking
                    try:
                        s = E.report(E.evaluate(ix, questions, ("ours",), None))["ours"]
                    finally:
                        for attr, value in saved:
                            setattr(K, attr, value)
                        ix.engine.ranking = Ranking()
                    print(f"| {label} | {name} | {s['session']['hit@1']:.3f} | {s['session']['hit@5']:.3f} | "
                          f"{s['session']['mrr']:.3f} | {s['message']['hit@1']:.3f} | {s['message']['mrr']:.3f} |",
                          flush=True)
                ix.close()
    except D.DataMissing as e:
        print(f"skipped: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
