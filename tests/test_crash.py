"""A kill -9 at any point loses nothing and duplicates nothing (contract §10).

A deterministic corpus of canonical logs (mostly noise lines, streaming deltas
that settle later and some that never do, bad lines of every kind, secrets,
attachments) grows in stages, as logs do, with each stage cut at an arbitrary
byte, often inside a line. A real indexing process is started on each stage
and SIGKILLed at a random (seeded) point: after a random number of committed
batches and a random delay on top. After every kill the index must be
exactly a fresh build of the logs truncated at the offsets it committed; at the
end a last run finishes, and its index must equal a fresh build of the whole
logs in a second database: sessions, messages, per-file offsets and parser
state, skip counts and the FTS5 postings, with SQLite's and FTS5's integrity
checks passing. A second test does the same to `recall watch` while the logs
are being appended to.

RECALL_CRASH_TRIALS sets the number of kills per test (CI runs a few; run 50
by hand before touching sync, ingest or the store); RECALL_CRASH_SEED replays
a run; `pytest -s` prints what each run did.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import apsw
import orjson
import pytest

from session_recall import Index
from session_recall.text.redact import render
from tests.secret_samples import SECRETS as SAMPLES_BY_KIND

TRIALS = int(os.environ.get("RECALL_CRASH_TRIALS", "5"))
SEED = int(os.environ.get("RECALL_CRASH_SEED", "20261128"))

# Small batches give the indexer many commit points to be killed between (and
# inside); the fresh builds use the default batch size, so the comparison also
# shows that the result does not depend on where batches end.
BATCH_LINES = 20
# The logs total about CORPUS_LINES lines however many trials run, so that a
# long run kills at more points of the same work instead of growing the work.
CORPUS_LINES = 15_000
# An indexer is killed after a random number of its batches have committed,
# plus a random delay of up to a few batches: random points of the work
# however fast this machine is. A watcher is killed after a random delay.
KILL_DELAY_S = 0.01
WATCH_KILL_WITHIN_S = 0.6

# A one-shot indexer with small batches: the Python API, as a harness would call it.
INDEXER = """
import sys
import orjson
import pytest
from session_recall.indexer.sync import Syncer
from session_recall.store import Store

