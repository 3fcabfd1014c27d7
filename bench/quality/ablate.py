"""What each ranking choice buys: session-recall on the labelled sets with one
choice undone at a time (the rest as shipped).

    python bench/quality/ablate.py [--set cmrc|cranfield|mixed|all] [--limit-questions N]

Each variant sets module constants of session_recall.query (engine,
keywords) for the run; nothing is written. docs/quality.md shows the output.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import datasets as D  # noqa: E402
import run as R  # noqa: E402

from session_recall.query import engine as E  # noqa: E402
from session_recall.query import keywords as K  # noqa: E402

VARIANTS: list[tuple[str, list[tuple[object, str, object]]]] = [
    ("as shipped", []),
    ("no title boost (TITLE_WEIGHT=0)", [(E, "TITLE_WEIGHT", 0.0)]),
    ("no coverage factor (COVERAGE_POWER=0)", [(E, "COVERAGE_POWER", 0.0)]),
    ("coverage power 1", [(E, "COVERAGE_POWER", 1.0)]),
    ("jieba search mode (cut_for_search)", [(K, "CJK_SEGMENTATION", "search")]),
    ("unknown characters not joined", [(K, "JOIN_UNKNOWN", False)]),
    ("at most 32 keywords (tried, not kept)", [(K, "KEYWORD_LIMIT", 32)]),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="all", choices=["cmrc", "cranfield", "mixed", "cmrc-trial", "all"])
    ap.add_argument("--limit-questions", type=int, default=None)
    args = ap.parse_args(argv)
    names = ["cmrc", "cranfield", "mixed"] if args.set == "all" else [args.set]
    print("| variant | set | s.hit@1 | s.hit@5 | s.MRR | m.hit@1 | m.MRR |")
    print("|---|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory(prefix="recall-ablate-") as tmp:
            for name in names:
                ds, ix, _, _ = R.prepare(name, Path(tmp))
                questions = ds.questions[:args.limit_questions] if args.limit_questions else ds.questions
                for label, patches in VARIANTS:
                    saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in patches]
                    for mod, attr, value in patches:
                        setattr(mod, attr, value)
                    try:
                        s = R.report(R.evaluate(ix, questions, ("ours",), None))["ours"]
                    finally:
                        for mod, attr, value in saved:
                            setattr(mod, attr, value)
                    print(f"| {label} | {name} | {s['session']['hit@1']:.3f} | {s['session']['hit@5']:.3f} | "
                          f"{s['session']['mrr']:.3f} | {s['message']['hit@1']:.3f} | {s['message']['mrr']:.3f} |",
                          flush=True)
                ix.close()
    except D.DataMissing as e:
        print(f"skipped: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
