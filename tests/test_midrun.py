"""A log that changes while it is being indexed: truncated, rewritten with
other content (in place, or replaced by a new file), deleted or renamed between
two batches of one pass.

The change is made at a real point of a real pass: from the `progress`
callback, which a pass calls after each committed batch, while the reader
(this process, or the worker process of a large pass, one range ahead) still
has the rest of the file to read; and in a real `recall index` subprocess,
stopped with SIGSTOP once its first batches of the file are committed, and
continued after the change. Each time: nothing raises, the pass counts the
change under its reason (`report.skipped`, `status()["skipped"]`), the logs
beside it are indexed, and the next pass leaves the index exactly as a fresh
build of the logs as they now are (a deleted log's sessions are kept, as
always, until `--prune`)."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import orjson
import pytest

from session_recall import Index
from session_recall.indexer import files as F
from session_recall.indexer import pipeline
from session_recall.indexer.sync import Syncer

CWD = "/home/ada/midrun"
BIG = "m-big.jsonl"  # sorted between the two small logs, so one is read before it and one after


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def log(sid: str, tag: str, n_lines: int, *, same_as: int = 0) -> bytes:
    """A session of `n_lines` lines: one message in 7, streaming deltas (some
    settled later, some never), the rest noise. The first `same_as` lines do
    not depend on `tag`, so that two logs of different tags share a head."""
    out = [line({"type": "session", "session_id": sid, "cwd": CWD, "started_at": "2026-12-01T09:00:00Z"})]
    for i in range(1, n_lines):
        t = "same" if i < same_as else tag
        ts = f"2026-12-01T10:{i // 3600 % 60:02d}:{i % 60:02d}Z"
        if i % 7 == 0:
            out.append(line({"type": "message", "session_id": sid, "message_id": f"m{i}", "turn_id": f"t{i // 70}",
                             "role": "user" if i % 2 else "assistant", "ts": ts,
                             "text": f"{t}word{i} was said at line {i} of {t}"}))
        elif i % 53 == 0:
            out.append(line({"type": "message_delta", "session_id": sid, "message_id": f"d{i // 106}",
                             "turn_id": "t", "role": "assistant", "ts": ts, "text": f"{t}part{i} "}))
        elif i % 265 == 0:
            out.append(line({"type": "message", "session_id": sid, "message_id": f"d{i // 106}", "turn_id": "t",
                             "role": "assistant", "ts": ts, "text": f"{t}settled{i}"}))
        else:
            out.append(line({"type": "progress", "session_id": sid, "percent": i % 100, "pad": t * 12}))
    return b"".join(out)


def small_logs(src: Path) -> None:
    (src / "a-before.jsonl").write_bytes(log("before", "alpha", 300))
    # A log with a malformed line: its count must survive the pass.
    (src / "z-after.jsonl").write_bytes(log("after", "omega", 300) + b"{not json\n")


def messages(ix: Index) -> dict[tuple[str, str, str], tuple[str, int]]:
    """(cwd, session_id, message_id) -> (text, settled), after checking that the
    database and its FTS5 index agree."""
    c = ix.store.conn
    assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    c.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")
    assert c.execute("SELECT count(*) FROM message_fts").fetchone()[0] == \
        c.execute("SELECT count(*) FROM messages").fetchone()[0]
    return {(cwd, sid, mid): (text, settled) for cwd, sid, mid, text, settled in c.execute(
        "SELECT s.cwd, s.session_id, m.message_id, m.text, m.settled FROM messages m JOIN sessions s ON s.id = m.session")}


def fresh(src: Path, db: Path) -> tuple[dict, dict]:
    """Messages and skip counts of a fresh build of `src` as it is now."""
    with Index.open(db) as ix:
        ix.sync([str(src)])
        return messages(ix), ix.status()["skipped"]


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> Callable[[str, bytes], dict]:
    """`originals(name, big_log)`: the messages of a fresh build of the small
    logs beside the big log `name` as written before any change (`messages`).
    The logs are deterministic and the tests only read the result, so each is
    built once a module, not once a test (indexing the 4.8 MB or 19 MB log
    again for every change)."""
    built: dict[tuple[str, bytes], dict] = {}

    def build(name: str, big_log: bytes) -> dict:
        key = (name, hashlib.blake2b(big_log).digest())
        if key not in built:
            root = tmp_path_factory.mktemp("original")
            src = root / "logs"
            src.mkdir()
            small_logs(src)
            (src / name).write_bytes(big_log)
            with Index.open(root / "before.db") as ix:
                ix.sync([str(src)])
                built[key] = messages(ix)
        return dict(built[key])

    return build


def of_session(msgs: dict, sid: str) -> dict:
    return {k: v for k, v in msgs.items() if k[1] == sid}


# --- the changes ------------------------------------------------------------------
# Each takes the log and how far the index had committed it when the change is
# made, changes it, and returns the reason the pass must count, and the path
# the log now has (None: gone).


def longer(path: Path) -> int:
    """A number of lines that makes a longer log than `path`."""
    return path.read_bytes().count(b"\n") * 6 // 5


def truncate_behind(path: Path, committed: int) -> tuple[str, Path | None]:
    """Cut inside a line already committed: what the index holds of it is gone."""
    os.truncate(path, committed // 2 + 5)
    return "truncated_while_read", path


def truncate_ahead(path: Path, committed: int) -> tuple[str, Path | None]:
    """Cut inside a line not read yet, keeping all that was committed."""
    os.truncate(path, committed + (path.stat().st_size - committed) // 3)
    return "truncated_while_read", path


def rewrite_in_place(path: Path, committed: int) -> tuple[str, Path | None]:
    """The same file (same inode) written again with other, longer content that
    shares its first lines and its session: many message ids recur with other
    text, and the reader's open file now yields the new bytes."""
    new = log("big", "rewritten", longer(path), same_as=300)
    with open(path, "r+b") as fh:  # not write_bytes: no moment of an empty file
        fh.write(new)
    return "rewritten_while_read", path