store = Store(sys.argv[1])
syncer = Syncer(store, batch_lines=int(sys.argv[3]), progress=lambda *_: print("batch", flush=True))
print("ready", flush=True)
report = syncer.run([sys.argv[2]])
print(orjson.dumps(report.as_dict()).decode(), flush=True)
"""

WORDS = ["font", "serif", "checkout", "rounding", "deploy", "staging", "cache", "offset", "watcher", "résumé",
         "简历", "字体", "浮窗", "模板", "显示", "菜名", "数据库", "索引", "上周", "修好了", "カタカナ", "한국어",
         "100%", "C++", "a->b", "src/pricing/total.cc", '"quoted"', "back\\slash", "tab\there", "new\nline",
         "ｆｕｌｌｗｉｄｔｈ", "e\u0301", "🙂"]
# bare tokens of three kinds, from the one table of secret samples
SECRETS = [SAMPLES_BY_KIND[kind][0] for kind in ("openai_key", "github_token", "email")]
NOISE = ["progress", "usage", "token_count", "tool_progress", "heartbeat"]
BAD = [b"", b"   ", b"{not json", b"[1, 2]", b'"a string"', b'{"no": "type"}', b"\xff\xfe not utf-8",
       b'{"type": "message", "session_id": "x"}']


def _text(rng: random.Random, tag: str) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(2, 24))]
    if rng.random() < 0.05:
        words.insert(rng.randrange(len(words) + 1), rng.choice(SECRETS))
    return f"{tag} " + " ".join(words)


def build_log(rng: random.Random, n: int, lines: int) -> bytes:
    """One session's log: about `lines` lines, 60% of them noise."""
    sid = f"crash-{n:02d}"
    cwd = f"/home/ada/project{n % 3}"
    rows = [{"type": "session", "session_id": sid, "cwd": cwd, "started_at": f"2026-11-{n % 28 + 1:02d}T09:00:00Z",
             "title": f"session {n}"}]
    streaming: dict[str, str] = {}  # message_id -> role, of messages whose deltas have not settled
    settled: list[str] = []
    count = turn = 0
    while len(rows) < lines:
        r = rng.random()
        ts = f"2026-11-{n % 28 + 1:02d}T{10 + len(rows) // 3600:02d}:{len(rows) // 60 % 60:02d}:{len(rows) % 60:02d}Z"
        if r < 0.60:
            rows.append({"type": rng.choice(NOISE), "session_id": sid, "n": len(rows), "pad": "x" * rng.randint(0, 200)})
        elif r < 0.74 or (r < 0.88 and len(streaming) >= 3):
            count += 1
            turn += rng.random() < 0.3
            role = rng.choice(["user", "assistant", "assistant", "tool_call", "tool_result", "system"])
            row = {"type": "message", "session_id": sid, "message_id": f"m{count}", "turn_id": f"t{turn}",
                   "role": role, "ts": ts, "text": _text(rng, f"s{n}m{count}")}
            if role == "tool_call":
                row["tool_name"] = "Bash"
                row["text"] = orjson.dumps({"command": row["text"]}).decode()
            elif role == "tool_result":
                row["text"] = orjson.dumps({"stdout": row["text"], "exit_code": 0}).decode()
            if rng.random() < 0.05:
                row["attachments"] = [{"id": f"img{count}", "name": f"截图 {count}.png", "mime_type": "image/png",
                                       "bytes": 1000 + count}]
            rows.append(row)
            settled.append(row["message_id"])
        elif r < 0.88:  # a delta: of a message still streaming, or the first of a new one
            if streaming and rng.random() < 0.7:
                mid = rng.choice(sorted(streaming))
            else:
                count += 1
                mid = f"m{count}"
                streaming[mid] = rng.choice(["assistant", "user"])
            rows.append({"type": "message_delta", "session_id": sid, "message_id": mid, "turn_id": f"t{turn}",
                         "role": streaming[mid], "ts": ts, "text": _text(rng, f"s{n}{mid}d")})
        elif r < 0.95:  # a streaming message settles, with text of its own
            if not streaming:
                continue
            mid = rng.choice(sorted(streaming))
            rows.append({"type": "message", "session_id": sid, "message_id": mid, "turn_id": f"t{turn}",
                         "role": streaming.pop(mid), "ts": ts, "text": _text(rng, f"s{n}{mid}s")})
            settled.append(mid)
        elif r < 0.96 and settled:  # a late delta of a settled message: counted, ignored
            rows.append({"type": "message_delta", "session_id": sid, "message_id": rng.choice(settled),
                         "turn_id": f"t{turn}", "role": "assistant", "ts": ts, "text": "late"})
        elif r < 0.97:
            rows.append({"type": "title", "session_id": sid, "title": _text(rng, "title")})
        else:
            rows.append(rng.choice(BAD))
    return b"".join((row if isinstance(row, bytes) else orjson.dumps(row)) + b"\n" for row in rows)


def build_corpus(rng: random.Random, n_files: int, lines: int) -> dict[str, bytes]:
    """{relative path: final bytes}; files of varied length, in a few folders."""
    weights = [rng.uniform(0.5, 1.5) for _ in range(n_files)]
    return {f"project{n % 3}/2026-11-{n:02d}-crash.jsonl": build_log(rng, n, int(lines * w / sum(weights)) + 1)
            for n, w in enumerate(weights)}


def cuts(rng: random.Random, size: int, stages: int, first: int) -> list[int]:
    """Where a file of `size` bytes ends at each stage: absent (0) before stage
    `first`, then growing at arbitrary bytes to its whole size at the end."""
    out = []
    for k in range(stages):
        if k < first:
            out.append(0)
        else:
            share = (k - first + 1) / (stages - first + 1)
            out.append(max(out[-1] if out else 0, min(size, int(size * share) + rng.randint(-300, 300))))
    return out


