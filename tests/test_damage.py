"""Damage and upgrades (contract sections 1 and 10).

A real database has bytes of one of its pages overwritten (a page in the
middle of the file, the page of the `sources` table, the file header):
`recall doctor` finds it (SQLite's and FTS5's integrity checks, on a
connection of its own) and exits 1 with a message that says what to do;
`recall doctor --repair` moves it aside with its WAL and shm files and builds
a new one from the sources the damaged file listed, or, when that list
cannot be read, from the configured sources, and says which; the new index
equals a fresh build of the same logs.

A database created by the first migration alone, holding data written as
that schema expects, is opened by the current code: it upgrades in place,
its data intact and searchable, and the next sync resumes at its offsets.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import apsw
import orjson
import pytest

from session_recall import Index, migrations
from session_recall.config import Settings
from session_recall.indexer.files import prefix_hash
from session_recall.indexer.project import PROJECTION_VERSION
from session_recall.store import check_database
from session_recall.text.redact import REDACTOR_VERSION, Redactor, render
from session_recall.text.tokens import TOKENIZER_VERSION, index_body

CWD = "/home/ada/damage"
WORDS = ["deploy", "checklist", "font", "serif", "résumé", "简历", "模板", "字体", "a->b", "cache", "offset"]


def write_logs(logs: Path, sessions: int = 30, messages: int = 120) -> None:
    rng = random.Random(5)
    for s in range(sessions):
        sid = f"dmg-{s:03d}"
        rows = [{"type": "session", "session_id": sid, "cwd": f"{CWD}/p{s % 3}", "started_at": "2026-11-20T09:00:00Z",
                 "title": f"damage session {s}"}]
        for m in range(messages):
            rows.append({"type": "message", "session_id": sid, "message_id": f"m{m}", "turn_id": f"t{m // 3}",
                         "role": rng.choice(["user", "assistant"]), "ts": f"2026-11-20T10:{m // 60:02d}:{m % 60:02d}Z",
                         "text": f"s{s}m{m} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))})
        (logs / f"{sid}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def snapshot(db: Path) -> list[tuple]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return sorted(conn.execute(
            "SELECT s.source, s.cwd, s.session_id, s.title, m.message_id, m.turn_id, m.role, m.ts, m.text, m.settled "
            "FROM messages m JOIN sessions s ON s.id = m.session"))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The logs and a fresh build of them, made once a module: the logs are
    only read, and each test damages its own copy of the database (`built`)."""
    root = tmp_path_factory.mktemp("damage")
    logs = root / "logs"
    logs.mkdir()
    write_logs(logs)
    db = root / "recall.db"
    with pytest.MonkeyPatch.context() as mp:  # isolated_settings, for a module
        for key in [k for k in os.environ if k.startswith("RECALL_")]:
            mp.delenv(key)
        with Index.open(db, settings=Settings()) as ix:
            ix.sync([str(logs)], kind="canonical")
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0  # all in the main file
    assert check_database(db) == []
    return {"db": db, "logs": logs, "fresh": snapshot(db)}


@pytest.fixture
def built(template, tmp_path, isolated_settings):
    """This test's own copy of the template's database (mode bits included),
    whose sources are the template's logs; `fresh` is what a fresh build of
    them holds."""
    db = tmp_path / "recall.db"
    shutil.copy(template["db"], db)
    return {"db": db, "logs": template["logs"], "fresh": template["fresh"]}


