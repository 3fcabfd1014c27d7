"""Deleted means gone (contract section 6, redaction): once a sync pass that
forgot a message returns, none of its bytes are left in the database, its WAL
or its shared-memory file: not in `messages` (secure_delete zeroes freed
space), not in FTS5's segments (a contentless_delete table only marks a
deleted row until a merge rewrites its segment: the pass ends with
`optimize`), not in old page images of the WAL (a TRUNCATE checkpoint), and
after a rebuild not anywhere in the file (VACUUM).

Each test plants a distinctive word, indexes it with the real API or CLI,
forgets it by one path, and reads the files' bytes. The control tests turn the
wipe off and find the word still there, so these tests can fail."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from session_recall import Index
from session_recall.indexer.sync import Syncer
from session_recall.store import Store
from session_recall.text import redact

WORD = "xylophonequokkazanzibar"
PIECE = WORD[6:18]  # 12 characters from its middle: FTS5 may store a term's head shared with its neighbour's
SECRET = f"{WORD}@corvid-mail.net"  # an e-mail address: the current redactor replaces it


def leftovers(db: Path, *needles: str) -> dict[str, list[str]]:
    """Which of the needles (case-insensitively: FTS5 holds folded text) each
    of the database's files still holds, by file."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        f = Path(f"{db}{suffix}")
        if f.exists():
            data = f.read_bytes().lower()
            hits = [n for n in needles if n.lower().encode() in data]
            if hits:
                out[f.name] = hits
    return out


def plant(canonical, logs: Path, name: str = "a.jsonl", *, word: str = WORD, title: str | None = None) -> Path:
    """A session with the word among ordinary messages, plus one it does not touch."""
    a = canonical("sa")
    path = logs / name
    path.write_bytes(a.session(title) + a.message("m1", "which font did we pick") +
                     a.message("m2", f"the answer is {word} in the end") + a.message("m3", "Serif, then"))
    b = canonical("sb")
    (logs / "b.jsonl").write_bytes(b.session() + b.message("m1", "an unrelated session stays"))
    return path


def test_the_planted_word_is_in_the_files_after_indexing(index, db_path, logs_dir, canonical):
    plant(canonical, logs_dir)
    index.sync([logs_dir])
    assert leftovers(db_path, WORD, PIECE)  # the probe sees what it looks for


def _index_then(index, logs_dir, canonical, **kw):
    path = plant(canonical, logs_dir, **kw)
    index.sync([logs_dir])
    assert [h.message_id for h, _ in index.search(WORD)] == ["m2"]
    return path


def test_prune_leaves_no_bytes(index, db_path, logs_dir, canonical):
    # the session's title goes too: its row is deleted with its last message
    path = _index_then(index, logs_dir, canonical, title=f"about {WORD[::-1]}")
    assert leftovers(db_path, WORD[::-1])
    path.unlink()
    report = index.sync([logs_dir], prune=True)
    assert report.wiped == 3 and not report.wipe_pending
    assert leftovers(db_path, WORD, PIECE, WORD[::-1]) == {}
    assert index.search(WORD) == []
    assert index.status()["messages"] == 1 and index.status()["wipe_pending"] == 0


def test_a_rewritten_log_leaves_no_bytes_of_what_it_held(index, db_path, logs_dir, canonical):
    path = _index_then(index, logs_dir, canonical)
    a = canonical("sa")
    path.write_bytes(a.session() + a.message("m1", "which font did we pick") + a.message("m3", "Serif, then"))
    report = index.sync([logs_dir])
    assert report.files_reset == 1 and report.wiped == 3  # the file's messages, replaced by the two it holds
    assert leftovers(db_path, WORD, PIECE) == {}
    assert index.status()["messages"] == 3


def test_a_truncated_log_seen_by_the_watcher_path_leaves_no_bytes(index, db_path, logs_dir, canonical):
    path = _index_then(index, logs_dir, canonical)
    a = canonical("sa")
    path.write_bytes(a.session() + a.message("m1", "which font"))
    report = Syncer(index.store).sync_files([str(path)])  # what `recall watch` calls on a change
    assert report.wiped == 3
    assert leftovers(db_path, WORD, PIECE) == {}


def _old_redactor(monkeypatch):
    """An index written by an older redactor that did not know e-mail addresses."""
    monkeypatch.setattr(redact.Redactor, "redact", lambda self, text, **kw: (text, 0))


@pytest.mark.parametrize("log_kept", [True, False], ids=["log-reread", "log-deleted-text-re-redacted"])
def test_a_redactor_upgrade_leaves_no_bytes_of_the_secret(index, db_path, logs_dir, canonical, monkeypatch,
                                                          log_kept):
    with monkeypatch.context() as m:
        _old_redactor(m)
        path = plant(canonical, logs_dir, word=SECRET)
        index.sync([logs_dir])
    assert leftovers(db_path, SECRET, PIECE)
    if not log_kept:
        path.unlink()  # its messages survive in the index only, and are re-redacted there
    index.store.conn.execute("UPDATE meta SET value = '0' WHERE key = 'redactor_version'")
    report = index.sync([logs_dir])
    assert report.rebuilt and report.vacuumed and not report.wipe_pending
    assert leftovers(db_path, SECRET, WORD, PIECE) == {}
    assert index.status()["messages"] == 4  # nothing lost: the secret is a placeholder now
    text = index.store.conn.execute("SELECT text FROM messages WHERE message_id = 'm2'").fetchone()[0]
    assert "email" in text


