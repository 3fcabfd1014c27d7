"""What answering a confined caller costs, on a kept bench index.

    python -m bench.run --size-mb 250 --profile mixed --json bench/out/250-mixed.json --keep
    python -m bench.confined bench/out/250-mixed.json [--reps 5]

A caller under a deny or allow list (or in a project scope while
all_projects is not allowed) is ranked with statistics of its own scope
(query/rank.py): FTS5's bm25 formula in a Python auxiliary function, and a
count of each phrase's matches in scope. This asks the run's mix in the
project holding the most sessions twice over one index, in one process,
taking turns: unconfined (FTS5's own bm25) and confined by a deny list that
names every other project (the same sessions in scope). It prints the
medians side by side and asserts that both answered with the same status
(the orders differ a little: the scores of one are over the busiest
project, of the other over the whole index).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import kept_index, label
from session_recall import Index
from session_recall.config import Settings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Confined against unconfined recall, on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `python -m bench.run ... --keep` run")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--corpus", type=Path, help="the run's corpus, when it was outside the project")
    args = ap.parse_args(argv)
    res, db = kept_index(args.run_json, args.corpus)
    if db is None:
        return 2
    with Index.open(str(db)) as probe:
        cwds = [c for (c,) in probe.store.conn.execute(
            "SELECT cwd FROM sessions GROUP BY cwd ORDER BY count(*) DESC, cwd")]
    busiest, others = cwds[0], cwds[1:]
    with Index.open(str(db)) as free, Index.open(str(db), settings=Settings(deny_cwds=others)) as confined:
        ixs = {"unconfined": free, "confined": confined}
        rows = []
        for q in res["queries"]:
            times: dict[str, list[float]] = {name: [] for name in ixs}
            found = {}
            for rep in range(args.reps):
                for name in (list(ixs) if rep % 2 == 0 else list(ixs)[::-1]):
                    ix = ixs[name]
                    ix.recall(q["query"], question=q["question"], cwd=busiest, limit=5)  # warm
                    t0 = time.perf_counter()
                    env = ix.recall(q["query"], question=q["question"], cwd=busiest, limit=5)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    found[name] = env.status
            assert found["unconfined"] == found["confined"], f"the two disagree on {label(q)}: {found}"
            rows.append((label(q), *(statistics.median(times[n]) for n in ixs)))
    print(f"scope: the busiest project ({busiest}), {len(others)} other projects denied\n")
    print("| query | unconfined ms | confined ms | confined / unconfined |\n|---|---:|---:|---:|")
    for name, a, b in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    for summary, pick in (("median of the mix", statistics.median), ("sum of the mix", sum)):
        a, b = pick([r[1] for r in rows]), pick([r[2] for r in rows])
        print(f"| {summary} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