def pages_of(db: Path) -> tuple[int, int, dict[str, list[int]]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        count = conn.execute("PRAGMA page_count").fetchone()[0]
        by_name: dict[str, list[int]] = {}
        for name, page in conn.execute("SELECT name, pageno FROM dbstat"):
            by_name.setdefault(name, []).append(page)
        return size, count, by_name
    finally:
        conn.close()


def damage(db: Path, where: str) -> str:
    """Overwrite bytes of one page in use; return what was hit."""
    size, count, by_name = pages_of(db)
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0  # all in the main file
    rng = random.Random(11)
    if where == "header":
        offset, length, hit = 0, 100, "the file header"
    else:
        if where == "middle":
            in_use = sorted((p, n) for n, ps in by_name.items() for p in ps if n != "sqlite_schema")
            page, hit = min(in_use, key=lambda pn: abs(pn[0] - count // 2))
        else:
            page, hit = by_name[where][0], where
        offset, length = (page - 1) * size, size
    junk = bytearray(rng.randbytes(length))
    if where != "header":
        junk[0] = 0xFF  # not a b-tree page type, whatever the random bytes say
    with open(db, "r+b") as fh:
        fh.seek(offset)
        fh.write(junk)
    assert Path(db).stat().st_size >= offset + length
    return f"{hit} (bytes {offset}..{offset + length} of {count * size})"


@pytest.mark.parametrize("where", ["middle", "sources", "header"])
def test_a_damaged_database_is_detected_and_rebuilt_from_its_sources(built, where, run_recall, tmp_path):
    db, logs = built["db"], built["logs"]
    hit = damage(db, where)
    config = tmp_path / "config.toml"
    config.write_text(f'[[sources]]\npath = "{logs}"\nkind = "canonical"\n')

    done = run_recall("--db", db, "--config", config, "doctor")
    assert done.returncode == 1, (hit, done.stdout, done.stderr)
    assert "damaged" in done.stderr and "recall doctor --repair" in done.stderr, done.stderr
    report = Index.doctor(db, settings=Settings())
    assert not report["ok"] and report["problems"], hit
    for args in (["status"], ["search", "deploy", "--all-projects"]):  # no traceback: a message naming doctor
        done = run_recall("--db", db, *args)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 0 or "recall doctor --repair" in done.stderr, done.stderr
    assert Path(db).exists() and not report["moved_to"]  # a check changes nothing

    done = run_recall("--db", db, "--config", config, "doctor", "--repair", "--json")
    assert done.returncode == 0, (hit, done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["ok"] and report["repaired"], report
    moved = Path(report["moved_to"])
    assert moved.exists() and moved.name.startswith("recall.db.damaged-")
    assert check_database(moved)  # the damaged file is kept as it was
    # It still holds the old text, which nothing will wipe: its owner's alone, and said so.
    for f in moved.parent.glob(moved.name + "*"):
        assert f.stat().st_mode & 0o777 == 0o600, f
    assert "0600" in report["message"] and "delete it" in report["message"]
    if where == "middle":
        assert report["sources_from"] == "database"
        assert "the 1 sources the damaged database listed" in report["message"]
    else:  # its list of sources is unreadable: the config's, said so
        assert report["sources_from"] == "config"
        assert "could not be read" in report["message"] and "config" in report["message"]
    assert report["sources"] == [{"path": str(logs.resolve()), "kind": "canonical"}]
    assert str(moved) in report["message"]
    assert check_database(db) == []
    assert snapshot(db) == built["fresh"], hit
    done = run_recall("--db", db, "doctor")
    assert done.returncode == 0 and "healthy" in done.stdout, done.stderr
    with Index.open(db, settings=Settings()) as ix:
        env = ix.recall("简历 deploy", all_projects=True)
        assert env.status == "ok" and env.results
        assert ix.status()["sources"][0]["path"] == str(logs.resolve())


def test_repair_of_a_healthy_database_changes_nothing(built, run_recall):
    db = built["db"]
    before = db.read_bytes()
    done = run_recall("--db", db, "doctor", "--repair")
    assert done.returncode == 0 and "healthy" in done.stdout, done.stderr
    assert db.read_bytes() == before
    assert not list(db.parent.glob("recall.db.damaged-*"))


def test_doctor_without_a_database_says_so(tmp_path, run_recall):
    done = run_recall("--db", tmp_path / "none.db", "doctor")
    assert done.returncode == 1 and "no database" in done.stderr
    assert not (tmp_path / "none.db").exists()


def test_repair_waits_for_no_writer_and_refuses_beside_one(built, run_recall, recall_cmd):
    """A repair takes the writer lock: while `recall watch` runs, it is refused."""
    import subprocess
    import time

    db, logs = built["db"], built["logs"]
    damage(db, "middle")
    watcher = subprocess.Popen([*recall_cmd, "--db", str(db), "watch", str(logs)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        lock = Path(f"{db}.lock")
        deadline = time.monotonic() + 20
        while not (lock.exists() and f"pid {watcher.pid}" in lock.read_text()):
            if watcher.poll() is not None:
                pytest.skip("the watcher stopped on the damaged database before taking the lock")
            assert time.monotonic() < deadline
            time.sleep(0.02)
        done = run_recall("--db", db, "doctor", "--repair")
        assert done.returncode == 2 and f"pid {watcher.pid}" in done.stderr, done.stderr
        assert not list(db.parent.glob("recall.db.damaged-*"))
    finally:
        watcher.kill()
        watcher.wait(timeout=10)
        watcher.stderr.close()


# --- upgrades ----------------------------------------------------------------------------------


def test_a_first_schema_database_upgrades_in_place_with_its_data(tmp_path, isolated_settings):
    logs = tmp_path / "logs"
    logs.mkdir()
    cwd = f"{CWD}/old"
    lines = [
        {"type": "session", "session_id": "old-1", "cwd": cwd, "started_at": "2026-01-05T09:00:00Z",
         "title": "the first schema"},
        {"type": "message", "session_id": "old-1", "message_id": "m1", "turn_id": "t1", "role": "user",
         "ts": "2026-01-05T09:00:01Z", "text": "which font did we pick for the résumé?"},
        {"type": "message", "session_id": "old-1", "message_id": "m2", "turn_id": "t1", "role": "assistant",
         "ts": "2026-01-05T09:00:02Z", "text": "Source Serif for the 简历模板, key ghp_abcdefghijklmnopqrstuvwxyz0123"},
        {"type": "progress", "session_id": "old-1", "percent": 50},
        {"type": "message", "session_id": "old-1", "message_id": "m3", "turn_id": "t2", "role": "user",
         "ts": "2026-01-05T09:00:03Z", "text": "and the screenshot",
         "attachments": [{"id": "img1", "name": "résumé 截图.png", "mime_type": "image/png", "bytes": 2048}]},
    ]
    log = logs / "old-1.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    real = os.path.realpath(log)
    st = os.stat(real)

    db = tmp_path / "old.db"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL")
    assert migrations.apply(conn, upto=1) == ["m001_initial"]
    assert migrations.schema_version(conn) == 1
    assert conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'source_problems'").fetchone() is None
    key = os.urandom(32)
    redactor = Redactor(key)
    with conn:
        # The versions of today's text pipeline (a database without
        # `projection_version` was built by projection 1, and is rebuilt:
        # test_escapes.py), so that the upgrade alone is what is tested.
        for k, v in (("created_at", "2026-01-05T09:00:00Z"), ("tokenizer_version", str(TOKENIZER_VERSION)),
                     ("redactor_version", str(REDACTOR_VERSION)), ("projection_version", str(PROJECTION_VERSION)),
                     ("redaction_key", key.hex()), ("generation", "3")):
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (k, v))
        conn.execute("INSERT INTO sources(id, path, kind, added_at, last_indexed_at) VALUES (1, ?, 'canonical', ?, ?)",
                     (os.path.realpath(logs), "2026-01-05T09:00:00Z", "2026-01-05T09:01:00Z"))
        conn.execute(
            "INSERT INTO files(id, path, source_id, kind, dev, ino, size, mtime_ns, offset, prefix_hash, state, "
            "missing, indexed_at) VALUES (1, ?, 1, 'canonical', ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_size, prefix_hash(real, st.st_size),
             orjson.dumps({"cwd": {"old-1": cwd}}).decode(), "2026-01-05T09:01:00Z"))
        conn.execute("INSERT INTO file_skips(file_id, reason, count) VALUES (1, 'noise', 1)")
        conn.execute("INSERT INTO sessions(id, source, cwd, session_id, title, started_at) "
                     "VALUES (1, 'canonical', ?, 'old-1', 'the first schema', '2026-01-05T09:00:00Z')", (cwd,))
        for seq, row in enumerate((lines[1], lines[2], lines[4]), start=1):
            text, _ = redactor.redact(row["text"])
            atts = row.get("attachments")
            names = [a["name"] for a in atts] if atts else []
            conn.execute(
                "INSERT INTO messages(id, session, message_id, turn_id, seq, role, ts, text, attachments, settled, "
                "file_id) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, 1, 1)",
                (seq, row["message_id"], row["turn_id"], seq, row["role"], row["ts"], text,
                 orjson.dumps(atts).decode() if atts else None))
            body = index_body(text) + ("\n" + index_body("\n".join(names)) if names else "")
            conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (seq, body))
    tables = ("meta", "sources", "files", "file_skips", "sessions", "messages")
    columns = {t: ", ".join(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables}
    before = {t: sorted(conn.execute(f"SELECT {columns[t]} FROM {t}")) for t in tables}
    conn.close()

    with Index.open(db, settings=Settings()) as ix:
        assert ix.store.versions()["schema_version"] == len(migrations.MIGRATIONS)
        applied = migrations.applied(ix.store.conn)
        assert applied == sorted(f.__name__ for f in migrations.MIGRATIONS)
        after = {t: sorted(ix.store.conn.execute(f"SELECT {columns[t]} FROM {t}")) for t in tables}
        assert after == before  # the upgrade touched no row
        # m003 added messages.nfkc; rows written before it say "not known to be NFKC"
        assert ix.store.conn.execute("SELECT DISTINCT nfkc FROM messages").fetchall() == [(0,)]
        st_ = ix.status()
        assert (st_["sessions"], st_["messages"], st_["skipped"]) == (1, 3, {"noise": 1})
        assert not st_["stale"]
        env = ix.recall("简历 serif", cwd=cwd)
        [anchor] = [m for m in env.results[0].passage.messages if m.is_anchor]
        assert env.status == "ok" and anchor.message_id == "m2" and anchor.text.startswith("Source Serif")
        assert "[redacted:github_token]" in anchor.text and "ghp_" not in env.model_dump_json()
        assert ix.recall("截图", cwd=cwd).status == "ok"  # attachment names are indexed
        assert ix.recall("", question="which font for the résumé?", cwd=cwd).status == "ok"
        # the next sync resumes at the stored offset: nothing read twice
        report = ix.sync([str(logs)], kind="canonical")
        assert (report.messages_added, report.messages_updated, report.files_read) == (0, 0, 0)
        with open(log, "ab") as fh:
            fh.write(orjson.dumps({"type": "message", "session_id": "old-1", "message_id": "m4", "turn_id": "t3",
                                   "role": "assistant", "ts": "2026-01-05T09:00:04Z", "text": "appended after"}) + b"\n")
        report = ix.sync([str(logs)], kind="canonical")
        assert (report.messages_added, report.messages_updated) == (1, 0)
        assert ix.status()["messages"] == 4
        assert check_database(db) == []
    # and it now equals a fresh build of the same log (placeholders compared as rendered:
    # each database has its own redaction key)
    fresh = tmp_path / "fresh.db"
    with Index.open(fresh, settings=Settings()) as ix:
        ix.sync([str(logs)], kind="canonical")

    def rendered(path: Path) -> list[tuple]:
        return [row[:8] + (render(row[8], "mask")[0], row[9]) for row in snapshot(path)]

    assert rendered(db) == rendered(fresh)
