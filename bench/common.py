"""Helpers shared by the instruments in bench/: where a run keeps its
databases and how to find the index it kept, the settings every measured
index is opened with, and how query times are taken and summed up.

The instruments are run as modules from the project's root (`python -m
bench.run ...`), so `bench` and `session_recall` import without any path
set-up; ROOT is only for the child processes and git commands they start.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERY_BUDGET_S = 2.0  # a slow query is repeated fewer times (at least 3), within about this long


# ---------------------------------------------------------------------------
# Environment and kept indexes
# ---------------------------------------------------------------------------


def isolate(work: Path) -> dict[str, str]:
    """Default settings for this process and its children: no RECALL_*
    variable, and an empty config file instead of the user's."""
    for k in [k for k in os.environ if k.startswith("RECALL_")]:
        del os.environ[k]
    cfg = work / "config.toml"
    cfg.write_text("", encoding="utf-8")
    os.environ["RECALL_CONFIG"] = str(cfg)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


# How a run's JSON names a folder outside the project: its last component
# only, behind this mark.
OUTSIDE = "…/"


def shown(path: str | Path) -> str:
    """A path as a run's JSON records it: relative to the project's root
    when it lies under it (kept_index reads it back from ROOT); elsewhere
    only its name, behind OUTSIDE, so that a kept JSON never names the
    folders of the machine it ran on (the tools that read its index are
    then told where the corpus is: `--corpus DIR`)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return OUTSIDE + Path(path).name


def shown_argv(argv: list[str], options: tuple[str, ...] = ("--corpus", "--json", "--cprofile")) -> list[str]:
    """A command line as a run's JSON records it: the paths given to
    `options` (as `--opt PATH` or `--opt=PATH`) shown as `shown` shows them."""
    out = []
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        if eq and key in options:
            out.append(f"{key}={shown(value)}")
        elif i and argv[i - 1] in options:
            out.append(shown(a))
        else:
            out.append(a)
    return out


def work_dir(root: Path) -> Path:
    """Where a run on the corpus at `root` keeps its databases (`--keep`)."""
    return root.with_name(root.name + ".work")


def kept_index(run_json: Path, corpus: Path | None = None) -> tuple[dict, Path | None]:
    """The results of a run, and the index it kept (None, with a message on
    stderr, if it kept none). `corpus`: where the run's corpus is, for a
    corpus outside the project (the JSON records only its name)."""
    res = json.loads(run_json.read_text(encoding="utf-8"))
    root = res["corpus"]["root"]
    if corpus is None and root.startswith(OUTSIDE):
        print(f"the run's corpus was outside the project ({root}): say where it is with --corpus DIR",
              file=sys.stderr)
        return res, None
    db = work_dir(corpus if corpus is not None else ROOT / root) / "recall.db"
    if not db.exists():
        print(f"no kept index for this run ({db}): run the bench with --keep first", file=sys.stderr)
        return res, None
    return res, db


def label(q: dict) -> str:
    """A query of the mix as the tables print it: its term, or question=... ."""
    return q["query"] if q["query"] else f"question={q['question']}"


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def median_ms(fn, reps: int) -> float:
    """Median ms of fn(), after one warm-up run; fewer runs when slow."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    n = max(3, min(reps, int(QUERY_BUDGET_S / first) if first else reps))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def weighted_percentile(per_query: list[list[float]], pct: float) -> float:
    """The pct-th percentile of all samples, each query weighing the same
    whatever its number of samples."""
    pool = sorted((v, 1.0 / len(s)) for s in per_query if s for v in s)
    total = sum(w for _, w in pool)
    acc = 0.0
    for v, w in pool:
        acc += w
        if acc >= total * pct / 100 - 1e-12:
            return v
    return pool[-1][0]