def replace_by_new_file(path: Path, committed: int) -> tuple[str, Path | None]:
    """Another file renamed over the log (a new inode), as an editor saves."""
    tmp = path.with_name(".replacement")
    tmp.write_bytes(log("big", "replaced", longer(path), same_as=300))
    os.replace(tmp, path)
    return "rewritten_while_read", path


def delete(path: Path, committed: int) -> tuple[str, Path | None]:
    path.unlink()
    return "vanished_file", None


def rename(path: Path, committed: int) -> tuple[str, Path | None]:
    new = path.with_name("renamed-big.jsonl")
    os.rename(path, new)
    return "vanished_file", new


CHANGES = [truncate_behind, truncate_ahead, rewrite_in_place, replace_by_new_file, delete, rename]


def committed_offset(db: Path, path: Path) -> int:
    """The offset of `path` committed so far, read as any reader would."""
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.CantOpenError:
        return 0
    try:
        conn.set_busy_timeout(5000)
        row = conn.execute("SELECT offset FROM files WHERE path = ?", (str(path.resolve()),)).fetchone()
        return row[0] if row else 0
    except apsw.SQLError:  # not created yet
        return 0
    finally:
        conn.close()


def check_converged(ix: Index, src: Path, scratch: Path, change: Callable, reason: str, now: Path | None,
                    during: dict, original: dict) -> None:
    """The pass after the change: the index is a fresh build of the logs as
    they are now, and the reason is no longer counted."""
    report = ix.sync([str(src)])
    assert reason not in report.skipped
    after = messages(ix)
    expected, expected_skipped = fresh(src, scratch / "fresh.db")
    if now is None:
        # A deleted log's sessions stay searchable: what was committed of it
        # before it went, each message as the log had it; `prune` forgets it.
        kept = of_session(after, "big")
        assert kept == of_session(during, "big")
        assert kept and all(original[k] == v or not v[1] for k, v in kept.items())
        assert {k: v for k, v in after.items() if k[1] != "big"} == expected
        assert ix.status()["sources"][0]["missing_files"] == 1
        ix.sync([str(src)], prune=True)
        after = messages(ix)
    else:
        if change is rename:
            assert report.files_renamed == 1 and report.files_reset == 0  # nothing read twice
        if change is truncate_behind or change in (rewrite_in_place, replace_by_new_file):
            assert report.files_reset == 1
    assert after == expected
    assert ix.status()["skipped"] == expected_skipped
    again = ix.sync([str(src)])
    assert (again.bytes_read, again.messages_added, again.messages_updated) == (0, 0, 0)


