"""A pass that reads through the worker process (pipeline.py) builds exactly
the index that a pass in one process builds: same messages, offsets, parser
states and skip counts, whatever the range size."""

from __future__ import annotations

import concurrent.futures as cf
import gc
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from session_recall import Index
from session_recall.indexer import pipeline
from session_recall.indexer import sync as sync_module


def _write_logs(root: Path, seed: int = 7) -> None:
    rng = random.Random(seed)
    words = "font serif deploy 字体 简历 模板 浮窗 显示 bug fix sk-ant-abcdefghijklmnopqrstu price->round 100%".split()
    for f in range(6):
        sid = f"s{f}"
        lines = [{"type": "session", "session_id": sid, "cwd": f"/p/{f % 2}", "started_at": "2026-01-01T00:00:00Z"}]
        for i in range(400):
            r = rng.random()
            if r < 0.6:
                lines.append({"type": "progress", "session_id": sid, "data": " ".join(rng.choices(words, k=30))})
            elif r < 0.7:
                mid = f"d{i}"
                for part in range(3):
                    lines.append({"type": "message_delta", "session_id": sid, "message_id": mid, "turn_id": "t",
                                  "role": "assistant", "ts": "2026-01-01T00:00:01Z",
                                  "text": " ".join(rng.choices(words, k=5))})
                if rng.random() < 0.5:
                    lines.append({"type": "message", "session_id": sid, "message_id": mid, "turn_id": "t",
                                  "role": "assistant", "ts": "2026-01-01T00:00:02Z", "text": "settled " + mid})
            else:
                lines.append({"type": "message", "session_id": sid, "message_id": f"m{i}", "turn_id": f"t{i // 7}",
                              "role": rng.choice(["user", "assistant", "tool_result"]), "ts": f"2026-01-01T00:{i % 60:02d}:00Z",
                              "text": " ".join(rng.choices(words, k=rng.randint(1, 60)))})
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines) + "[1, 2]\n{broken\n"
        if f == 5:
            (root / f"{sid}.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data.encode()))
        else:
            (root / f"{sid}.jsonl").write_text(data, encoding="utf-8")
    (root / "corrupt.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd garbage")


def _snapshot(ix: Index) -> dict:
    """What must be equal; a placeholder's keyed hash differs between two
    databases (each has its own key), so only its kind is compared."""
    c = ix.store.conn
    unkey = re.compile("(\ue000[a-z_]+):[0-9a-f]{8}\ue001")
    return {
        "messages": sorted((*row[:5], unkey.sub(r"\1", row[5]), row[6]) for row in c.execute(
            "SELECT s.session_id, m.message_id, m.turn_id, m.seq, m.role, m.text, m.settled "
            "FROM messages m JOIN sessions s ON s.id = m.session")),
        "files": sorted(c.execute("SELECT path, offset, state, prefix_hash, size FROM files")),
        "status": {k: v for k, v in ix.status().items() if k in ("sessions", "messages", "skipped")},
        "fts": sorted(c.execute("SELECT rowid FROM message_fts")),
        "postings": _postings(c),
    }


def _postings(c) -> list:
    """Every token's every position, as FTS5 holds them."""
    c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.postings USING fts5vocab(main, message_fts, instance)")
    return list(c.execute("SELECT term, doc, offset FROM temp.postings ORDER BY term, doc, offset"))


@pytest.mark.parametrize("lookahead_bytes", [1, 1 << 30])  # one file ahead; every file
@pytest.mark.parametrize("range_bytes", [4096, 65536, 1 << 30])
def test_the_worker_builds_what_one_process_builds(tmp_path: Path, monkeypatch, range_bytes: int,
                                                   lookahead_bytes: int):
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_logs(logs)
    with Index.open(tmp_path / "one.db") as ix:
        monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 1 << 40)
        ix.sync([str(logs)])
        expected = _snapshot(ix)
    monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(pipeline, "LOOKAHEAD_BYTES", lookahead_bytes)
    with Index.open(tmp_path / "two.db") as ix:
        report = ix.sync([str(logs)])
        got = _snapshot(ix)
        assert report.skipped.get("corrupt_zst") == 1
        assert ix.search("字体", limit=10**6) and not ix.search("abcdefghijklmnopqrstu", limit=10)
    assert got == expected
    assert expected["status"]["messages"] > 500


@pytest.mark.parametrize(("lookahead_bytes", "ahead"), [(3 * 4096, 3), (1 << 30, 4)])
def test_the_worker_reads_the_next_files_first_ranges_while_one_is_committed(tmp_path: Path, monkeypatch,
                                                                             lookahead_bytes: int, ahead: int):
    """Before the first file's second range is asked for, the first ranges of
    the next files are queued, up to LOOKAHEAD_BYTES of log: the worker does
    not wait for a file's last commit to start on the next files, and small
    files are queued many at a time."""
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_logs(logs)
    for zst in logs.glob("*.zst"):  # read whole: its first range is the file
        zst.unlink()
    asked: list[tuple[str, int]] = []  # (file, offset) of each range, in the order asked

    class Recording(cf.ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            asked.append((os.path.basename(args[0]), args[2]))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(pipeline, "worker_pool",
                        lambda: Recording(max_workers=1, mp_context=multiprocessing.get_context("spawn")))
    monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 4096)  # each file holds several
    monkeypatch.setattr(pipeline, "LOOKAHEAD_BYTES", lookahead_bytes)
    with Index.open(tmp_path / "r.db") as ix:
        ix.sync([str(logs)])
    firsts = [name for name, offset in asked if offset == 0]
    assert len(firsts) == len(set(firsts)) == 5  # each file's first range once
    second = next(i for i, (_, offset) in enumerate(asked) if offset > 0)
    assert [name for name, _ in asked[:second]] == firsts[:1 + ahead]  # the file being read, and those ahead


