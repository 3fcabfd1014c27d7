"""Concurrency (contract section 10): one writer, many readers, in real
processes, for a while.

`recall watch` (the one writer) mirrors a corpus that another process keeps
growing: it appends messages and streaming deltas to existing logs and starts
new ones. Meanwhile 4 reader processes query without pause through the Python
API (words, phrases, CJK, a symbols-only term that the session scan answers,
questions, all projects, paging with cursors, recall_more), reopening the
index every so often as a command-line user would. Every reader call must
return an envelope with an expected status and no exception (0 errors), the
number of indexed messages a reader sees never goes down, and no call may
wait anywhere near the busy timeout: the slowest is reported. Half-way
through, a second writer (`recall index` and `Index.sync`) is refused with a
message naming the watcher. At the end the watcher catches up with every
appended line, and the index equals a fresh build of the same logs.

RECALL_CONCURRENCY_S sets how long the readers and the appender run (CI: 5;
by hand: `RECALL_CONCURRENCY_S=60 python -m pytest tests/test_concurrency.py -s`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import orjson
import pytest

from session_recall import Index
from session_recall.store import BUSY_TIMEOUT_MS, WriterBusy

DURATION_S = float(os.environ.get("RECALL_CONCURRENCY_S", "5"))
READERS = 4
CWD = "/home/ada/concurrency"

APPENDER = r"""
import os, sys, time, random, orjson
logs, duration, cwd = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rng = random.Random(7)
words = ["deploy", "checklist", "font", "serif", "cache", "简历", "模板", "字体", "a->b", "C++", "100%"]
files = sorted(os.path.join(logs, f) for f in os.listdir(logs))
n = 0
end = time.monotonic() + duration
def line(obj):
    return orjson.dumps(obj) + b"\n"
while time.monotonic() < end:
    if rng.random() < 0.02:  # a new session log
        sid = f"new-{len(files):04d}"
        path = os.path.join(logs, f"{sid}.jsonl")
        with open(path, "ab") as fh:
            fh.write(line({"type": "session", "session_id": sid, "cwd": cwd + f"/p{len(files) % 3}",
                           "started_at": "2026-11-21T09:00:00Z", "title": f"new session {sid}"}))
        files.append(path)
    path = rng.choice(files)
    sid = os.path.basename(path).rsplit(".", 1)[0]
    n += 1
    text = f"ap{n:06d} " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
    ts = f"2026-11-21T10:{n // 60 % 60:02d}:{n % 60:02d}Z"
    rows = []
    if rng.random() < 0.2:  # a message that streams, then settles
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            rows.append({"type": "message_delta", "session_id": sid, "message_id": f"a{n}", "turn_id": f"t{n}",
                         "role": "assistant", "ts": ts, "text": piece})
    rows.append({"type": "message", "session_id": sid, "message_id": f"a{n}", "turn_id": f"t{n}",
                 "role": rng.choice(["user", "assistant"]), "ts": ts, "text": text})
    rows += [{"type": "progress", "session_id": sid, "n": n}] * rng.randint(0, 3)
    with open(path, "ab") as fh:  # as a harness does: open, write, close
        fh.write(b"".join(line(r) for r in rows))
    time.sleep(rng.random() * 0.004)
print(orjson.dumps({"appended": n, "files": len(files)}).decode(), flush=True)
"""

READER = r"""
import sys, time, random, traceback, orjson
from session_recall import Index
db, duration, seed, cwd = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)
ALLOWED = {"ok", "partial", "no_match", "stale_cursor"}
calls = [
    lambda ix: ix.recall("deploy", cwd=cwd),
    lambda ix: ix.recall("deploy checklist", cwd=cwd, limit=10),
    lambda ix: ix.recall("简历", cwd=cwd),
    lambda ix: ix.recall("模板 字体", all_projects=True),
    lambda ix: ix.recall("a->b", cwd=cwd),
    lambda ix: ix.recall("ap%06d" % rng.randint(1, 2000), all_projects=True),
    lambda ix: ix.recall("", question="which font did we pick for the résumé?", cwd=cwd),
    lambda ix: ix.recall("deploy", question="how did the deploy go?", all_projects=True),
    lambda ix: ix.recall("font nosuchword", cwd=cwd),
]
latencies, errors, statuses = [], [], {}
busy_waits = []  # (call number, how many times SQLite said busy in a row)
def busy(count):
    busy_waits.append(count)
    time.sleep(0.001)
    return count < 5000  # about the busy timeout
