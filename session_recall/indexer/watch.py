"""The watcher: reconcile everything at start, then mirror changes as they come.

watchdog's handler only enqueues paths (it runs on the observer's thread); the
main thread, which owns the database connection, drains the queue after a short
debounce and syncs just those files. The debounce waits from the first event,
not the last, so a log that is written to continuously is still synced every
`debounce` seconds. Moves and deletions trigger a reconcile of their source,
which is where renames are recognised. A periodic reconcile covers events the
OS dropped. The target of a symlinked folder or log in a source is watched
too (its events named by the path through the link). Stopping (SIGINT/SIGTERM,
or `stop()`) takes effect between batches.

Sources that come while it watches are added without a restart: a folder
handed over by `recall index PATH` (which cannot write while the watcher holds
the writer lock: it appends the path to `<db>.handover`, and the watcher takes
it within a second), and, for a watch of the known sources, a harness folder
that appears after the start (`discover`, asked every DISCOVER_EVERY_S). While
it runs, `<db>.watch` holds its pid, so that `recall index` knows whom to
hand a source to.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import orjson
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ..store import Store
from .files import DEFAULT_LIMITS, Limits, is_log
from .sync import Syncer, SyncReport

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.1
RECONCILE_EVERY_S = 300.0
# A database's commit becomes visible to its readers when its writer updates
# the WAL index (`-shm`, through shared memory: no file event), after the
# frames are written to the `-wal` file whose event woke the watcher. A pass
# that ran in between found nothing new, and no event follows. So a database
# that a pass opened (it had changed) is looked at again this long after that
# pass, then this long after the next look, and so on; a look that finds it
# unchanged costs two stats and a read of 96 bytes (files.database_stat), and
# one that finds a change starts the series again.
SETTLE_S = (0.2, 1.0, 4.0)
DISCOVER_EVERY_S = 2.0


def _marker(db: str | os.PathLike[str]) -> Path:
    p = Path(db).expanduser().resolve()
    return p.with_name(p.name + ".watch")


def _handover(db: str | os.PathLike[str]) -> Path:
    p = Path(db).expanduser().resolve()
    return p.with_name(p.name + ".handover")


def watcher_pid(db: str | os.PathLike[str]) -> int | None:
    """The pid of the `recall watch` that keeps the database at `db` current,
    if one runs."""
    try:
        pid = int(_marker(db).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def hand_over(db: str | os.PathLike[str], sources: list[tuple[str, str]]) -> None:
    """Give (path, kind) sources to the running watcher of `db`."""
    with _locked(_handover(db)) as fd:
        os.write(fd, b"".join(orjson.dumps({"path": p, "kind": k}) + b"\n" for p, k in sources))


def take_handed(db: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The sources handed over since the last call (and forget them)."""
    path = _handover(db)
    if not path.exists():
        return []
    with _locked(path) as fd:
        data = path.read_bytes()
        os.ftruncate(fd, 0)
    out = []
    for line in data.splitlines():
        with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
            obj = orjson.loads(line)
            out.append((str(obj["path"]), str(obj["kind"])))
    return out


class _Enqueue(FileSystemEventHandler):
    def __init__(self, watcher: Watcher, alias: tuple[str, str] | None = None):
        self.watcher = watcher
        # (real, link): this handler watches the target of a symlinked folder
        # or log of a source; its events are named by the path through the
        # link (under the source), and events beside a linked log are not its.
        self.alias = alias

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [os.fsdecode(event.src_path)]
        if getattr(event, "dest_path", ""):
            paths.append(os.fsdecode(event.dest_path))
        if self.alias is not None:
            real, link = self.alias
            paths = [link + p[len(real):] for p in paths if p == real or p.startswith(real + "/")]
            if not paths:
                return
        # A database in WAL mode is written through its `-wal` file.
        paths = [p.removesuffix("-wal") for p in paths]
        # A folder's "modified" comes with every write closed in it: only folders
        # created, moved or deleted need a reconcile (a file event names the file).
        structural = event.event_type in ("moved", "deleted") or (
            event.is_directory and event.event_type != "modified")
        self.watcher.enqueue([p for p in paths if is_log(p) or structural], structural)


