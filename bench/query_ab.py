"""Recall's query engine against that of another commit, on a kept bench index.

    python -m bench.run --size-mb 1000 --profile mixed --json bench/out/1000-mixed.json --keep
    python -m bench.query_ab bench/out/1000-mixed.json --base REV [--scope all|busiest] [--extra json error]

These machines swing by tens of percent within minutes, so two bench runs
cannot show a query change of that size. This runs both engines in one
process over one index: the `query/` package of commit REV (every module of
it, read with `git archive` and loaded beside the current one under another
name) and the current one take turns, alternating which goes first, each
query warmed and then timed, `--reps` times; it prints the medians side by
side and asserts that both gave the same answers (sessions and scores;
with `--exact`, whole envelopes but their `elapsed_ms`; with `--differ`, for
a change of plan, it says which differ instead). Only
the query side differs: the index and the rest of the package (config,
model, text) are the current ones, so REV's query package must still fit
them.

The queries are the run's mix (terms and questions) plus any `--extra`
terms; `--scope busiest` asks in the project that holds the most sessions
instead of all projects.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, kept_index, label
from session_recall import Index

BASE_PACKAGE = "session_recall.query_base"


def engine_of(rev: str):
    """The engine module of the `query/` package of commit `rev`, that whole
    package loaded as `session_recall.query_base`: its relative imports of
    its own stages (`.parse`, `.retrieve`, ...) resolve within it, those of
    the rest of the project (`..config`, `..text`) to the current modules."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "session_recall/query"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    tmp = Path(tempfile.mkdtemp(prefix="query-ab-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
    folder = tmp / "session_recall" / "query"
    spec = importlib.util.spec_from_file_location(BASE_PACKAGE, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[BASE_PACKAGE] = package  # dataclasses look their module up
    spec.loader.exec_module(package)
    return importlib.import_module(BASE_PACKAGE + ".engine")


def _answer(env, exact: bool):
    """What must be the same in both engines' answers: the sessions and
    scores; `exact`: the whole envelope but the time it took."""
    if not exact:
        return [(r.session_id, r.score) for r in env.results]
    whole = env.model_dump()
    whole["diagnostics"].pop("elapsed_ms")
    return whole


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A/B of the query side against a commit's, on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `python -m bench.run ... --keep` run")
    ap.add_argument("--base", required=True, help="the commit whose query package is the baseline")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scope", choices=["all", "busiest"], default="all")
    ap.add_argument("--extra", nargs="*", default=[], help="more term queries")
    ap.add_argument("--exact", action="store_true",
                    help="compare whole envelopes (every field but diagnostics.elapsed_ms), not only sessions and "
                         "scores: for a change that must not alter any answer")
    ap.add_argument("--differ", action="store_true",
                    help="the engines may rank differently (a change of plan): say which answers differ "
                         "instead of stopping at the first")
    ap.add_argument("--corpus", type=Path, help="the run's corpus, when it was outside the project")
    args = ap.parse_args(argv)
    res, db = kept_index(args.run_json, args.corpus)
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
                    answers[name] = _answer(env, args.exact)
            same = answers["base"] == answers["now"]
            assert same or args.differ, f"the engines disagree on {query or question!r}"
            rows.append((label({"query": query, "question": question}),
                         *(statistics.median(times[n]) for n in engines), "same" if same else "differ"))
    print(f"| query | {args.base} ms | now ms | base / now | answers |\n|---|---:|---:|---:|---|")
    for name, b, n, same in rows:
        print(f"| {name} | {b:.2f} | {n:.2f} | {b / n:.2f}x | {same} |")
    mix = rows[:len(res["queries"])]
    # The run's ripgrep times over these medians, summed over the term queries, as bench.run's rg_ratio
    # (a run without ripgrep: -); and the slowest median, which is the p99 of 25 queries' medians.
    terms = [(q, r) for q, r in zip(res["queries"], mix) if q["query"]]
    rg = sum(q.get("rg_ms") or 0.0 for q, _ in terms)
    for summary, pick in (("slowest of the run's mix", max), ("median of the run's mix", statistics.median),
                          ("sum of the run's mix", sum)):
        b, n = pick([r[1] for r in mix]), pick([r[2] for r in mix])
        print(f"| {summary} | {b:.2f} | {n:.2f} | {b / n:.2f}x | |")
        if summary.startswith("slowest"):
            b, n = (sum(r[i] for _, r in terms) for i in (1, 2))
            ratio = (f"{rg / b:.1f}x | {rg / n:.1f}x" if rg and all(q.get("rg_ms") for q, _ in terms) else "- | -")
            print(f"| ripgrep's time over it, the {len(terms)} term queries summed | {ratio} | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
