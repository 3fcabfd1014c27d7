"""The Python API (contract §9): open an index, sync it, ask it."""

from __future__ import annotations

import os
from pathlib import Path

from .config import default_db
from .indexer.sync import Progress, Syncer, SyncReport
from .query.retrieve import Hit, Retriever
from .store import Store


class Index:
    def __init__(self, store: Store):
        self.store = store
        self._retriever = Retriever(store.conn)
        self._syncer: Syncer | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Index:
        """Open (creating or migrating) the index database."""
        return cls(Store(path or default_db()))

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # --- indexing ---------------------------------------------------------------

    def sync(self, paths: list[str] | str | None = None, kind: str = "auto", *,
             prune: bool = False, progress: Progress | None = None) -> SyncReport:
        """One incremental sync of `paths` (registered as sources), or of every
        source the index already knows."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [str(paths)]
        syncer = Syncer(self.store, progress=progress)
        self._syncer = syncer
        try:
            return syncer.run(paths, kind, prune=prune)
        finally:
            self._syncer = None

    def stop(self) -> None:
        """Ask a running sync to stop after its current batch."""
        if self._syncer is not None:
            self._syncer.stop_requested = True

    # --- asking -----------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[tuple[Hit, dict]]:
        """Messages matching every term of `query`, best first, with their session."""
        terms = self._retriever.parse(query)
        out = []
        if not terms:
            return out
        for hit in self._retriever.matches(terms):
            out.append((hit, self.session(hit.session)))
            if len(out) >= limit:
                break
        return out

    def session(self, rowid: int) -> dict:
        row = self.store.conn.execute(
            "SELECT source, cwd, session_id, title, started_at FROM sessions WHERE id = ?", (rowid,)
        ).fetchone()
        return dict(zip(("source", "cwd", "session_id", "title", "started_at"), row))

    def status(self) -> dict:
        c = self.store.conn
        skipped = dict(c.execute("SELECT reason, sum(count) FROM file_skips GROUP BY reason ORDER BY reason"))
        sources = [
            {"path": p, "kind": k, "files": n, "missing_files": miss, "last_indexed_at": at}
            for p, k, n, miss, at in c.execute(
                "SELECT s.path, s.kind, count(f.id), coalesce(sum(f.missing), 0), s.last_indexed_at "
                "FROM sources s LEFT JOIN files f ON f.source_id = s.id GROUP BY s.id ORDER BY s.id"
            )
        ]
        db = Path(self.store.path)
        return {
            "db": str(db),
            "db_bytes": sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists()),
            "sessions": c.execute("SELECT count(*) FROM sessions").fetchone()[0],
            "messages": c.execute("SELECT count(*) FROM messages").fetchone()[0],
            "streaming": c.execute("SELECT count(*) FROM messages WHERE settled = 0").fetchone()[0],
            "skipped": skipped,
            "sources": sources,
            **self.store.versions(),
            "stale": self.store.stale_versions(),
        }
