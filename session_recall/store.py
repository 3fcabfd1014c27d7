"""The one object that owns the database: its connections, pragmas,
transactions, migrations on open, recorded versions, meta, and the
single-writer lock.

Two roles, two connections (datasette's one write connection and read
connections). `conn` is the write path: migrations, `atomic()` transactions,
`group()` (many small writes in one transaction), the writer lock, the wipe.
`reader` is a read-only connection for queries and counts; the query engine
registers its SQL functions on it once. The indexer and the query receive the
Store; neither opens a connection of its own.

Readers and the writer may live in different processes. WAL lets readers go on
reading the last committed state while the writer commits, so a reader never
waits on the writer; the busy timeout covers the short checkpoint windows.
Only one process may write: `writer()` takes an exclusive advisory lock on a
file beside the database and refuses a second writer, naming the holder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import apsw

from . import migrations
from .config import ConfigError
from .indexer.project import PROJECTION_VERSION
from .rows import one
from .text.redact import REDACTOR_VERSION
from .text.tokens import TOKENIZER_VERSION

BUSY_TIMEOUT_MS = 5000


class WriterBusy(RuntimeError):
    """Another process holds the writer lock of this database."""


class NotAnIndex(ConfigError):
    """The database file named is an SQLite database of something else (a
    wrong `--db`): it is never migrated into. A configuration error: the
    setting names the wrong file."""


SQLITE_HEADER = b"SQLite format 3\x00"
# What the first migration creates, in one transaction with its record.
_INDEX_TABLES = {"_migrations", "meta", "sessions", "messages", "message_fts"}


def foreign_tables(path: Path) -> list[str] | None:
    """The tables of the SQLite database at `path` when it is not a
    session-recall index; None when it is one, or may become one: no file,
    an empty file, a database without tables, or one with only the record
    of migrations that an interrupted first open left (and None for a file
    that is not SQLite at all, or cannot be read: the damage checks say what
    it is). Read on a read-only connection of its own, before anything
    writes."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != SQLITE_HEADER:
                return None
    except OSError:
        return None
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if tables <= {"_migrations"}:
            return None
        if tables >= _INDEX_TABLES and conn.execute(
                "SELECT 1 FROM _migrations WHERE name = 'm001_initial'").fetchone():
            return None
        return sorted(tables)
    except apsw.Error:
        return None
    finally:
        conn.close()


def refuse_foreign(path: Path) -> None:
    """Raise NotAnIndex when `path` is an SQLite database of something else."""
    tables = foreign_tables(path)
    if tables is not None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise NotAnIndex(
            f"{path} is an SQLite database but not a session-recall index (its tables: {shown}); recall never "
            "writes into another program's database. Give --db (or RECALL_DB) a new file or an existing index.")


def _private(path: Path) -> None:
    """A new index is readable by its owner alone: it holds every
    conversation. Its folder, when created here, is 0700; the file is created
    0600 before SQLite opens it, and SQLite gives its WAL and shm files the
    database's mode. A folder that exists keeps its mode. An index file that
    others may read (made before this rule) becomes 0600, with its WAL and
    shm, when its owner opens it."""
    if not path.parent.is_dir():
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.parent.mkdir(mode=0o700)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    refuse_foreign(path)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(OSError):
            st = p.stat()
            if st.st_uid == os.geteuid() and st.st_mode & 0o077:
                os.chmod(p, st.st_mode & 0o700)


