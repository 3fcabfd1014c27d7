"""The `opencode` source (docs/formats.md): OpenCode's SQLite history, read
read-only and incrementally by update times while OpenCode may be writing it,
and its older JSON files. The shared samples (a hand-built database of the
1.2 schema, a hand-built JSON tree) index with the counts asserted here; the
fixture in fixtures/opencode (see its README) is built into a WAL database
as OpenCode keeps it, and changed as OpenCode changes it: parts appended,
a streaming text part updated in place, a revert's deletions, a new title."""

from __future__ import annotations

import hashlib
import shutil
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from test_harnesses import lay_out
from test_sources import DATA, found, needs_data, roles, sessions, texts

from session_recall import Index
from session_recall.indexer import files as F
from session_recall.indexer.sources import detect_database, detect_kind, kinds

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OC = "opencode"
SHOP = "ses_4a1f0c2e7ffeQ1b2C3d4E5f6G7"
SUB = "ses_4a1f0c9d1ffeH8i9J0k1L2m3N4"
BREAD = "ses_5b2e1d3c4ffeA1b2C3d4E5f6G7"
SAMPLE_DB = "opencode/sheurich-episodic-memory/opencode.db"
SAMPLE_TREE = "opencode/git-ai-project-git-ai/storage"



@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The fixture laid out as OpenCode's data folder, its database in WAL mode."""
    dest = tmp_path / "share" / "opencode"
    lay_out(OC, dest)
    return dest


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_data
def test_samples_index(open_index):
    before = sha(DATA / SAMPLE_DB)
    ix = open_index()
    report = ix.sync([str(DATA / "opencode")])  # auto: the database and the JSON tree
    assert report.files == 3 and report.files_read == 3
    assert sha(DATA / SAMPLE_DB) == before  # read, never written
    tree = str((DATA / SAMPLE_TREE).resolve())
    assert sessions(ix) == {
        # the sub-agent session (parent_id) lands in its parent; the empty session has nothing to index
        "ses_main001": (OC, "/Users/test/src/my-project", "Implement auth feature", "2026-01-30T19:23:20.000Z",
                        roles(3, 4, 2, 2)),
        "ses_err001": (OC, "/Users/test/src/my-project", "Errored session", "2026-01-30T19:28:20.000Z", roles(1, 1)),
        # no session file, no path.cwd in the tree: the storage folder is its cwd
        "test-session-123": (OC, tree, None, "2024-01-28T16:37:10.000Z", roles(1, 2, 1, 1)),
    }
    assert found(ix, "express-jwt") == [("ses_main001", "msg_a003#prt_a003_t", "assistant")]
    assert ("ses_main001", "msg_a001a#prt_a001a_tool:result", "tool_result") in found(ix, "login")
    assert ("test-session-123", "msg-user-001#prt-001", "user") in found(ix, "Hello World")
    # a message's parts are its own: the sample reuses part file names across messages
    assert ("test-session-123", "msg-assistant-001#prt-001", "assistant") in found(ix, "comment")


@needs_data
def test_each_sample_is_one_kind():
    assert [n for n, p in kinds().items() if p.database and p.recognizes_database(str(DATA / SAMPLE_DB))] == [OC]
    for doc in (DATA / SAMPLE_TREE / "message").rglob("*.json"):
        head = [doc.read_bytes()]
        assert [n for n, p in kinds().items() if p.detect(head)] == [OC], doc
    # and OpenCode takes no other kind's sample for its own
    for kind in ("claude-code", "codex", "gemini-cli"):
        for log in (DATA / kind).rglob("*.json*"):
            head = [log.read_bytes()] if F.is_document(str(log)) else [log.read_bytes().split(b"\n")[0]]
            assert not kinds()[OC].detect(head), log


def test_fixture_database_and_json_tree(data_dir, open_index):
    ix = open_index()
    report = ix.sync([str(data_dir)])
    assert report.files == 3  # opencode.db and the two message files
    assert sessions(ix) == {
        SHOP: (OC, "/home/ada/shop", "Cart total rounding", "2025-11-20T09:00:00.000Z", roles(2, 2, 2, 2)),
        BREAD: (OC, "/home/ada/recipes", "Sourdough hydration", "2025-10-02T09:00:00.000Z", roles(1, 1)),
    }
    # synthetic text and reasoning are not indexed; tool input and output are
    for word in ("walrus", "zebrafish"):
        assert found(ix, word) == [], word
    assert found(ix, "pelican") == [(SHOP, "msg_9c1e0a100002Bb#prt_9c1e0a100002b3:result", "tool_result")]
    rows = {m: (t, r, x) for m, t, r, x in texts(ix, SHOP)}
    assert rows["msg_9c1e0a100002Bb#prt_9c1e0a100002b3"] == ("msg_9c1e0a100001Aa", "tool_call", "grep\ntoFixed\nsrc")
    # the sub-agent's session is in its parent's, in a turn of its own
    assert found(ix, "ocelot") == [(SHOP, "msg_9c1e0a200002Ff#prt_9c1e0a200002f1", "assistant")]
    assert rows["msg_9c1e0a200002Ff#prt_9c1e0a200002f1"][0] == "msg_9c1e0a200001Ee"
    assert found(ix, "axolotl") == [(BREAD, "msg_a1b2c3d40002Yy#prt_a1b2c3d40002y1", "assistant")]
    again = ix.sync([str(data_dir)])
    assert (again.files_read, again.messages_added, again.messages_updated) == (0, 0, 0)
    assert ix.status()["waiting"] == {}  # a database or a document read whole waits for nothing


