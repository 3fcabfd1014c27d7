"""What "deleted means gone" costs, beside the build of the same corpus.

    python -m bench.wipe_cost --size-mb N [--forget-share 0.1] [--runs 3] [--json OUT.json]

On a deterministic corpus (bench/corpus.py, copied into a scratch folder so
that logs can be deleted), in this process and with default settings:

1. the build, into a fresh database, with `PRAGMA secure_delete` ON (as the
   store opens every connection) and OFF, alternating, best of `--runs` each:
   the ratio is secure_delete's cost on the write path of a build;
2. a prune: `--forget-share` of the logs deleted, `sync(prune=True)`; the pass
   without its wipe, and the wipe's parts (FTS5 `optimize`, the TRUNCATE
   checkpoint) in seconds;
3. a rebuild after a redactor version change: the pass without its wipe, and
   the wipe's parts (`optimize`, `VACUUM`, the checkpoint).

Every figure is printed beside the build time of the same corpus. The machine
may be shared: wall-clock figures move by several percent from run to run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench import corpus as C
from bench.common import isolate, work_dir
from session_recall import Index
from session_recall.store import Store

KEYS = ("build_s", "build_s_secure_delete_off", "secure_delete_ratio", "secure_delete_cpu_ratio", "prune_s",
        "prune_optimize_s", "prune_checkpoint_s", "rebuild_s", "rebuild_optimize_s", "rebuild_vacuum_s",
        "rebuild_checkpoint_s")


def _fresh(db: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def build(db: Path, logs: Path, secure_delete: bool) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds): the writer runs here (a
    parsing worker, if any, does not count in the CPU time, and does the same
    work either way)."""
    _fresh(db)
    t0, c0 = time.perf_counter(), time.process_time()
    with Index.open(db) as ix:
        if not secure_delete:
            ix.store.conn.execute("PRAGMA secure_delete=OFF")
        ix.sync([str(logs)], kind="canonical")
    return time.perf_counter() - t0, time.process_time() - c0


class Spy:
    """Store.wipe, recording what each call did."""

    def __init__(self):
        self.calls: list[dict] = []
        self._orig = Store.wipe

    def __enter__(self):
        spy = self

        def wipe(store):
            done = spy._orig(store)
            if done:
                spy.calls.append(done)
            return done

        Store.wipe = wipe
        return self

    def __exit__(self, *exc):
        Store.wipe = self._orig


def measure(logs: Path, work: Path, runs: int, forget_share: float) -> dict:
    db = work / "wipe.db"
    on, off = [], []
    for _ in range(runs):  # alternating, so that a noisy spell hits both
        off.append(build(db, logs, secure_delete=False))
        on.append(build(db, logs, secure_delete=True))
    res = {"build_s": min(r[0] for r in on), "build_s_secure_delete_off": min(r[0] for r in off),
           "build_cpu_s": min(r[1] for r in on), "build_cpu_s_secure_delete_off": min(r[1] for r in off),
           }
    res["secure_delete_ratio"] = res["build_s"] / res["build_s_secure_delete_off"]
    res["secure_delete_cpu_ratio"] = res["build_cpu_s"] / res["build_cpu_s_secure_delete_off"]
    with Index.open(db) as ix:
        res["messages"] = ix.status()["messages"]
        files = sorted(logs.rglob("*.jsonl*"))
        gone = files[:: max(1, round(1 / forget_share))] if forget_share > 0 else []
        for f in gone:
            f.unlink()
        with Spy() as spy:
            r = ix.sync([str(logs)], kind="canonical", prune=True)
        w = spy.calls[-1] if spy.calls else {"optimize_s": 0.0, "checkpoint_s": 0.0, "seconds": 0.0}
        res.update(files_forgotten=len(gone), messages_forgotten=r.wiped, prune_s=r.elapsed_s - w["seconds"],
                   prune_optimize_s=w["optimize_s"], prune_checkpoint_s=w["checkpoint_s"])
        ix.store.conn.execute("UPDATE meta SET value = '0' WHERE key = 'redactor_version'")
        with Spy() as spy:
            r = ix.sync([str(logs)], kind="canonical")
        assert r.rebuilt and r.vacuumed, "the rebuild did not run"
        w = spy.calls[-1]
        res.update(rebuild_s=r.elapsed_s - w["seconds"], rebuild_optimize_s=w["optimize_s"],
                   rebuild_vacuum_s=w["vacuum_s"], rebuild_checkpoint_s=w["checkpoint_s"])
    res["db_bytes"] = db.stat().st_size
    return res


def render(res: dict) -> str:
    b = res["build_s"]

    def row(what: str, s: float) -> str:
        return f"| {what} | {s:.3f} | {s / b:.3f} |"

    return "\n".join([
        f"Corpus: {res['corpus']}; {res['messages']:,} messages; best of {res['runs']} builds each way.",
        "",
        "| step | seconds | / build (secure_delete on) |",
        "|---|---:|---:|",
        row("build, secure_delete ON (shipped)", b),
        row("build, secure_delete OFF", res["build_s_secure_delete_off"]),
        f"| secure_delete cost on the build (ON / OFF) | | {res['secure_delete_ratio']:.3f}x |",
        f"| same, by the writer's CPU time ({res['build_cpu_s']:.2f} / {res['build_cpu_s_secure_delete_off']:.2f} s)"
        f" | | {res['secure_delete_cpu_ratio']:.3f}x |",
        row(f"prune pass of {res['files_forgotten']} logs ({res['messages_forgotten']:,} messages), "
            "without its wipe", res["prune_s"]),
        row("  wipe: FTS5 optimize", res["prune_optimize_s"]),
        row("  wipe: wal_checkpoint(TRUNCATE)", res["prune_checkpoint_s"]),
        row("rebuild pass (redactor version change), without its wipe", res["rebuild_s"]),
        row("  wipe: FTS5 optimize", res["rebuild_optimize_s"]),
        row("  wipe: VACUUM", res["rebuild_vacuum_s"]),
        row("  wipe: wal_checkpoint(TRUNCATE)", res["rebuild_checkpoint_s"]),
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The cost of wiping deleted messages, beside the build time.")
    ap.add_argument("--size-mb", type=float, required=True, help="corpus size in MB of raw log")
    ap.add_argument("--corpus", type=Path, help="corpus folder (default bench/out/corpus-<profile>-<size>-...)")
    C.add_knobs(ap)
    ap.add_argument("--runs", type=int, default=3, help="builds each way, best taken (default 3)")
    ap.add_argument("--forget-share", type=float, default=0.1, help="share of the logs deleted and pruned")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)

    p = C.params_from_args(args)
    root = (args.corpus or C.corpus_dir(p, args.profile)).resolve()
    corpus, _ = C.ensure(p, root)
    work = work_dir(root) / "wipe"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    isolate(work)
    logs = work / "logs"  # a copy: the prune deletes some of it
    shutil.copytree(root, logs, ignore=shutil.ignore_patterns("manifest.json"))
    try:
        res = measure(logs, work, max(1, args.runs), args.forget_share)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    res.update(corpus=C.describe(corpus), runs=max(1, args.runs), cpus=os.cpu_count())
    print(render(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