kind = []
last_count = 0
end = time.monotonic() + duration
ix = None
n = 0
while time.monotonic() < end:
    t0 = time.perf_counter()
    try:
        if ix is None or n % 50 == 0:  # as the command line does, open again now and then
            if ix is not None:
                ix.close()
            ix = Index.open(db)
            for conn in (ix.store.conn, ix.store.reader):  # instead of the timeout: counts every wait
                conn.set_busy_handler(busy)
        i = rng.randrange(len(calls))
        kind.append(i)
        env = calls[i](ix)
        if env.results and rng.random() < 0.5:
            more = ix.recall_more(env.results[0].passage.anchor_id, all_projects=True)
            if more.status != "ok":
                errors.append(f"recall_more: {more.status}: {more.hint}")
        if env.next_cursor:
            page = ix.recall(env.query, env.question, all_projects=True, cwd=cwd, cursor=env.next_cursor)
            statuses[page.status] = statuses.get(page.status, 0) + 1
        env.model_dump_json()
        statuses[env.status] = statuses.get(env.status, 0) + 1
        if env.status not in ALLOWED:
            errors.append(f"status {env.status}: {env.hint}")
        count = ix.store.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        if count < last_count:
            errors.append(f"the message count went down: {last_count} -> {count}")
        last_count = count
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    latencies.append(time.perf_counter() - t0)
    n += 1
print(orjson.dumps({"calls": n, "errors": errors[:20], "n_errors": len(errors), "statuses": statuses,
                    "latencies": latencies, "kinds": kind, "busy_waits": len(busy_waits),
                    "last_count": last_count}).decode(), flush=True)