def write_stage(src: Path, corpus: dict[str, bytes], sizes: dict[str, int]) -> None:
    for rel, size in sizes.items():
        if size:
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as fh:  # appended, as a harness writes: the old bytes stay put
                fh.write(corpus[rel][fh.tell():size])


# --- comparing indexes -----------------------------------------------------------


def snapshot(db: Path, root: Path) -> dict:
    """Everything an index holds that a rebuild must reproduce, keyed by what
    it means (not by rowids), with paths relative to `root`. Redaction
    placeholders are rendered, since each database has its own redaction key."""
    conn = apsw.Connection(str(db))
    try:
        def rows(sql):
            return list(conn.execute(sql))

        def rel(path):
            return os.path.relpath(path, root)

        def shown(text):
            return None if text is None else render(text, "mask")[0]

        messages = [(source, cwd, sid, mid, role, shown(text), shown(atts), settled, turn, ts)
                    for source, cwd, sid, mid, role, text, atts, settled, turn, ts in rows(
                        "SELECT s.source, s.cwd, s.session_id, m.message_id, m.role, m.text, m.attachments, "
                        "m.settled, m.turn_id, m.ts FROM messages m JOIN sessions s ON s.id = m.session")]
        seqs = rows("SELECT s.cwd, s.session_id, m.message_id, m.seq FROM messages m JOIN sessions s ON s.id = m.session")
        conn.execute("CREATE VIRTUAL TABLE temp.postings USING fts5vocab(main, message_fts, instance)")
        postings = rows(
            "SELECT s.cwd, s.session_id, m.message_id, p.term, p.offset FROM temp.postings p "
            "JOIN messages m ON m.id = p.doc JOIN sessions s ON s.id = m.session")
        unmatched = rows("SELECT doc FROM temp.postings WHERE doc NOT IN (SELECT id FROM messages) LIMIT 5")
        fts_rowids = {r for (r,) in conn.execute("SELECT rowid FROM message_fts")}
        message_rowids = {r for (r,) in conn.execute("SELECT id FROM messages")}
        return {
            # (with the totals the writer keeps a batch at a time, migration
            # m010: a confined caller's bm25 reads them, so a crash must not
            # leave them counting a message twice or not at all)
            "sessions": Counter((src, cwd, sid, shown(title), started, n, ntok)
                                for src, cwd, sid, title, started, n, ntok in rows(
                "SELECT source, cwd, session_id, title, started_at, n_messages, n_tokens FROM sessions")),
            "messages": Counter(messages),
            "seqs": Counter(seqs),
            "files": Counter((rel(path), *rest) for path, *rest in rows(
                "SELECT path, kind, offset, size, mtime_ns, dev, ino, prefix_hash, state, missing FROM files")),
            "skips": Counter((rel(path), reason, n) for path, reason, n in rows(
                "SELECT f.path, k.reason, k.count FROM file_skips k JOIN files f ON f.id = k.file_id")),
            "postings": Counter(postings),
            "fts_without_message": (sorted(fts_rowids - message_rowids)[:5], unmatched),
            "message_without_fts": sorted(message_rowids - fts_rowids)[:5],
            "raw_secrets": [s for s in SECRETS for (n,) in conn.execute(
                "SELECT count(*) FROM messages WHERE instr(text, ?) OR instr(coalesce(attachments, ''), ?)", (s, s))
                if n],
        }
    finally:
        conn.close()


def check_integrity(db: Path) -> None:
    """SQLite's integrity check and FTS5's own, on a fresh connection."""
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # Raises apsw.CorruptError if the FTS5 index is not internally consistent
        # (a contentless table has no content to check it against).
        conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def fresh_build(src: Path, db: Path) -> None:
    with Index.open(db) as ix:
        ix.sync([str(src)])