def _small_pass(ix: Index, logs: Path, monkeypatch) -> None:
    """One message appended to a log of _write_logs, read by a pass below the
    worker's threshold."""
    monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 1 << 40)
    with (logs / "s0.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "message", "session_id": "s0", "message_id": "small", "turn_id": "t",
                             "role": "user", "ts": "2026-02-01T00:00:00Z", "text": "a small pass"}) + "\n")
    assert ix.sync([str(logs)]).messages_added == 1


def test_a_large_pass_merges_fts5_levels_at_16_and_then_at_4_again(tmp_path: Path, monkeypatch):
    """While a pass reads at least WORKER_MIN_BYTES, FTS5 merges a level's
    segments at 16 (sync.AUTOMERGE_BULK) instead of 4; the pass ends at 4, and
    a small pass writes no setting at all. The postings are the same either
    way (test_the_worker_builds_what_one_process_builds compares them)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_logs(logs)
    set_to: list[int] = []

    def trace(_cursor, sql: str, bindings) -> bool:
        if "'automerge'" in sql and sql.startswith("INSERT"):
            set_to.append(bindings[0])
        return True

    monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
    with Index.open(tmp_path / "r.db") as ix:
        ix.store.conn.set_exec_trace(trace)
        ix.sync([str(logs)])
        assert set_to == [16, 4]
        assert ix.store.conn.execute("SELECT v FROM message_fts_config WHERE k = 'automerge'").fetchall() == [(4,)]
        set_to.clear()
        _small_pass(ix, logs, monkeypatch)
        assert set_to == []


def test_a_large_pass_runs_the_garbage_collector_less_and_then_as_before(tmp_path: Path, monkeypatch):
    """While a pass reads at least WORKER_MIN_BYTES, the collector's first
    threshold is sync.GC_BULK_THRESHOLD (it found no garbage in the
    hundreds of collections a large pass ran: docs/benchmarks.md); after the
    pass the caller's own thresholds are back, and a small pass never
    changes them. Nested or concurrent passes restore them once, at the end
    of the last."""
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_logs(logs)
    seen: set[tuple[int, ...]] = set()

    def trace(_cursor, sql: str, bindings) -> bool:
        if sql.startswith("INSERT INTO messages"):
            seen.add(gc.get_threshold())
        return True

    before = gc.get_threshold()
    try:
        gc.set_threshold(1234, 11, 12)
        monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
        with Index.open(tmp_path / "r.db") as ix:
            ix.store.conn.set_exec_trace(trace)
            ix.sync([str(logs)])
            assert seen == {(sync_module.GC_BULK_THRESHOLD, 11, 12)}
            assert gc.get_threshold() == (1234, 11, 12)
            seen.clear()
            _small_pass(ix, logs, monkeypatch)
            assert seen == {(1234, 11, 12)}
        with sync_module._collect_less():
            with sync_module._collect_less():
                assert gc.get_threshold()[0] == sync_module.GC_BULK_THRESHOLD
            assert gc.get_threshold()[0] == sync_module.GC_BULK_THRESHOLD  # the outer pass still runs
        assert gc.get_threshold() == (1234, 11, 12)
        with pytest.raises(RuntimeError), sync_module._collect_less():
            raise RuntimeError("a pass that fails")
        assert gc.get_threshold() == (1234, 11, 12)
    finally:
        gc.set_threshold(*before)


def test_appends_after_a_parallel_build_are_read_from_the_offset(tmp_path: Path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_logs(logs)
    monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 8192)
    with Index.open(tmp_path / "r.db") as ix:
        ix.sync([str(logs)])
        before = ix.status()["messages"]
        line = {"type": "message", "session_id": "s0", "message_id": "late", "turn_id": "t", "role": "user",
                "ts": "2026-02-01T00:00:00Z", "text": "zanzibar appended"}
        with open(logs / "s0.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
        report = ix.sync([str(logs)])
        assert report.messages_added == 1 and report.bytes_read == len(json.dumps(line)) + 1
        assert ix.status()["messages"] == before + 1
        assert [m.message_id for m, _ in ix.search("zanzibar")] == ["late"]
    assert os.path.exists(tmp_path / "r.db")


def test_each_batch_carries_the_parser_state_of_its_own_offset(tmp_path: Path):
    """A batch's state is saved with its offset; a parser that changes its
    nested state after the cut must not change the batch's copy."""
    log = tmp_path / "two.jsonl"
    lines = [{"type": "session", "session_id": "a", "cwd": "/a", "started_at": "2026-01-01T00:00:00Z"}]
    lines += [{"type": "progress", "n": i} for i in range(30)]
    lines += [{"type": "session", "session_id": "b", "cwd": "/b", "started_at": "2026-01-01T00:00:00Z"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    out = list(pipeline.batches(str(log), "canonical", 0, {}, b"k", batch_lines=10, batch_bytes=1 << 20))
    assert out[0].state == {"cwd": {"a": "/a"}}
    assert out[-1].state == {"cwd": {"a": "/a", "b": "/b"}}


def test_the_worker_imports_only_what_reading_needs():
    """A spawned worker starts by importing the pipeline: not the store, the
    query engine or the settings, whose imports cost it a tenth of a second
    and more of a build's start (docs/indexing.md)."""
    code = "import json, sys, session_recall.indexer.pipeline; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout))
    assert "session_recall.indexer.pipeline" in loaded
    heavy = {"session_recall.store", "session_recall.index", "session_recall.config", "session_recall.query",
             "pydantic_settings", "jieba"}
    assert heavy.isdisjoint(loaded)
