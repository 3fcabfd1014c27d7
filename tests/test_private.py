"""The index file is private and its own (README, "Where the index lives"):
a new database, its WAL and shm files are created 0600 in a 0700 folder
whatever the umask, an existing folder keeps its mode, an index that others
could read becomes 0600 when its owner opens it; `--db` naming another
program's SQLite database is refused with a message and a non-zero exit, and
the file is left byte for byte as it was. All through the real `recall`."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import apsw
from conftest import poll_until, recall_command


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_index_its_wal_shm_and_lock_are_0600_in_a_0700_folder_whatever_the_umask(tmp_path):
    db = tmp_path / "data" / "session-recall" / "recall.db"
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RECALL_DB"}
    # umask 0: whatever modes the folder and the files get, the code gave them.
    # `recall watch` keeps the index open, so its WAL and shm files are there.
    watcher = subprocess.Popen([*recall_command(), "--db", str(db), "watch", str(logs)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=env, cwd=tmp_path, preexec_fn=lambda: os.umask(0))
    try:
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.lock")]
        poll_until(lambda: all(p.exists() for p in files) or watcher.poll() is not None, 30, "the open index's files")
        assert watcher.poll() is None, watcher.stderr.read() if watcher.stderr else ""
        assert mode(db.parent) == 0o700
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
        if watcher.stderr:
            watcher.stderr.close()


def test_an_existing_folder_keeps_its_mode_and_an_existing_file_becomes_a_private_index(tmp_path, run_recall):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    db = shared / "recall.db"
    db.touch()  # an empty file is a new database, not another program's
    os.chmod(db, 0o644)  # as an earlier version left its index, too
    r = run_recall("--db", db, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert (mode(shared), mode(db)) == (0o755, 0o600)


def another_programs_database(path: Path, *, wal: bool) -> bytes:
    conn = apsw.Connection(str(path))
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); CREATE TABLE notes(body TEXT);"
                  "INSERT INTO notes VALUES ('my notes, not an index')")
    conn.close()
    return path.read_bytes()


def test_another_programs_sqlite_database_is_refused_and_left_as_it_was(tmp_path, run_recall):
    other = tmp_path / "notes.sqlite"
    before = another_programs_database(other, wal=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    r = run_recall("--db", other, "index", logs)  # every command opens the index the same way
    assert r.returncode != 0, r.stdout
    assert "not a session-recall index" in r.stderr and "notes" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "notes.sqlite"]  # no WAL, lock or journal left


def test_doctor_never_moves_another_programs_database_aside(tmp_path, run_recall):
    other = tmp_path / "app.db"
    before = another_programs_database(other, wal=True)
    r = run_recall("--db", other, "doctor", "--repair", "--json")
    assert r.returncode != 0
    assert "not a session-recall index" in r.stdout, r.stdout
    assert other.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if "damaged" in p.name] == []