def assert_same(resumed: dict, fresh: dict, *, files: bool = True) -> None:
    for key in ("sessions", "messages", "seqs", "skips", "postings", "files"):
        if key == "files" and not files:
            continue
        dup = [row for row, n in resumed[key].items() if n > 1]
        assert not dup, f"duplicated {key}: {dup[:3]}"
        missing = fresh[key] - resumed[key]
        extra = resumed[key] - fresh[key]
        assert not missing and not extra, (
            f"{key} differ from a fresh build: {sum(missing.values())} missing, e.g. {list(missing)[:3]}; "
            f"{sum(extra.values())} extra, e.g. {list(extra)[:3]}")
    for snap in (resumed, fresh):
        assert snap["fts_without_message"] == ([], []) and snap["message_without_fts"] == []
        assert snap["raw_secrets"] == []


def assert_is_fresh_build_of_committed_prefix(db: Path, src: Path, scratch: Path) -> int:
    """The crash invariant: what the index holds is exactly a fresh build of
    every log truncated at the offset committed for it. Returns the messages."""
    conn = apsw.Connection(str(db))
    try:
        offsets = list(conn.execute("SELECT path, offset FROM files"))
    finally:
        conn.close()
    shutil.rmtree(scratch, ignore_errors=True)
    for path, offset in offsets:
        data = Path(path).read_bytes()
        assert offset <= len(data) and (offset == 0 or data[offset - 1:offset] == b"\n"), \
            f"{path}: offset {offset} is not at the end of a line"
        if offset:
            prefix = scratch / "src" / os.path.relpath(path, src)
            prefix.parent.mkdir(parents=True, exist_ok=True)
            prefix.write_bytes(data[:offset])
    check_integrity(db)
    resumed = snapshot(db, src)
    if (scratch / "src").exists():
        fresh_build(scratch / "src", scratch / "fresh.db")
        fresh = snapshot(scratch / "fresh.db", scratch / "src")
    else:
        fresh = {k: Counter() for k in ("sessions", "messages", "seqs", "skips", "postings")}
        fresh |= {"fts_without_message": ([], []), "message_without_fts": [], "raw_secrets": []}
    # Offsets and sizes are compared at the end, against the whole logs.
    assert_same(resumed, fresh, files=False)
    return sum(resumed["messages"].values())


def backlog(db: Path, src: Path) -> int:
    """Complete lines in the logs that the index has not read yet."""
    offsets = {}
    if db.exists():
        conn = apsw.Connection(str(db))
        try:
            offsets = dict(conn.execute("SELECT path, offset FROM files"))
        finally:
            conn.close()
    return sum(p.read_bytes()[offsets.get(str(p.resolve()), 0):].count(b"\n") for p in src.rglob("*.jsonl"))


# --- the tests -------------------------------------------------------------------


