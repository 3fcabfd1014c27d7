"""Sources a user can see and correct, through the real `recall` command: a
path that does not exist is refused and registers nothing; `recall sources`
lists, adds and removes; `recall projects` lists the project roots; `recall
index` while `recall watch` runs hands the new source to the watcher; and the
watcher takes a harness folder created after it started (real watchdog
events, real subprocesses)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path

import apsw
import pytest
from conftest import Proc, poll_until

from session_recall import Index

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No harness folder, no config, no user index: only what a test makes."""
    config = tmp_path / "config.toml"
    config.write_text("")
    e = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
    e.update(HOME=str(tmp_path / "home"), RECALL_CONFIG=str(config), XDG_DATA_HOME=str(tmp_path / "xdg-data"),
             CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), CODEX_HOME=str(tmp_path / "codex"),
             GEMINI_CLI_HOME=str(tmp_path / "gemini"), PYTHONUNBUFFERED="1")
    (tmp_path / "home").mkdir()
    return e


@pytest.fixture
def recall(tmp_path: Path, env, recall_cmd):
    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*recall_cmd, "--db", str(tmp_path / "r.db"), *map(str, args)], capture_output=True,
                              text=True, timeout=60, cwd=cwd or tmp_path, env=env)
    return run


@pytest.fixture
def procs():
    started: list[Proc] = []
    yield started
    for p in started:
        if p.alive():
            p.popen.kill()
        p.popen.wait(timeout=10)


def sessions_of(db: Path, source: str) -> int:
    """Sessions of a source kind, read the way any reader does (read-only)."""
    if not db.exists():
        return 0
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM sessions WHERE source = ?", (source,)).fetchone()[0]
    except apsw.SQLError:
        return 0
    finally:
        conn.close()


