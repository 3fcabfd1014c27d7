"""The whole of `Index.recall` against that of another commit, on a kept bench index.

    python -m bench.run --size-mb 25 --profile mixed --json bench/out/25-mixed.json --keep
    python -m bench.recall_ab bench/out/25-mixed.json --base REV [--rounds 6] [--reps 9]

bench.query_ab swaps only the `query/` package, in one process; a change
in `text/` (folding, redaction), in `index.py` or in the store is the same
on both of its sides. This one runs the whole `session_recall` package of
commit REV (read with `git archive`) and the current one, each in a process
of its own asking `Index.recall(..., all_projects=True, limit=5)` for the
run's mix (each query warmed, then timed `--reps` times, its median kept),
`--rounds` times, alternating which goes first; it prints the median of
each query's medians side by side and fails if the two gave different
envelopes (every field but `elapsed_ms`), unless `--differ`. Processes
differ more than two engines in one process do: read a ratio within about
5 % as noise.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, kept_index, label


def child(db: Path, queries: list[dict], reps: int) -> dict:
    """In a child process: each query's median ms and a digest of its envelope."""
    import session_recall
    from session_recall import Index

    print(f"session_recall from {Path(session_recall.__file__).parent.parent}", file=sys.stderr)
    out = {}
    with Index.open(str(db)) as ix:
        for q in queries:
            env = ix.recall(q["query"], question=q["question"], all_projects=True, limit=5)  # warm
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                ix.recall(q["query"], question=q["question"], all_projects=True, limit=5)
                times.append(time.perf_counter() - t0)
            whole = env.model_dump()
            whole["diagnostics"].pop("elapsed_ms")
            digest = hashlib.blake2b(json.dumps(whole, sort_keys=True).encode(), digest_size=8).hexdigest()
            out[label(q)] = (statistics.median(times) * 1000, digest)
    return out


def tree_of(rev: str) -> Path:
    """The `session_recall` package of commit `rev`, in a folder of its own."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "session_recall"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    tmp = Path(tempfile.mkdtemp(prefix="recall-ab-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def _rounds(args: argparse.Namespace, trees: dict[str, Path]) -> dict[str, list[dict]] | None:
    """Each round, a child process of each tree, alternating which goes
    first; None when a child failed (its stderr printed)."""
    runs: dict[str, list[dict]] = {"base": [], "now": []}
    for r in range(args.rounds):
        for name in ("base", "now") if r % 2 == 0 else ("now", "base"):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(trees[name]), str(ROOT)]))
            where = ["--corpus", str(args.corpus.resolve())] if args.corpus else []
            proc = subprocess.run([sys.executable, "-P", "-m", "bench.recall_ab", str(args.run_json.resolve()),
                                   "--child", "--reps", str(args.reps), *where], cwd=ROOT, env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                print(proc.stderr[-3000:], file=sys.stderr)
                return None
            runs[name].append(json.loads(proc.stdout))
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A/B of Index.recall against a commit's, on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `python -m bench.run ... --keep` run")
    ap.add_argument("--base", help="the commit whose session_recall package is the baseline")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--differ", action="store_true", help="say which answers differ instead of failing")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", type=Path, help="the run's corpus, when it was outside the project")
    args = ap.parse_args(argv)
    res, db = kept_index(args.run_json.resolve(), args.corpus.resolve() if args.corpus else None)
    if db is None:
        return 2
    if args.child:
        print(json.dumps(child(db, res["queries"], args.reps)))
        return 0
    if not args.base:
        ap.error("--base is required")
    # A child imports session_recall from its tree and bench from ROOT
    # (PYTHONPATH, in that order; -P: not from the working directory, which
    # is ROOT for both: the caller's project is part of every answer).
    trees = {"base": tree_of(args.base), "now": ROOT}
    try:
        runs = _rounds(args, trees)
    finally:
        shutil.rmtree(trees["base"], ignore_errors=True)
    if runs is None:
        return 1
    rows = []
    for q in runs["now"][0]:
        b, n = (statistics.median(run[q][0] for run in runs[name]) for name in ("base", "now"))
        same = runs["base"][0][q][1] == runs["now"][0][q][1]
        assert same or args.differ, f"the two gave different envelopes for {q!r}"
        rows.append((q, b, n, "same" if same else "differ"))
    print(f"| query | {args.base} ms | now ms | base / now | answers |\n|---|---:|---:|---:|---|")
    for q, b, n, same in rows:
        print(f"| {q} | {b:.2f} | {n:.2f} | {b / n:.2f}x | {same} |")
    for summary, pick in (("slowest of the run's mix", max), ("median of the run's mix", statistics.median),
                          ("sum of the run's mix", sum)):
        b, n = pick([r[1] for r in rows]), pick([r[2] for r in rows])
        print(f"| {summary} | {b:.2f} | {n:.2f} | {b / n:.2f}x | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
