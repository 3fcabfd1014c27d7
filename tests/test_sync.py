"""Incremental sync, file by file (contract section 10): a fresh build counts
exactly the searchable messages, and every later change of a log (append, a
partial last line, rewrite, truncate, delete, rename, a changed `.zst`,
deltas that settle) leaves the index equal to what the logs now hold. Also the
rebuild after a version change, and how a pass writes the FTS index.

Real files, real databases, real subprocesses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zstandard

from session_recall import Index
from session_recall.indexer.project import PROJECTION_VERSION
from session_recall.text.redact import REDACTOR_VERSION
from session_recall.text.tokens import FTS_TOKENIZE, TOKENIZER_VERSION, index_body
from tests.helpers import found, messages, write

# --- helpers ------------------------------------------------------------------


def append(path: Path, *chunks: bytes) -> int:
    data = b"".join(chunks)
    with open(path, "ab") as fh:
        fh.write(data)
    return len(data)


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# --- a fresh build, then nothing to do ----------------------------------------


def test_fresh_index_counts_each_searchable_message_once(index, logs_dir, canonical):
    a = canonical("sess-a")
    write(
        logs_dir / "a.jsonl",
        a.session(title="Fonts"),
        a.noise(3),
        a.message("m1", "Which typeface suits the résumé?"),
        a.message("m2", "Source Serif for the body.", role="assistant"),
        a.message("m3", '{"command": "fc-list | grep Serif"}', role="tool_call", tool_name="Bash"),
        a.message("m4", "You are a helpful assistant.", role="system"),  # not indexed by default
        a.delta("m5", "Still streaming "),
        a.delta("m5", "this answer"),  # never settles: searchable, once
    )
    b = canonical("sess-b", cwd="/home/ada/shop")
    write(
        logs_dir / "b.jsonl",
        b.session(),
        b.message("u1", "上周给简历选的什么字体？"),
        b.delta("a1", "思源"),
        b.delta("a1", "宋体"),
        b.message("a1", "选了思源宋体。", role="assistant"),  # settles: replaces its deltas
        b.noise(2),
    )

    report = index.sync([logs_dir])

    assert (report.files, report.files_read, report.messages_added) == (2, 2, 6)
    assert messages(index) == {
        ("sess-a", "m1"): ("Which typeface suits the résumé?", 1),
        ("sess-a", "m2"): ("Source Serif for the body.", 1),
        ("sess-a", "m3"): ("Bash\nfc-list | grep Serif", 1),
        ("sess-a", "m5"): ("Still streaming this answer", 0),
        ("sess-b", "u1"): ("上周给简历选的什么字体？", 1),
        ("sess-b", "a1"): ("选了思源宋体。", 1),
    }
    st = index.status()
    assert (st["sessions"], st["messages"], st["streaming"]) == (2, 6, 1)
    assert st["skipped"] == {"noise": 5, "role_system": 1}
    assert found(index, "streaming") == [("sess-a", "m5")]
    assert found(index, "字体") == [("sess-b", "u1")]
    assert found(index, "宋体") == [("sess-b", "a1")]
    assert found(index, "helpful") == []

    again = index.sync([logs_dir])

    assert (again.messages_added, again.messages_updated, again.files_read, again.bytes_read) == (0, 0, 0, 0)
    assert index.status()["messages"] == 6
    assert index.status()["skipped"] == {"noise": 5, "role_system": 1}


def test_shipped_fixtures_count_exactly(index, fixture_sessions):
    report = index.sync([fixture_sessions])

    assert (report.files, report.messages_added) == (3, 12)
    st = index.status()
    # resume-font: m1..m6 (m6 streams, then settles: once); 简历模板: 4; checkout: 2.
    assert (st["sessions"], st["messages"], st["streaming"]) == (3, 12, 0)
    assert st["skipped"] == {"noise": 4}
    again = index.sync([fixture_sessions])
    assert (again.messages_added, again.files_read) == (0, 0)


# --- append and the partial last line -----------------------------------------


def test_append_is_read_from_the_stored_offset(index, logs_dir, canonical):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    first = write(log, s.session(), s.message("m1", "the first walrus"))
    index.sync([logs_dir])

    added = append(log, s.noise(2), s.message("m2", "a second pelican", role="assistant"))
    report = index.sync([logs_dir])

    assert report.bytes_read == added
    assert (report.files_read, report.files_reset, report.messages_added, report.messages_updated) == (1, 0, 1, 0)
    assert found(index, "pelican") == [("s1", "m2")]
    assert found(index, "walrus") == [("s1", "m1")]
    assert index.status()["messages"] == 2
    assert log.stat().st_size == first + added


def test_last_line_without_newline_waits_for_it(index, logs_dir, canonical):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    complete = write(log, s.session(), s.message("m1", "settled heron"))
    partial = s.message("m2", "pending ibis").rstrip(b"\n")
    half = len(partial) // 2

    append(log, partial[:half])
    report = index.sync([logs_dir])
    assert report.bytes_read == complete
    assert messages(index) == {("s1", "m1"): ("settled heron", 1)}

    append(log, partial[half:])  # the whole line, still without its newline
    report = index.sync([logs_dir])
    assert (report.bytes_read, report.messages_added) == (0, 0)
    assert found(index, "ibis") == []
    assert index.status()["skipped"] == {}

    append(log, b"\n")
    report = index.sync([logs_dir])
    assert report.bytes_read == len(partial) + 1
    assert report.messages_added == 1
    assert found(index, "ibis") == [("s1", "m2")]

    again = index.sync([logs_dir])
    assert (again.messages_added, again.bytes_read) == (0, 0)
    assert index.status()["messages"] == 2


def test_new_file_whose_first_line_is_unfinished_waits(index, logs_dir, canonical):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    head = s.session()
    write(log, head[:-1])  # the harness has not written the newline yet

    report = index.sync([logs_dir])
    assert (report.files_read, report.messages_added) == (0, 0)
    assert index.status()["sessions"] == 0

    append(log, b"\n", s.message("m1", "finally here"))
    report = index.sync([logs_dir])
    assert report.files_read == 1
    assert messages(index) == {("s1", "m1"): ("finally here", 1)}
    assert index.status()["sources"][0]["files"] == 1


# --- rewrite and truncate -----------------------------------------------------


def _bump_mtime(path: Path, since_ns: int) -> None:
    """Make the log's mtime later than `since_ns`, as a rewrite a moment later
    would; on filesystems with coarse timestamps a rewrite within one tick
    keeps the mtime, and an in-place rewrite of the same size is then not seen
    (the documented quick check on size and mtime)."""
    st = path.stat()
    if st.st_mtime_ns <= since_ns:
        os.utime(path, ns=(st.st_atime_ns, since_ns + 1_000_000_000))


@pytest.mark.parametrize("size", ["same", "larger"])
def test_rewritten_file_is_reread_and_replaced(index, logs_dir, canonical, size):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    before = write(log, s.session(), s.message("m1", "stalewalrus"), s.message("m2", "oldpelican"))
    index.sync([logs_dir])
    mtime = log.stat().st_mtime_ns

    s = canonical("s1")
    if size == "same":
        after = write(log, s.session(), s.message("n1", "freshotters"), s.message("m2", "newpelican"))
        assert after == before
    else:
        after = write(log, s.session(), s.message("n1", "freshotters"), s.message("m2", "newpelican"),
                      s.message("n3", "and a heron too"))
        assert after > before
    _bump_mtime(log, mtime)
    report = index.sync([logs_dir])

    assert report.files_reset == 1
    assert report.bytes_read == after
    expected = {("s1", "n1"): ("freshotters", 1), ("s1", "m2"): ("newpelican", 1)}
    if size == "larger":
        expected[("s1", "n3")] = ("and a heron too", 1)
    assert messages(index) == expected
    assert found(index, "stalewalrus") == []
    assert found(index, "oldpelican") == []
    assert found(index, "freshotters") == [("s1", "n1")]
    assert found(index, "newpelican") == [("s1", "m2")]
    assert index.status()["messages"] == len(expected)


def test_replaced_file_of_same_size_and_mtime_is_reread(index, logs_dir, canonical):
    """A log replaced by a new file (write elsewhere, then rename over it) is a
    new inode: seen even when size and mtime happen to match the old ones."""
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    before = write(log, s.session(), s.message("m1", "stalewalrus"))
    index.sync([logs_dir])
    old = log.stat()

    tmp = logs_dir.parent / "s.jsonl.tmp"
    s = canonical("s1")
    assert write(tmp, s.session(), s.message("m1", "freshotters")) == before
    os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(tmp, log)
    report = index.sync([logs_dir])

    assert report.files_reset == 1
    assert messages(index) == {("s1", "m1"): ("freshotters", 1)}
    assert found(index, "stalewalrus") == []


def test_truncated_file_is_reread(index, logs_dir, canonical):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    keep = write(log, s.session(), s.message("m1", "kept kestrel"))
    append(log, s.message("m2", "dropped dodo"), s.delta("m3", "streaming swift"))
    index.sync([logs_dir])
    assert index.status()["messages"] == 3

    with open(log, "r+b") as fh:
        fh.truncate(keep)
    report = index.sync([logs_dir])

    assert (report.files_reset, report.bytes_read) == (1, keep)
    assert messages(index) == {("s1", "m1"): ("kept kestrel", 1)}
    assert found(index, "dodo") == []
    assert found(index, "swift") == []
    assert index.status()["streaming"] == 0

    s2 = canonical("s1")
    append(log, s2.message("m4", "then a new lark"))
    report = index.sync([logs_dir])
    assert report.files_reset == 0
    assert found(index, "lark") == [("s1", "m4")]
    assert index.status()["messages"] == 2


# --- delete and rename --------------------------------------------------------


def test_deleted_file_stays_searchable_until_pruned(index, logs_dir, canonical):
    a, b = canonical("sa"), canonical("sb")
    write(logs_dir / "a.jsonl", a.session(), a.message("m1", "ancient aardvark"), a.delta("m2", "half bison"))
    write(logs_dir / "b.jsonl", b.session(), b.message("m1", "living beaver"))
    index.sync([logs_dir])
    assert index.status()["messages"] == 3

    (logs_dir / "a.jsonl").unlink()
    report = index.sync([logs_dir])

    assert (report.files_missing, report.messages_added, report.files) == (1, 0, 1)
    st = index.status()
    assert (st["sessions"], st["messages"]) == (2, 3)
    assert st["sources"][0]["missing_files"] == 1
    assert found(index, "aardvark") == [("sa", "m1")]
    assert found(index, "bison") == [("sa", "m2")]

    again = index.sync([logs_dir])  # still kept on the next pass
    assert found(index, "aardvark") == [("sa", "m1")]
    assert again.messages_added == 0

    pruned = index.sync([logs_dir], prune=True)

    assert pruned.files_missing == 1
    assert messages(index) == {("sb", "m1"): ("living beaver", 1)}
    st = index.status()
    assert (st["sessions"], st["messages"], st["streaming"]) == (1, 1, 0)
    assert (st["sources"][0]["files"], st["sources"][0]["missing_files"]) == (1, 0)
    assert found(index, "aardvark") == []
    assert found(index, "beaver") == [("sb", "m1")]


@pytest.mark.parametrize("dest", ["renamed.jsonl", "sub/dir/renamed.jsonl"])
def test_renamed_file_is_not_indexed_twice(index, logs_dir, canonical, dest):
    s = canonical("s1")
    write(logs_dir / "a.jsonl", s.session(), s.message("m1", "moving mongoose"), s.delta("m2", "still typing"))
    index.sync([logs_dir])
    before = messages(index)

    target = logs_dir / dest
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(logs_dir / "a.jsonl", target)
    report = index.sync([logs_dir])

    assert (report.files_renamed, report.files_missing, report.files_read, report.messages_added) == (1, 0, 0, 0)
    assert messages(index) == before
    assert found(index, "mongoose") == [("s1", "m1")]
    st = index.status()
    assert (st["sources"][0]["files"], st["sources"][0]["missing_files"]) == (1, 0)

    # The record moved with the file: an append is read from the old offset.
    added = append(target, s.message("m3", "arrived at the new name"))
    report = index.sync([logs_dir])
    assert (report.bytes_read, report.messages_added) == (added, 1)
    assert index.status()["messages"] == 3


def test_renamed_and_appended_file_reads_only_the_append(index, logs_dir, canonical):
    s = canonical("s1")
    write(logs_dir / "a.jsonl", s.session(), s.message("m1", "moving mongoose"))
    index.sync([logs_dir])

    os.rename(logs_dir / "a.jsonl", logs_dir / "b.jsonl")
    added = append(logs_dir / "b.jsonl", s.message("m2", "after the move"))
    report = index.sync([logs_dir])

    assert (report.files_renamed, report.files_reset, report.bytes_read, report.messages_added) == (1, 0, added, 1)
    assert index.status()["messages"] == 2


# --- .jsonl.zst ---------------------------------------------------------------


def test_zst_log_is_indexed(index, logs_dir, canonical):
    s = canonical("z1")
    raw = s.session() + s.noise(5) + s.message("m1", "compressed capybara") + s.delta("m2", "streaming 压缩")
    (logs_dir / "x.jsonl.zst").write_bytes(zst(raw))

    report = index.sync([logs_dir])

    assert (report.files, report.bytes_read, report.messages_added) == (1, len(raw), 2)
    assert report.files_reset == 0  # a first read replaces nothing
    assert messages(index) == {("z1", "m1"): ("compressed capybara", 1), ("z1", "m2"): ("streaming 压缩", 0)}
    assert found(index, "capybara") == [("z1", "m1")]
    assert found(index, "压缩") == [("z1", "m2")]
    again = index.sync([logs_dir])
    assert (again.files_read, again.messages_added, again.bytes_read) == (0, 0, 0)


def test_zst_of_several_frames_is_read_across_them(index, logs_dir, canonical):
    s = canonical("z1")
    one = s.session() + s.message("m1", "first frame")
    two = s.message("m2", "second frame")
    (logs_dir / "x.jsonl.zst").write_bytes(zst(one) + zst(two))

    index.sync([logs_dir])

    assert messages(index) == {("z1", "m1"): ("first frame", 1), ("z1", "m2"): ("second frame", 1)}


def test_changed_zst_is_reread_whole(index, logs_dir, canonical):
    path = logs_dir / "x.jsonl.zst"
    s = canonical("z1")
    head = s.session() + s.message("m1", "early egret") + s.delta("m2", "draft dingo")
    path.write_bytes(zst(head))
    index.sync([logs_dir])
    assert index.status()["messages"] == 2

    # Recompressed with more lines: m2 settles, m3 arrives.
    more = head + s.message("m2", "final falcon", role="assistant") + s.message("m3", "late lemur")
    path.write_bytes(zst(more))
    report = index.sync([logs_dir])

    assert (report.files_read, report.files_reset, report.bytes_read) == (1, 1, len(more))
    assert messages(index) == {
        ("z1", "m1"): ("early egret", 1),
        ("z1", "m2"): ("final falcon", 1),
        ("z1", "m3"): ("late lemur", 1),
    }
    assert found(index, "dingo") == []
    assert found(index, "falcon") == [("z1", "m2")]

    # Recompressed with other content: what it held is replaced.
    s = canonical("z1")
    other = s.session() + s.message("m9", "only okapi")
    path.write_bytes(zst(other))
    index.sync([logs_dir])
    assert messages(index) == {("z1", "m9"): ("only okapi", 1)}
    assert found(index, "egret") == []


def test_plain_log_beside_its_zst_wins(index, logs_dir, canonical):
    s = canonical("z1")
    (logs_dir / "x.jsonl").write_bytes(s.session() + s.message("m1", "plain parrot"))
    (logs_dir / "x.jsonl.zst").write_bytes(zst(s.session() + s.message("m2", "zipped zebra")))

    report = index.sync([logs_dir])

    assert report.files == 1
    assert messages(index) == {("z1", "m1"): ("plain parrot", 1)}
    assert found(index, "zebra") == []
    assert index.status()["sources"][0]["files"] == 1


@pytest.mark.parametrize("direction", ["compress", "decompress"])
def test_log_compressed_in_place_is_not_indexed_twice(index, logs_dir, canonical, direction):
    """x.jsonl becomes x.jsonl.zst (a harness rotating its logs), or the other
    way round: the new file carries the same messages, each is indexed once,
    and a streaming message is not appended to itself."""
    s = canonical("s1")
    raw = (s.session() + s.message("m1", "rotated raven") + s.delta("m2", "half ") + s.delta("m2", "said")
           + s.delta("m3", "draft ") + s.message("m3", "settled stork", role="assistant"))
    plain, packed = logs_dir / "x.jsonl", logs_dir / "x.jsonl.zst"
    if direction == "compress":
        plain.write_bytes(raw)
    else:
        packed.write_bytes(zst(raw))
    index.sync([logs_dir])
    before = messages(index)
    assert before == {("s1", "m1"): ("rotated raven", 1), ("s1", "m2"): ("half said", 0),
                      ("s1", "m3"): ("settled stork", 1)}

    more = raw + s.delta("m2", " more") + s.message("m4", "new newt")
    if direction == "compress":
        packed.write_bytes(zst(more))
        plain.unlink()
    else:
        plain.write_bytes(more)  # beside the .zst, the plain file wins
    report = index.sync([logs_dir])

    assert report.messages_added == 1
    assert report.skipped == {}
    assert messages(index) == {**before, ("s1", "m2"): ("half said more", 0), ("s1", "m4"): ("new newt", 1)}
    assert index.status()["messages"] == 4
    assert found(index, "said") == [("s1", "m2")]

    index.sync([logs_dir], prune=True)  # the old file's record goes; its messages live on in the new one
    assert index.status()["messages"] == 4
    assert index.status()["sources"][0]["files"] == 1


# --- deltas, then the settle --------------------------------------------------


def test_deltas_are_searchable_then_replaced_when_settled(index, logs_dir, canonical):
    log = logs_dir / "s.jsonl"
    s = canonical("s1")
    write(log, s.session(), s.message("u1", "deploy it"), s.delta("a1", "Deploying the "), s.noise(2),
          s.delta("a1", "preview to quokka"))
    report = index.sync([logs_dir])

    assert report.messages_added == 2
    assert messages(index)[("s1", "a1")] == ("Deploying the preview to quokka", 0)
    assert found(index, "quokka") == [("s1", "a1")]
    assert found(index, '"the preview"') == [("s1", "a1")]  # the join of two deltas is one text
    (rowid,) = index.store.conn.execute("SELECT id FROM messages WHERE message_id = 'a1'").fetchone()

    append(log, s.delta("a1", " staging"))
    report = index.sync([logs_dir])
    assert (report.messages_added, report.messages_updated) == (0, 1)
    assert messages(index)[("s1", "a1")] == ("Deploying the preview to quokka staging", 0)
    assert found(index, "staging") == [("s1", "a1")]

    append(log, s.message("a1", "Deployed the preview.", role="assistant"))
    report = index.sync([logs_dir])

    assert (report.messages_added, report.messages_updated) == (0, 1)
    assert messages(index)[("s1", "a1")] == ("Deployed the preview.", 1)
    assert index.store.conn.execute("SELECT id FROM messages WHERE message_id = 'a1'").fetchone() == (rowid,)
    st = index.status()
    assert (st["messages"], st["streaming"]) == (2, 0)
    assert found(index, "quokka") == []
    assert found(index, "staging") == []
    assert found(index, "deployed") == [("s1", "a1")]

    append(log, s.delta("a1", " and a stray yak"))
    report = index.sync([logs_dir])

    assert (report.messages_added, report.messages_updated) == (0, 0)
    assert report.skipped == {"delta_after_settle": 1}
    assert index.status()["skipped"] == {"delta_after_settle": 1, "noise": 2}
    assert messages(index)[("s1", "a1")] == ("Deployed the preview.", 1)
    assert found(index, "yak") == []


def test_deltas_and_settle_in_one_read(index, logs_dir, canonical):
    s = canonical("s1")
    write(logs_dir / "s.jsonl", s.session(), s.delta("a1", "draft "), s.delta("a1", "words"),
          s.message("a1", "final words", role="assistant"), s.delta("a1", "late"))

    report = index.sync([logs_dir])

    assert report.messages_added == 1
    assert messages(index) == {("s1", "a1"): ("final words", 1)}
    assert index.status()["skipped"] == {"delta_after_settle": 1}
    assert found(index, "draft") == []


def test_a_stream_read_in_one_batch_reaches_the_index_once_with_its_last_text(index, logs_dir, canonical):
    """The FTS5 rows of a batch are written at its end (ingest.Writer._index):
    a stream's deltas between other messages are inserted once, with the
    text they add up to, never deleted and inserted again per delta (each
    such delete made FTS5 write its pending rows out as a new segment). A
    stream that goes on in a later batch still replaces its row there."""
    s = canonical("s1")
    log = logs_dir / "s.jsonl"
    write(log, s.session(), s.message("m1", "first plain message"), s.delta("a1", "alpha "),
          s.message("m2", "second plain message"), s.delta("a1", "bravo "), s.delta("a2", "gamma "),
          s.message("m3", "third plain message"), s.delta("a1", "charlie"),
          s.message("a1", "settled words", role="assistant"), s.delta("a2", "delta"))
    statements: list[str] = []
    index.store.conn.set_profile(lambda sql, ns: statements.append(sql) if "message_fts(" in sql
                                 or "FROM message_fts" in sql else None)
    report = index.sync([logs_dir])
    index.store.conn.set_profile(None)

    assert (report.messages_added, report.messages_updated) == (5, 4)
    assert not [q for q in statements if q.startswith("DELETE")]
    assert sum(q.startswith("INSERT INTO message_fts(rowid, body)") for q in statements) == 5
    assert messages(index)[("s1", "a1")] == ("settled words", 1)
    assert messages(index)[("s1", "a2")] == ("gamma delta", 0)
    for gone in ("alpha", "bravo", "charlie"):
        assert found(index, gone) == []
    assert found(index, "settled") == [("s1", "a1")] and found(index, '"gamma delta"') == [("s1", "a2")]
    index.store.conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, message_fts, 'row')")
    vocab = {t for (t,) in index.store.conn.execute("SELECT term FROM temp.v")}
    assert {"alpha", "bravo", "charlie"}.isdisjoint(vocab) and {"settled", "gamma", "delta"} <= vocab

    append(log, s.delta("a2", " echo"))
    report = index.sync([logs_dir])
    assert (report.messages_added, report.messages_updated) == (0, 1)
    assert found(index, '"delta echo"') == [("s1", "a2")] and found(index, "gamma") == [("s1", "a2")]
    index.store.conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")  # raises


# --- a version change rebuilds ------------------------------------------------


@pytest.mark.parametrize("key", ["tokenizer_version", "redactor_version", "projection_version"])
def test_version_change_rebuilds_keeping_deleted_sources(index, db_path, logs_dir, canonical, key):
    a, b, c = canonical("sa"), canonical("sb", cwd="/home/ada/b"), canonical("sc")
    write(logs_dir / "a.jsonl", a.session(), a.message("m1", "上周给简历选的什么字体"),
          a.delta("m2", "still streaming"))
    write(logs_dir / "b.jsonl", b.session(), b.message("m1", "gone before: bittern"))
    write(logs_dir / "c.jsonl", c.session(), c.message("m1", "gone just now: curlew"))
    index.sync([logs_dir])
    (logs_dir / "b.jsonl").unlink()
    index.sync([logs_dir])  # b is known to be missing
    (logs_dir / "c.jsonl").unlink()  # c vanishes while nobody looks
    before = messages(index)
    assert len(before) == 4

    index.store.conn.execute("UPDATE meta SET value = '0' WHERE key = ?", (key,))
    assert index.status()["stale"]
    report = index.sync([logs_dir])

    assert report.rebuilt is True
    assert messages(index) == before
    st = index.status()
    assert (st["messages"], st["streaming"], st["stale"]) == (4, 1, False)
    assert (st["tokenizer_version"], st["redactor_version"], st["projection_version"]) == (
        TOKENIZER_VERSION, REDACTOR_VERSION, PROJECTION_VERSION)
    assert found(index, "字体") == [("sa", "m1")]
    assert found(index, "streaming") == [("sa", "m2")]
    assert found(index, "bittern") == [("sb", "m1")]
    assert found(index, "curlew") == [("sc", "m1")]

    again = index.sync([logs_dir])
    assert (again.rebuilt, again.messages_added) == (False, 0)
    assert index.status()["sources"][0]["missing_files"] == 2

    # The rebuilt index is the one a fresh build makes of the same logs.
    with Index.open(db_path.with_name("fresh.db")) as fresh:
        fresh.sync([logs_dir])
        assert messages(fresh) == {k: v for k, v in before.items() if k[0] == "sa"}


def _fts_sql(conn) -> str:
    return conn.execute("SELECT sql FROM sqlite_master WHERE name = 'message_fts'").fetchone()[0]


def test_an_index_made_before_the_one_character_prefix_index_gets_it_by_migration(index, db_path, logs_dir,
                                                                                   canonical):
    """Before migration m011 the FTS5 table had no prefix index: a lone CJK
    character merged the row lists of every token beginning with it. m011
    makes the table again, with it, from the stored rows: the same answers,
    the same scores, nothing read from the logs again."""
    s = canonical("s1")
    write(logs_dir / "a.jsonl", s.session(), s.message("m1", "上周给简历选的什么字体"),
          s.message("m2", "字 alone"), s.message("m3", "nothing here"))
    index.sync([logs_dir])
    conn = index.store.conn
    assert "prefix='1'" in _fts_sql(conn)

    def scored(ix: Index, query: str) -> list[tuple[str, float]]:
        return [(h.message_id, round(h.score, 9)) for h, _ in ix.search(query, limit=100)]

    want = {q: scored(index, q) for q in ("字", "字体", "alone", "上周")}
    assert [m for m, _ in want["字"]] and sorted(m for m, _ in want["字"]) == ["m1", "m2"]
    with conn:  # the table as it was made before m011
        conn.execute("DROP TABLE message_fts")
        conn.execute("CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1, "
                     f"tokenize=\"{FTS_TOKENIZE}\")")
        for rowid, text in list(conn.execute("SELECT id, text FROM messages")):
            conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (rowid, index_body(text)))
        conn.execute("DELETE FROM _migrations WHERE name = 'm011_one_character_prefix_index'")
    assert {q: scored(index, q) for q in want} == want  # the prefix merge answered the same
    index.close()

    with Index.open(db_path) as again:
        c = again.store.conn
        assert "prefix='1'" in _fts_sql(c)
        assert c.execute("SELECT 1 FROM _migrations WHERE name = 'm011_one_character_prefix_index'").fetchone()
        assert {q: scored(again, q) for q in want} == want
        assert again.status()["stale"] is False  # no rebuild owed: the tokens are the same
        assert again.sync([logs_dir]).rebuilt is False
        c.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")


def test_rebuild_after_a_rename_keeps_each_message_once(index, logs_dir, canonical):
    s = canonical("s1")
    write(logs_dir / "a.jsonl", s.session(), s.message("m1", "moving mongoose"), s.delta("m2", "typing tern"))
    index.sync([logs_dir])
    before = messages(index)
    os.rename(logs_dir / "a.jsonl", logs_dir / "b.jsonl")

    index.store.conn.execute("UPDATE meta SET value = '0' WHERE key = 'tokenizer_version'")
    report = index.sync([logs_dir])

    assert report.rebuilt is True
    assert messages(index) == before
    assert found(index, "tern") == [("s1", "m2")]
    st = index.status()
    assert (st["sources"][0]["files"], st["sources"][0]["missing_files"]) == (1, 0)


def test_each_message_records_whether_its_text_is_in_nfkc(index, logs_dir, canonical):
    """messages.nfkc lets recall fold a text by casefold() alone; it must be 1
    only for text NFKC leaves unchanged, and follow a stream as it grows."""
    a = canonical("sess-nfkc")
    write(
        logs_dir / "a.jsonl",
        a.session(),
        a.message("m1", "plain ASCII"),
        a.message("m2", "中文。没有全角标点"),
        a.message("m3", "全角，标点：ＡＢＣ"),
        a.delta("m4", "先是中文"),
        a.delta("m4", "，然后全角"),
    )
    index.sync([str(logs_dir)], kind="canonical")
    got = dict(index.store.conn.execute("SELECT message_id, nfkc FROM messages"))
    assert got == {"m1": 1, "m2": 1, "m3": 0, "m4": 0}
    [result] = index.recall("ａｂｃ", all_projects=True).results
    assert [m.message_id for m in result.passage.messages if m.is_anchor] == ["m3"]


def _fts_segments(ix: Index) -> int:
    return ix.store.conn.execute("SELECT count(DISTINCT segid) FROM message_fts_idx").fetchone()[0]


def test_a_bulk_pass_ends_with_one_fts_segment(index, logs_dir, canonical, monkeypatch):
    """A pass that wrote at least half of the index merges FTS5 into one
    segment (docs/indexing.md); a small later pass does not pay for that."""
    from session_recall.indexer import sync
    from session_recall.indexer.sync import Syncer

    monkeypatch.setattr(sync, "OPTIMIZE_MIN_ADDED", 20)
    for f in range(12):
        a = canonical(f"sess-{f}")
        write(logs_dir / f"{f}.jsonl", a.session(),
              *[a.message(f"m{i}", f"kerning pair {f} {i} 字距调整") for i in range(4)])
    # A commit per file, as a large pass commits per batch: many segments.
    report = Syncer(index.store, batch_lines=1).run([str(logs_dir)], kind="canonical")
    assert report.messages_added == 48
    assert _fts_segments(index) == 1
    before = messages(index)
    assert len(found(index, "字距")) == 48

    b = canonical("sess-late")
    write(logs_dir / "late.jsonl", b.session(), *[b.message(f"m{i}", f"late kerning {i}") for i in range(20)])
    Syncer(index.store, batch_lines=1).run([str(logs_dir)], kind="canonical")
    assert _fts_segments(index) > 1  # 20 of 68: no optimize, a segment per commit
    assert len(messages(index)) == len(before) + 20
    assert len(found(index, "kerning")) == 68


def test_a_first_pass_lists_new_files_in_one_transaction(index, logs_dir, canonical):
    """Each new log gets its row in `files` inside the pass's group, not in a
    transaction (a WAL commit) of its own: 40 small logs take a few commits."""
    for f in range(40):
        a = canonical(f"sess-{f}")
        write(logs_dir / f"{f}.jsonl", a.session(), a.message("m1", f"ligature {f}"))
    commits = []
    index.store.conn.set_commit_hook(lambda: bool(commits.append(1)))
    try:
        report = index.sync([logs_dir])
    finally:
        index.store.conn.set_commit_hook(None)
    assert report.files_read == 40 and report.messages_added == 40
    assert 1 <= len(commits) <= 3
    assert len(found(index, "ligature")) == 40


