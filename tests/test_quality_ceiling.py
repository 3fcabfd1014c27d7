"""The reach of keyword ranking (bench/quality/ceiling.py): each ask of a set
is classed by the keyword evidence its gold session holds. Checked on a set
built here, where every class is known by construction, and on a slice of
DREAM when the data are beside the project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.quality import datasets as D
from bench.quality.ceiling import CLASSES, Evidence

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"


def _set() -> D.Dataset:
    texts = {
        "a": ["The violin lesson moved to Tuesday.", "Fine, I will bring the sheet music."],
        "b": ["Our violin teacher is ill.", "Then the lesson is off."],
        "c": ["The train to Leeds leaves at nine.", "Tuesday suits me."],
        "d": ["Violin strings are cheap here.", "Buy two."],
        "e": ["The lesson on Tuesday was about violin scales.", "Hard work."],
        "f": ["A violin lesson is expensive.", "Ask about Tuesday."],
        "g": ["My violin lesson, Tuesday.", "Good."],
        "h": ["The violin lesson is on Tuesday again.", "Yes."],
        "i": ["Tuesday violin lesson at noon.", "OK."],
    }
    sessions = [D.Session(sid, "/home/t", "", [D.Message(f"{sid}{i}", "user", t) for i, t in enumerate(turns)])
                for sid, turns in texts.items()]
    return D.Dataset("t", sessions, [])


@pytest.mark.parametrize(("question", "gold", "expected"), [
    ("What did they say?", "a", "no keywords"),                  # every word a stop word
    ("When does the train leave for Leeds?", "b", "gold holds none"),
    ("Which city is the train going to?", "c", "gold alone holds most"),  # only c holds train
    ("Where are the violin strings cheap?", "d", "gold alone holds most"),
    ("Is the violin lesson on Tuesday?", "a", "gold ties for most"),  # a, e, f, g, h, i hold all three
    ("Is the violin lesson on Tuesday?", "c", "5+ hold more"),   # c holds Tuesday only; six hold all three
    ("Who is ill, the violin teacher?", "d", "1-4 hold more"),   # b holds all three; six hold violin as d does
    ("Was the violin lesson moved?", "b", "1-4 hold more"),     # a holds lesson, violin and moved
])
def test_each_ask_is_classed_by_its_gold_session_s_keyword_evidence(question: str, gold: str, expected: str) -> None:
    assert expected in CLASSES
    q = D.Question("q", question, "en", {gold}, set())
    assert Evidence(_set()).classify(q) == expected


@pytest.mark.skipif(not (DATA / "dream-train").is_dir(), reason="../shared/data/dream-train is not beside the project")
def test_the_ceiling_runs_on_a_slice_of_dream() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.quality.ceiling", "--set", "dream", "--limit-questions", "40"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| dream | all |")]
    assert len(rows) == 1, proc.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[2] == "40"
    shares = [float(c.rstrip("%")) for c in cells[3:3 + len(CLASSES)]]
    assert abs(sum(shares) - 100.0) < 0.5, shares
