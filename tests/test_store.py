"""The Store's roles: a read-only connection for queries, one write path
(the lock, atomic(), groups), meta and counts; the indexer's stream state is
the indexer's, not the Store's; a second writer is refused, naming the
holder."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from session_recall.indexer.ingest import held_tails
from session_recall.store import Store, WriterBusy
from tests.helpers import write


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "recall.db")
    yield s
    s.close()


def test_the_read_connection_cannot_write(store):
    with pytest.raises(apsw.ReadOnlyError):
        store.reader.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
    assert store.reader is store.reader  # one read connection, opened once


def test_a_group_commits_what_its_blocks_wrote_at_its_end_and_rolls_back_on_an_error(store):
    with store.group() as group:
        group.join()
        with store.atomic():
            store.set_meta("a", "1")
        assert store.reader.execute("SELECT value FROM meta WHERE key = 'a'").fetchone() is None  # not yet
    assert store.meta("a") == "1"
    with pytest.raises(RuntimeError), store.group() as group:
        group.join()
        with store.atomic():
            store.set_meta("b", "1")
        raise RuntimeError("the pass failed")
    assert store.meta("b") is None
    assert store.conn.get_autocommit()  # nothing left open


def test_a_full_group_commits_and_the_next_write_opens_it_again(store):
    commits = []
    store.conn.set_commit_hook(lambda: bool(commits.append(1)))
    with store.group() as group:
        for i in range(3):
            group.join()
            with store.atomic():
                store.set_meta(f"k{i}", str(i))
            group.commit()
    store.conn.set_commit_hook(None)
    assert len(commits) == 3
    assert [store.meta(f"k{i}") for i in range(3)] == ["0", "1", "2"]


def test_the_generation_moves_on_with_each_batch_written(store):
    assert store.generation() == 0
    with store.atomic():
        store.bump_generation()
    with store.atomic():
        store.bump_generation()
    assert store.generation() == 2


def test_counts_and_status_read_what_was_committed(store):
    assert store.is_empty() and store.files_pending() == 0
    assert store.counts() == {"sessions": 0, "messages": 0, "sources": 0}
    status = store.status()
    assert status["messages"] == 0 and status["sources"] == [] and status["stale"] is False


def test_the_held_words_of_streams_belong_to_the_indexer_per_open_store(tmp_path, store):
    assert not hasattr(store, "stream_tails")
    held = held_tails(store)
    held[(1, "m1")] = "Bearer"
    assert held_tails(store) is held
    other = Store(tmp_path / "recall.db")  # another open of the same file: another process's view
    try:
        assert held_tails(other) == {}
    finally:
        other.close()


# --- one writer: a second is refused, naming the holder -----------------------------

WAIT_S = 20.0

HOLD_WRITER = """
import sys
from session_recall.store import Store
store = Store(sys.argv[1])
with store.writer():
    sys.stdin.read()  # hold the lock until the test closes our stdin
"""


def _hold_writer(db_path: Path, logs_dir: Path, how: str, recall_cmd: list[str]) -> subprocess.Popen:
    if how == "store.writer":
        cmd = [sys.executable, "-c", HOLD_WRITER, str(db_path)]
    else:
        cmd = [*recall_cmd, "--db", str(db_path), "watch", str(logs_dir)]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("how", ["store.writer", "recall watch"])
def test_second_writer_is_refused_naming_the_holder(index, db_path, logs_dir, canonical, run_recall,
                                                     recall_cmd, wait_until, how):
    s = canonical("s1")
    write(logs_dir / "s.jsonl", s.session(), s.message("m1", "hello"))
    holder = _hold_writer(db_path, logs_dir, how, recall_cmd)
    lock = Path(f"{db_path}.lock")
    try:
        wait_until(lambda: holder.poll() is not None or (lock.exists() and f"pid {holder.pid}" in lock.read_text()),
                   WAIT_S, "the subprocess to take the writer lock")
        assert holder.poll() is None, holder.stderr.read().decode()

        with pytest.raises(WriterBusy, match=rf"\bpid {holder.pid}\b"):
            index.sync([logs_dir])

        cli = run_recall("--db", db_path, "index", logs_dir)
        if how == "store.writer":
            assert cli.returncode != 0
            assert f"pid {holder.pid}" in cli.stderr
            assert "only one indexer" in cli.stderr
        else:  # a running watcher takes the source over instead (README, "recall index while recall watch runs")
            assert cli.returncode == 0, cli.stderr
            assert "handed" in cli.stdout + cli.stderr
    finally:
        if how == "store.writer":
            holder.stdin.close()
        else:
            holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=WAIT_S)
        holder.stderr.close()
        if holder.stdin and not holder.stdin.closed:
            holder.stdin.close()
    assert holder.returncode == 0

    # Released: the next writer proceeds.
    report = index.sync([logs_dir])
    assert index.status()["messages"] == 1
    assert report.files == 1
