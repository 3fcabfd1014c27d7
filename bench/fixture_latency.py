"""Warm recall latency on the shipped fixtures: `python -m bench.fixture_latency`.

Indexes fixtures/ into a temporary database, then times Index.recall over a
small query mix (Chinese, English, phrases, symbols, a scan-only term) many
times, and prints p50/p90/p99 in milliseconds."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import ROOT
from session_recall import Index
from session_recall.config import Settings

QUERIES = ["字体", "显示", "font", '"source serif"', "100%", "C++", "简历 模板", "deploy preview", "->"]


def main(reps: int = 50) -> None:
    with tempfile.TemporaryDirectory() as tmp, Index.open(Path(tmp) / "r.db", settings=Settings()) as ix:
        report = ix.sync([str(ROOT / "fixtures" / k) for k in ("sessions", "claude-code", "codex")])
        print(f"indexed {report.files} files, {report.bytes_read} bytes in {report.elapsed_s} s")
        for q in QUERIES:  # warm
            ix.recall(q, all_projects=True)
        ms = []
        for _ in range(reps):
            for q in QUERIES:
                t = time.perf_counter()
                ix.recall(q, all_projects=True)
                ms.append((time.perf_counter() - t) * 1000)
        ms.sort()
        pick = lambda p: ms[min(len(ms) - 1, int(len(ms) * p))]  # noqa: E731
        print(f"recall ms over {len(ms)} calls: p50 {pick(0.5):.2f}, p90 {pick(0.9):.2f}, p99 {pick(0.99):.2f}")


if __name__ == "__main__":
    main()