# --- in this process, changed from the progress callback -------------------------


@pytest.mark.parametrize("reader", ["one-process", "worker"])
@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_a_log_changed_between_two_batches_is_counted_and_the_next_pass_converges(
        change, reader, tmp_path, monkeypatch, originals):
    src = tmp_path / "logs"
    src.mkdir()
    small_logs(src)
    big = src / BIG
    big.write_bytes(log("big", "original", 30_000))  # about 4.8 MB: several 1 MB reads
    original = originals(BIG, big.read_bytes())
    if reader == "worker":  # the worker process reads small ranges ahead of the commits
        monkeypatch.setattr(pipeline, "WORKER_MIN_BYTES", 0)
        monkeypatch.setattr(pipeline, "RANGE_BYTES", 256 << 10)

    target = str(big.resolve())
    seen: list[tuple[int, int]] = []
    outcome: dict = {}

    def progress(path: str, done: int, total: int) -> None:
        if path != target:
            return
        seen.append((done, total))
        if len(seen) == 3:  # three batches of the log committed, many to come
            outcome["left"] = total - done
            outcome["reason"], outcome["now"] = change(big, done)

    db = tmp_path / "r.db"
    with Index.open(db) as ix:
        report = Syncer(ix.store, progress=progress, batch_lines=2_000).run([str(src)])

        assert outcome, f"the log was read in {len(seen)} batches, too few to change it between two"
        assert outcome["left"] > 1 << 20  # changed in the middle of the log
        reason = outcome["reason"]
        assert report.skipped.get(reason) == 1, report.skipped
        status = ix.status()
        assert status["skipped"].get(reason) == 1
        assert status["skipped"].get("malformed_json") == 1
        during = messages(ix)
        # The logs beside it are indexed in full.
        for sid in ("before", "after"):
            assert of_session(during, sid) == of_session(original, sid) and of_session(during, sid)
        # Nothing of the changed log's new content was taken for its old.
        for k, v in of_session(during, "big").items():
            assert original.get(k) == v or not v[1], (k, v)

        check_converged(ix, src, tmp_path, change, reason, outcome["now"], during, original)


# --- a real `recall index`, stopped in the middle of the log ------------------------