def test_kill_9_of_the_indexer_at_random_points_loses_and_duplicates_nothing(tmp_path, spawn, wait_until):
    rng = random.Random(SEED)
    src = tmp_path / "logs"
    src.mkdir()
    db = tmp_path / "resumed.db"
    corpus = build_corpus(rng, n_files=8, lines=CORPUS_LINES)
    plan = {rel: cuts(rng, len(data), TRIALS + 1, first=i % 3) for i, (rel, data) in enumerate(corpus.items())}
    killed = 0
    for trial in range(TRIALS):
        write_stage(src, corpus, {rel: c[trial] for rel, c in plan.items()})
        batches = rng.randint(0, backlog(db, src) // BATCH_LINES + len(corpus))
        proc = spawn([sys.executable, "-c", INDEXER, db, src, BATCH_LINES], name=f"index-{trial}")
        wait_until(lambda: ("ready" in (out := proc.stdout()) and out.count("batch") >= batches) or not proc.alive(),
                   60, f"the indexer to commit {batches} batches")
        time.sleep(rng.uniform(0, KILL_DELAY_S))  # the random kill point: the experiment itself, not a wait
        proc.send(signal.SIGKILL)
        rc = proc.wait(timeout=30)
        assert rc in (0, -signal.SIGKILL), f"the indexer failed on its own (exit {rc}):\n{proc.stderr()}"
        killed += rc == -signal.SIGKILL
        n = assert_is_fresh_build_of_committed_prefix(db, src, tmp_path / "prefix")
        print(f"trial {trial}: {'killed' if rc else 'finished first'} after {proc.stdout().count('batch')} "
              f"batches, {n} messages committed")
    write_stage(src, corpus, {rel: len(data) for rel, data in corpus.items()})
    final = spawn([sys.executable, "-c", INDEXER, db, src, BATCH_LINES], name="index-final")
    assert final.wait(timeout=120) == 0, final.stderr()
    again = spawn([sys.executable, "-c", INDEXER, db, src, BATCH_LINES], name="index-again")
    assert again.wait(timeout=120) == 0, again.stderr()
    report = orjson.loads(again.stdout().splitlines()[-1])
    assert (report["messages_added"], report["messages_updated"], report["bytes_read"]) == (0, 0, 0)

    fresh_build(src, tmp_path / "fresh.db")
    check_integrity(db)
    check_integrity(tmp_path / "fresh.db")
    resumed, fresh = snapshot(db, src), snapshot(tmp_path / "fresh.db", src)
    assert_same(resumed, fresh)
    streaming = sum(n for m, n in resumed["messages"].items() if m[7] == 0)
    print(f"seed {SEED}: {killed} of {TRIALS} indexers killed mid-run; "
          f"{sum(len(d) for d in corpus.values()) / 1e6:.1f} MB in {len(corpus)} logs; "
          f"{sum(resumed['messages'].values())} messages ({streaming} still streaming), 0 lost, 0 duplicated")
    assert killed, "no indexer was killed before it finished: the logs are too small for this machine"


def test_kill_9_of_the_watcher_while_logs_grow_loses_and_duplicates_nothing(tmp_path, spawn, recall_cmd,
                                                                           wait_until):
    rng = random.Random(SEED + 1)
    src = tmp_path / "logs"
    src.mkdir()
    db = tmp_path / "resumed.db"
    corpus = build_corpus(rng, n_files=5, lines=max(CORPUS_LINES // 5, 150 * TRIALS))
    # Bytes of each log written so far; a log appears (often with half a first
    # line) when its first bytes are written.
    written = dict.fromkeys(corpus, 0)
    total = sum(len(d) for d in corpus.values())

    def grow(upto: float) -> None:
        """Append random chunks to random logs until `upto` of the corpus is written."""
        while sum(written.values()) < upto * total:
            rel = rng.choice([r for r in corpus if written[r] < len(corpus[r])])
            size = min(len(corpus[rel]), written[rel] + rng.randint(1, 3000))
            write_stage(src, corpus, {rel: size})
            written[rel] = size
            time.sleep(rng.uniform(0.001, 0.01))  # pacing of the writer, not a wait for the watcher

    grow(0.2)
    killed = 0
    for trial in range(TRIALS):
        proc = spawn([*recall_cmd, "--db", db, "watch", src], name=f"watch-{trial}")
        proc.wait_for("watching", timeout=60)
        started, window = time.monotonic(), rng.uniform(0.05, WATCH_KILL_WITHIN_S)
        target = 0.2 + 0.8 * (trial + 1) / TRIALS
        start = sum(written.values()) / total
        while (elapsed := time.monotonic() - started) < window:  # the logs grow while the watcher mirrors them
            grow(start + (target - start) * min(1.0, elapsed / window))
            time.sleep(0.001)
        assert proc.alive(), f"the watcher died on its own (exit {proc.popen.returncode}):\n{proc.stderr()}"
        proc.send(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        killed += 1
        n = assert_is_fresh_build_of_committed_prefix(db, src, tmp_path / "prefix")
        print(f"trial {trial}: watcher killed with {n} messages committed")
        grow(target)  # and they grow while nobody watches
    assert written == {rel: len(data) for rel, data in corpus.items()}

    # A last watcher reconciles what it missed, catches up, and stops cleanly.
    final = spawn([*recall_cmd, "--db", db, "watch", src], name="watch-final")
    final.wait_for("watching", timeout=60)
    expected = {str((src / rel).resolve()): (data.rfind(b"\n") + 1, len(data)) for rel, data in corpus.items()}

    def caught_up() -> bool:
        assert final.alive(), final.stderr()
        conn = apsw.Connection(str(db))
        try:
            got = {path: (offset, size) for path, offset, size in conn.execute("SELECT path, offset, size FROM files")}
        finally:
            conn.close()
        return got == expected

    wait_until(caught_up, 60, "the last watcher to catch up with the logs")
    final.send(signal.SIGTERM)
    assert final.wait(timeout=10) == 0, final.stderr()

    fresh_build(src, tmp_path / "fresh.db")
    check_integrity(db)
    resumed, fresh = snapshot(db, src), snapshot(tmp_path / "fresh.db", src)
    assert_same(resumed, fresh)
    print(f"seed {SEED + 1}: {killed} watchers killed while {total / 1e6:.1f} MB were appended to "
          f"{len(corpus)} logs; {sum(resumed['messages'].values())} messages, 0 lost, 0 duplicated")


# An indexer whose pass reads through the parsing worker (pipeline.py), even
# for a small corpus, and stops after its first committed batch, as a killed
# indexer would be stopped anywhere.
WORKER_INDEXER = """
import sys, time
from session_recall.indexer import pipeline
from session_recall.indexer.sync import Syncer
from session_recall.store import Store

pipeline.WORKER_MIN_BYTES = 0
pipeline.RANGE_BYTES = pipeline.LOOKAHEAD_BYTES = 4096

def committed(*_):
    print("batch", flush=True)
    time.sleep(60)

Syncer(Store(sys.argv[1]), batch_lines=10, progress=committed).run([sys.argv[2]])
"""


def _worker_logs(tmp_path: Path, canonical) -> Path:
    """Three logs of 300 messages each, for WORKER_INDEXER to stop in."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in range(3):
        log = canonical(f"w{n}", cwd="/home/ada/worker")
        (logs / f"w{n}.jsonl").write_bytes(log.session() + b"".join(
            log.message(f"m{i}", f"worker line {i} of log {n} " + "padding " * 20) for i in range(300)))
    return logs


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; reaping it is its new parent's business


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_kill_9_of_an_indexer_leaves_no_parsing_worker_behind(tmp_path, spawn, wait_until, canonical):
    """The worker process of a large pass holds both ends of its own pipes, so
    a parent killed with SIGKILL never closes them for it: it used to wait for
    a task (or to hand back a range) forever, tens of MB each, one more per
    crash of `recall index` or `recall watch`. It exits once its parent is gone."""
    logs = _worker_logs(tmp_path, canonical)
    proc = spawn([sys.executable, "-c", WORKER_INDEXER, tmp_path / "recall.db", logs], name="indexer")
    proc.wait_for("batch", stream="stdout", timeout=30)
    children = wait_until(lambda: _children(proc.pid), 10, "the indexer's worker processes")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    try:
        wait_until(lambda: not any(_running(c) for c in children), 5, "the orphaned worker processes to exit")
    finally:
        for c in children:
            if _running(c):
                os.kill(c, signal.SIGKILL)


def _automerge(db: Path) -> int | None:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = conn.execute("SELECT v FROM message_fts_config WHERE k = 'automerge'").fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def test_an_indexer_killed_in_a_large_pass_leaves_fts5_merging_at_16_and_the_next_pass_sets_it_back(
        tmp_path, spawn, canonical):
    """A large pass merges FTS5's levels at 16 segments (sync.AUTOMERGE_BULK),
    a value kept in the table's config: killed midway, the indexer leaves it
    there, and the next pass, however small, merges at 4 again."""
    logs = _worker_logs(tmp_path, canonical)
    db = tmp_path / "recall.db"
    proc = spawn([sys.executable, "-c", WORKER_INDEXER, db, logs], name="indexer")
    proc.wait_for("batch", stream="stdout", timeout=30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert _automerge(db) == 16
    with Index.open(db) as ix:
        ix.sync([str(logs)])  # 300 KB: below the worker's threshold, so not a large pass
        assert ix.status()["messages"] == 900
    assert _automerge(db) == 4