"""


CALL_NAMES = ["word", "two words", "CJK", "CJK, all projects", "symbols (scan)", "fresh marker, all projects",
              "question", "query and question", "partial"]


def write_corpus(logs: Path, sessions: int = 24, messages: int = 150) -> None:
    words = ["deploy", "checklist", "font", "serif", "résumé", "简历", "模板", "字体", "a->b", "cache"]
    for s in range(sessions):
        sid = f"base-{s:04d}"
        rows = [{"type": "session", "session_id": sid, "cwd": f"{CWD}/p{s % 3}", "started_at": "2026-11-20T09:00:00Z",
                 "title": f"base session {s}"}]
        for m in range(messages):
            rows.append({"type": "message", "session_id": sid, "message_id": f"m{m}", "turn_id": f"t{m // 4}",
                         "role": "user" if m % 2 else "assistant", "ts": f"2026-11-20T10:{m // 60:02d}:{m % 60:02d}Z",
                         "text": f"base{s}m{m} " + " ".join(words[(s + m + k) % len(words)] for k in range(8))})
        (logs / f"{sid}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def test_readers_never_fail_or_wait_while_the_watcher_writes(tmp_path, isolated_settings, recall_cmd, run_recall):
    logs = tmp_path / "logs"
    logs.mkdir()
    write_corpus(logs)
    db = tmp_path / "recall.db"
    done = run_recall("--db", db, "index", logs, "--kind", "canonical")
    assert done.returncode == 0, done.stderr
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs: list[subprocess.Popen] = []

    def start(argv: list[str], name: str) -> subprocess.Popen:
        out = open(tmp_path / f"{name}.out", "wb")
        err = open(tmp_path / f"{name}.err", "wb")
        p = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             cwd=tmp_path)
        procs.append(p)
        return p

    def text(name: str, stream: str = "err") -> str:
        return (tmp_path / f"{name}.{stream}").read_text("utf-8", "replace")

    try:
        watcher = start([*recall_cmd, "--db", db, "watch", logs, "--kind", "canonical"], "watch")
        deadline = time.monotonic() + 20
        while "watching" not in text("watch"):
            assert watcher.poll() is None and time.monotonic() < deadline, text("watch")
            time.sleep(0.02)
        readers = [start([sys.executable, "-c", READER, db, DURATION_S, i, CWD], f"reader{i}") for i in range(READERS)]
        appender = start([sys.executable, "-c", APPENDER, logs, DURATION_S, CWD], "appender")

        # half-way: a second writer is refused, naming the watcher; `recall
        # index` hands its source to the watcher instead (test_source_commands.py)
        time.sleep(DURATION_S / 2)
        second = run_recall("--db", db, "index", logs, "--kind", "canonical")
        assert second.returncode == 0, second.stderr
        assert f"recall watch (pid {watcher.pid})" in second.stderr, second.stderr
        with Index.open(db) as other:
            with pytest.raises(WriterBusy, match=rf"pid {watcher.pid}\b"):
                other.sync([str(logs)], kind="canonical")

        for p in (appender, *readers):
            p.wait(timeout=DURATION_S + 120)
        assert appender.returncode == 0, text("appender")
        appended = json.loads(text("appender", "out"))
        results = []
        for i, p in enumerate(readers):
            assert p.returncode == 0, text(f"reader{i}")
            results.append(json.loads(text(f"reader{i}", "out")))

        # the watcher catches up with every appended line
        last = f"ap{appended['appended']:06d}"
        deadline = time.monotonic() + 30
        with Index.open(db) as ix:
            while not ix.search(last, limit=1):
                assert watcher.poll() is None, text("watch")
                assert time.monotonic() < deadline, f"the watcher never indexed {last}"
                time.sleep(0.05)
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(timeout=20) == 0, text("watch")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)

    errors = [e for r in results for e in r["errors"]]
    n_errors = sum(r["n_errors"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    calls = sum(r["calls"] for r in results)
    worst = max(latencies)
    statuses: dict[str, int] = {}
    for r in results:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    busy_waits = sum(r["busy_waits"] for r in results)
    slowest_kind: dict[int, float] = {}
    for r in results:
        for k, x in zip(r["kinds"], r["latencies"]):
            slowest_kind[k] = max(slowest_kind.get(k, 0.0), x)
    print(f"\nconcurrency: {DURATION_S:g}s, {READERS} readers, {calls} reader calls, {n_errors} errors, "
          f"{busy_waits} busy waits; "
          f"latency p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
          f"max {worst * 1000:.1f} ms (busy timeout {BUSY_TIMEOUT_MS} ms); {appended['appended']} messages appended "
          f"to {appended['files']} logs while `recall watch` indexed them; statuses {statuses}; "
          f"second writer refused; slowest by call: "
          + ", ".join(f"{CALL_NAMES[k]} {v * 1000:.0f} ms" for k, v in sorted(slowest_kind.items())))
    assert n_errors == 0, errors
    assert calls >= READERS * 5
    assert worst < BUSY_TIMEOUT_MS / 1000 / 2, f"a reader call took {worst:.2f}s"

    # the watched index equals a fresh build of the same logs
    fresh = tmp_path / "fresh.db"
    with Index.open(fresh) as ix:
        ix.sync([str(logs)], kind="canonical")
    snap = {}
    for name in (db, fresh):
        conn = apsw.Connection(str(name))
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")
        snap[name] = sorted(conn.execute(
            "SELECT s.session_id, m.message_id, m.text, m.settled FROM messages m JOIN sessions s ON s.id = m.session"))
        conn.close()
    assert snap[db] == snap[fresh]
