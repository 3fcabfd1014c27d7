"""The benchmark runs, end to end, on a tiny corpus (issue 5, item 4).

`python -m bench.run --size-mb 2 --json OUT` must exit 0 and write every key
of the bench's JSON as a number (rg_ratio may be null where ripgrep is not
installed), and `python -m bench.query_profile` must read the index it kept. No
timing is asserted: CI machines are shared and noisy.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from bench.common import label
from session_recall.indexer.ingest import fts_body
from session_recall.indexer.sync import AUTOMERGE_BULK
from session_recall.migrations import create_fts
from session_recall.rows import one

ROOT = Path(__file__).resolve().parent.parent
KEYS = (
    "build_mb_s_raw", "build_text_mb_s", "messages_per_s", "peak_rss_mb", "index_bytes_per_text_byte",
    "query_p50_ms", "query_p99_ms", "fullscan_ratio", "rg_ratio", "unicode61_recall", "trigram_ratio",
    "freshness_p99_ms",
)


def test_bench_runs_and_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--size-mb", "2", "--json", str(out),
         "--corpus", str(tmp_path / "corpus"), "--reps", "3", "--fresh", "5", "--keep", "--build-reps", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    for key in KEYS:
        assert key in data, key
        value = data[key]
        if key == "rg_ratio" and shutil.which("rg") is None:
            assert value is None
            assert "apt-get install -y ripgrep" in proc.stdout
            continue
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value >= 0, (key, value)
    # the table is printed, and the corpus was generated where it was told to; the JSON names no
    # folder outside the project (the corpus by its name only, in the command line too)
    assert "| build_mb_s_raw |" in proc.stdout
    assert (tmp_path / "corpus" / "manifest.json").is_file()
    assert str(tmp_path) not in out.read_text(encoding="utf-8")
    assert data["corpus"]["root"] == "…/corpus" and "--json …/bench.json --corpus …/corpus " in data["command"]
    where = ["--corpus", str(tmp_path / "corpus")]  # so the tools below find the index it kept
    # the build's floor: FTS5 fed the index's own bodies holds what the index's FTS5 table holds
    base = data["baselines"]
    assert base["floor_build_text_mb_s"] > 0 and base["floor_messages_per_s"] > 0
    # ...and, with its optimize into one segment timed apart, the same end state as a large build
    assert base["floor_optimize_s"] > 0 and 0 < base["floor_ended_build_text_mb_s"] < base["floor_build_text_mb_s"]
    assert "(the floor; " in proc.stdout and "with its optimize into one segment" in proc.stdout
    # two builds, each with the floor made right after it; the ratio is the pairs' median, the run's
    # figures are the first pair's, and the second build's scratch database is gone
    pairs = data["build_pairs"]
    assert len(pairs) == 2 and all(p["build_s"] > 0 and p["floor_s"] > 0 and p["ended_ratio"] > p["ratio"] > 0
                                   for p in pairs)
    assert data["build_floor_ratio"] == statistics.median(p["ratio"] for p in pairs)
    assert pairs[0]["build_s"] == data["build"]["build_s"]
    assert pairs[0]["floor_s"] == pytest.approx(data["index"]["messages"] / base["floor_messages_per_s"])
    assert "| build_floor_ratio | " in proc.stdout and not (tmp_path / "corpus.work" / "pair.db").exists()
    # (but for the terms of the freshness probes, which the bench appends to the index after it)
    floor = apsw.Connection(str(tmp_path / "corpus.work" / "floor.db"))
    # it merges its levels as a large pass of the build does
    assert one(floor.execute("SELECT v FROM message_fts_config WHERE k = 'automerge'"))[0] == AUTOMERGE_BULK
    index = apsw.Connection(str(tmp_path / "corpus.work" / "recall.db"))
    probes = apsw.Connection(":memory:")
    create_fts(probes)
    probes.executemany("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", [
        (rowid, fts_body(text, [a["name"] for a in json.loads(atts or "[]")])[0]) for rowid, text, atts in
        index.execute("SELECT id, text, attachments FROM messages WHERE message_id LIKE 'fresh-%'")])
    for conn in (floor, index, probes):
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, message_fts, 'row')")
    fresh = {term for (term,) in probes.execute("SELECT term FROM temp.v")}
    assert fresh  # the probes were there to leave out

    def terms(conn):
        return [r for r in conn.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term") if r[0] not in fresh]

    assert terms(floor) == terms(index) != []

    # the kept index feeds the per-query profile: one row per query of the mix
    lost = subprocess.run([sys.executable, "-m", "bench.query_profile", str(out), "--reps", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert lost.returncode == 2 and "say where it is with --corpus DIR" in lost.stderr
    prof = subprocess.run([sys.executable, "-m", "bench.query_profile", str(out), "--reps", "1", *where],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert prof.returncode == 0, prof.stderr[-3000:]
    per_query, floor_table = prof.stdout.split("\n\n")
    rows = [line for line in per_query.splitlines() if line.startswith("| ") and not line.startswith("| category")]
    assert len(rows) == len(data["queries"])  # the questions too: each has keywords in the index
    assert all(float(cell) >= 0 for r in rows for cell in r.strip("| ").split(" | ")[3:6])
    # ...then the query targets figured from FTS5 alone beside recall
    floor_rows = floor_table.splitlines()[2:]
    assert [r.split(" | ")[0] for r in floor_rows] == ["| p50", "| p99", "| ripgrep's time over it, the "
                                                       f"{sum(1 for q in data['queries'] if q['query'])} term "
                                                       "queries summed"]
    assert all(float(r.split(" | ")[c].split()[0].rstrip("x")) > 0 for r in floor_rows for c in (1, 2)
               if shutil.which("rg") or not r.startswith("| ripgrep"))

    # ...and what the tail's design changes could buy: a row per query of the mix, one per question for the
    # pruning, and the walk never more than the ranked statement that makes it (but where nothing matches)
    tail = subprocess.run([sys.executable, "-m", "bench.tail_probe", str(out), "--reps", "1", *where],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert tail.returncode == 0, tail.stderr[-3000:]
    every, pruning, _windows = (
        [line.strip("| ").split(" | ") for line in table.splitlines()[2:]] for table in tail.stdout.split("\n\n"))
    assert [r[0] for r in every] == [label(q) for q in data["queries"]]
    assert [r[0] for r in pruning] == [label(q) for q in data["queries"] if not q["query"]] != []
    assert all(int(r[1].replace(",", "")) >= 0 and float(r[2]) >= 0 and float(r[3]) >= 0 for r in every)

    # ...and the A/B of the query engine against a commit's: the same answers (it asserts that), one row
    # per query of the mix and per extra term, then the slowest, ripgrep's time over it, the median and
    # the sum. HEAD's engine is a real second engine, loaded from git beside the current one.
    # --exact: whole envelopes compared, every field but elapsed_ms.
    ab = subprocess.run([sys.executable, "-m", "bench.query_ab", str(out), "--base", "HEAD",
                         "--reps", "1", "--extra", "qzxjvkwy", "--exact", *where], cwd=ROOT, capture_output=True, text=True,
                        timeout=120)
    assert ab.returncode == 0, ab.stdout[-3000:] + ab.stderr[-3000:]
    rows = [line for line in ab.stdout.splitlines() if line.startswith("| ") and not line.startswith("| query")]
    assert len(rows) == len(data["queries"]) + 1 + 4
    assert [r.split(" | ")[0] for r in rows[-4:]] == [
        "| slowest of the run's mix", f"| ripgrep's time over it, the {sum(1 for q in data['queries'] if q['query'])}"
        " term queries summed", "| median of the run's mix", "| sum of the run's mix"]

    # ...and the whole of Index.recall against HEAD's package, each in a process of its own: the same
    # envelopes (it asserts that), one row per query of the mix, then the slowest, the median and the sum.
    whole = subprocess.run([sys.executable, "-m", "bench.recall_ab", str(out), "--base", "HEAD", "--rounds", "1",
                            "--reps", "1", *where], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    rows = [line for line in whole.stdout.splitlines() if line.startswith("| ") and not line.startswith("| query")]
    assert len(rows) == len(data["queries"]) + 3 and rows[-1].startswith("| sum of the run's mix |")

    # ...and confined against unconfined recall on the same index: the same statuses and candidates (it
    # asserts that), one row per query of the mix, then the median and the sum.
    confined = subprocess.run([sys.executable, "-m", "bench.confined", str(out), "--reps", "1", *where],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert confined.returncode == 0, confined.stdout[-3000:] + confined.stderr[-3000:]
    rows = [line for line in confined.stdout.splitlines() if line.startswith("| ") and not line.startswith("| query")]
    assert len(rows) == len(data["queries"]) + 2 and rows[-1].startswith("| sum of the mix |")

def test_a_run_can_leave_out_the_baselines_that_read_every_byte_again(tmp_path: Path) -> None:
    """`--skip` (for 1 GB and beyond): the named baselines are not run, their
    figures are null and the table says so; the query figures and ripgrep's
    ratio are still measured; an unknown name is refused before any work."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--size-mb", "1", "--json", str(out), "--corpus", str(tmp_path / "c"),
         "--reps", "1", "--fresh", "2", "--keep", "--skip", "fullscan,trigram,unicode61,floor"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["skipped"] == ["fullscan", "trigram", "unicode61", "floor"]
    for key in ("fullscan_ratio", "trigram_ratio", "unicode61_recall"):
        assert data[key] is None, key
    assert data["baselines"]["floor_build_text_mb_s"] is None
    assert data["build_pairs"] == [] and data["build_floor_ratio"] is None
    for key in ("query_p50_ms", "query_p99_ms", "index_bytes_per_text_byte", "freshness_p99_ms"):
        assert data[key] > 0, key
    assert (data["rg_ratio"] or 0) > 0 or shutil.which("rg") is None
    assert not any(q.get("fullscan_ms") or q.get("trigram_ms") for q in data["queries"])
    for name in ("trigram", "unicode61", "floor"):
        assert not (tmp_path / "c.work" / f"{name}.db").exists(), name
    for row in ("| fullscan_ratio | n/a | skipped (--skip fullscan) |", "| trigram_ratio | n/a | skipped",
                "| unicode61_recall | n/a | skipped"):
        assert row in proc.stdout, row
    assert "(the floor" not in proc.stdout
    rendered = subprocess.run([sys.executable, "-m", "bench.run", "--render", str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0 and "| trigram_ratio | n/a | skipped" in rendered.stdout, rendered.stderr

    bad = subprocess.run([sys.executable, "-m", "bench.run", "--size-mb", "1", "--corpus", str(tmp_path / "d"),
                          "--skip", "fullscan,rg"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown baseline rg" in bad.stderr
    unpaired = subprocess.run([sys.executable, "-m", "bench.run", "--size-mb", "1", "--corpus", str(tmp_path / "d"),
                               "--skip", "floor", "--build-reps", "2"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    assert unpaired.returncode == 2 and "paired with the floor" in unpaired.stderr
    assert not (tmp_path / "d").exists()


def test_wipe_cost_runs_and_writes_every_key(tmp_path: Path) -> None:
    """`python -m bench.wipe_cost` on a tiny corpus: exits 0, prints its table and
    writes every figure as a number (no timing asserted)."""
    out = tmp_path / "wipe.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.wipe_cost", "--size-mb", "1", "--runs", "1",
         "--corpus", str(tmp_path / "corpus"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    from bench.wipe_cost import KEYS as WIPE_KEYS

    for key in WIPE_KEYS:
        value = data[key]
        assert isinstance(value, (int, float)) and math.isfinite(value) and value >= 0, (key, value)
    assert data["messages_forgotten"] > 0
    assert "| secure_delete cost on the build (ON / OFF) |" in proc.stdout
    assert not (tmp_path / "corpus.work" / "wipe" / "logs").exists()  # the scratch copy is gone

def test_the_redaction_bench_runs_and_writes_its_figures(tmp_path: Path) -> None:
    """`python -m bench.redaction_fp` on tiny inputs, against this checkout's HEAD
    (always there in a git checkout): it exits 0 and writes every figure."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        import pytest

        pytest.skip("not a git checkout")
    out = tmp_path / "fp.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.redaction_fp", "--base", "HEAD", "--corpus-mb", "0.1",
         "--dense-mb", "0.02", "--long-mb", "0.1", "--reps", "1", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {"corpus", "dense", "long_line"} <= set(data)
    assert 0 <= data["corpus"]["fp_share"] < 0.01 and data["corpus"]["mb_s"] > 0
    assert data["dense"]["doubling"] > 0 and data["long_line"]["doubling"] > 0
    assert "false positives, corpus:" in proc.stdout


def test_the_chat_profile_writes_short_messages(tmp_path: Path) -> None:
    """The `chat` corpus (issue 21): chat-sized messages, a median of about
    400 bytes of text, few tool results; the agent profiles keep their style."""
    sys.path.insert(0, str(ROOT))
    from bench import corpus as C

    t = C.generate(C.params_for("chat", 0.3), tmp_path / "chat").manifest["totals"]
    assert 300 <= t["median_message_bytes"] <= 500, t
    assert t["tool_result_share"] < 0.15, t
    assert t["messages_by_role"]["user"] >= 0.4 * t["messages"], t
    assert C.params_for("mixed", 1).style == "agent"


def test_a_run_records_the_project_s_folders_relative_to_its_root(tmp_path: Path) -> None:
    """A kept run JSON names folders under the project relative to its root
    (never the machine's path to it) and is read back from there; a folder
    elsewhere by its name only, and a path on the command line likewise."""
    from bench.common import ROOT, kept_index, shown, shown_argv, work_dir

    assert shown(ROOT / "bench" / "out" / "corpus-x") == "bench/out/corpus-x"
    assert shown(tmp_path / "corpus") == "…/corpus"
    assert shown_argv(["--size-mb", "4", "--corpus", str(tmp_path / "c"), f"--json={tmp_path}/r.json",
                       "--profile", "mixed"]) == ["--size-mb", "4", "--corpus", "…/c", "--json=…/r.json",
                                                  "--profile", "mixed"]
    corpus = ROOT / "bench" / "out" / f"corpus-test-{tmp_path.name}"
    work = work_dir(corpus)
    work.mkdir(parents=True)
    try:
        (work / "recall.db").write_bytes(b"")
        run = tmp_path / "run.json"
        run.write_text(json.dumps({"corpus": {"root": shown(corpus)}}), encoding="utf-8")
        assert kept_index(run)[1] == work / "recall.db"
    finally:
        (work / "recall.db").unlink()
        work.rmdir()
    far = tmp_path / "far"
    work_dir(far).mkdir()
    (work_dir(far) / "recall.db").write_bytes(b"")
    run = tmp_path / "far.json"
    run.write_text(json.dumps({"corpus": {"root": shown(far)}}), encoding="utf-8")
    assert kept_index(run)[1] is None  # (and it says to pass --corpus)
    assert kept_index(run, far)[1] == work_dir(far) / "recall.db"


def test_the_floor_is_made_with_the_index_page_size_and_ends_in_one_segment(tmp_path: Path, corpus, proj) -> None:
    """The baseline tables' files take the page size of the index they are
    fed from (an index made with 8 KiB pages here), so a page-size lever
    moves the floor as it moves the build; the floor's optimize is timed
    apart from its inserts."""
    from bench.run import build_baseline_tables

    db = corpus.db
    made = apsw.Connection(str(db))
    made.execute("PRAGMA page_size=8192")
    made.execute("PRAGMA journal_mode=WAL")  # writes the header: the page size is the file's from now on
    made.close()
    s = corpus.session("s1", proj)
    for i in range(30):
        s.message(f"m{i}", f"message {i} about the floor 页面大小 {i}")
    assert corpus.open().status()["messages"] == 30
    out = build_baseline_tables(db, tmp_path, ("floor",))
    floor = apsw.Connection(str(out["floor"]["path"]))
    assert one(floor.execute("PRAGMA page_size"))[0] == 8192
    assert out["floor"]["optimize_s"] > 0 and out["floor"]["ended_text_mb_s"] < out["floor"]["text_mb_s"]
    floor.close()
