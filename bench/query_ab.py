"""Recall's query engine against that of another commit, on a kept bench index.

    python bench/run.py --size-mb 1000 --profile mixed --json bench/out/1000-mixed.json --keep
    python bench/query_ab.py bench/out/1000-mixed.json --base REV [--scope all|busiest] [--extra json error]

These machines swing by tens of percent within minutes, so two bench runs
cannot show a query change of that size. This runs both engines in one
process over one index: the `query/engine.py` of commit REV (read with
`git show`, loaded beside the current one) and the current one take turns,
alternating which goes first, each query warmed and then timed, `--reps`
times; it prints the medians side by side and asserts that both gave the
same answers (sessions and scores). Only the engine differs: the index, the
passages and the rest of the package are the current ones, so REV's engine
must still fit them.

The queries are the run's mix (terms and questions) plus any `--extra`
terms; `--scope busiest` asks in the project that holds the most sessions
instead of all projects.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402  (it also puts the project on the path)

from session_recall import Index  # noqa: E402


def engine_of(rev: str):
    """The module query/engine.py of commit `rev`, as a module of the package."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(["git", "show", f"{rev}:session_recall/query/engine.py"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "engine_base.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("session_recall.query.engine_base", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A/B of the query engine against a commit's, on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `bench/run.py ... --keep` run")
    ap.add_argument("--base", required=True, help="the commit whose engine is the baseline")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scope", choices=["all", "busiest"], default="all")
    ap.add_argument("--extra", nargs="*", default=[], help="more term queries")
    args = ap.parse_args(argv)
    res, db = run.kept_index(args.run_json)
    if db is None:
        return 2
    base = engine_of(args.base)
    queries = [(q["query"], q["question"]) for q in res["queries"]] + [(t, None) for t in args.extra]
    # Each engine on its own connection: an engine registers its SQL functions on it.
    with Index.open(str(db)) as ix, Index.open(str(db)) as other:
        engines = {"base": base.Engine(other.store.reader, other.settings), "now": ix.engine}
        kw: dict = {"all_projects": True}
        if args.scope == "busiest":
            kw = {"cwd": ix.store.reader.execute(
                "SELECT cwd FROM sessions GROUP BY cwd ORDER BY count(*) DESC LIMIT 1").fetchone()[0]}
        rows = []
        for query, question in queries:
            times: dict[str, list[float]] = {name: [] for name in engines}
            answers = {}
            for rep in range(args.reps):
                for name in (list(engines) if rep % 2 == 0 else list(engines)[::-1]):
                    engine = engines[name]
                    engine.recall(query, question=question, limit=5, **kw)  # warm
                    t0 = time.perf_counter()
                    env = engine.recall(query, question=question, limit=5, **kw)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    answers[name] = [(r.session_id, r.score) for r in env.results]
            assert answers["base"] == answers["now"], f"the engines disagree on {query or question!r}"
            rows.append((run.label({"query": query, "question": question}),
                         *(statistics.median(times[n]) for n in engines)))
    print(f"| query | {args.base} ms | now ms | base / now |\n|---|---:|---:|---:|")
    for name, b, n in rows:
        print(f"| {name} | {b:.2f} | {n:.2f} | {b / n:.2f}x |")
    mix = rows[:len(res["queries"])]
    for label, pick in (("median of the run's mix", statistics.median), ("sum of the run's mix", sum)):
        b, n = pick([r[1] for r in mix]), pick([r[2] for r in mix])
        print(f"| {label} | {b:.2f} | {n:.2f} | {b / n:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