def _writer(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None, timeout=5)


def test_appends_streaming_updates_reverts_and_titles(data_dir, open_index):
    db = data_dir / "opencode.db"
    ix = open_index()
    ix.sync([str(data_dir)])
    w = _writer(db)
    t = int(time.time() * 1000)
    # a new prompt and an answer streaming into its text part
    w.execute("INSERT INTO message VALUES ('msg_z1', ?, ?, ?, ?)",
              (SHOP, t, t, '{"role":"user","time":{"created":%d},"agent":"build"}' % t))
    w.execute("INSERT INTO part VALUES ('prt_z1', 'msg_z1', ?, ?, ?, ?)",
              (SHOP, t, t, '{"type":"text","text":"Now round the tax with a quetzal helper"}'))
    w.execute("INSERT INTO message VALUES ('msg_z2', ?, ?, ?, ?)",
              (SHOP, t + 1, t + 1, '{"role":"assistant","parentID":"msg_z1","time":{"created":%d}}' % (t + 1)))
    w.execute("INSERT INTO part VALUES ('prt_z2', 'msg_z2', ?, ?, ?, ?)",
              (SHOP, t + 1, t + 1, '{"type":"text","text":"Rounding the"}'))
    r = ix.sync([str(data_dir)])
    assert r.messages_added == 2
    assert found(ix, "quetzal") == [(SHOP, "msg_z1#prt_z1", "user")]
    w.execute("UPDATE part SET data = ?, time_updated = ? WHERE id = 'prt_z2'",
              ('{"type":"text","text":"Rounding the tax with the quetzal helper now."}', t + 2))
    r = ix.sync([str(data_dir)])
    assert (r.messages_added, r.messages_updated) == (0, 1)
    assert sorted(found(ix, "quetzal")) == [(SHOP, "msg_z1#prt_z1", "user"), (SHOP, "msg_z2#prt_z2", "assistant")]
    # a revert applied: OpenCode deletes the messages after the revert point and their parts
    w.execute("DELETE FROM part WHERE message_id IN ('msg_z1', 'msg_z2')")
    w.execute("DELETE FROM message WHERE id IN ('msg_z1', 'msg_z2')")
    w.execute("UPDATE session SET title = 'Cart and tax rounding', time_updated = ? WHERE id = ?", (t + 3, SHOP))
    r = ix.sync([str(data_dir)])
    assert r.messages_forgotten == 2 and found(ix, "quetzal") == []
    got = sessions(ix)[SHOP]
    assert got[2] == "Cart and tax rounding" and got[4] == roles(2, 2, 2, 2)
    # a sub-agent's parts taken back leave its parent's session too
    w.execute("DELETE FROM part WHERE session_id = ?", (SUB,))
    ix.sync([str(data_dir)])
    assert found(ix, "ocelot") == [] and sessions(ix)[SHOP][4] == roles(1, 1, 2, 2)
    w.close()


def test_read_only_and_never_blocking(data_dir, open_index):
    """The app holds a write transaction while the index reads: the read
    neither waits for it nor sees its uncommitted rows, and the app commits
    at once after; the database file is never written by the reader."""
    db = data_dir / "opencode.db"
    w = _writer(db)
    w.execute("BEGIN IMMEDIATE")
    t = int(time.time() * 1000)
    w.execute("INSERT INTO message VALUES ('msg_y1', ?, ?, ?, ?)", (SHOP, t, t, '{"role":"user"}'))
    w.execute("INSERT INTO part VALUES ('prt_y1', 'msg_y1', ?, ?, ?, ?)",
              (SHOP, t, t, '{"type":"text","text":"uncommitted capybara"}'))
    before = sha(db)
    ix = open_index()
    t0 = time.monotonic()
    ix.sync([str(data_dir)])
    assert time.monotonic() - t0 < 5
    assert found(ix, "capybara") == [] and found(ix, "pelican") != []
    assert sha(db) == before
    w.execute("COMMIT")  # not blocked by the reader
    ix.sync([str(data_dir)])
    assert found(ix, "capybara") == [(SHOP, "msg_y1#prt_y1", "user")]
    w.close()