class Watcher:
    def __init__(self, store: Store, paths: list[str] | None, kind: str = "auto", *,
                 debounce: float = DEBOUNCE_S, reconcile_every: float = RECONCILE_EVERY_S,
                 on_sync: Callable[[SyncReport], None] | None = None, limits: Limits = DEFAULT_LIMITS,
                 discover: Callable[[], list[tuple[str, str]]] | None = None,
                 on_source: Callable[[str, str], None] | None = None):
        self.store = store
        # Sources that may appear while it watches (harness folders created
        # later); `on_source(path, kind)` is told of every source added.
        self.discover = discover
        self.on_source = on_source
        self.extra: list[tuple[str, str]] = []  # sources added while watching explicit paths
        self._scheduled: set[str] = set()
        self._linked: set[tuple[str, str]] = set()  # (link, real) watched through _watch_link
        self._observer: BaseObserver | None = None
        self._next_discover = 0.0
        self.limits = limits
        # Passes that failed (logged, then the watch went on).
        self.failures = 0
        self.paths = paths
        self.kind = kind
        self.debounce = debounce
        self.reconcile_every = reconcile_every
        self.on_sync = on_sync
        self._dirty: set[str] = set()
        self._reconcile = False
        # database path -> (index into SETTLE_S of its next look, when it is due)
        self._settle: dict[str, tuple[int, float]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._syncer: Syncer | None = None

    def enqueue(self, paths: list[str], structural: bool = False) -> None:
        with self._cond:
            self._dirty.update(paths)
            self._reconcile = self._reconcile or structural
            self._cond.notify()

    def stop(self) -> None:
        self._stop.set()
        if self._syncer is not None:
            self._syncer.stop_requested = True
        with self._cond:
            self._cond.notify()

    def _sync(self, fn) -> None:
        """One pass. A pass that fails (what a file does is counted within
        the pass; this is for anything else) is rolled back, logged and
        counted, and the watch goes on: the next reconcile retries it. Only
        a database that can no longer be written to stops the watch."""
        self._syncer = Syncer(self.store, limits=self.limits)
        if self._stop.is_set():
            return
        try:
            report = fn(self._syncer)
            for link, real in self._syncer.links:
                self._watch_link(link, real)
            for path in self._syncer.databases_read:
                self._settle[path] = (0, time.monotonic() + SETTLE_S[0])
        except (apsw.FullError, apsw.CorruptError, apsw.NotADBError, apsw.ReadOnlyError):
            raise
        except Exception:
            # Not retried at once (a pass that fails every time would spin):
            # the periodic reconcile, or the file's next change, retries it.
            self.failures += 1
            log.exception("a sync pass failed; the watch goes on and the next reconcile retries it")
            return
        if self.on_sync:
            self.on_sync(report)

    def _wait_s(self) -> float:
        """How long the loop may sleep with nothing queued: a second, or until
        the next look at a database (SETTLE_S)."""
        if not self._settle:
            return 1.0
        return max(0.0, min(1.0, min(at for _, at in self._settle.values()) - time.monotonic()))

    def _looks_due(self) -> list[str]:
        """The databases whose next look is due, each moved on to the look
        after it (or off the list after the last). A look that finds a change
        is a read, which starts its series again (`_sync`)."""
        now = time.monotonic()
        due = [path for path, (_, at) in self._settle.items() if at <= now]
        for path in due:
            i = self._settle[path][0] + 1
            if i < len(SETTLE_S):
                self._settle[path] = (i, now + SETTLE_S[i])
            else:
                del self._settle[path]
        return due

    def _schedule(self, root: str) -> bool:
        """Watch `root` (a folder, or a file's folder) unless it is watched or absent."""
        target = root if os.path.isdir(root) else os.path.dirname(root)
        if target in self._scheduled or not os.path.isdir(target) or self._observer is None:
            return False
        self._observer.schedule(_Enqueue(self), target, recursive=True)
        self._scheduled.add(target)
        return True

    def _watch_link(self, link: str, real: str) -> None:
        """Watch the target of a symlinked folder (or log) of a source:
        inotify reports a write only in the folder that holds the file, not
        through a link to it (watchdog does not follow links by default, and
        following them everywhere would walk into loops)."""
        if (link, real) in self._linked or self._observer is None:
            return
        folder = os.path.isdir(real)
        target = real if folder else os.path.dirname(real)
        if not os.path.isdir(target):
            return
        with contextlib.suppress(OSError):  # gone, or not ours to watch: the periodic reconcile covers it
            self._observer.schedule(_Enqueue(self, (real, link)), target, recursive=folder)
            self._linked.add((link, real))
            # The pass that found the link read its logs before this watch
            # began: a write in between raised no event here, so its logs are
            # looked at once more (a log unchanged since costs a stat).
            self.enqueue([os.path.join(d, f) for d, _, names in os.walk(link) for f in names] if folder
                         else [link])

    def _reconcile_all(self, s: Syncer) -> SyncReport:
        report = s.run(self.paths, self.kind)
        for path, kind in self.extra:
            report = s.run([path], kind)
        return report

    def _add_sources(self) -> None:
        """Take the sources handed over, and those that appeared (a harness
        folder created after the start, a known source whose folder was
        absent): register, watch and sync each one."""
        new = take_handed(self.store.path)
        if self.discover is not None and time.monotonic() >= self._next_discover:
            self._next_discover = time.monotonic() + DISCOVER_EVERY_S
            known = [(row[0], row[1]) for row in self.store.conn.execute("SELECT path, kind FROM sources")]
            # (A source may be a file: the database $OPENCODE_DB names.)
            new += [(p, k) for p, k in self.discover() + known if os.path.exists(p)]
        for path, kind in new:
            real = os.path.realpath(os.path.expanduser(path))
            if not os.path.exists(real):
                continue
            fresh = self._schedule(real)
            known_row = self.store.conn.execute("SELECT 1 FROM sources WHERE path = ?", (real,)).fetchone()
            if not fresh and known_row:
                continue  # watched and registered already
            if self.paths and (real, kind) not in self.extra:
                self.extra.append((real, kind))
            self._sync(lambda s, p=real, k=kind: s.run([p], k))
            if self.on_source:
                self.on_source(real, kind)

    def run(self) -> None:
        with self.store.writer():
            marker = _marker(self.store.path)
            marker.write_text(f"{os.getpid()}\n")
            # Watch first, then reconcile: a change made while the reconcile
            # runs is then queued, not lost until the next periodic reconcile.
            if self.paths:
                roots = [os.path.realpath(os.path.expanduser(p)) for p in self.paths]
            else:
                roots = [row[0] for row in self.store.conn.execute("SELECT path FROM sources ORDER BY id")]
            observer = self._observer = Observer()
            for root in roots:
                self._schedule(root)
            observer.start()
            try:
                self._sync(self._reconcile_all)
                last_reconcile = time.monotonic()
                while not self._stop.is_set():
                    self._add_sources()
                    with self._cond:
                        if not self._dirty and not self._reconcile:
                            self._cond.wait(timeout=self._wait_s())
                    if self._stop.is_set():
                        break
                    due = time.monotonic() - last_reconcile >= self.reconcile_every
                    looks = self._looks_due()
                    if not self._dirty and not self._reconcile and not due and not looks:
                        continue
                    if self._dirty or self._reconcile:
                        time.sleep(self.debounce)  # let the writer finish its burst
                    with self._cond:
                        dirty, self._dirty = self._dirty, set()
                        reconcile, self._reconcile = self._reconcile or due, False
                    if reconcile:
                        self._sync(self._reconcile_all)
                        last_reconcile = time.monotonic()
                    else:
                        self._sync(lambda s: s.sync_files(sorted(dirty | set(looks))))
            finally:
                with contextlib.suppress(OSError):
                    marker.unlink()
                observer.stop()
                observer.join(timeout=5)
