"""One incremental pass: bring the index level with a set of source paths.

Per file the index keeps a byte offset, a signature of the prefix already read,
and the parser's state at that offset. Appends are read from the offset; a file
that shrank or whose prefix changed is re-read from the start (its messages
replaced); a changed `.zst` is re-read whole. Each batch is one transaction that
also advances the offset, the parser state and the skip counts, so a kill at
any point loses nothing and duplicates nothing: the next pass resumes at the
last committed offset.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import gc
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import apsw
import orjson
import zstandard

from ..migrations import recreate_fts
from ..rows import one
from ..store import Group, Store, utcnow
from ..text.redact import REDACTOR_VERSION, Redactor
from ..text.tokens import TOKENIZER_VERSION
from . import files as F
from . import pipeline as P
from .ingest import Writer, fts_body, held_tails
from .project import PROJECTION_VERSION, strip_escapes
from .sources import SourceBusy, detect_database, detect_kind, kind_names, kinds

log = logging.getLogger(__name__)

KINDS = kind_names()  # the registry of source kinds: indexer/sources
BATCH_LINES = 20_000
BATCH_BYTES = 16 << 20
DETECT_LINES = 8
# A pass that added at least this many messages, and at least half of all the
# index holds, ends with an FTS5 optimize (Sync._optimize_after_bulk).
OPTIMIZE_MIN_ADDED = 10_000
# FTS5 merges the segments of a level once it holds `automerge` of them (4 by
# default), and it writes a segment at every savepoint: one a batch. A large
# read ends in an optimize that merges everything anyway (or leaves the
# merging to later writes), so merging at 4 rewrites the same postings once
# per level on the way. While a pass reads at least P.WORKER_MIN_BYTES, levels
# merge at 16 instead (FTS5's most, its crisis merge); after it, at 4 again.
# The value lives in the FTS5 table's config, so a pass that stopped midway
# leaves 16 behind: every pass sets it back first (Sync._grouped).
# A 250 MB `mixed` build, alternated three times: the writer's CPU 30.5 ->
# 27.8 s (medians, 0.91x), the postings the same.
AUTOMERGE = 4
AUTOMERGE_BULK = 16
# Python's cyclic garbage collector runs each time 700 more container objects
# are alive than at its last run. A large pass holds the batches the worker
# unpickles here until they are written (hundreds of thousands of events,
# each a few containers), so a 250 MB `mixed` build ran 1,165 collections in
# the writer (0.45 s, and more inside the unpickling), which found no garbage
# at all: its objects are freed by their reference counts. While a pass reads
# at least P.WORKER_MIN_BYTES, the collector waits for this many instead; a
# pass that did make cyclic garbage still has it collected, later.
GC_BULK_THRESHOLD = 100_000
_gc_lock = threading.Lock()
_gc_users = 0
_gc_before: tuple[int, ...] = ()


@contextlib.contextmanager
def _collect_less():
    """GC_BULK_THRESHOLD as the collector's first threshold while any large
    pass of this process runs; the thresholds before, once the last ends."""
    global _gc_users, _gc_before
    with _gc_lock:
        if _gc_users == 0:
            _gc_before = gc.get_threshold()
            gc.set_threshold(max(GC_BULK_THRESHOLD, _gc_before[0]), *_gc_before[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0:
                gc.set_threshold(*_gc_before)


def _written(path: str) -> tuple[int, str]:
    """A log's modification time (0 if it cannot be read now: its error is
    counted where it is read), then its path."""
    try:
        return os.stat(path).st_mtime_ns, path
    except OSError:
        return 0, path


@dataclass
class SyncReport:
    sources: list[dict] = field(default_factory=list)
    files: int = 0
    files_read: int = 0
    files_reset: int = 0
    files_missing: int = 0
    files_renamed: int = 0
    bytes_read: int = 0
    lines: int = 0
    messages_added: int = 0
    messages_updated: int = 0
    # Messages a log took back (a Gemini CLI rewind): gone from the index.
    messages_forgotten: int = 0
    secrets_redacted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    rebuilt: bool = False
    # Deleted means gone (Store.wipe): messages forgotten (pruned, replaced
    # by a rewritten log, dropped by a rebuild) whose tokens and text were
    # then wiped from the FTS5 segments, freed pages and the WAL; whether the
    # file was VACUUMed; the seconds it took; and `wipe_pending`, true when it
    # could not finish (a reader held an old snapshot) and the next pass owes it.
    wiped: int = 0
    vacuumed: bool = False
    wipe_s: float = 0.0
    wipe_pending: bool = False
    elapsed_s: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


Progress = Callable[[str, int, int], None]  # (path, bytes done in this file, bytes of this file)


@dataclass
class ReadJob:
    """A file to read from `offset`, decided before any of it is read.

    `expect` is what the file must still be for what is read to continue what
    the index holds: for a plain file, the signature of its first `offset`
    bytes as they were consumed; for a `.zst`, its identity (size, head and
    tail) when the read was decided."""

    fid: int
    kind: str
    path: str
    offset: int
    state: dict
    st: os.stat_result
    expect: str | None = None


class Syncer:
    def __init__(self, store: Store, *, progress: Progress | None = None,
                 batch_lines: int = BATCH_LINES, batch_bytes: int = BATCH_BYTES,
                 limits: F.Limits = F.DEFAULT_LIMITS):
        self.store = store
        self.limits = limits
        self.conn = store.conn
        self.progress = progress
        self.batch_lines = batch_lines
        self.batch_bytes = batch_bytes
        self.redactor = Redactor(bytes.fromhex(store.meta("redaction_key") or ""))
        self.writer = Writer(self.conn, self.redactor, held_tails(store))
        self.report = SyncReport()
        self.skipped: Counter[str] = Counter()
        self.stop_requested = False
        self._group: Group | None = None  # the open Store.group() of a pass
        self.parallel = True  # a worker process for large passes (pipeline.py)
        # Symlinked folders and logs met in the sources listed by this pass,
        # as (path through the link, real path): the watcher watches them.
        self.links: list[tuple[str, str]] = []
        # Databases this pass opened because they changed: the watcher looks
        # at them again (watch.SETTLE_S).
        self.databases_read: list[str] = []

    # --- entry points -----------------------------------------------------------

    def run(self, paths: list[str] | None, kind: str = "auto", *, prune: bool = False) -> SyncReport:
        """Sync the given paths (registering them as sources), or every known source."""
        t0 = time.perf_counter()
        with self.store.writer():
            with self._grouped():
                if self.store.stale_versions():
                    self.rebuild()
                sources = self._sources(paths, kind)
                for source_id, source_path, source_kind in sources:
                    if self.stop_requested:
                        break
                    self._sync_source(source_id, source_path, source_kind, prune=prune)
            if not self.stop_requested:
                if self.store.wipe_owed() == (0, False):
                    self._optimize_after_bulk()
                self._wipe()  # it optimizes too
        r = self.report
        r.skipped = dict(sorted(self.skipped.items()))
        r.messages_added = self.writer.counts["messages_added"]
        r.messages_updated = self.writer.counts["messages_updated"]
        r.messages_forgotten = self.writer.counts["messages_forgotten"]
        r.secrets_redacted = self.writer.counts["secrets_redacted"]
        r.elapsed_s = round(time.perf_counter() - t0, 3)
        return r

    def sync_files(self, paths: list[str]) -> SyncReport:
        """Sync only these files (the watcher's path): each under its known source."""
        t0 = time.perf_counter()
        problems: Counter[str] = Counter()  # a log not yet readable, say created but still empty
        with self.store.writer():
            with self._grouped():
                for path in paths:
                    real = os.path.realpath(path)
                    # A log behind a symlinked folder is under its source by the
                    # path through the link, and recorded by its real path.
                    src = self._source_of(os.path.abspath(path)) or self._source_of(real)
                    if src is None:
                        continue
                    source_id, _source_path, source_kind = src
                    if os.path.exists(real):
                        self.report.files += self._sync_file(source_id, source_kind, real, problems)
                    else:
                        with self.store.atomic():
                            self.conn.execute("UPDATE files SET missing = 1 WHERE path = ?", (real,))
            self._wipe()  # a rewritten log replaced its messages
        self.skipped.update(problems)
        self.report.skipped = dict(sorted(self.skipped.items()))
        self.report.messages_added = self.writer.counts["messages_added"]
        self.report.messages_updated = self.writer.counts["messages_updated"]
        self.report.messages_forgotten = self.writer.counts["messages_forgotten"]
        self.report.elapsed_s = round(time.perf_counter() - t0, 3)
        return self.report

    def _wipe(self) -> None:
        """Before the pass says it is done: if messages were deleted (by this
        pass, or by one that crashed before it could wipe), leave none of
        their bytes in the database, its WAL or its FTS5 segments."""
        done = self.store.wipe()
        if done is None:
            return
        r = self.report
        r.wiped += done["messages"]
        r.vacuumed = r.vacuumed or done["vacuumed"]
        r.wipe_s = round(r.wipe_s + done["seconds"], 3)
        r.wipe_pending = not done["complete"]

    def _optimize_after_bulk(self) -> None:
        """Merge the FTS5 index into one segment after a pass that wrote most
        of it (a first build, a rebuild): the many segments a bulk insert
        leaves cost space and a seek each per query term. Costs about 1.5 s
        per 100,000 messages; smaller passes leave merging to automerge."""
        added = self.writer.counts["messages_added"]
        if added < OPTIMIZE_MIN_ADDED:
            return
        total = self.store.counts()["messages"]
        if 2 * added >= total:
            with self.store.atomic():
                self.conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")

    # --- transactions -----------------------------------------------------------

    @contextlib.contextmanager
    def _grouped(self):
        """Batches of small files share a transaction (see Store.group);
        each batch is still all or nothing with its offsets. What is open when
        the pass ends is committed; on an error it is rolled back."""
        self._pending = 0
        try:
            with self.store.group() as self._group:
                self._automerge(AUTOMERGE)
                yield
        except BaseException:
            self.writer.forget()
            self.writer.held.clear()  # what they continue was rolled back
            raise
        finally:
            self._group = None

    def _automerge(self, level: int) -> None:
        """FTS5's automerge from now on (AUTOMERGE); written only when it
        changes, so a pass with nothing to do writes nothing."""
        now = one(self.conn.execute(
            "SELECT coalesce((SELECT v FROM message_fts_config WHERE k = 'automerge'), ?)", (AUTOMERGE,)))[0]
        if now != level:
            self.conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('automerge', ?)", (level,))

    def _open_group(self) -> Group:
        """The group of the pass under way (only asked for inside one)."""
        assert self._group is not None, "no pass under way"
        return self._group

    def _batch_done(self, lines: int, nbytes: int) -> None:
        """Count a batch into the open group; commit the group when it is full."""
        self._pending += max(lines, nbytes // 200)
        if self._pending >= self.batch_lines or nbytes >= self.batch_bytes:
            self._open_group().commit()
            self._pending = 0

    # --- sources ----------------------------------------------------------------

    def register(self, sources: list[tuple[str, str]]) -> None:
        """Record (path, kind) pairs as sources, without reading them."""
        for _, kind in sources:
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        with self.store.writer(), self.store.atomic():
            for p, kind in sources:
                real = os.path.realpath(os.path.expanduser(p))
                self.conn.execute(
                    "INSERT INTO sources(path, kind, added_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(path) DO UPDATE SET kind = excluded.kind",
                    (real, kind, utcnow()),
                )
                # Files of a source removed earlier (Index.remove_source) come back to it.
                self.conn.execute(
                    "UPDATE files SET source_id = (SELECT id FROM sources WHERE path = ?1) "
                    "WHERE source_id NOT IN (SELECT id FROM sources) AND (path = ?1 OR substr(path, 1, length(?1) + 1) = ?1 || '/')",
                    (real,),
                )

    def _sources(self, paths: list[str] | None, kind: str) -> list[tuple[int, str, str]]:
        if paths:
            self.register([(p, kind) for p in paths])
            wanted = [os.path.realpath(os.path.expanduser(p)) for p in paths]
            rows = [one(self.conn.execute("SELECT id, path, kind FROM sources WHERE path = ?", (p,))) for p in wanted]
        else:
            rows = list(self.conn.execute("SELECT id, path, kind FROM sources ORDER BY id"))
        return [tuple(r) for r in rows]

    def _source_of(self, real: str) -> tuple[int, str, str] | None:
        best = None
        for sid, spath, skind in self.conn.execute("SELECT id, path, kind FROM sources"):
            if real == spath or real.startswith(spath.rstrip("/") + "/"):
                if best is None or len(spath) > len(best[1]):
                    best = (sid, spath, skind)
        return best

    def _sync_source(self, source_id: int, source_path: str, kind: str, *, prune: bool) -> None:
        problems: Counter[str] = Counter()
        found = F.discover(source_path, problems, self.links)
        known = {
            row[0]: row
            for row in self.conn.execute(
                "SELECT path, id, dev, ino, offset, prefix_hash FROM files WHERE source_id = ?", (source_id,)
            )
        }
        found_real = {os.path.realpath(p): p for p in found}
        gone = {p: row for p, row in known.items() if p not in found_real}
        # A new path whose inode and consumed prefix match a vanished file is
        # that file renamed: move its record rather than read it twice.
        for real in found_real:
            if real in known or not gone:
                continue
            try:
                st = os.stat(real)
            except OSError:
                continue
            for old_path, row in list(gone.items()):
                _, fid, dev, ino, offset, phash = row
                try:
                    same = (dev, ino) == (st.st_dev, st.st_ino) and (
                        F.is_zst(real) or st.st_size >= offset and F.prefix_hash(real, offset) == phash)
                except OSError:
                    same = False
                if same:
                    with self.store.atomic():
                        self.conn.execute("UPDATE files SET path = ?, missing = 0 WHERE id = ?", (real, fid))
                    del gone[old_path]
                    self.report.files_renamed += 1
                    break
        if gone:
            with self.store.atomic():
                for old_path, row in gone.items():
                    if prune:
                        self._delete_file_messages(row[1])
                        self.conn.execute("DELETE FROM file_skips WHERE file_id = ?", (row[1],))
                        self.conn.execute("DELETE FROM files WHERE id = ?", (row[1],))
                    else:
                        self.conn.execute("UPDATE files SET missing = 1 WHERE id = ?", (row[1],))
                if prune:
                    self.conn.execute(
                        "DELETE FROM sessions WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.session = sessions.id)"
                    )
            self.report.files_missing += len(gone)
        n_files = 0
        jobs: list[ReadJob] = []
        # The files' rows (a first pass adds one per log) are written in the
        # group's transaction, not one transaction each.
        self._open_group().join()
        # Oldest first (by modification time, then path), so message row ids
        # follow the time logs were written in (the query plan reads the
        # newest row ids first: docs/recall.md).
        for real in sorted(found_real, key=_written):
            if self.stop_requested:
                break
            n_files += self._sync_file(source_id, kind, real, problems, jobs)
        self._read_jobs(jobs, problems)
        self.skipped.update(problems)
        with self.store.atomic():
            self.conn.execute("UPDATE sources SET last_indexed_at = ? WHERE id = ?", (utcnow(), source_id))
            if not self.stop_requested:  # a pass cut short has not seen the whole source
                self.conn.execute("DELETE FROM source_problems WHERE source_id = ?", (source_id,))
                for reason, n in problems.items():
                    self.conn.execute("INSERT INTO source_problems(source_id, reason, count) VALUES (?, ?, ?)",
                                      (source_id, reason, n))
        self.report.sources.append({"path": source_path, "kind": kind, "files": n_files})
        self.report.files += n_files

    # --- one file ---------------------------------------------------------------

    def _sync_file(self, source_id: int, source_kind: str, path: str, problems: Counter[str],
                   jobs: list[ReadJob] | None = None) -> int:
        """Bring one file level (or, given `jobs`, queue what is to be read);
        return 1 if it is a log of a known kind, else 0."""
        with self._file_errors(problems):
            st = os.stat(path)
            row = self.conn.execute(
                "SELECT id, kind, size, mtime_ns, dev, ino, offset, prefix_hash, state, missing "
                "FROM files WHERE path = ?",
                (path,),
            ).fetchone()
            if row is None:
                kind = source_kind if source_kind != "auto" else self._detect(path)
                if kind is None:  # an empty log waits for its first line; anything else is not a log we know
                    problems["empty_file" if st.st_size == 0 else "unknown_kind"] += 1
                    return 0
                with self.store.atomic():
                    fid = one(self.conn.execute(
                        "INSERT INTO files(path, source_id, kind, dev, ino) VALUES (?, ?, ?, ?, ?) RETURNING id",
                        (path, source_id, kind, st.st_dev, st.st_ino),
                    ))[0]
                row = (fid, kind, -1, -1, None, None, 0, None, None, 0)
            fid, kind, size, mtime_ns, dev, ino, offset, phash, state, missing = row
            if missing:
                with self.store.atomic():
                    self.conn.execute("UPDATE files SET missing = 0 WHERE id = ?", (fid,))
            if F.is_database(path):
                self._sync_database(fid, kind, path, (size, mtime_ns, phash), state, problems)
                return 1
            # Unchanged size, mtime and inode: nothing to read. A log replaced
            # by another file (written beside it, renamed over it) is a new
            # inode even when size and mtime happen to match.
            if (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino) == (size, mtime_ns, dev, ino):
                return 1
            if F.is_zst(path):
                ident = expect = F.file_identity(path, st.st_size)
                if phash is None:  # a first read (or one after a rebuild): nothing to replace
                    with self.store.atomic():
                        self.conn.execute("UPDATE files SET prefix_hash = ? WHERE id = ?", (ident, fid))
                elif ident != phash:
                    self._reset(fid, prefix=ident)
                    offset, state = 0, None
            elif st.st_size < offset or (offset and (F.is_document(path) or F.prefix_hash(path, offset) != phash)):
                # (A document, read whole, that changed at all is read again whole.)
                self._reset(fid, prefix=None)
                offset, state, expect = 0, None, None
            else:
                expect = phash if offset else None
            job = ReadJob(fid, kind, path, offset, orjson.loads(state) if state else {}, st, expect)
            if jobs is None:
                self._read_jobs([job], problems)
            else:
                jobs.append(job)
            return 1
        return 0

    def _sync_database(self, fid: int, kind: str, path: str, seen: tuple[int, int, str | None],
                       state: str | None, problems: Counter[str]) -> None:
        """A source that is an SQLite database: what changed since the state
        saved with it, read by its kind (never written), one transaction a
        batch with the state after it. Unchanged (with its write-ahead log and
        the commits its readers can see, `F.database_stat`: kept as the
        file's size, mtime_ns and prefix_hash), it is not opened."""
        with self._file_errors(problems):
            sig = F.database_stat(path)  # before the read: a commit after it is read by the next pass
            if sig == seen:
                return
            self.databases_read.append(path)
            st = os.stat(path)
            for events, new_state, skips in kinds()[kind].read_database(path, orjson.loads(state) if state else {}):
                self._open_group().join()
                try:
                    with self.store.atomic():
                        if events:
                            self.store.bump_generation()
                        self.writer.apply(kind, fid, events)
                        skips.update(self.writer.skips)
                        self.writer.skips.clear()
                        self.conn.execute("UPDATE files SET state = ? WHERE id = ?",
                                          (orjson.dumps(new_state).decode(), fid))
                        for reason, n in skips.items():
                            self.conn.execute(
                                "INSERT INTO file_skips(file_id, reason, count) VALUES (?, ?, ?) "
                                "ON CONFLICT(file_id, reason) DO UPDATE SET count = count + excluded.count",
                                (fid, reason, n))
                except BaseException:
                    self.writer.forget()
                    raise
                self.skipped.update(skips)
                self._batch_done(len(events), 0)
                self.report.lines += len(events)
                if self.stop_requested:
                    return
            with self.store.atomic():
                # (Its offset is its size: read to the end, nothing waits, as `recall status` counts it.)
                self.conn.execute(
                    "UPDATE files SET size = ?, offset = ?, mtime_ns = ?, prefix_hash = ?, dev = ?, ino = ?, "
                    "indexed_at = ? WHERE id = ?",
                    (sig[0], sig[0], sig[1], sig[2], st.st_dev, st.st_ino, utcnow(), fid))
            self.report.files_read += 1

    def _detect(self, path: str) -> str | None:
        """The kind of a log from its first lines. A damaged `.zst` is
        detected from the lines before its damage (which its read then
        counts); with none, the damage is this file's problem."""
        first: list[bytes] = []
        if F.is_database(path):
            return detect_database(path)
        if F.is_document(path):  # its first "line" is all of it
            with open(path, "rb") as fh:
                head = fh.read(self.limits.max_line_bytes + 1)
            return detect_kind([head]) if len(head) <= self.limits.max_line_bytes else None
        try:
            for line, _ in F.read_lines(path, 0):
                first.append(line)
                if len(first) >= DETECT_LINES:
                    break
        except F.Damaged:
            kind = detect_kind(first)
            if kind is None:
                raise
            return kind
        return detect_kind(first)

    def _delete_file_messages(self, fid: int) -> None:
        """What the index holds from this log: its messages, and the titles it
        gave sessions by a message id (LeafTitleEvent)."""
        self.conn.execute("DELETE FROM message_fts WHERE rowid IN (SELECT id FROM messages WHERE file_id = ?)", (fid,))
        self.conn.execute("DELETE FROM messages WHERE file_id = ?", (fid,))
        self.conn.execute("DELETE FROM leaf_titles WHERE file_id = ?", (fid,))

    def _reset(self, fid: int, *, prefix: str | None) -> None:
        """The file was rewritten: what it held is replaced by what it holds now."""
        with self.store.atomic():
            self._delete_file_messages(fid)
            self.conn.execute("DELETE FROM file_skips WHERE file_id = ?", (fid,))
            self.conn.execute(
                "UPDATE files SET offset = 0, state = NULL, prefix_hash = ?, size = -1, mtime_ns = -1 WHERE id = ?",
                (prefix, fid),
            )
        self.writer.forget()
        self.report.files_reset += 1

    def _read_jobs(self, jobs: list[ReadJob], problems: Counter[str]) -> None:
        """Read the files of a pass: in this process, or, when there is much to
        read, with a worker process making the batches (pipeline.py) while this
        one commits them, one range ahead."""
        todo = sum(max(0, j.st.st_size - j.offset) for j in jobs)
        bulk = todo >= P.WORKER_MIN_BYTES
        if bulk:
            self._automerge(AUTOMERGE_BULK)
        with _collect_less() if bulk else contextlib.nullcontext():
            left = self._read_in_worker(jobs, problems) if bulk and self.parallel else jobs
            if left:
                # Below the threshold (or with no worker); or the worker process
                # died (killed, out of memory): the file it was reading is counted
                # (file_error; the next pass resumes it from its committed offset)
                # and the files not yet started are read here, so that one file
                # cannot cost the others their pass.
                self._read_here(left, problems)
        if bulk:  # an error leaves it for the next pass to set back
            self._automerge(AUTOMERGE)

    def _read_here(self, jobs: list[ReadJob], problems: Counter[str]) -> None:
        for job in jobs:
            if self.stop_requested:
                return
            with self._file_errors(problems, job):
                for batch in P.batches(job.path, job.kind, job.offset, job.state, self.redactor.key,
                                       batch_lines=self.batch_lines, batch_bytes=self.batch_bytes,
                                       expect=job.expect, limits=self.limits):
                    self._commit(job, batch)
                    if self.stop_requested:
                        return
                self._finish(job)

    def _read_in_worker(self, jobs: list[ReadJob], problems: Counter[str]) -> list[ReadJob]:
        """The worker's half of _read_jobs; returns the jobs not started
        when the worker process died (none if it did not)."""
        key = self.redactor.key

        def submit(job: ReadJob, offset: int, state: dict, expect: str | None) -> cf.Future:
            span = float("inf") if F.is_zst(job.path) else P.RANGE_BYTES  # a .zst cannot seek
            # For a .zst, `expect` is its identity: a reader that meets damage
            # tells a file written again meanwhile from a damaged one by it.
            return pool.submit(P.read_range, job.path, job.kind, offset, state, key,
                               self.batch_lines, self.batch_bytes, span, expect, self.limits)

        def first_range(job: ReadJob) -> int:  # bytes of log (a .zst is read whole)
            left = max(0, job.st.st_size - job.offset)
            return left if F.is_zst(job.path) else min(left, P.RANGE_BYTES)

        pending = deque(jobs)
        # Reads queued on the worker, in file order: the next range of the
        # file being committed first, then the first ranges of the next files
        # (up to P.LOOKAHEAD_BYTES of log), so neither process waits for the
        # other where files differ in size. Files are still committed one
        # after another.
        ahead: deque[tuple[ReadJob, cf.Future]] = deque()
        queued = 0  # bytes of log in `ahead`
        with P.worker_pool() as pool:
            def fill() -> None:
                nonlocal queued
                while pending and (not ahead or queued + first_range(pending[0]) <= P.LOOKAHEAD_BYTES):
                    job = pending[0]
                    future = submit(job, job.offset, job.state, job.expect)
                    pending.popleft()
                    queued += first_range(job)
                    ahead.append((job, future))

            following: cf.Future | None = None  # the next range of `job`
            try:
                fill()
                while (following or ahead) and not self.stop_requested:
                    if following is None:
                        job, future = ahead.popleft()
                        queued -= first_range(job)
                    else:
                        future, following = following, None
                    fill()
                    out: list[P.Batch] = []
                    done, failed = True, True
                    with self._file_errors(problems, job):
                        out, done = future.result()
                        failed = False
                    if not done and not failed:  # queued now, so the worker reads it while this commits
                        following = submit(job, out[-1].end, out[-1].state, out[-1].sig)
                    committed = False
                    # The file can vanish or change between its read and its commit.
                    with self._file_errors(problems, job):
                        for batch in out:
                            self._commit(job, batch)
                            if self.stop_requested:
                                break
                        committed = True
                    if not committed and following is not None:
                        # Its next range starts past what was not committed: drop
                        # it; the next pass resumes at the committed offset.
                        following.cancel()
                        following = None
                    if done and not failed and committed and not self.stop_requested:
                        with self._file_errors(problems, job):
                            self._finish(job)
            except BrokenProcessPool:
                log.warning("the parsing worker died; the files not started are read in this process",
                            exc_info=True)
                problems["file_error"] += 1  # the file it was reading
                if following is not None:
                    following.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                return [j for j, _ in ahead] + list(pending)
            pool.shutdown(cancel_futures=True)
        return []

    @contextlib.contextmanager
    def _file_errors(self, problems: Counter[str], job: ReadJob | None = None):
        """A file that cannot be read, or that changes while it is read, is
        counted, and the pass goes on. What was committed of it stays; the
        next pass finds out from the file what to do with it (read on,
        re-read it, or keep its sessions if it is gone)."""
        try:
            yield
        except PermissionError:
            problems["unreadable_file"] += 1
        except FileNotFoundError:
            problems["vanished_file"] += 1  # deleted or renamed since it was listed, or while it was read
        except (F.FileChanged, F.Damaged, SourceBusy) as e:
            problems[e.reason] += 1
        except zstandard.ZstdError:
            # A .zst written again while it was decompressed reads as garbage.
            problems[F.REWRITTEN if job is not None and self._zst_changed(job) else "corrupt_zst"] += 1
        except (apsw.Error, KeyboardInterrupt, SystemExit, cf.CancelledError, BrokenProcessPool):
            raise  # the database's problem, a stop, or the worker's death: not this file's
        except RecursionError:
            problems["too_deep"] += 1
            log.warning("reading %s failed; counted as too_deep", job.path if job else "a file", exc_info=True)
        except MemoryError:
            problems["too_large"] += 1
            log.warning("reading %s failed; counted as too_large", job.path if job else "a file", exc_info=True)
        except Exception:
            # Whatever else a file does to its reader (a bug a line found, a
            # worker process that died), it is this file's problem only: it
            # is counted and the other files and sources go on.
            problems["file_error"] += 1
            log.warning("reading %s failed; counted as file_error", job.path if job else "a file", exc_info=True)

    @staticmethod
    def _zst_changed(job: ReadJob) -> bool:
        try:
            return F.file_identity(job.path, os.stat(job.path).st_size) != job.expect
        except OSError:
            return True

    def _check_unchanged(self, job: ReadJob, end: int, sig: str | None) -> None:
        """Raise FileChanged unless the plain file still holds what was read
        of it up to `end` (whose signature, as read, is `sig`);
        FileNotFoundError if it is gone. (A `.zst` is read whole through one
        open file, and any change to it makes the next pass read it again
        whole: its identity, stored from before this read, no longer matches.
        Only whether it is still there is checked.)"""
        if F.is_zst(job.path):
            os.stat(job.path)
            return
        if end and F.prefix_hash(job.path, end) != sig:
            now = os.stat(job.path)
            replaced = (now.st_dev, now.st_ino) != (job.st.st_dev, job.st.st_ino)
            raise F.FileChanged(F.TRUNCATED if now.st_size < end and not replaced else F.REWRITTEN)

    def _commit(self, job: ReadJob, batch: P.Batch) -> None:
        """One batch, one transaction (or savepoint of the open group): its
        messages, its skip counts, the offset and parser state after it."""
        self._open_group().join()
        skips = batch.skips
        try:
            self._commit_batch(job, batch, skips)
        except BaseException:
            self.writer.forget()  # its caches may name rows the savepoint undid
            raise
        self.skipped.update(skips)
        self._batch_done(batch.lines, batch.nbytes)
        self.report.bytes_read += batch.nbytes
        self.report.lines += batch.lines
        if self.progress:
            self.progress(job.path, batch.end, job.st.st_size)

    def _commit_batch(self, job: ReadJob, batch: P.Batch, skips: Counter[str]) -> None:
        # Before anything is written: a batch read from a file that has since
        # been truncated or written again is not what the file holds (and its
        # signature must not vouch for what it holds now).
        self._check_unchanged(job, batch.end, batch.sig)
        with self.store.atomic():
            if batch.events:
                # Every committed batch moves the generation on: a recall
                # cursor made before it knows it may no longer page the same ranking.
                self.store.bump_generation()
            self.writer.apply(job.kind, job.fid, batch.events)
            skips.update(self.writer.skips)
            self.writer.skips.clear()
            state = orjson.dumps(batch.state).decode()
            if F.is_zst(job.path):
                self.conn.execute("UPDATE files SET offset = ?, state = ? WHERE id = ?", (batch.end, state, job.fid))
            else:
                self.conn.execute("UPDATE files SET offset = ?, state = ?, prefix_hash = ? WHERE id = ?",
                                  (batch.end, state, batch.sig, job.fid))
            for reason, n in skips.items():
                self.conn.execute(
                    "INSERT INTO file_skips(file_id, reason, count) VALUES (?, ?, ?) "
                    "ON CONFLICT(file_id, reason) DO UPDATE SET count = count + excluded.count",
                    (job.fid, reason, n),
                )

    def _finish(self, job: ReadJob) -> None:
        """The file was read to its last complete line: remember what it was,
        unless it changed meanwhile (then the next pass looks at it again)."""
        st = job.st
        # Its last batch was checked against the file as it was committed; a
        # file that shrank while it was read (where the reader met the end
        # early, or a tail not yet consumed was cut) is counted too, and its
        # stat not stored, so that the next pass checks its prefix.
        now = os.stat(job.path)
        if now.st_size < st.st_size and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            raise F.FileChanged(F.TRUNCATED)
        with self.store.atomic():
            self.conn.execute(
                "UPDATE files SET size = ?, mtime_ns = ?, dev = ?, ino = ?, indexed_at = ? WHERE id = ?",
                (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, utcnow(), job.fid),
            )
        self.report.files_read += 1

    # --- versions ---------------------------------------------------------------

    def rebuild(self) -> None:
        """The tokenizer, redactor or projection changed: derive everything again.

        Files still on disk are re-read from the start. Messages whose file is
        gone (harnesses delete old transcripts; the index is where they survive)
        are projected again (what a newer projection drops from text already
        projected: terminal escapes), re-redacted and re-tokenized from their
        stored text, and so are titles, attachment ids and the session,
        message and turn ids."""
        with self.store.atomic():
            # A file deleted since the last pass is not yet marked missing; its
            # messages must survive like those of any deleted file, not be
            # dropped in the expectation of a re-read that cannot happen.
            for fid, path in list(self.conn.execute("SELECT id, path FROM files WHERE missing = 0")):
                if not os.path.exists(path):
                    self.conn.execute("UPDATE files SET missing = 1 WHERE id = ?", (fid,))
            recreate_fts(self.conn)
            self.conn.execute(
                "DELETE FROM messages WHERE file_id IS NULL OR file_id IN (SELECT id FROM files WHERE missing = 0)"
            )
            self.conn.execute("DELETE FROM file_skips WHERE file_id IN (SELECT id FROM files WHERE missing = 0)")
            self.conn.execute(
                "DELETE FROM leaf_titles WHERE file_id IS NULL OR file_id IN (SELECT id FROM files WHERE missing = 0)")
            # A session with nothing left is named again by the logs read
            # again (with today's rules: a summary that named it by mistake
            # does not any more); one that keeps messages of a gone log keeps
            # its names.
            self.conn.execute("UPDATE sessions SET title = NULL, title_rank = 0, prompt = NULL WHERE NOT EXISTS "
                              "(SELECT 1 FROM messages m WHERE m.session = sessions.id)")
            self.conn.execute(
                "UPDATE files SET offset = 0, state = NULL, prefix_hash = NULL, size = -1, mtime_ns = -1 WHERE missing = 0"
            )
            # Ids are shown: one holding a secret becomes its keyed hash, as the
            # writer stores it (the logs read again map theirs the same way).
            key = self.redactor.redact_key
            for rowid, sid in list(self.conn.execute("SELECT id, session_id FROM sessions")):
                if key(sid) != sid:
                    self.conn.execute("UPDATE OR IGNORE sessions SET session_id = ? WHERE id = ?", (key(sid), rowid))
            for source, leaf in list(self.conn.execute("SELECT source, leaf FROM leaf_titles")):
                if key(leaf) != leaf:
                    self.conn.execute("UPDATE OR IGNORE leaf_titles SET leaf = ? WHERE source = ? AND leaf = ?",
                                      (key(leaf), source, leaf))
            for rowid, text, atts, mid, tid, ts in list(self.conn.execute(
                    "SELECT id, text, attachments, message_id, turn_id, ts FROM messages")):
                text, _ = self.redactor.redact(strip_escapes(text), keep_placeholders=True)
                names = []
                if atts:
                    items = orjson.loads(atts)
                    for a in items:
                        a["name"], _ = self.redactor.redact(a["name"], keep_placeholders=True)
                        a["id"], _ = self.redactor.redact_id(a["id"])
                        if self.redactor.holds_secret(a.get("mime_type") or ""):
                            a["mime_type"] = "application/octet-stream"
                        names.append(a["name"])
                    atts = orjson.dumps(items).decode()
                body, nfkc, ntok = fts_body(text, names)
                ts = "" if ts and self.redactor.holds_secret(ts) else ts
                self.conn.execute("UPDATE messages SET text = ?, attachments = ?, nfkc = ?, ntok = ?, turn_id = ?, "
                                  "ts = ? WHERE id = ?", (text, atts, int(nfkc), ntok, key(tid or ""), ts, rowid))
                if key(mid) != mid:
                    self.conn.execute("UPDATE OR IGNORE messages SET message_id = ? WHERE id = ?", (key(mid), rowid))
                self.conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (rowid, body))
            # Titles too: a session whose file is gone keeps the title it had.
            for sid, title, prompt in list(self.conn.execute(
                    "SELECT id, title, prompt FROM sessions WHERE title IS NOT NULL OR prompt IS NOT NULL")):
                new, _ = self.redactor.redact(strip_escapes(title), keep_placeholders=True) if title else (None, 0)
                newp, _ = self.redactor.redact(strip_escapes(prompt), keep_placeholders=True) if prompt else (None, 0)
                if (new, newp) != (title, prompt):
                    self.conn.execute("UPDATE sessions SET title = ?, prompt = ? WHERE id = ?", (new, newp, sid))
            for source, leaf, title in list(self.conn.execute("SELECT source, leaf, title FROM leaf_titles")):
                new, _ = self.redactor.redact(strip_escapes(title), keep_placeholders=True)
                if new != title:
                    self.conn.execute("UPDATE leaf_titles SET title = ? WHERE source = ? AND leaf = ?",
                                      (new, source, leaf))
            # Their token counts changed with them (the writer keeps the
            # totals of what it writes; this pass wrote around it).
            self.conn.execute(
                "UPDATE sessions SET n_messages = (SELECT count(*) FROM messages WHERE session = sessions.id), "
                "n_tokens = (SELECT coalesce(sum(ntok), 0) FROM messages WHERE session = sessions.id)")
            self.store.set_meta("tokenizer_version", str(TOKENIZER_VERSION))
            self.store.set_meta("redactor_version", str(REDACTOR_VERSION))
            self.store.set_meta("projection_version", str(PROJECTION_VERSION))
            self.conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
            # The kept messages were re-redacted in place: their old text is in
            # freed space of pages not zeroed on older databases, and the old
            # FTS5 table's pages were dropped; the end of the pass VACUUMs.
            self.store.owe_vacuum()
        self.writer.forget()
        self.report.rebuilt = True
