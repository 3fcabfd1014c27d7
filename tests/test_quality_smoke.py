"""The recall-quality harness runs on a slice of every labelled set.

`python -m bench.quality.evaluate --set all --limit-questions 60 --json OUT`
indexes the CMRC 2018, Cranfield, mixed, C3, DREAM and coding sets through
the normal pipeline and asks the first 60 questions of each. Asserted: it
runs, reports every system on every set (and the dialogue sets' slices), and
session-recall is not below the plain unicode61 baseline on hit@1 and MRR
(session level) on that slice. The full numbers are in
docs/quality.md; no quality margin or timing is asserted here (a slice is
noisy, CI machines too).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"


@pytest.mark.skipif(not (DATA / "cmrc2018").is_dir() or not (DATA / "cranfield").is_dir(),
                    reason="the labelled collections (../shared/data/cmrc2018, ../shared/data/cranfield) "
                           "are not beside the project")
@pytest.mark.skipif(not all((DATA / d).is_dir() for d in ("c3-train", "dream-train", "claude-code", "codex")),
                    reason="the conversation collections are not beside the project")
def test_quality_harness_runs_and_ours_is_not_below_plain_unicode61(tmp_path: Path) -> None:
    out = tmp_path / "quality.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.quality.evaluate", "--set", "all", "--limit-questions", "60",
         "--json", str(out), "--require-data"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    sets = {r["set"]: r for r in report["results"]}
    assert set(sets) == {"cmrc", "cranfield", "mixed", "c3", "dream", "coding"}
    for name, res in sets.items():
        systems = res["systems"]
        assert set(systems) == {"ours", "porter", "bigram", "peer", "unicode61", "scan"}, name
        assert res["questions"] == 60, name
        if name in ("c3", "dream"):  # each question asked alone and with its answer, in two halves
            assert set(systems["ours"]["by_slice"]) == {f"{a}/{h}" for a in ("question", "question+answer")
                                                        for h in ("tune", "held")}, name
        for metrics in systems.values():
            for level in ("session", "message"):
                for key in ("hit@1", "hit@5", "mrr"):
                    assert 0.0 <= metrics[level][key] <= 1.0
        ours, plain = systems["ours"]["session"], systems["unicode61"]["session"]
        assert ours["hit@1"] >= plain["hit@1"], (name, ours, plain)
        assert ours["mrr"] >= plain["mrr"], (name, ours, plain)
    assert "| ours |" in proc.stdout
