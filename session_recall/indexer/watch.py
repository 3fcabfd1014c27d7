"""The watcher: reconcile everything at start, then mirror changes as they come.

watchdog's handler only enqueues paths (it runs on the observer's thread); the
main thread, which owns the database connection, drains the queue after a short
debounce and syncs just those files. The debounce waits from the first event,
not the last, so a log that is written to continuously is still synced every
`debounce` seconds. Moves and deletions trigger a reconcile of their source,
which is where renames are recognised. A periodic reconcile covers events the
OS dropped. Stopping (SIGINT/SIGTERM, or `stop()`) takes effect between batches.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import apsw
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..store import Store
from .files import DEFAULT_LIMITS, Limits, is_log
from .sync import Syncer, SyncReport

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.1
RECONCILE_EVERY_S = 300.0


class _Enqueue(FileSystemEventHandler):
    def __init__(self, watcher: Watcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [os.fsdecode(event.src_path)]
        if getattr(event, "dest_path", ""):
            paths.append(os.fsdecode(event.dest_path))
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
                 on_sync: Callable[[SyncReport], None] | None = None, limits: Limits = DEFAULT_LIMITS):
        self.store = store
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

    def run(self) -> None:
        with self.store.writer():
            # Watch first, then reconcile: a change made while the reconcile
            # runs is then queued, not lost until the next periodic reconcile.
            if self.paths:
                roots = [os.path.realpath(os.path.expanduser(p)) for p in self.paths]
            else:
                roots = [row[0] for row in self.store.conn.execute("SELECT path FROM sources ORDER BY id")]
            observer = Observer()
            for root in roots:
                target = root if os.path.isdir(root) else os.path.dirname(root)
                if os.path.isdir(target):
                    observer.schedule(_Enqueue(self), target, recursive=True)
            observer.start()
            try:
                self._sync(lambda s: s.run(self.paths, self.kind))
                last_reconcile = time.monotonic()
                while not self._stop.is_set():
                    with self._cond:
                        if not self._dirty and not self._reconcile:
                            self._cond.wait(timeout=1.0)
                    if self._stop.is_set():
                        break
                    due = time.monotonic() - last_reconcile >= self.reconcile_every
                    if not self._dirty and not self._reconcile and not due:
                        continue
                    time.sleep(self.debounce)  # let the writer finish its burst
                    with self._cond:
                        dirty, self._dirty = self._dirty, set()
                        reconcile, self._reconcile = self._reconcile or due, False
                    if reconcile:
                        self._sync(lambda s: s.run(self.paths, self.kind))
                        last_reconcile = time.monotonic()
                    else:
                        self._sync(lambda s: s.sync_files(sorted(dirty)))
            finally:
                observer.stop()
                observer.join(timeout=5)
