"""The benchmark of issue 5: every figure beside its baseline, measured in one run.

    python -m bench.run --size-mb N [--json OUT.json] [--corpus DIR] [--profile noise|cjk|mixed|chat]

Builds (or reuses) a deterministic corpus of canonical logs (bench/corpus.py),
then measures, on that corpus and this machine, in this order:

1. the cold build: `Index.open(db).sync([corpus])` into a fresh database, in a
   subprocess (so its peak RSS is the indexer's alone, plus that of any
   parsing worker it starts), timed from open to close. build_mb_s_raw is MB
   of log per second, build_text_mb_s MB of stored message text per second,
   messages_per_s stored messages per second, peak_rss_mb the child's VmHWM
   plus its workers' peak. The CPU time of the build (its process and its
   workers) is printed beside the wall clock: another job on the machine
   lengthens the second, hardly the first. The logs were just written or
   read, so they are in the page cache: "cold" means an empty index, not a
   cold disk.
2. the index's size: database plus WAL after a checkpoint, per byte of stored
   text (index_bytes_per_text_byte).
3. queries: warm `Index.recall(query, all_projects=True, limit=5)` (passages
   included) over the corpus's fixed query mix (English words and phrases, CJK
   terms of 1, 2 and 4 characters, mixed-script terms, zero-hit terms,
   questions through question=), every query repeated; query_p50_ms and
   query_p99_ms weigh each query the same however often it ran.
4. baselines on the same queries (the term queries: questions have no
   literal term), each a ratio "baseline time / recall time" over the same
   set of queries (sum of per-query medians), so > 1 means recall is faster:
   - fullscan_ratio: an exact scan of the raw logs, as a tool without an
     index would answer: read every file, parse its message lines, fold deltas
     into messages, project and fold the text, test every term with the same
     predicate recall uses. Exact, like recall; no index to build or keep.
   - rg_ratio: `rg -F -i -c` over the raw logs for the query's longest term:
     the fastest literal search there is, multi-threaded, but neither exact
     (it sees JSON escapes and noise lines, and no NFKC) nor ranked. Process
     start-up is part of its time, as it is for anyone who shells out to it.
   - trigram_ratio: a regular FTS5 trigram table over the same stored messages
     (folded), queried the cheapest plausible way: terms of 3+ characters by
     MATCH, top 5 by bm25; shorter terms by LIKE '%t%' (trigrams cannot index
     them), newest 5 first. It verifies nothing and builds no passages, so it is
     a generous baseline.
   - unicode61_recall: a plain unicode61 FTS5 table over the same stored text,
     the speed ceiling of FTS5, asked for each CJK term as a prefix phrase
     ("term"*, its best case): the share of the true matches (substrings of
     the folded text) it finds. It is not a speed ratio: it shows why the
     index rewrites CJK into bigrams.
   - the floor of the build: the index's own FTS5 table fed the index's own
     bodies, inserts and commits timed alone (baselines.floor_build_text_mb_s
     and floor_messages_per_s): what no build of this index can beat here;
     then its optimize into one segment, timed apart
     (floor_ended_build_text_mb_s counts it): the end state of a large build.
     The floor is built right after the build, and `--build-reps N` makes N
     such pairs, alternated (N - 1 more builds, into a scratch database):
     this machine's speed drifts by a fifth within minutes, so a ratio of a
     build and a floor minutes apart says as much about the drift as about
     the build. build_floor_ratio is the median pair's build rate over its
     floor's (build_floor_ended_ratio against the floor with its optimize);
     build_pairs keeps every pair, the build figures are the first build's.
5. freshness: `recall watch` on the corpus in a subprocess; N messages
   appended one at a time to random logs, each timed from the append to the
   moment a separate Index.open finds it (freshness_p99_ms). The appended
   lines are cut off again afterwards, so the corpus stays reusable.

The machine is shared and noisy: absolute figures move from run to run, the
ratios much less. Your RECALL_* environment and config file are ignored here:
every index is opened with default settings.

`python -m bench.run --render OUT.json` prints the tables of an earlier run again.

`--skip fullscan,trigram,unicode61,floor` leaves those baselines out (their
figures are null, and the tables say so): at 1 GB and beyond each reads or
indexes every byte again, the trigram table at a tenth of the build's speed,
which is more than the run itself; ripgrep, the ratio the query targets name,
always runs.

`--cprofile FILE` adds a second, profiled build (into a scratch database; the
measured build is never profiled) and prints its top entries by cumulative time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import apsw
import orjson

from bench import corpus as C
from bench.common import (
    QUERY_BUDGET_S,
    ROOT,
    isolate,
    label,
    median_ms,
    shown,
    shown_argv,
    weighted_percentile,
    work_dir,
)

# The keys every run writes (tests/test_bench_smoke.py checks them).
KEYS = (
    "build_mb_s_raw", "build_text_mb_s", "messages_per_s", "peak_rss_mb", "index_bytes_per_text_byte",
    "query_p50_ms", "query_p99_ms", "fullscan_ratio", "rg_ratio", "unicode61_recall", "trigram_ratio",
    "freshness_p99_ms",
)
RG_INSTALL = "apt-get install -y ripgrep"
BASELINES = ("fullscan", "trigram", "unicode61", "floor")  # what --skip can leave out
TABLES = ("unicode61", "trigram", "floor")


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------


def machine() -> dict:
    model, nproc = C.cpu()
    rg = shutil.which("rg")
    rg_version = None
    if rg:
        rg_version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    code = None
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "session_recall"],
                               capture_output=True, text=True).stdout.strip()
        code = (head + (" with uncommitted changes to session_recall/" if dirty else "")) if head else None
    except OSError:
        pass
    return {
        "code": code,
        "nproc": nproc,
        "cpu": model,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "ripgrep": rg_version,
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


# ---------------------------------------------------------------------------
# 1. The cold build, in a child process
# ---------------------------------------------------------------------------


def _vm_hwm_kb() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def child_build(db: str, root: str, cprofile: str | None) -> int:
    """Runs in the child: one cold sync, reported as JSON on stdout."""
    from session_recall import Index

    prof = None
    if cprofile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    def cpu() -> float:  # CPU seconds of this process and of its (exited) workers
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    c0 = cpu()
    t0 = time.perf_counter()
    with Index.open(db) as ix:
        t1 = time.perf_counter()
        report = ix.sync([root])
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    if prof:
        prof.disable()
        prof.dump_stats(cprofile)
    hwm = _vm_hwm_kb() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # A large sync parses in worker processes (spawned, so they share no pages
    # with this one); they have exited by now, and the kernel keeps the
    # largest peak among them. The indexer's peak is at most the sum of the two.
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = {"build_s": t3 - t0, "open_s": t1 - t0, "sync_s": t2 - t1, "close_s": t3 - t2, "cpu_s": cpu() - c0,
           "main_rss_kb": hwm, "workers_rss_kb": workers, "peak_rss_kb": hwm + workers,
           "report": report.as_dict()}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def build(db: Path, root: Path, env: dict, cprofile: Path | None = None) -> dict:
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "bench.run", "--build-child", str(db), str(root)]
    if cprofile:
        cmd.append(str(cprofile))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
    if proc.returncode != 0:
        raise SystemExit(f"the build failed ({proc.returncode}):\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # The kernel's view, for the record: the largest RSS of any child waited
    # for so far. It can exceed the child's own VmHWM, because a forked child
    # starts out as a copy of this (larger) process before it execs.
    out["rusage_children_maxrss_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return out


def build_pairs(db: Path, root: Path, env: dict, work: Path, text_bytes: int, reps: int, with_floor: bool,
                first: dict) -> tuple[list[dict], dict | None]:
    """`reps` pairs of a cold build and the floor made right after it (the
    first build is `first`, into `db`; the others go to a scratch database,
    removed after), and the first pair's floor (beside the first build,
    whose figures the run reports) as the run's floor. Without the floor:
    no pairs, None."""
    if not with_floor:
        return [], None
    pairs: list[dict] = []
    floor: dict | None = None
    scratch = work / "pair.db"
    mb = text_bytes / 1e6
    for i in range(reps):
        b = first if i == 0 else build(scratch, root, env)
        f = build_baseline_tables(db, work, ("floor",))["floor"]
        floor = floor or f
        pairs.append({"build_s": b["build_s"], "cpu_s": b.get("cpu_s"), "floor_s": f["build_s"],
                      "floor_optimize_s": f["optimize_s"], "ratio": (mb / b["build_s"]) / f["text_mb_s"],
                      "ended_ratio": (mb / b["build_s"]) / f["ended_text_mb_s"]})
        print(f"build and floor, pair {i + 1}: {b['build_s']:.2f} s and {f['build_s']:.2f} s "
              f"(+ {f['optimize_s']:.2f} s optimize): {pairs[-1]['ratio']:.2f} of the floor, "
              f"{pairs[-1]['ended_ratio']:.2f} with its optimize", flush=True)
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    return pairs, floor


def profile_top(path: Path, n: int = 15) -> str:
    import io
    import pstats

    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    st.strip_dirs().sort_stats("cumulative").print_stats(n)
    text = buf.getvalue()
    # keep the table, drop pstats' preamble
    i = text.find("   ncalls")
    return text[i:].rstrip() if i >= 0 else text


# ---------------------------------------------------------------------------
# 2. The index's size and contents
# ---------------------------------------------------------------------------


def index_facts(db: Path) -> dict:
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    messages, text_bytes = conn.execute(
        "SELECT count(*), coalesce(sum(length(CAST(text AS BLOB))), 0) FROM messages").fetchone()
    fts = conn.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'message\\_fts%' ESCAPE '\\'"
                       ).fetchone()[0]
    sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    conn.close()
    size = sum(os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}"))
    return {"messages": messages, "sessions": sessions, "text_bytes": text_bytes, "db_bytes": size, "fts_bytes": fts}


# ---------------------------------------------------------------------------
# 3. Queries
# ---------------------------------------------------------------------------


def time_recall(db: Path, queries: list[dict], reps: int) -> list[dict]:
    """Warm recall times per query (ms), with what each answered."""
    from session_recall import Index

    out = [{"samples": [], "reps": reps} for _ in queries]
    with Index.open(str(db)) as ix:
        def once(q: dict):
            t0 = time.perf_counter()
            env = ix.recall(q["query"], question=q["question"], all_projects=True, limit=5)
            return (time.perf_counter() - t0) * 1000, env

        for q in queries:  # a first warm-up pass: page cache, SQLite's cache, jieba's dictionary
            once(q)
        for q, o in zip(queries, out):  # a second one, to know each query's cost
            ms, env = once(q)
            o.update(status=env.status, results=len(env.results), engine=env.diagnostics.engine,
                     candidates=env.diagnostics.candidates, sessions_scanned=env.diagnostics.sessions_scanned,
                     ranked=env.diagnostics.ranked, ranked_of=env.diagnostics.ranked_of,
                     ranked_of_more=env.diagnostics.ranked_of_more)
            if ms > QUERY_BUDGET_S * 1000 / reps:
                o["reps"] = max(3, int(QUERY_BUDGET_S * 1000 / ms))
        # interleaved passes, so that a noisy moment on the machine spreads over all queries
        for r in range(reps):
            for q, o in zip(queries, out):
                if r < o["reps"]:
                    o["samples"].append(once(q)[0])
    for o in out:
        o["p50_ms"] = statistics.median(o["samples"])
    return out


def query_terms(q: dict) -> list[str]:
    """The folded terms of a query, as recall parses them."""
    from session_recall.query.parse import split_terms
    from session_recall.text.fold import match_text

    terms: list[str] = []
    for raw in split_terms(q["query"] or ""):
        t = match_text(raw).strip(" ")
        if t and t not in terms:
            terms.append(t)
    return terms


# ---------------------------------------------------------------------------
# 4. Baselines
# ---------------------------------------------------------------------------


def full_scan(corpus: C.Corpus, terms: list[str]) -> int:
    """Exact answer from the raw logs alone: the number of messages that
    contain every term. What a tool without an index must do per query."""
    from session_recall.indexer.project import project
    from session_recall.query.match import occurs
    from session_recall.text.fold import match_text

    hits = 0
    for f in corpus.files:
        texts: dict[str, list] = {}  # message_id -> [visible text, settled]
        data = (corpus.root / f["path"]).read_bytes()
        for line in data.split(b"\n"):
            # A byte test first: only lines that can be messages are parsed
            # (the same shortcut the indexer takes; it makes this baseline faster).
            if b'"message' not in line:
                continue
            obj = orjson.loads(line)
            kind = obj.get("type")
            if kind not in ("message", "message_delta"):
                continue
            text = project(obj["role"], obj["text"], obj.get("tool_name"))
            if text is None:
                continue
            mid = obj["message_id"]
            cur = texts.get(mid)
            if kind == "message":
                if cur is None or not cur[1]:
                    texts[mid] = [text, True]
            elif cur is None:
                texts[mid] = [text, False]
            elif not cur[1]:
                cur[0] += text
        for text, _ in texts.values():
            mt = match_text(text)
            if all(occurs(t, mt) for t in terms):
                hits += 1
    return hits


def rg_seconds(rg: str, root: Path, term: str, runs: int = 3) -> float:
    """Median wall time of `rg -F -i -c TERM` over the logs (process start included)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([rg, "-F", "-i", "-c", "--no-messages", "-g", "*.jsonl", "--", term, str(root)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def build_baseline_tables(db: Path, work: Path, names: tuple[str, ...] = TABLES) -> dict:
    """Three FTS5 tables over the messages the index stored, each in its own
    database: a plain unicode61 table (raw text), a trigram table (folded
    text), and the index's own table (create_fts, merging as a large pass
    does) fed the index's own bodies
    (stored_body): FTS5's insert alone, without parsing, redaction, the
    `messages` rows or the bigram rewrite, which no build of this index can
    beat. What each table is fed is made before the clock starts; only the
    inserts and their commits are timed. The floor is then merged into one
    segment as a large pass of the build ends (sync.OPTIMIZE_MIN_ADDED), timed
    apart: its `ended_text_mb_s` counts it, for a floor with the build's end
    state. `names`: the tables to build."""
    from session_recall.indexer.ingest import stored_body
    from session_recall.indexer.sync import AUTOMERGE_BULK
    from session_recall.migrations import create_fts
    from session_recall.text.fold import fold

    if not names:
        return {}

    def floor_table(conn: apsw.Connection) -> None:
        # The index's own table, merging its levels as a large pass of the
        # build does (sync.AUTOMERGE_BULK): a floor the build could not reach
        # by its merge setting alone.
        create_fts(conn)
        conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('automerge', ?)", (AUTOMERGE_BULK,))

    src = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    rows = list(src.execute("SELECT id, text, attachments FROM messages ORDER BY id"))
    page_size = src.execute("PRAGMA page_size").fetchone()[0]  # each table's file is made as the index's was
    src.close()
    text_mb = sum(len(t.encode("utf-8")) for _, t, _ in rows) / 1e6

    out = {}
    for name, create, feed in (
        ("unicode61", lambda c: c.execute("CREATE VIRTUAL TABLE u USING fts5(body, content='')"), lambda t, a: t),
        ("trigram", lambda c: c.execute("CREATE VIRTUAL TABLE u USING fts5(body, tokenize='trigram')"),
         lambda t, a: fold(t)),
        ("floor", floor_table, stored_body),
    ):
        if name not in names:
            continue
        table = "message_fts" if name == "floor" else "u"
        path = work / f"{name}.db"
        for s in ("", "-wal", "-shm"):
            Path(f"{path}{s}").unlink(missing_ok=True)
        conn = apsw.Connection(str(path))
        conn.execute(f"PRAGMA page_size={page_size}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA cache_size=-65536")
        create(conn)
        secs = 0.0
        for i in range(0, len(rows), 5000):
            batch = [(rid, feed(t, a)) for rid, t, a in rows[i : i + 5000]]
            t0 = time.perf_counter()
            with conn:
                conn.executemany(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", batch)
            secs += time.perf_counter() - t0
        optimize_s = None
        if name == "floor":
            t0 = time.perf_counter()
            with conn:
                conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
            optimize_s = time.perf_counter() - t0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        size = sum(os.path.getsize(f"{path}{s}") for s in ("", "-wal") if os.path.exists(f"{path}{s}"))
        out[name] = {"path": path, "build_s": secs, "text_mb_s": text_mb / secs if secs else None,
                     "messages_per_s": len(rows) / secs if secs else None, "bytes": size,
                     "optimize_s": optimize_s,
                     "ended_text_mb_s": text_mb / (secs + optimize_s) if optimize_s is not None and secs else None}
    return out


def _fts_string(t: str) -> str:
    return '"' + t.replace('"', '""') + '"'


def _like(t: str) -> str:
    return "%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def trigram_sql(terms: list[str]) -> tuple[str, list[str]]:
    """The trigram baseline's statement for one query (see the module docstring)."""
    long = [t for t in terms if len(t) >= 3]
    short = [t for t in terms if len(t) < 3]
    likes = "".join(" AND body LIKE ? ESCAPE '\\'" for _ in short)
    if long:
        return (f"SELECT rowid FROM u WHERE u MATCH ?{likes} ORDER BY rank LIMIT 5",
                [" AND ".join(_fts_string(t) for t in long)] + [_like(t) for t in short])
    return (f"SELECT rowid FROM u WHERE 1{likes} ORDER BY rowid DESC LIMIT 5", [_like(t) for t in short])


def time_sql(conn: apsw.Connection, sql: str, params: list, reps: int) -> float:
    """Median ms of a statement (see median_ms)."""
    return median_ms(lambda: conn.execute(sql, params).fetchall(), reps)


def unicode61_recall(db: Path, u61: Path, cjk_terms: list[str]) -> dict:
    """True matches of each CJK term (substring of the folded text, as the
    match predicate says) against what a plain unicode61 table returns."""
    from session_recall.text.fold import match_text

    src = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    truth: dict[str, set[int]] = {t: set() for t in cjk_terms}
    for rid, text in src.execute("SELECT id, text FROM messages"):
        mt = match_text(text)
        for t in cjk_terms:
            if t in mt:
                truth[t].add(rid)
    src.close()
    conn = apsw.Connection(str(u61), flags=apsw.SQLITE_OPEN_READONLY)
    per = {}
    for t in cjk_terms:
        found = {r for (r,) in conn.execute("SELECT rowid FROM u WHERE u MATCH ?", (_fts_string(t) + "*",))}
        per[t] = {"true": len(truth[t]), "found": len(found & truth[t])}
    conn.close()
    # The same check on our index: the candidates of its bigram query, as
    # recall builds it, must hold every true match (verification then drops
    # the rest). A miss here would be a product defect.
    from session_recall.query.parse import QueryTokenizer, fts_phrase

    src = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    tokenizer = QueryTokenizer(src)
    for t in cjk_terms:
        terms = tokenizer.parse(t)
        ours = set()
        if terms and terms[0].tokens.tokens:
            ours = {r for (r,) in src.execute("SELECT rowid FROM message_fts WHERE message_fts MATCH ?",
                                               (fts_phrase(terms[0].tokens),))}
        per[t]["ours"] = len(ours & truth[t])
    src.close()
    total = sum(v["true"] for v in per.values())
    return {"recall": sum(v["found"] for v in per.values()) / total if total else None,
            "ours": sum(v["ours"] for v in per.values()) / total if total else None, "terms": per}


# ---------------------------------------------------------------------------
# 5. Freshness under `recall watch`
# ---------------------------------------------------------------------------


def freshness(db: Path, corpus: C.Corpus, env: dict, n: int, work: Path, seed: int) -> dict:
    from session_recall import Index

    rng = random.Random(seed)
    sizes = {f["path"]: (corpus.root / f["path"]).stat().st_size for f in corpus.files}
    log = open(work / "watch.stderr", "wb")
    watcher = subprocess.Popen(
        [sys.executable, "-c", "from session_recall.cli import main; main()", "--db", str(db), "watch",
         str(corpus.root)], stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=str(ROOT))
    clock = [0]

    def append(f: dict, token: str) -> None:
        clock[0] += 1
        line = {"type": "message", "session_id": f["session_id"], "message_id": f"fresh-{token}",
                "turn_id": "fresh", "role": "user", "ts": C._ts(C.EPOCH + 200 * 86400 + clock[0]),
                "text": f"freshness probe {token} 新鲜度"}
        with open(corpus.root / f["path"], "ab") as fh:
            fh.write(orjson.dumps(line) + b"\n")

    def wait_for(ix, token: str, timeout: float) -> float | None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if ix.recall(token, all_projects=True, limit=1).results:
                return (time.perf_counter() - t0) * 1000
            if watcher.poll() is not None:
                raise SystemExit(f"`recall watch` exited ({watcher.returncode}): "
                                 + (work / "watch.stderr").read_text(errors="replace")[-2000:])
            time.sleep(0.002)
        return None

    lat: list[float] = []
    timeouts = 0
    try:
        with Index.open(str(db)) as ix:
            # ready when a first probe is searchable (the watcher reconciles first)
            t_ready = time.perf_counter()
            append(corpus.files[0], "zzprobe0start")
            if wait_for(ix, "zzprobe0start", 120) is None:
                raise SystemExit("`recall watch` did not index a probe within 120 s: "
                                 + (work / "watch.stderr").read_text(errors="replace")[-2000:])
            ready_s = time.perf_counter() - t_ready
            for k in range(n):
                time.sleep(rng.uniform(0.05, 0.3))  # appends come apart, as an agent's do
                token = f"zzfresh{k}x{seed}"
                t0 = time.perf_counter()
                append(rng.choice(corpus.files), token)
                waited = wait_for(ix, token, 30)
                if waited is None:
                    timeouts += 1
                    lat.append(30_000.0)
                else:
                    lat.append((time.perf_counter() - t0) * 1000)
    finally:
        watcher.terminate()
        try:
            watcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()
        log.close()
        for path, size in sizes.items():  # cut the appended lines off: the corpus stays as generated
            os.truncate(corpus.root / path, size)
    lat_sorted = sorted(lat)
    return {
        "n": n, "timeouts": timeouts, "ready_s": ready_s,
        "p50_ms": statistics.median(lat),
        "p99_ms": lat_sorted[min(len(lat_sorted) - 1, math.ceil(0.99 * len(lat_sorted)) - 1)],
        "max_ms": lat_sorted[-1],
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def fmt(x, digits: int = 2) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, int) or abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 1 else f"{x:.2g}x"


def skip_or(skipped: set[str], name: str, x) -> str:
    return "skipped" if name in skipped else fmt(x)


def render(res: dict) -> str:
    m, c, b, ix = res["machine"], res["corpus"], res["build"], res["index"]
    bl, fr = res["baselines"], res["freshness"]
    skipped = set(res.get("skipped", ()))

    def per_text_byte(name: str) -> str:
        return "skipped" if name in skipped else f"{bl[f'{name}_bytes'] / max(1, ix['text_bytes']):.2f}"
    lines = [
        f"Command: `{res['command']}`",
        "",
        f"Code: {m['code'] or 'unknown'}.",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['os']}; Python {m['python']}, SQLite {m['sqlite']} "
        f"(apsw {m['apsw']}); {m['ripgrep'] or 'ripgrep not installed'}; load average {m['load_start']} at start, "
        f"{m['load_end']} at the end; run took {res['seconds']:.0f} s.",
        "",
        f"Corpus ({c['profile']}, seed {c['params']['seed']}, {'reused' if c['reused'] else 'generated'}): "
        f"{c['description']}.",
        "",
        "| figure | value | beside it |",
        "|---|---:|---|",
        f"| build_mb_s_raw | {fmt(res['build_mb_s_raw'])} MB/s | {c['raw_bytes'] / 1e6:.1f} MB of log in "
        f"{b['build_s']:.2f} s (sync {b['sync_s']:.2f} s), cold, "
        f"{'with a parsing worker process' if b['workers_rss_kb'] else 'one process'}"
        + (f"; {b['cpu_s']:.2f} s of CPU ({c['raw_bytes'] / 1e6 / b['cpu_s']:.1f} MB per CPU-second, which "
           "other load on the machine hardly changes)" if b.get("cpu_s") else "") + " |",
        f"| build_text_mb_s | {fmt(res['build_text_mb_s'])} MB/s | {ix['text_bytes'] / 1e6:.1f} MB of stored text; "
        f"FTS5 insert alone, no parsing: unicode61 {skip_or(skipped, 'unicode61', bl['unicode61_build_text_mb_s'])} "
        f"MB/s, trigram {skip_or(skipped, 'trigram', bl['trigram_build_text_mb_s'])} MB/s"
        + (f", the index's own table and bodies {fmt(bl['floor_build_text_mb_s'])} MB/s (the floor"
           + (f"; {fmt(bl['floor_ended_build_text_mb_s'])} MB/s with its optimize into one segment, "
              f"{bl['floor_optimize_s']:.2f} s, as a large build ends"
              if bl.get("floor_optimize_s") is not None else "") + ")"
           if bl.get("floor_build_text_mb_s") else "") + " |",
        f"| messages_per_s | {res['messages_per_s']:,.0f} | {ix['messages']:,} messages in {ix['sessions']:,} "
        f"sessions"
        + (f"; FTS5 insert alone of the index's own bodies {bl['floor_messages_per_s']:,.0f} (the floor)"
           if bl.get("floor_messages_per_s") else "") + " |",
        *([f"| build_floor_ratio | {fmt(res['build_floor_ratio'])} | median of {len(res['build_pairs'])} "
           f"alternated pairs of a build and the floor right after it: "
           + ", ".join(f"{p['ratio']:.2f}" for p in res["build_pairs"])
           + f"; against the floor with its optimize {fmt(res['build_floor_ended_ratio'])} ("
           + ", ".join(f"{p['ended_ratio']:.2f}" for p in res["build_pairs"]) + ") |"]
          if res.get("build_pairs") else []),
        f"| peak_rss_mb | {fmt(res['peak_rss_mb'], 0)} | peak of the build process {b['main_rss_kb'] / 1024:.0f} MB "
        f"(VmHWM; interpreter and imports included)"
        + (f" + its parsing worker {b['workers_rss_kb'] / 1024:.0f} MB (their sum bounds the combined peak)"
           if b["workers_rss_kb"] else ", no worker process") + " |",
        f"| index_bytes_per_text_byte | {fmt(res['index_bytes_per_text_byte'])} | {ix['db_bytes'] / 1e6:.1f} MB "
        f"after a checkpoint, of which FTS5 {ix['fts_bytes'] / 1e6:.1f} MB; trigram table "
        f"{per_text_byte('trigram')}, unicode61 {per_text_byte('unicode61')} bytes per text byte |",
        f"| query_p50_ms | {fmt(res['query_p50_ms'])} | {len(res['queries'])} queries, warm, limit 5, "
        f"passages built |",
        f"| query_p99_ms | {fmt(res['query_p99_ms'])} | slowest: {res['slowest_query']} |",
        f"| fullscan_ratio | {ratio(res['fullscan_ratio'])} | "
        + ("skipped (--skip fullscan) |" if "fullscan" in skipped else
           f"exact scan of the logs {fmt(bl['fullscan_ms'])} ms vs recall {fmt(bl['fullscan_recall_ms'])} ms, "
           f"summed over {bl['fullscan_queries']} queries; per-query geometric mean "
           f"{ratio(bl['fullscan_geomean_ratio'])} |"),
        f"| rg_ratio | {ratio(res['rg_ratio'])} | "
        + (f"`rg -F -i` {fmt(bl['rg_ms'])} ms vs recall {fmt(bl['rg_recall_ms'])} ms, summed over "
           f"{bl['rg_queries']} queries; per-query geometric mean {ratio(bl['rg_geomean_ratio'])} |"
           if res["rg_ratio"] is not None else
           f"ripgrep not installed: `{RG_INSTALL}` |"),
        f"| trigram_ratio | {ratio(res['trigram_ratio'])} | "
        + ("skipped (--skip trigram) |" if "trigram" in skipped else
           f"trigram FTS5 + LIKE {fmt(bl['trigram_ms'])} ms vs recall {fmt(bl['trigram_recall_ms'])} ms, summed over "
           f"{bl['trigram_queries']} queries; per-query geometric mean {ratio(bl['trigram_geomean_ratio'])} |"),
        f"| unicode61_recall | {fmt(res['unicode61_recall'], 3)} | "
        + ("skipped (--skip unicode61) |" if "unicode61" in skipped else
           f"plain unicode61 finds {bl['unicode61_found']:,} of {bl['unicode61_true']:,} true matches of "
           f"{bl['unicode61_terms']} CJK terms (as prefix phrases); our bigram index's candidates hold "
           f"{bl['bigram_found']:,} of them |"),
        f"| freshness_p99_ms | {fmt(res['freshness_p99_ms'], 0)} | `recall watch`, {fr['n']} appends: p50 "
        f"{fmt(fr['p50_ms'], 0)} ms, max {fmt(fr['max_ms'], 0)} ms, {fr['timeouts']} timeouts |",
        "",
        "Per query (recall: median ms and its own p99 over its repetitions; baselines: median ms; "
        "`-`: not run for this query):",
        "",
        "| category | query | recall p50 | recall p99 | reps | engine | results | full scan | rg | trigram |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for q in res["queries"]:
        samples = sorted(q["samples"])
        p99 = samples[min(len(samples) - 1, math.ceil(0.99 * len(samples)) - 1)]
        shown = label(q).replace("|", "\\|")
        lines.append(
            f"| {q['category']} | {shown} | {fmt(q['p50_ms'])} | {fmt(p99)} | "
            f"{len(q['samples'])} | {q['engine']} | {q['results']} ({q['status']}) | "
            f"{fmt(q.get('fullscan_ms')) if q.get('fullscan_ms') is not None else '-'} | "
            f"{fmt(q.get('rg_ms')) if q.get('rg_ms') is not None else '-'} | "
            f"{fmt(q.get('trigram_ms')) if q.get('trigram_ms') is not None else '-'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--build-child"]:
        return child_build(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
    if argv[:1] == ["--render"]:  # reprint the tables of an earlier run from its JSON
        res = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        print(render(res))
        if res.get("cprofile"):
            print(f"\nProfiled build ({res['cprofile']['build_s']:.2f} s under cProfile), top 15 by cumulative "
                  f"time:\n\n{res['cprofile']['top']}")
        return 0
    ap = argparse.ArgumentParser(description="session-recall benchmark: figures beside their baselines.")
    ap.add_argument("--size-mb", type=float, required=True, help="corpus size in MB of raw log")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--corpus", type=Path, help="corpus folder (default bench/out/corpus-<profile>-<size>-...)")
    C.add_knobs(ap)
    ap.add_argument("--reps", type=int, default=20, help="repetitions of each query (default 20)")
    ap.add_argument("--fresh", type=int, default=30, help="appends timed under `recall watch` (default 30)")
    ap.add_argument("--scan-per-category", type=int, default=2,
                    help="queries per category timed by the full scan (default 2; it reads every log per query)")
    ap.add_argument("--cprofile", type=Path, help="also profile a second build; write pstats here, print the top")
    ap.add_argument("--build-reps", type=int, default=1, metavar="N",
                    help="cold builds, each followed by the floor (alternated pairs; default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the databases (in the work folder beside the corpus)")
    ap.add_argument("--skip", default="", metavar="NAMES",
                    help="baselines to leave out, comma-separated, of " + ", ".join(BASELINES) + " (their figures are "
                         "null): for the largest corpora, where each reads or indexes every byte again")
    args = ap.parse_args(argv)
    if args.build_reps < 1:
        ap.error("--build-reps: at least 1")
    skip = tuple(n for n in args.skip.split(",") if n)
    if unknown := [n for n in skip if n not in BASELINES]:
        ap.error(f"--skip: unknown baseline {', '.join(unknown)} (known: {', '.join(BASELINES)})")
    if args.build_reps > 1 and "floor" in skip:
        ap.error("--build-reps: each build is paired with the floor, which --skip leaves out")

    t_start = time.perf_counter()
    p = C.params_from_args(args)
    root = (args.corpus or C.corpus_dir(p, args.profile)).resolve()
    work = work_dir(root)
    work.mkdir(parents=True, exist_ok=True)
    env = isolate(work)
    info = machine()
    print(f"machine: {info['nproc']} CPUs ({info['cpu']}), Python {info['python']}, SQLite {info['sqlite']}",
          flush=True)

    t0 = time.perf_counter()
    corpus, reused = C.ensure(p, root)
    print(f"corpus: {'reused' if reused else 'generated'} {root.name} ({time.perf_counter() - t0:.1f} s): "
          f"{C.describe(corpus)}", flush=True)

    # 1. build
    db = work / "recall.db"
    b = build(db, root, env)
    for source in b["report"]["sources"]:
        source["path"] = shown(source["path"])
    print(f"build: {b['build_s']:.2f} s, peak RSS {b['peak_rss_kb'] / 1024:.0f} MB", flush=True)
    facts = index_facts(db)
    pairs, floor = build_pairs(db, root, env, work, facts["text_bytes"], args.build_reps, "floor" not in skip, b)

    # 3. queries
    queries = [dict(q) for q in corpus.queries]
    timed = time_recall(db, queries, args.reps)
    for q, t in zip(queries, timed):
        q.update(t)
    per_query = [q["samples"] for q in queries]
    print(f"queries: {len(queries)} x up to {args.reps}", flush=True)

    # 4. baselines, on the term queries (a question has no literal term)
    term_qs = [q for q in queries if q["query"]]
    for q in term_qs:
        q["terms"] = query_terms(q)
    # full scan: the first `scan-per-category` term queries of each category
    seen: dict[str, int] = {}
    scan_qs = []
    for q in term_qs:
        if seen.get(q["category"], 0) < args.scan_per_category:
            seen[q["category"]] = seen.get(q["category"], 0) + 1
            scan_qs.append(q)
    for q in scan_qs if "fullscan" not in skip else []:
        t0 = time.perf_counter()
        q["fullscan_hits"] = full_scan(corpus, q["terms"])
        q["fullscan_ms"] = (time.perf_counter() - t0) * 1000
    if "fullscan" in skip:
        scan_qs = []
    print(f"full scan: {len(scan_qs)} queries", flush=True)
    rg = shutil.which("rg")
    if rg:
        for q in term_qs:
            main_term = max(q["terms"], key=len)  # the most selective literal, as a person would grep
            q["rg_ms"] = rg_seconds(rg, root, main_term) * 1000
    else:
        print(f"ripgrep (rg) is not installed, so rg_ratio is null; install it with: {RG_INSTALL}", flush=True)
    tables = build_baseline_tables(db, work, tuple(n for n in TABLES if n not in skip and n != "floor"))
    if floor:
        tables["floor"] = floor
    if "trigram" in tables:
        tri = apsw.Connection(str(tables["trigram"]["path"]), flags=apsw.SQLITE_OPEN_READONLY)
        for q in term_qs:
            sql, params = trigram_sql(q["terms"])
            q["trigram_ms"] = time_sql(tri, sql, params, args.reps)
        tri.close()
    cjk_terms = [q["terms"][0] for q in queries if q["category"] in ("cjk1", "cjk2", "cjk4")]
    u61 = (unicode61_recall(db, tables["unicode61"]["path"], cjk_terms) if "unicode61" in tables
           else {"recall": None, "terms": {}})
    print("baselines: done", flush=True)

    # 5. freshness
    fr = freshness(db, corpus, env, args.fresh, work, p.seed)
    print(f"freshness: p99 {fr['p99_ms']:.0f} ms", flush=True)

    # --- the figures
    def sum_ratio(qs: list[dict], key: str) -> tuple[float | None, float, float]:
        """The headline ratio: the baseline's time for the queries over recall's
        (sums of per-query medians), so slow queries weigh what they cost;
        None for a baseline not run."""
        qs = [q for q in qs if q.get(key) is not None]
        base = sum(q[key] for q in qs)
        ours = sum(q["p50_ms"] for q in qs)
        return (base / ours if qs and ours else None), base, ours

    def geo_ratio(qs: list[dict], key: str) -> float | None:
        """The typical query's ratio: geometric mean of per-query ratios."""
        rs = [q[key] / q["p50_ms"] for q in qs if q.get(key) and q["p50_ms"] > 0]
        return math.exp(sum(math.log(r) for r in rs) / len(rs)) if rs else None

    fs_ratio, fs_ms, fs_ours = sum_ratio(scan_qs, "fullscan_ms")
    rg_ratio, rg_ms, rg_ours = sum_ratio(term_qs, "rg_ms") if rg else (None, 0.0, 0.0)
    tri_ratio, tri_ms, tri_ours = sum_ratio(term_qs, "trigram_ms")
    slowest = max(queries, key=lambda q: q["p50_ms"])
    build_s = b["build_s"]
    res = {
        "build_mb_s_raw": corpus.raw_bytes / 1e6 / build_s,
        "build_text_mb_s": facts["text_bytes"] / 1e6 / build_s,
        "messages_per_s": facts["messages"] / build_s,
        "peak_rss_mb": b["peak_rss_kb"] / 1024,
        "index_bytes_per_text_byte": facts["db_bytes"] / facts["text_bytes"] if facts["text_bytes"] else None,
        "query_p50_ms": weighted_percentile(per_query, 50),
        "query_p99_ms": weighted_percentile(per_query, 99),
        "fullscan_ratio": fs_ratio,
        "rg_ratio": rg_ratio,
        "unicode61_recall": u61["recall"],
        "trigram_ratio": tri_ratio,
        "freshness_p99_ms": fr["p99_ms"],
        "build_floor_ratio": statistics.median(p["ratio"] for p in pairs) if pairs else None,
        "build_floor_ended_ratio": statistics.median(p["ended_ratio"] for p in pairs) if pairs else None,
        "build_pairs": pairs,
        "slowest_query": f"`{label(slowest)}` ({slowest['category']}, {slowest['engine']}) "
                         f"{slowest['p50_ms']:.1f} ms median",
        "command": "python -m bench.run " + " ".join(shown_argv([str(a) for a in argv])),
        "skipped": list(skip),
        "machine": info,
        "corpus": {"profile": args.profile, "root": shown(root), "params": corpus.manifest["params"], "reused": reused,
                   "raw_bytes": corpus.raw_bytes, "totals": corpus.manifest["totals"],
                   "description": C.describe(corpus)},
        "build": b,
        "index": facts,
        "baselines": {
            "fullscan_ms": fs_ms, "fullscan_recall_ms": fs_ours, "fullscan_queries": len(scan_qs),
            "fullscan_geomean_ratio": geo_ratio(scan_qs, "fullscan_ms"),
            "rg_geomean_ratio": geo_ratio(term_qs, "rg_ms") if rg else None,
            "trigram_geomean_ratio": geo_ratio(term_qs, "trigram_ms"),
            "rg_ms": rg_ms if rg else None, "rg_recall_ms": rg_ours if rg else None, "rg_queries": len(term_qs),
            "trigram_ms": tri_ms, "trigram_recall_ms": tri_ours, "trigram_queries": len(term_qs),
            **{f"{name}_{key}": tables.get(name, {}).get(field) for name in TABLES
               for key, field in (("build_text_mb_s", "text_mb_s"), ("bytes", "bytes"))},
            "floor_messages_per_s": tables.get("floor", {}).get("messages_per_s"),
            "floor_optimize_s": tables.get("floor", {}).get("optimize_s"),
            "floor_ended_build_text_mb_s": tables.get("floor", {}).get("ended_text_mb_s"),
            "unicode61_terms": len(cjk_terms),
            "unicode61_true": sum(v["true"] for v in u61["terms"].values()),
            "unicode61_found": sum(v["found"] for v in u61["terms"].values()),
            "bigram_found": sum(v["ours"] for v in u61["terms"].values()),
            "unicode61_per_term": u61["terms"],
        },
        "freshness": fr,
        "queries": queries,
    }
    if args.cprofile:
        scratch = work / "profiled.db"
        pb = build(scratch, root, env, cprofile=args.cprofile.resolve())
        res["cprofile"] = {"path": shown(args.cprofile), "build_s": pb["build_s"],
                           "top": profile_top(args.cprofile.resolve())}
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    res["seconds"] = time.perf_counter() - t_start
    print()
    print(render(res))
    if args.cprofile:
        print(f"\nProfiled build ({res['cprofile']['build_s']:.2f} s under cProfile), top 15 by cumulative time:\n")
        print(res["cprofile"]["top"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
        print(f"\nwrote {args.json}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
