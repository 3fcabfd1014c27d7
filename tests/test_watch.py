"""The watcher as a real process: `recall --db DB watch SRC` reconciles at
start, then mirrors appends, new files and renames into the index while a
separate reader searches the same database; SIGTERM and SIGINT stop it cleanly.

Every wait polls with a deadline. The deadline is generous (the contract asks
for an append to be searchable within a second; CI machines vary), and the
measured latency is printed, not asserted (`pytest -s` shows it).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from session_recall import Index

DEADLINE_S = 10.0  # for anything the watcher should do "within a second"
STOP_S = 5.0  # for a signalled watcher to exit


@pytest.fixture
def src(tmp_path: Path, fixture_sessions: Path) -> Path:
    """A copy of the shipped fixtures: a source the test may append to."""
    path = tmp_path / "src"
    shutil.copytree(fixture_sessions, path)
    return path


class Watch:
    """A running `recall watch` and the test's way to wait on it: every wait
    fails at once, with the watcher's stderr, if the watcher died."""

    def __init__(self, proc, wait_until):
        self.proc = proc
        self._wait_until = wait_until

    def alive(self) -> bool:
        return self.proc.alive()

    def until(self, predicate, what: str, timeout: float = DEADLINE_S):
        def check():
            assert self.proc.alive(), f"the watcher exited with {self.proc.popen.returncode}:\n{self.proc.stderr()}"
            return predicate()

        return self._wait_until(check, timeout, what)

    def stop(self, sig: int) -> None:
        name = signal.Signals(sig).name
        self.proc.send(sig)
        try:
            rc = self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the watcher did not exit within {STOP_S:g}s of {name}:\n{self.proc.stderr()}")
        assert rc == 0, f"exit code {rc} after {name}:\n{self.proc.stderr()}"
        assert "stopped" in self.proc.stderr()


@pytest.fixture
def watcher(spawn, wait_until, recall_cmd, db_path: Path, src: Path) -> Watch:
    """A started `recall watch SRC` (it has opened the database, so a reader may too)."""
    proc = spawn([*recall_cmd, "--db", db_path, "watch", src], name="watch")
    proc.wait_for("watching")
    return Watch(proc, wait_until)


def hits(reader: Index, query: str) -> list[tuple[str, str]]:
    return sorted((s["session_id"], h.message_id) for h, s in reader.search(query, limit=50))


def append(path: Path, data: bytes) -> float:
    """Append as a harness does (open, write, close); return when it was written."""
    with open(path, "ab") as fh:
        fh.write(data)
    return time.perf_counter()


def file_rows(reader: Index) -> list[tuple[str, int]]:
    return sorted(reader.store.conn.execute("SELECT path, missing FROM files"))


def test_watch_mirrors_appends_new_files_and_renames(watcher, db_path, src, canonical):
    with Index.open(db_path) as reader:
        watcher.until(lambda: hits(reader, "Source Serif") and hits(reader, "简历") and hits(reader, "checkout"),
                      "the initial reconcile to index the fixtures")

        # Appends to a log the watcher already knows, measured append -> searchable.
        checkout = src / "shop" / "2026-11-28-checkout.jsonl"
        shop = canonical("c0ffee00-0003", cwd="/home/ada/shop")
        latencies = []
        for i in range(5):
            word = f"kumquat{i}x"
            written = append(checkout, shop.noise(2) + shop.message(f"w{i}", f"appended {word} 金橘{i}号"))
            watcher.until(lambda: hits(reader, word), f"the appended message {word} to become searchable")
            latencies.append(time.perf_counter() - written)
        print(f"\nappend -> searchable: median {statistics.median(latencies) * 1000:.0f} ms, "
              f"max {max(latencies) * 1000:.0f} ms over {len(latencies)} appends "
              f"({', '.join(f'{x * 1000:.0f}' for x in latencies)} ms)")
        assert hits(reader, "金橘3号") == [("c0ffee00-0003", "w3")]

        # A new log in a new project folder.
        garden = src / "garden"
        garden.mkdir()
        g = canonical("garden-1", cwd="/home/ada/garden")
        (garden / "2026-12-01-garden.jsonl").write_bytes(
            g.session("Garden") + g.noise(3) + g.message("u1", "plant the persimmon by the wall 柿子树"))
        watcher.until(lambda: hits(reader, "persimmon"), "a new log file to be indexed")
        assert hits(reader, "柿子") == [("garden-1", "u1")]

        # A harness creates its log before it writes the first line, and may be
        # caught halfway through that line: neither may stop the watcher.
        late = src / "shop" / "2026-12-02-late.jsonl"
        late.touch()
        append(checkout, shop.message("w-quince", "marker quince after an empty log appeared"))
        watcher.until(lambda: hits(reader, "quince"), "an append next to a new empty log")
        lt = canonical("late-1", cwd="/home/ada/shop")
        first = lt.session("Late")
        append(late, first[:20])
        append(checkout, shop.message("w-medlar", "marker medlar after half a first line"))
        watcher.until(lambda: hits(reader, "medlar"), "an append next to a log with half a line")
        append(late, first[20:] + lt.message("u1", "the late log finally speaks of tamarind"))
        watcher.until(lambda: hits(reader, "tamarind"), "the completed new log to be indexed")

        # A rename is the same file: its record moves, nothing is read twice.
        status = reader.status()
        renamed = src / "shop" / "2026-11-28-checkout-renamed.jsonl"
        os.rename(checkout, renamed)
        watcher.until(lambda: (str(renamed.resolve()), 0) in file_rows(reader), "the watcher to record the rename")
        assert str(checkout.resolve()) not in {p for p, _ in file_rows(reader)}
        after = reader.status()
        assert (after["messages"], after["skipped"]) == (status["messages"], status["skipped"])
        assert hits(reader, "kumquat0x") == [("c0ffee00-0003", "w0")]
        # ...and it is read on from its offset under the new name.
        append(renamed, shop.noise(1) + shop.message("w-loquat", "after the rename: loquat"))
        watcher.until(lambda: hits(reader, "loquat"), "an append to the renamed log")
        after = reader.status()
        assert after["messages"] == status["messages"] + 1
        assert after["skipped"]["noise"] == status["skipped"]["noise"] + 1
        assert len(file_rows(reader)) == len(list(src.rglob("*.jsonl")))
    watcher.stop(signal.SIGTERM)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_watcher_cleanly(watcher, db_path, src, canonical, sig):
    with Index.open(db_path) as reader:
        watcher.until(lambda: hits(reader, "checkout"), "the initial reconcile")
        shop = canonical("c0ffee00-0003", cwd="/home/ada/shop")
        append(src / "shop" / "2026-11-28-checkout.jsonl", shop.message("s1", "one more: rambutan"))
        watcher.until(lambda: hits(reader, "rambutan"), "an append")
    watcher.stop(sig)