def utcnow() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_generation(conn: apsw.Connection) -> int:
    """The generation as `conn` sees it (the engine asks inside the read
    transaction that answers a query, so the cursor it makes matches)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row else 0


def read_is_empty(conn: apsw.Connection) -> bool:
    """No message indexed (yet), as `conn` sees it."""
    return conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None


class Store:
    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path).expanduser().resolve()
        _private(self.path)
        self.conn = apsw.Connection(str(self.path))
        self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL is durable against a killed process in WAL mode; an OS crash may
        # drop the last commits, but never half of one (offsets commit with data).
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=OFF")
        self.conn.execute("PRAGMA cache_size=-65536")
        # Deleted content is overwritten with zeros (cells, freeblocks and
        # freed pages) instead of lingering in the file; what FTS5 and the
        # WAL still hold is cleared by wipe(). Costs little: see
        # docs/reliability.md, "Deleted means gone".
        self.conn.execute("PRAGMA secure_delete=ON")
        migrations.apply(self.conn)
        self._lock_fd: int | None = None
        self._depth = 0  # open transaction (1) and savepoints within it
        self._reader: apsw.Connection | None = None
        self._ensure_meta()

    @property
    def reader(self) -> apsw.Connection:
        """The read connection (read-only), opened on first use: queries and
        counts. It never takes the write lock, so it never waits on the
        writer's transaction (WAL); it sees what was committed when each of its
        statements (or read transactions) began."""
        if self._reader is None:
            # After migrations (done on `conn`): the schema is there to read.
            reader = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
            reader.set_busy_timeout(BUSY_TIMEOUT_MS)
            reader.execute("PRAGMA cache_size=-65536")
            self._reader = reader
        return self._reader

    # --- meta -----------------------------------------------------------------

    def _ensure_meta(self) -> None:
        keys = ("created_at", "tokenizer_version", "redactor_version", "projection_version", "redaction_key")
        # Every open after the first only reads: a reader must not queue for
        # the write lock behind a writer's batch.
        have = {row[0] for row in self.conn.execute("SELECT key FROM meta")}
        if have >= set(keys):
            return
        # An index built before the projection had a version was built by
        # version 1: it is stale, and the next sync rebuilds it.
        projection = 1 if "tokenizer_version" in have else PROJECTION_VERSION
        with self.atomic():
            for key, value in zip(keys, (utcnow(), str(TOKENIZER_VERSION), str(REDACTOR_VERSION),
                                         str(projection), secrets.token_hex(32))):
                self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def generation(self) -> int:
        """How many batches were committed: a recall cursor made at another
        generation may no longer page the same ranking."""
        return read_generation(self.reader)

    def bump_generation(self) -> None:
        """Inside the transaction of a batch that writes events."""
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def versions(self) -> dict[str, int]:
        return {
            "schema_version": migrations.schema_version(self.conn),
            "tokenizer_version": int(self.meta("tokenizer_version") or 0),
            "redactor_version": int(self.meta("redactor_version") or 0),
            "projection_version": int(self.meta("projection_version") or 0),
        }

    def stale_versions(self) -> bool:
        """True when the index was built by another tokenizer, redactor or
        projection (indexer/project.py)."""
        v = self.versions()
        return (v["tokenizer_version"] != TOKENIZER_VERSION or v["redactor_version"] != REDACTOR_VERSION
                or v["projection_version"] != PROJECTION_VERSION)

    # --- counts -----------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Sessions, messages and sources in the index, as committed."""
        sessions, messages, sources = one(self.reader.execute(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages), "
            "(SELECT count(*) FROM sources)"))
        return {"sessions": sessions, "messages": messages, "sources": sources}

    def is_empty(self) -> bool:
        """No message indexed (yet)."""
        return read_is_empty(self.reader)

    def files_pending(self) -> int:
        """Files of known sources never read to their end (new, or reset)."""
        return one(self.reader.execute("SELECT count(*) FROM files WHERE size < 0 OR offset = 0"))[0]

    def status(self) -> dict:
        """What the index holds (Index.status): counts, skips by reason,
        sources, versions, and what is owed."""
        c = self.reader
        skipped = dict(c.execute(
            "SELECT reason, sum(count) FROM (SELECT reason, count FROM file_skips "
            "UNION ALL SELECT reason, count FROM source_problems) GROUP BY reason ORDER BY reason"))
        sources = [
            {"path": p, "kind": k, "files": n, "missing_files": miss, "last_indexed_at": at}
            for p, k, n, miss, at in c.execute(
                "SELECT s.path, s.kind, count(f.id), coalesce(sum(f.missing), 0), s.last_indexed_at "
                "FROM sources s LEFT JOIN files f ON f.source_id = s.id GROUP BY s.id ORDER BY s.id"
            )
        ]
        # Not skipped but not read yet: a plain log whose last line had no
        # newline when it was last read (its size then is past the offset
        # consumed, which ends at a newline). It is read when the newline comes.
        partial = one(c.execute("SELECT count(*) FROM files WHERE missing = 0 AND size > offset "
                                "AND path NOT LIKE '%.zst'"))[0]
        db = self.path
        return {
            "db": str(db),
            "db_bytes": sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists()),
            "sessions": one(c.execute("SELECT count(*) FROM sessions"))[0],
            "messages": one(c.execute("SELECT count(*) FROM messages"))[0],
            "streaming": one(c.execute("SELECT count(*) FROM messages WHERE settled = 0"))[0],
            "skipped": skipped,
            "waiting": {"partial_last_line": partial} if partial else {},
            "sources": sources,
            **self.versions(),
            "stale": self.stale_versions(),
            # Deleted messages whose bytes the next sync pass still has to wipe
            # (Store.wipe); nonzero only after a pass that could not finish it.
            "wipe_pending": self.wipe_owed()[0],
        }

    # --- deleted means gone -------------------------------------------------------

    def wipe_owed(self) -> tuple[int, bool]:
        """(messages deleted since the last wipe, whether a VACUUM is owed)."""
        owed = dict(self.conn.execute("SELECT what, n FROM wipe_pending"))
        return owed.get("messages", 0), bool(owed.get("vacuum"))

    def owe_vacuum(self) -> None:
        """Inside the transaction that rewrites stored text in place (a rebuild)."""
        self.conn.execute("INSERT OR REPLACE INTO wipe_pending(what, n) VALUES ('vacuum', 1)")

    def wipe(self) -> dict | None:
        """Pay what wipe_owed() says, outside any transaction; None if nothing.

        A contentless_delete FTS5 table only marks a deleted row (a
        tombstone): its tokens stay in the segment pages until a merge
        rewrites them, so `optimize` merges every segment into one without
        them (secure_delete zeroes the pages freed). A VACUUM (owed after a
        rebuild, or by a database older than secure_delete here) rewrites the
        whole file. Then a TRUNCATE checkpoint copies the WAL into the
        database and cuts the WAL to zero bytes, so that no old page image
        survives there either. Only then is the debt cleared: a crash, or a
        reader whose snapshot keeps the checkpoint from finishing, leaves it
        owed for the next pass (the result says `complete: False`)."""
        messages, vacuum = self.wipe_owed()
        if not messages and not vacuum:
            return None
        t0 = time.perf_counter()
        with self.atomic():
            self.conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
        t1 = time.perf_counter()
        if vacuum:
            self.conn.execute("VACUUM")
        t2 = time.perf_counter()
        complete = self._checkpoint_truncate()
        if complete:
            with self.atomic():
                self.conn.execute("DELETE FROM wipe_pending")
            # And that commit's page (of wipe_pending alone); a reader that
            # arrived meanwhile can only keep that page in the WAL.
            self._checkpoint_truncate()
        t3 = time.perf_counter()
        return {"messages": messages, "vacuumed": vacuum, "complete": complete,
                "optimize_s": round(t1 - t0, 4), "vacuum_s": round(t2 - t1, 4),
                "checkpoint_s": round(t3 - t2, 4), "seconds": round(t3 - t0, 4)}

    def _checkpoint_truncate(self) -> bool:
        """True when the whole WAL was checkpointed and truncated to 0 bytes
        (it waits up to the busy timeout for readers on older snapshots)."""
        busy, _log, _done = one(self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        return busy == 0

    # --- transactions -----------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[apsw.Connection]:
        """One write transaction, taken immediately so it never deadlocks on
        upgrade. Inside an open group (Store.group) it is a savepoint: all or
        nothing of it, committed with the group."""
        if self._depth:
            name = f"sp{self._depth}"
            self.conn.execute(f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self.conn.execute(f"ROLLBACK TO {name}")
                self.conn.execute(f"RELEASE {name}")
                raise
            finally:
                self._depth -= 1
            self.conn.execute(f"RELEASE {name}")
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0
        self._finish_transaction("COMMIT")

    def _finish_transaction(self, verb: str) -> None:
        """COMMIT or ROLLBACK; a COMMIT that fails (a full disk) is rolled
        back, so the connection is never left inside a transaction that
        nothing here knows of."""
        try:
            self.conn.execute(verb)
        except BaseException:
            if not self.conn.get_autocommit():
                self.conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def group(self) -> Iterator[Group]:
        """A transaction that several atomic() blocks join, so that many small
        files commit together: every commit costs a WAL write and a new FTS5
        segment (and, sooner or later, its merge). The group's transaction is
        opened where writes start (`Group.join`) and committed when it is full
        (`Group.commit`, which the next join opens again); what is open at the
        end is committed, and on an error rolled back."""
        g = Group(self)
        try:
            yield g
        except BaseException:
            g.commit(commit=False)
            raise
        g.commit()

    # --- the writer lock --------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def writer(self) -> Iterator[Store]:
        """Hold the single-writer lock for the duration; refuse if another has it."""
        if self._lock_fd is not None:  # re-entrant within one process
            yield self
            return
        with writer_lock(self.path) as fd:
            self._lock_fd = fd
            try:
                yield self
            finally:
                self._lock_fd = None

    def check(self) -> list[str]:
        """check_database() of this database (on a connection of its own)."""
        return check_database(self.path)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.conn.close()


class Group:
    """The open transaction of Store.group()."""

    def __init__(self, store: Store):
        self._store = store

    def join(self) -> None:
        """Open the group's transaction unless one is open: the atomic() blocks
        that follow are savepoints of it."""
        store = self._store
        if not store._depth:
            store.conn.execute("BEGIN IMMEDIATE")
            store._depth = 1

    def commit(self, *, commit: bool = True) -> None:
        """Commit (or roll back) the group's transaction, if it is open."""
        store = self._store
        if store._depth == 1:
            store._depth = 0
            store._finish_transaction("COMMIT" if commit else "ROLLBACK")


# Writer locks this process holds, by database path: `recall doctor --repair`
# holds the lock of a damaged database while it builds the new one in its place.
_HELD: dict[Path, int] = {}


@contextlib.contextmanager
def writer_lock(path: str | os.PathLike[str]) -> Iterator[int]:
    """The single-writer lock of the database at `path` (re-entrant within
    this process); WriterBusy names the process that holds it."""
    path = Path(path).expanduser().resolve()
    if path in _HELD:
        yield _HELD[path]
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "an unknown process"
        os.close(fd)
        raise WriterBusy(
            f"{path} is being indexed by {holder}; only one indexer may write at a time "
            "(searches keep working meanwhile). Stop that process or wait for it to finish."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} (since {utcnow()})".encode(), 0)
    _HELD[path] = fd
    try:
        yield fd
    finally:
        del _HELD[path]
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def check_database(path: str | os.PathLike[str]) -> list[str]:
    """What is wrong with the database at `path`, on a fresh connection of
    its own: SQLite's integrity check, then FTS5's check of its index. An
    empty list means healthy. Opens nothing it would have to create. FTS5's
    check runs as a write statement: apsw.BusyError when an indexer holds the
    write lock beyond the busy timeout (that is not damage)."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error as e:
        return [f"cannot open the database: {e}"]
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        problems: list[str] = []
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check(100)")]
            if rows != ["ok"]:
                problems += [f"integrity_check: {r}" for r in rows]
        except apsw.Error as e:
            problems.append(f"integrity_check failed: {e}")
        if conn.readonly("main"):
            # A read-only file (or folder, or file system) is not damage, and
            # FTS5's command cannot run on it; PRAGMA integrity_check above has
            # run FTS5's own check (its xIntegrity, SQLite 3.44 and later).
            return problems
        try:
            # Reads the whole FTS5 index and checks it is consistent with
            # itself (a contentless table has no content to compare it with).
            conn.execute("INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)")
        except apsw.BusyError:
            raise
        except apsw.Error as e:
            problems.append(f"FTS5 integrity-check: {e}")
        return problems
    finally:
        conn.close()