def test_the_cli_prune_says_what_it_wiped(run_recall, tmp_path, logs_dir, canonical):
    db = tmp_path / "cli.db"
    plant(canonical, logs_dir)
    assert run_recall("--db", db, "index", logs_dir).returncode == 0
    assert leftovers(db, WORD, PIECE)
    (logs_dir / "a.jsonl").unlink()
    out = run_recall("--db", db, "index", "--prune", logs_dir)
    assert out.returncode == 0, out.stderr
    assert "wiped 3 forgotten messages" in out.stdout
    assert leftovers(db, WORD, PIECE) == {}
    st = json.loads(run_recall("--db", db, "status", "--json").stdout)
    assert st["wipe_pending"] == 0 and st["messages"] == 1


def test_a_crash_between_forget_and_wipe_is_wiped_by_the_next_pass(index, db_path, logs_dir, canonical,
                                                                   monkeypatch):
    _index_then(index, logs_dir, canonical).unlink()
    with monkeypatch.context() as m:
        m.setattr(Store, "wipe", lambda self: None)  # the process dies before it can wipe
        index.sync([logs_dir], prune=True)
    assert leftovers(db_path, WORD, PIECE)
    assert index.status()["wipe_pending"] == 3  # owed, and recorded with the delete
    index.close()
    with Index.open(db_path) as again:
        report = again.sync([logs_dir])  # nothing to read, but the debt is paid
        assert report.wiped == 3
    assert leftovers(db_path, WORD, PIECE) == {}


# --- controls: without the wipe, the bytes stay --------------------------------


def test_control_without_the_wipe_step_the_bytes_remain(index, db_path, logs_dir, canonical, monkeypatch):
    monkeypatch.setattr(Store, "wipe", lambda self: None)
    _index_then(index, logs_dir, canonical).unlink()
    index.sync([logs_dir], prune=True)
    assert index.search(WORD) == []  # gone from the answers...
    assert leftovers(db_path, WORD, PIECE)  # ...but not from the files


def test_control_secure_delete_alone_leaves_the_tokens_in_fts5(index, db_path, logs_dir, canonical, monkeypatch):
    """Without the merge, the checkpoint alone still leaves FTS5's segment
    holding the deleted row's tokens (a contentless_delete tombstone)."""
    def checkpoint_only(self):
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    monkeypatch.setattr(Store, "wipe", checkpoint_only)
    _index_then(index, logs_dir, canonical).unlink()
    index.sync([logs_dir], prune=True)
    assert set(leftovers(db_path, WORD, PIECE)) == {db_path.name}


def test_a_reader_on_an_old_snapshot_defers_the_wipe_to_the_next_pass(index, db_path, logs_dir, canonical):
    _index_then(index, logs_dir, canonical).unlink()
    index.store.conn.set_busy_timeout(200)  # the checkpoint's wait for readers, shortened for the test
    reader = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 4  # holds its snapshot
        report = index.sync([logs_dir], prune=True)
        assert report.wipe_pending and report.wiped == 3
        assert index.status()["wipe_pending"] == 3  # still owed, and `recall status` says so
        reader.execute("COMMIT")
    finally:
        reader.close()
    report = index.sync([logs_dir])
    assert report.wiped == 3 and not report.wipe_pending
    assert leftovers(db_path, WORD, PIECE) == {}


def test_a_database_from_before_the_wipe_is_vacuumed_by_its_first_pass(db_path, logs_dir, canonical):
    """Older versions deleted without secure_delete, so freed pages may hold
    text that no merge will touch: migration m007 owes a VACUUM."""
    plant(canonical, logs_dir)
    with Index.open(db_path) as ix:
        ix.sync([logs_dir])
    conn = apsw.Connection(str(db_path))  # as the version before m007 left it, then deleted as it did
    conn.execute("DROP TRIGGER messages_wipe_pending; DROP TABLE wipe_pending; "
                 "DELETE FROM _migrations WHERE name = 'm007_wipe_pending'")
    conn.execute("PRAGMA secure_delete=OFF")
    conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
    conn.execute("DELETE FROM message_fts WHERE rowid IN (SELECT id FROM messages WHERE text LIKE '%' || ? || '%')",
                 (WORD,))
    conn.execute("DELETE FROM messages WHERE text LIKE '%' || ? || '%'", (WORD,))
    conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert set(leftovers(db_path, WORD, PIECE)) == {db_path.name}  # freed, not zeroed
    with Index.open(db_path) as ix:
        assert ix.store.wipe_owed() == (0, True)
        report = ix.sync([logs_dir])
        assert report.vacuumed and report.wiped == 0 and ix.status()["messages"] == 3
    assert leftovers(db_path, WORD, PIECE) == {}