def write_session(folder: Path, canonical, sid: str, cwd: Path | str, word: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    log = canonical(sid, cwd=str(cwd))
    (folder / f"{sid}.jsonl").write_bytes(log.session() + log.message("m1", f"{word} was said here"))


def test_a_path_that_does_not_exist_is_refused_and_registers_nothing(tmp_path, recall):
    done = recall("index", tmp_path / "no" / "such" / "dir")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "no such file or directory" in done.stderr and str(tmp_path / "no" / "such" / "dir") in done.stderr
    listed = recall("sources", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


def test_sources_lists_adds_and_removes(tmp_path, recall, canonical):
    logs = tmp_path / "logs"
    write_session(logs, canonical, "s1", "/home/ada/shop", "quux")
    assert recall("sources", "add", logs).returncode == 0
    assert recall("index").returncode == 0  # the known sources, the added one among them
    (listed,) = json.loads(recall("sources", "--json").stdout)
    assert listed["path"] == str(logs.resolve()) and listed["files"] == 1 and listed["last_indexed_at"]
    removed = recall("sources", "remove", logs)
    assert removed.returncode == 0, removed.stderr
    assert recall("sources", "remove", logs).returncode == 2  # not a source any more
    with Index.open(tmp_path / "r.db") as ix:
        assert ix.sources() == []
        # the sessions read from it stay searchable
        assert [r.session_id for r in ix.recall("quux", all_projects=True).results] == ["s1"]
        before = ix.status()["messages"]
        # added again, its files are its own again, read where they were left: nothing twice
        ix.sync([str(logs)])
        assert [s["files"] for s in ix.sources()] == [1] and ix.status()["messages"] == before


def test_projects_lists_the_roots_with_sessions_and_last_activity(tmp_path, recall, canonical, env, recall_cmd):
    repo = tmp_path / "home" / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    logs = tmp_path / "logs"
    write_session(logs, canonical, "top", repo, "alpha")
    write_session(logs, canonical, "src", repo / "src", "beta")
    write_session(logs, canonical, "far", "/srv/elsewhere", "gamma")
    assert recall("index", logs).returncode == 0
    listed = json.loads(recall("projects", "--json").stdout)
    by_root = {p["root"]: p for p in listed}
    assert set(by_root) == {str(repo), "/srv/elsewhere"}
    assert by_root[str(repo)]["sessions"] == 2 and by_root["/srv/elsewhere"]["sessions"] == 1
    assert all(p["last_activity"] for p in listed)
    # the text lists times in the local zone, as search does (here UTC+8)
    shown = subprocess.run([*recall_cmd, "--db", str(tmp_path / "r.db"), "projects"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env={**env, "TZ": "Asia/Shanghai"}).stdout
    last = max(p["last_activity"] for p in listed)
    local = dt.datetime.fromisoformat(last).astimezone(dt.timezone(dt.timedelta(hours=8))).strftime("%Y-%m-%d %H:%M")
    assert shown.splitlines()[0].startswith(local), (shown, last)
    # the lists apply: a folder they keep out is no project listed, in either list
    for lists in ('deny_cwds = ["/srv/elsewhere"]', f'allow_cwds = ["{repo}"]'):
        (tmp_path / "config.toml").write_text(lists + "\n")
        listed = json.loads(recall("projects", "--json").stdout)
        assert [(p["root"], p["sessions"]) for p in listed] == [(str(repo), 2)], lists
    (tmp_path / "config.toml").write_text(f'deny_cwds = ["{repo}/src"]\n')
    assert [(p["root"], p["sessions"]) for p in json.loads(recall("projects", "--json").stdout)
            if p["root"] == str(repo)] == [(str(repo), 1)]


def test_index_while_watch_runs_hands_the_source_to_the_watcher(tmp_path, recall, recall_cmd, env, canonical,
                                                               procs):
    first, second = tmp_path / "first", tmp_path / "second"
    write_session(first, canonical, "s1", "/home/ada/a", "alpha")
    write_session(second, canonical, "s2", "/home/ada/b", "bravo")
    db = tmp_path / "r.db"
    watch = Proc([*recall_cmd, "--db", str(db), "watch", str(first)], tmp_path, "watch", env, tmp_path)
    procs.append(watch)
    watch.wait_for("watching", timeout=20)
    poll_until(lambda: sessions_of(db, "canonical") == 1, 20, "the first source indexed")
    done = recall("index", second)
    assert done.returncode == 0, done.stderr
    assert f"indexed by recall watch (pid {watch.pid})" in done.stdout, (done.stdout, done.stderr)
    assert sessions_of(db, "canonical") == 2
    # and the watcher keeps the handed source current
    write_session(second, canonical, "s3", "/home/ada/b", "charlie")
    poll_until(lambda: sessions_of(db, "canonical") == 3, 20, "a new log in the handed source")
    assert watch.alive()


def test_watch_takes_a_harness_folder_created_after_it_started(tmp_path, recall_cmd, env, procs):
    db = tmp_path / "r.db"
    watch = Proc([*recall_cmd, "--db", str(db), "watch"], tmp_path, "watch", env, tmp_path)
    procs.append(watch)
    watch.wait_for("watching", timeout=20)
    assert sessions_of(db, "claude-code") == 0
    projects = tmp_path / "claude" / "projects"
    projects.mkdir(parents=True)
    shutil.copytree(FIXTURES / "claude-code" / "-home-ada-shop", projects / "-home-ada-shop")
    poll_until(lambda: sessions_of(db, "claude-code") >= 1, 20, "the new Claude Code folder indexed")
    watch.wait_for("new source", timeout=5)


def test_watch_takes_an_opencode_database_created_after_it_started(tmp_path, recall_cmd, env, procs):
    """$OPENCODE_DB names a file, not a folder: created after the watcher
    started, it is found, indexed, and watched (a later write is mirrored)."""
    import sqlite3

    oc = tmp_path / "oc"
    oc.mkdir()
    env = {**env, "OPENCODE_DB": str(oc / "opencode.db")}
    db = tmp_path / "r.db"
    watch = Proc([*recall_cmd, "--db", str(db), "watch"], tmp_path, "watch", env, tmp_path)
    procs.append(watch)
    watch.wait_for("watching", timeout=20)
    app = sqlite3.connect(oc / "opencode.db", isolation_level=None)
    app.execute("PRAGMA journal_mode = WAL")
    app.executescript((FIXTURES / "opencode" / "opencode.sql").read_text())
    poll_until(lambda: sessions_of(db, "opencode") >= 1, 20, "the new OpenCode database indexed")
    app.execute("UPDATE part SET data = ?, time_updated = time_updated + 1 WHERE id = 'prt_9c1e0a100002b5'",
                ('{"type":"text","text":"The fix is toFixed(2), says the quokka."}',))

    def quokka() -> bool:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return conn.execute("SELECT count(*) FROM messages WHERE text LIKE '%quokka%'").fetchone()[0] == 1
        finally:
            conn.close()

    poll_until(quokka, 20, "a later write to the database mirrored")
    app.close()


def test_status_and_sources_count_in_words_and_say_never(tmp_path, recall, canonical):
    """A source added but not yet indexed reads "never" (not "None"), and a
    count of one reads in the singular: "1 file", "1 session, 1 message"."""
    logs = tmp_path / "logs"
    write_session(logs, canonical, "s1", "/home/ada/shop", "quux")
    assert recall("sources", "add", logs).returncode == 0
    status = recall("status")
    assert "0 files, last indexed never" in status.stdout and "None" not in status.stdout, status.stdout
    assert recall("index", logs).returncode == 0
    status, listed = recall("status"), recall("sources")
    assert ": 1 session, 1 message (" in status.stdout, status.stdout
    assert "  1 file, last indexed" in status.stdout and "  1 file, last indexed" in listed.stdout, listed.stdout


def test_sources_says_which_logs_were_deleted_and_prune_says_what_it_wiped(tmp_path, recall, canonical):
    logs = tmp_path / "logs"
    write_session(logs, canonical, "s1", "/home/ada/shop", "quux")
    write_session(logs, canonical, "s2", "/home/ada/shop", "quuz")
    assert recall("index", logs).returncode == 0
    (logs / "s1.jsonl").unlink()
    assert recall("index", logs).returncode == 0
    listed = recall("sources")
    assert "2 files (1 deleted, their sessions kept), last indexed" in listed.stdout, listed.stdout
    pruned = recall("index", "--prune", logs)
    assert pruned.returncode == 0, pruned.stderr
    assert "\nwiped 1 forgotten message in " in pruned.stdout, pruned.stdout


def test_global_options_work_after_a_sources_subcommand(tmp_path, env, recall_cmd):
    """`recall sources add PATH --db X` as `recall search foo --db X` (README)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    db = tmp_path / "after.db"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*recall_cmd, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)

    added = run("sources", "add", str(logs), "--db", str(db))
    assert added.returncode == 0, added.stderr
    listed = run("sources", "--json", "--db", str(db))
    assert [s["path"] for s in json.loads(listed.stdout)] == [str(logs)]
    assert run("sources", "remove", str(logs), "--db", str(db)).returncode == 0