@pytest.mark.parametrize("change", [truncate_behind, rewrite_in_place, delete, rename], ids=lambda c: c.__name__)
def test_recall_index_stopped_mid_log_and_changed_counts_it(change, tmp_path, spawn, recall_cmd, run_recall,
                                                           originals):
    src = tmp_path / "logs"
    src.mkdir()
    small_logs(src)
    big = src / BIG
    # About 19 MB: six batches of 20,000 lines.
    big.write_bytes(log("big", "original", 120_000))
    original = originals(BIG, big.read_bytes())
    db = tmp_path / "r.db"

    for attempt in range(3):  # a loaded machine may run the indexer past the middle before it stops
        db.unlink(missing_ok=True)
        proc = spawn([*recall_cmd, "--db", db, "index", src], name=f"index-{attempt}")
        committed = 0
        deadline = time.monotonic() + 60
        while proc.alive() and time.monotonic() < deadline:
            if db.exists():
                committed = committed_offset(db, big)
                if committed:
                    break
            time.sleep(0.002)
        proc.send(signal.SIGSTOP)
        try:
            committed = committed_offset(db, big)
            mid_run = proc.alive() and 0 < committed < big.stat().st_size // 2
            if mid_run:
                reason, now = change(big, committed)
        finally:
            proc.send(signal.SIGCONT)
        assert proc.wait(timeout=120) == 0, proc.stderr()
        if mid_run:
            break
    else:
        pytest.fail("the indexer could not be stopped in the middle of the log in 3 attempts")

    assert f"{reason} 1" in proc.stdout()  # the pass's own report
    shown = run_recall("--db", db, "status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert orjson.loads(shown.stdout)["skipped"].get(reason) == 1
    text = run_recall("--db", db, "status")
    assert f"{reason} 1" in text.stdout

    with Index.open(db) as ix:
        during = messages(ix)
        for sid in ("before", "after"):
            assert of_session(during, sid) == of_session(original, sid) and of_session(during, sid)
        for k, v in of_session(during, "big").items():
            assert original.get(k) == v or not v[1], (k, v)
        check_converged(ix, src, tmp_path, change, reason, now, during, original)


# --- the signature kept from the bytes read ---------------------------------------


def test_the_signature_of_the_bytes_read_is_the_one_read_back_from_the_file(tmp_path):
    data = log("sig", "signature", 12_000)  # several 1 MB reads, and the head sample within the first batch
    path = tmp_path / "sig.jsonl"
    path.write_bytes(data)
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    out = list(pipeline.batches(str(path), "canonical", 0, {}, b"k", batch_lines=397, batch_bytes=1 << 30))
    assert len(out) > 20
    for batch in out:
        assert batch.end in ends
        assert batch.sig == F.prefix_hash(str(path), batch.end)
    # From an offset, given the signature of the prefix, as a later pass reads.
    mid = out[len(out) // 2].end
    rest = list(pipeline.batches(str(path), "canonical", mid, {}, b"k", batch_lines=397, batch_bytes=1 << 30,
                                 expect=F.prefix_hash(str(path), mid)))
    assert [b.sig for b in rest] == [b.sig for b in out if b.end > mid]
    # A prefix that is no longer what the signature says is refused.
    with open(path, "r+b") as fh:
        fh.write(b"[")
    with pytest.raises(F.FileChanged) as err:
        list(pipeline.batches(str(path), "canonical", mid, {}, b"k", batch_lines=397, batch_bytes=1 << 30,
                              expect=out[len(out) // 2].sig))
    assert err.value.reason == "rewritten_while_read"
    os.truncate(path, mid - 1)
    with pytest.raises(F.FileChanged) as err:
        list(pipeline.batches(str(path), "canonical", mid, {}, b"k", batch_lines=397, batch_bytes=1 << 30,
                              expect=out[len(out) // 2].sig))
    assert err.value.reason == "truncated_while_read"


# --- a .zst, read whole through one decompressor ------------------------------------


def zst_log(tag: str, n_lines: int, seed: int) -> bytes:
    """A compressed session of messages that do not compress away (random
    words), so that the compressed file is read in many pieces."""
    import random

    import zstandard

    rng = random.Random(seed)
    out = [line({"type": "session", "session_id": "big", "cwd": CWD, "started_at": "2026-12-01T09:00:00Z"})]
    out += [line({"type": "message", "session_id": "big", "message_id": f"m{i}", "turn_id": "t", "role": "user",
                  "ts": "2026-12-01T10:00:00Z", "text": f"{tag}word{i} {rng.getrandbits(128):032x}"})
            for i in range(1, n_lines)]
    return zstandard.ZstdCompressor().compress(b"".join(out))


@pytest.mark.parametrize("change", ["rewrite_in_place", "delete"])
def test_a_zst_log_changed_while_it_is_decompressed_is_counted(change, tmp_path, originals):
    src = tmp_path / "logs"
    src.mkdir()
    small_logs(src)
    big = src / "m-big.jsonl.zst"
    big.write_bytes(zst_log("original", 30_000, 1))
    original = originals(big.name, big.read_bytes())
    target = str(big.resolve())
    seen: list[int] = []

    def progress(path: str, done: int, total: int) -> None:
        if path != target:
            return
        seen.append(done)
        if len(seen) == 3:
            if change == "delete":
                big.unlink()
            else:  # the decompressor's next read is of another stream, from its middle
                with open(big, "r+b") as fh:
                    fh.write(zst_log("rewritten", 40_000, 2))

    reason = "vanished_file" if change == "delete" else "rewritten_while_read"
    with Index.open(tmp_path / "r.db") as ix:
        report = Syncer(ix.store, progress=progress, batch_lines=2_000).run([str(src)])
        assert len(seen) == 3 and report.skipped.get(reason) == 1, report.skipped
        assert "corrupt_zst" not in report.skipped
        assert ix.status()["skipped"].get(reason) == 1
        during = messages(ix)
        for sid in ("before", "after"):
            assert of_session(during, sid) == of_session(original, sid)
        assert all(original[k] == v for k, v in of_session(during, "big").items())
        check_converged(ix, src, tmp_path, rewrite_in_place if change != "delete" else delete, reason,
                        None if change == "delete" else big, during, original)