def test_a_locked_database_is_counted_and_read_later(tmp_path, open_index):
    """A database in rollback-journal mode (as the 1.2 samples are) locked by
    a writer: the pass does not hang, counts it, and a later pass reads it."""
    dest = tmp_path / "opencode"
    shutil.copytree(FIXTURES / OC, dest)
    db = sqlite3.connect(dest / "opencode.db")
    db.executescript((dest / "opencode.sql").read_text())
    db.close()
    (dest / "opencode.sql").unlink()
    w = _writer(dest / "opencode.db")
    w.execute("BEGIN EXCLUSIVE")
    ix = open_index()
    t0 = time.monotonic()
    r = ix.sync([str(dest / "opencode.db")], kind=OC)
    assert time.monotonic() - t0 < 5
    assert r.messages_added == 0 and r.skipped == {"database_busy": 1}
    w.execute("COMMIT")
    r = ix.sync([str(dest / "opencode.db")], kind=OC)
    assert r.messages_added == 8 and found(ix, "pelican") != []
    w.close()


def test_auto_tells_an_opencode_database_from_others(tmp_path):
    other = tmp_path / "opencode-other.db"
    sqlite3.connect(other).executescript("CREATE TABLE session (id TEXT); CREATE TABLE notes (x TEXT);")
    assert detect_database(str(other)) is None
    lay_out(OC, tmp_path / "oc")
    assert detect_database(str(tmp_path / "oc" / "opencode.db")) == OC
    for doc in (tmp_path / "oc" / "storage" / "message").rglob("*.json"):
        assert detect_kind([doc.read_bytes()]) == OC