def test_a_signal_during_a_long_sync_stops_between_batches(watcher, db_path, src, canonical, run_recall):
    """SIGTERM while the watcher is mid-file: it finishes the batch it is in,
    exits 0, and leaves an index that the next run completes."""
    big = canonical("big-1", cwd="/home/ada/big")
    n = 45_000  # three batches of the watcher's default size
    body = b"".join(big.message(f"m{i}", f"bulk line {i} durian") if i % 3 == 0 else big.noise(1)
                    for i in range(n))
    path = src / "big.jsonl"
    with Index.open(db_path) as reader:
        watcher.until(lambda: hits(reader, "checkout"), "the initial reconcile")
        path.write_bytes(big.session("Big") + body)

        def offset() -> int:
            row = reader.store.conn.execute("SELECT offset FROM files WHERE path = ?", (str(path.resolve()),)).fetchone()
            return row[0] if row else 0

        watcher.until(offset, "the watcher to commit its first batch of the big log", 4 * DEADLINE_S)
        watcher.stop(signal.SIGTERM)
        data = path.read_bytes()
        stopped_at = offset()
        assert 0 < stopped_at <= len(data) and data[stopped_at - 1:stopped_at] == b"\n"
    # A fresh connection: one that read the FTS table before another process
    # changed it may report stale FTS5 segments from PRAGMA integrity_check.
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    done = run_recall("--db", db_path, "index")
    assert done.returncode == 0, done.stderr
    with Index.open(db_path) as ix:
        n_big = ix.store.conn.execute(
            "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session WHERE s.session_id = 'big-1'"
        ).fetchone()[0]
    assert n_big == len(range(0, n, 3))


def test_a_reader_never_waits_for_the_writer(spawn, wait_until, db_path, fixture_sessions):
    """While another process holds a write transaction open (as the watcher does
    while it commits a batch), Index.open and a search return at once."""
    with Index.open(db_path) as ix:
        ix.sync([str(fixture_sessions)])
    holder = spawn([
        sys.executable, "-c",
        "import sys, time\n"
        "from session_recall.store import Store\n"
        "store = Store(sys.argv[1])\n"
        "with store.writer(), store.atomic() as conn:\n"
        "    conn.execute(\"UPDATE sessions SET title = 'rewritten' WHERE title IS NOT NULL\")\n"
        "    print('holding', flush=True)\n"
        "    time.sleep(60)\n",
        db_path,
    ], name="holder")
    holder.wait_for("holding", stream="stdout")
    started = time.perf_counter()
    try:
        with Index.open(db_path) as reader:
            found = hits(reader, "Source Serif")
            titles = {s["title"] for _, s in reader.search("简历", limit=5)}
    except apsw.BusyError as e:
        pytest.fail(f"a reader waited for the writer until the busy timeout and failed: {e}")
    elapsed = time.perf_counter() - started
    assert found and "rewritten" not in titles  # the last committed state, not the open transaction's
    # Far below the busy timeout (5 s): the reader did not wait for the lock.
    assert elapsed < 2.0, f"opening and searching took {elapsed:.2f}s while a writer was busy"