def test_watch_mirrors_a_running_opencode(data_dir, spawn, wait_until, recall_cmd, tmp_path):
    """`recall watch` on OpenCode's folder while OpenCode writes its WAL
    database (and keeps it open, so nothing is checkpointed into the main
    file): a new part, then its text streamed in place, become searchable."""
    db = tmp_path / "watch.db"
    proc = spawn([*recall_cmd, "--db", db, "watch", data_dir], name="watch")
    proc.wait_for("watching")
    w = _writer(data_dir / "opencode.db")
    t = int(time.time() * 1000)
    w.execute("INSERT INTO message VALUES ('msg_w1', ?, ?, ?, ?)", (SHOP, t, t, '{"role":"user"}'))
    w.execute("INSERT INTO part VALUES ('prt_w1', 'msg_w1', ?, ?, ?, ?)",
              (SHOP, t, t, '{"type":"text","text":"the gecko"}'))
    with Index.open(db) as reader:
        def hit(word):
            return lambda: found(reader, word)

        def alive_and(pred):
            def check():
                assert proc.alive(), proc.stderr()
                return pred()
            return check

        wait_until(alive_and(hit("gecko")), 10, "the new part to be searchable")
        w.execute("UPDATE part SET data = ?, time_updated = ? WHERE id = 'prt_w1'",
                  ('{"type":"text","text":"the gecko and the iguana"}', t + 1))
        wait_until(alive_and(hit("iguana")), 10, "the streamed text to be searchable")
        assert found(reader, "gecko") == [(SHOP, "msg_w1#prt_w1", "user")]
    w.close()
    proc.send(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0


# OpenCode's writer in the moment that matters: a transaction's frames are in
# the `-wal` file (its size and time have moved, the watcher had its event) and
# synced, and the commit is not yet in the WAL index (`-shm`, which the writer
# updates through shared memory: no file event comes of it). A real SQLite
# write through apsw, held in its sync of the `-wal` until `go` exists.
_PAUSED_WRITER = r"""
import os, sys, time, apsw
db, flags = sys.argv[1], sys.argv[2]
def wait(name):
    while not os.path.exists(os.path.join(flags, name)):
        time.sleep(0.002)
class File(apsw.VFSFile):
    armed = False
    def __init__(self, name, flags):
        super().__init__("", name, flags)
        # (apsw names the main file by a URIFilename, the others by a str)
        self.wal = (name if isinstance(name, str) else name.filename()).endswith("-wal")
    def xSync(self, flags):
        super().xSync(flags)
        # (not the sync of a new -wal file's 32-byte header: the commit's, after the frames)
        if self.wal and File.armed and self.xFileSize() > 32:
            File.armed = False
            print("paused", file=sys.stderr, flush=True)
            wait("go")
class Vfs(apsw.VFS):
    def __init__(self):
        super().__init__("paused", "")
    def xOpen(self, name, flags):
        return File(name, flags)
vfs = Vfs()
conn = apsw.Connection(db, vfs="paused")
conn.execute("PRAGMA synchronous = FULL")
t = int(time.time() * 1000)
File.armed = True
with conn:
    conn.execute("INSERT INTO message VALUES ('msg_p1', ?, ?, ?, ?)", (sys.argv[3], t, t, '{"role":"user"}'))
    conn.execute("INSERT INTO part VALUES ('prt_p1', 'msg_p1', ?, ?, ?, ?)",
                 (sys.argv[3], t, t, '{"type":"text","text":"the gecko"}'))
print("committed", file=sys.stderr, flush=True)
wait("quit")
conn.close()
"""


def _paused_writer(spawn, db: Path, flags: Path):
    flags.mkdir()
    proc = spawn([sys.executable, "-c", _PAUSED_WRITER, db, flags, SHOP], name="writer")
    proc.wait_for("paused")
    return proc


def test_a_commit_published_after_its_frames_is_read_by_the_next_sync(data_dir, open_index, spawn, tmp_path):
    """A sync that runs between a transaction's frames and its commit sees
    nothing new, though the `-wal` file changed; the next sync must read the
    commit when it is published, with no change to either file's size or time."""
    ix = open_index()
    ix.sync([str(data_dir)])
    db, flags = data_dir / "opencode.db", tmp_path / "flags"
    writer = _paused_writer(spawn, db, flags)
    ix.sync([str(data_dir)])
    assert found(ix, "gecko") == []
    wal = (db.with_name(db.name + "-wal")).stat()
    (flags / "go").touch()
    writer.wait_for("committed")
    after = (db.with_name(db.name + "-wal")).stat()
    assert (after.st_size, after.st_mtime_ns) == (wal.st_size, wal.st_mtime_ns)  # the moment this test is about
    ix.sync([str(data_dir)])
    assert found(ix, "gecko") == [(SHOP, "msg_p1#prt_p1", "user")]
    (flags / "quit").touch()
    assert writer.wait(timeout=10) == 0


def test_watch_reads_a_commit_published_after_its_frames(data_dir, spawn, wait_until, recall_cmd, tmp_path):
    """The same moment under `recall watch`: the `-wal` file's event comes,
    the watcher's pass finds nothing committed, and the commit then comes with
    no event at all. The watcher looks at a database again after its passes,
    so the commit is searchable within seconds, not at the next reconcile."""
    db = tmp_path / "watch.db"
    proc = spawn([*recall_cmd, "--db", db, "watch", data_dir], name="watch")
    proc.wait_for("watching")
    source, flags = data_dir / "opencode.db", tmp_path / "flags"
    with Index.open(db) as reader:
        wait_until(lambda: found(reader, "pelican"), 10, "the first pass")
        writer = _paused_writer(spawn, source, flags)

        def recorded() -> bool:  # the watcher's pass over the grown -wal file is done
            assert proc.alive(), proc.stderr()
            row = reader.store.conn.execute("SELECT size FROM files WHERE path = ?", (str(source),)).fetchone()
            return row is not None and row[0] == F.database_stat(str(source))[0]

        wait_until(recorded, 10, "the watcher to read the database with the frames in its -wal file")
        assert found(reader, "gecko") == []
        (flags / "go").touch()
        writer.wait_for("committed")
        wait_until(lambda: found(reader, "gecko"), 10, "the commit to be searchable")
    (flags / "quit").touch()
    assert writer.wait(timeout=10) == 0
    proc.send(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0


def test_many_changed_parts_are_read_in_batches(data_dir, open_index):
    """More changed parts than one batch holds: every one indexed once, in
    several transactions, and the next pass reads none of them again."""
    from session_recall.indexer.sources import opencode

    w = _writer(data_dir / "opencode.db")
    t = int(time.time() * 1000)
    n = 2 * opencode.BATCH_PARTS + 7
    w.execute("BEGIN")
    w.execute("INSERT INTO message VALUES ('msg_many', ?, ?, ?, ?)", (SHOP, t, t, '{"role":"assistant"}'))
    for i in range(n):
        w.execute("INSERT INTO part VALUES (?, 'msg_many', ?, ?, ?, ?)",
                  (f"prt_m{i:05d}", SHOP, t + i, t + i, '{"type":"text","text":"line %d of the yak log"}' % i))
    w.execute("COMMIT")
    w.close()
    ix = open_index()
    report = ix.sync([str(data_dir)])
    assert report.messages_added == n + 10  # and the fixture's own (8 in the database, 2 in the JSON files)
    assert ix.store.conn.execute("SELECT count(DISTINCT message_id) FROM messages "
                                 "WHERE message_id LIKE 'msg_many#%'").fetchone()[0] == n
    again = ix.sync([str(data_dir)])
    assert (again.files_read, again.messages_added, again.messages_updated) == (0, 0, 0)