def test_each_synced_batch_says_how_many_files_it_read(watcher, src, canonical):
    """The line the watcher prints for a batch (what `journalctl` shows of a
    user service) counts the files of that batch: an append to one log is
    "synced 1 file", never "synced 0 files" with a file read."""
    watcher.proc.wait_for("synced", stream="stdout")  # the reconcile of the fixtures
    shop = canonical("c0ffee00-0003", cwd="/home/ada/shop")
    append(src / "shop" / "2026-11-28-checkout.jsonl", shop.message("w-fig", "one more line about figs"))
    watcher.until(lambda: watcher.proc.stdout().count("synced ") >= 2, "a line for the append's batch")
    line = [ln for ln in watcher.proc.stdout().splitlines() if ln.startswith("synced ")][-1]
    assert line.startswith("synced 1 file (1 read, "), line
    assert "1 message added" in line, line
    watcher.stop(signal.SIGTERM)


def test_a_symlinked_folder_or_log_in_a_source_is_mirrored_as_it_changes(spawn, wait_until, recall_cmd, db_path,
                                                                          tmp_path, canonical):
    """A project folder (or one log) that is a symlink to another disk: inotify
    reports writes only in the folder that really holds the file, so the
    watcher watches the link's target too, and an append there, or a new log
    in it, is searchable within the deadline, not at the next periodic
    reconcile (minutes later)."""
    src, elsewhere = tmp_path / "src", tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    (elsewhere / "loose").mkdir()
    src.mkdir()
    (src / "proj").symlink_to(elsewhere / "proj", target_is_directory=True)
    proj = canonical("linked-1", cwd="/home/ada/proj")
    log = elsewhere / "proj" / "2026-12-01-linked.jsonl"
    log.write_bytes(proj.session("Linked") + proj.message("u1", "first words about the medlar tree"))
    loose = canonical("linked-2", cwd="/home/ada/loose")
    loose_log = elsewhere / "loose" / "2026-12-01-loose.jsonl"
    loose_log.write_bytes(loose.session("Loose") + loose.message("u1", "a log linked alone, about sorrel"))
    (src / "2026-12-01-loose.jsonl").symlink_to(loose_log)
    proc = spawn([*recall_cmd, "--db", db_path, "watch", src], name="watch")
    proc.wait_for("watching")
    watch = Watch(proc, wait_until)
    with Index.open(db_path) as reader:
        watch.until(lambda: hits(reader, "medlar") and hits(reader, "sorrel"), "the initial reconcile")
        append(log, proj.message("u2", "an append behind the link: quandong"))
        watch.until(lambda: hits(reader, "quandong"), "an append to a log in a symlinked folder")
        other = canonical("linked-3", cwd="/home/ada/proj")
        (elsewhere / "proj" / "2026-12-02-new.jsonl").write_bytes(
            other.session("New") + other.message("u1", "a new log behind the link: jaboticaba"))
        watch.until(lambda: hits(reader, "jaboticaba"), "a new log in a symlinked folder")
        append(loose_log, loose.message("u2", "an append to a linked log: bilberry"))
        watch.until(lambda: hits(reader, "bilberry"), "an append to a symlinked log")
        assert hits(reader, "quandong") == [("linked-1", "u2")]
        assert reader.status()["messages"] == 5
    watch.stop(signal.SIGTERM)


def test_a_write_between_the_pass_that_finds_a_link_and_its_watch_is_read(tmp_path, canonical, wait_until,
                                                                          monkeypatch):
    """The pass that finds a symlinked folder reads its logs, and the watch on
    the link's target begins after it: a write in that moment raises no event
    the watcher hears. The write is made exactly there (in process, with the
    real observer), and it must still be searchable at once, not at the next
    periodic reconcile (an hour away here)."""
    import threading

    from session_recall.indexer import watch as W

    src, elsewhere = tmp_path / "src", tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    src.mkdir()
    (src / "proj").symlink_to(elsewhere / "proj", target_is_directory=True)
    log = elsewhere / "proj" / "2026-12-01-linked.jsonl"
    proj = canonical("gap-1", cwd="/home/ada/proj")
    log.write_bytes(proj.session("Linked") + proj.message("u1", "before the watch: loquat"))
    real_watch_link = W.Watcher._watch_link

    def write_first(self, link, real):
        if (link, real) not in self._linked:
            append(log, proj.message("u2", "in the gap before the watch: tamarillo"))
        real_watch_link(self, link, real)

    monkeypatch.setattr(W.Watcher, "_watch_link", write_first)
    ix = Index.open(tmp_path / "gap.db")
    watcher = W.Watcher(ix.store, [str(src)], debounce=0.05, reconcile_every=3600)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    reader = Index.open(tmp_path / "gap.db")
    try:
        wait_until(lambda: hits(reader, "loquat"), DEADLINE_S, "the first pass")
        wait_until(lambda: hits(reader, "tamarillo"), DEADLINE_S, "the write made before the link's watch began")
    finally:
        watcher.stop()
        thread.join(timeout=STOP_S)
        reader.close()
        ix.close()
