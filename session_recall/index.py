"""The Python API (contract §9): open an index, sync it, ask it."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from .config import Settings, configured_sources, default_db, default_sources, load_settings
from .doctor import doctor
from .indexer.files import Limits
from .indexer.sources import default_folders
from .indexer.sync import KINDS, Progress, Syncer, SyncReport
from .model import Envelope
from .query.engine import Engine, Located
from .query.gates import Confirm, Scope, project_of_recorded, project_roots, why_wide
from .query.passages import parse_anchor
from .query.retrieve import Filters, Run
from .rows import one
from .store import NotAnIndex, Store, WriterBusy
from .text.redact import find_secret

if TYPE_CHECKING:
    from .indexer.watch import Watcher

__all__ = ["KINDS", "Index", "Match", "NotAnIndex", "WriterBusy"]


def _existing(paths: list[str]) -> list[str]:
    """`paths`, each of which must exist (FileNotFoundError names the first that does not)."""
    for p in paths:
        if not os.path.exists(os.path.expanduser(p)):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", p)
    return paths


@dataclass
class Match:
    """One message matching a query (Index.search)."""

    message_id: str
    role: str
    ts: str | None
    text: str
    attachments: list[dict]
    score: float


class Index:
    # The kinds of log a source may be (`auto` detects each file's kind).
    KINDS = KINDS

    def __init__(self, store: Store, settings: Settings):
        self.store = store
        self.settings = settings
        # Queries read through the store's read connection; the engine
        # registers its SQL functions there, once.
        self.engine = Engine(store.reader, settings)
        self._syncer: Syncer | None = None
        self._first_use_unfinished = False  # the first build ran out of its budget

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, settings: Settings | None = None,
             config: str | os.PathLike[str] | None = None) -> Index:
        """Open (creating or migrating) the index database."""
        settings = settings or load_settings(config)
        return cls(Store(path or default_db()), settings)

    @classmethod
    def doctor(cls, path: str | os.PathLike[str] | None = None, *, repair: bool = False,
               settings: Settings | None = None, config: str | os.PathLike[str] | None = None) -> dict:
        """Check the database (SQLite's and FTS5's integrity checks, on a
        connection of its own, without opening it as an index); with
        `repair`, move a damaged one aside and rebuild it from its sources.
        The report is described in session_recall.doctor."""
        return doctor(path or default_db(), settings or load_settings(config), repair=repair)

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    @property
    def path(self) -> Path:
        """The index database."""
        return self.store.path

    # --- indexing ---------------------------------------------------------------

    @property
    def limits(self) -> Limits:
        """What one log may cost to read, from the settings."""
        return Limits.of(self.settings)

    def configured_sources(self) -> list[tuple[str, str]]:
        """Sources from the settings, as (path, kind)."""
        return configured_sources(self.settings)

    def default_sources(self) -> tuple[str, list[tuple[str, str]]]:
        """What `index` and `watch` read when given no path (config.default_sources)."""
        return default_sources(self.settings)

    def register_default_sources(self) -> tuple[str, list[tuple[str, str]]]:
        """Register default_sources() so that a sync or watch of known sources includes them."""
        origin, sources = self.default_sources()
        if sources:
            Syncer(self.store).register(sources)
        return origin, sources

    def sync(self, paths: list[str] | str | None = None, kind: str = "auto", *,
             prune: bool = False, progress: Progress | None = None) -> SyncReport:
        """One incremental sync of `paths` (registered as sources), or, given
        none, of the default sources (default_sources()) and every source the
        index already knows. A path that does not exist raises
        FileNotFoundError before anything is registered."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [str(paths)]
        if paths:
            _existing(paths)
        if not paths:
            self.register_default_sources()
        syncer = Syncer(self.store, progress=progress, limits=self.limits)
        self._syncer = syncer
        try:
            return syncer.run(paths, kind, prune=prune)
        finally:
            self._syncer = None

    def watcher(self, paths: list[str] | None, kind: str = "auto", *,
                on_sync: Callable[[SyncReport], None] | None = None,
                on_source: Callable[[str, str], None] | None = None) -> Watcher:
        """A watcher of `paths` (else of every known source, and of the
        harness folders that appear while it runs) that keeps this index
        current: `run()` reconciles, then mirrors changes until `stop()`.
        Sources handed over by `hand_to_watcher` join it; `on_source(path,
        kind)` is told of each source added while it runs."""
        from .indexer.watch import Watcher  # watchdog only for those who watch

        if paths:
            _existing(paths)
        discover = None if paths else (lambda: self.default_sources()[1])
        return Watcher(self.store, paths, kind, on_sync=on_sync, limits=self.limits, discover=discover,
                       on_source=on_source)

    def watcher_pid(self) -> int | None:
        """The pid of the `recall watch` keeping this index current, if one runs."""
        from .indexer.watch import watcher_pid

        return watcher_pid(self.path)

    def hand_to_watcher(self, paths: list[str], kind: str = "auto") -> None:
        """Give sources to the running watcher (which holds the writer lock):
        it registers, indexes and watches them within a second or two."""
        from .indexer.watch import hand_over

        hand_over(self.path, [(os.path.realpath(os.path.expanduser(p)), kind) for p in _existing(paths)])

    def source_indexed_at(self, path: str) -> str | None:
        """When the source at `path` was last indexed (None: never, or unknown)."""
        row = self.store.reader.execute("SELECT last_indexed_at FROM sources WHERE path = ?",
                                        (os.path.realpath(os.path.expanduser(path)),)).fetchone()
        return row[0] if row else None

    # --- sources and projects ---------------------------------------------------

    def sources(self) -> list[dict]:
        """The registered sources (path, kind, files, missing_files,
        last_indexed_at), each marked `configured` when the config names it
        (a removed configured source comes back with the next `recall index`)."""
        configured = {os.path.realpath(p) for p, _ in self.configured_sources()}
        return [{**s, "configured": s["path"] in configured} for s in self.status()["sources"]]

    def add_source(self, path: str, kind: str = "auto") -> str:
        """Register an existing folder or file as a source, without reading it."""
        (real,) = [os.path.realpath(os.path.expanduser(p)) for p in _existing([path])]
        Syncer(self.store).register([(real, kind)])
        return real

    def remove_source(self, path: str) -> bool:
        """Stop indexing the source at `path` (as registered, or as written).
        The sessions read from it stay searchable, as those of a deleted log
        do. False when no such source is registered."""
        candidates = [path, os.path.realpath(os.path.expanduser(path))]
        with self.store.writer(), self.store.atomic():
            row = None
            for p in candidates:
                row = self.store.conn.execute("SELECT id FROM sources WHERE path = ?", (p,)).fetchone()
                if row:
                    break
            if row is None:
                return False
            sid = row[0]
            # Its files read as deleted logs: their messages survive (a rebuild
            # keeps them, `--prune` forgets them), and adding the source again
            # takes the files back where they were read to (Syncer.register).
            self.store.conn.execute("DELETE FROM file_skips WHERE file_id IN "
                                    "(SELECT id FROM files WHERE source_id = ?)", (sid,))
            self.store.conn.execute("UPDATE files SET missing = 1 WHERE source_id = ?", (sid,))
            self.store.conn.execute("DELETE FROM source_problems WHERE source_id = ?", (sid,))
            self.store.conn.execute("DELETE FROM sources WHERE id = ?", (sid,))
        return True

    def projects(self) -> list[dict]:
        """The indexed projects: each root (the top of the git work tree that
        holds a session's recorded cwd, else that cwd), its sessions and
        their last activity, most recent first: the roots to pass as `cwd`.
        The allow- and denylists apply as to every search: a session they keep
        out (or its twin, docs/recall.md) is in no project listed."""
        by_root: dict[str, dict] = {}
        with self.store.reader:
            # (the SQL of an all-projects search's scope: the lists and the twin rule)
            listed, params = self.engine.retriever.scope_sql(Scope("all", "/"))
            rows = list(self.store.reader.execute(
                "SELECT s.cwd, count(*), max(coalesce(s.updated_at, s.started_at)) FROM sessions s "
                f"WHERE 1 = 1{listed} GROUP BY s.cwd", params))
        for cwd, n, last in rows:
            root = project_of_recorded(cwd)
            p = by_root.setdefault(root, {"root": root, "sessions": 0, "last_activity": None})
            p["sessions"] += n
            if last and (p["last_activity"] is None or last > p["last_activity"]):
                p["last_activity"] = last
        return sorted(by_root.values(), key=lambda p: (p["last_activity"] or "", p["root"]), reverse=True)

    def stop(self) -> None:
        """Ask a running sync to stop after its current batch."""
        if self._syncer is not None:
            self._syncer.stop_requested = True

    def _first_use(self) -> dict[str, str]:
        """An empty index with known sources is built before answering, within
        the first-use budget; the gaps say how far it got."""
        if not self.store.is_empty() and not self._first_use_unfinished:
            return {}
        known = self.store.counts()["sources"]
        if not known and not self.default_sources()[1]:
            return {}
        cut = threading.Event()  # the budget ran out and stopped the pass

        def out_of_time() -> None:
            if self._syncer is not None:
                cut.set()
            self.stop()

        timer = threading.Timer(self.settings.first_use_budget_s, out_of_time)
        timer.start()
        try:
            self.sync(None)
        except WriterBusy:
            return {"first_use": "the index is empty and another process is building it; ask again shortly"}
        except Exception as e:  # noqa: BLE001 - the answer must still come: an empty index, and why
            # Hostile logs are counted inside the pass; this is anything else,
            # and the caller (an agent's tool call) gets an envelope, not a
            # trace. Only the exception's type: its message may quote a log.
            return {"first_use": f"the index is empty and building it failed ({type(e).__name__}); "
                                 "the user can run `recall index` to see why"}
        finally:
            timer.cancel()
        # Only a pass the budget cut short has files left to read: one that
        # finished read every file it could (an empty log, or one whose only
        # line waits for its newline, is read to its end; a damaged one is
        # counted by `recall status`), and asking again would not change them.
        pending = self.store.files_pending() if cut.is_set() else 0
        # A long-lived caller (the MCP server) goes on building on its next calls.
        self._first_use_unfinished = bool(pending)
        if pending:
            return {"first_use": f"the index was empty; it was built for {self.settings.first_use_budget_s:g}s "
                                 f"before answering and {pending} files are not indexed yet: ask again to "
                                 "search more of them (the user can run `recall index` to finish)"}
        return {}

    def _empty_index_hint(self) -> str:
        """What an empty index says to whoever asked (a model, often): where
        logs were looked for, and what the user can do; no path to guess."""
        looked = ", ".join(p for p, _ in default_folders())
        return ("The index is empty and no session logs were found to build it from, so nothing was searched "
                f"(no sources configured; looked for the harnesses' folders: {looked}). Tell the user: add the "
                "folder of their session logs as [[sources]] in the session-recall config, or run "
                "`recall index` with it once.")

    # --- asking -----------------------------------------------------------------

    @staticmethod
    def secret_in(text: str) -> str | None:
        """The kind of secret `text` holds, if any: such a query is refused."""
        return find_secret(text)

    @staticmethod
    def is_anchor(anchor: str) -> bool:
        """Whether `anchor` is shaped like a passage's anchor_id."""
        return bool(parse_anchor(anchor))

    @staticmethod
    def wide_scope(cwd: str, caller_cwd: str) -> str | None:
        """Why a search of `cwd` reaches beyond the project of `caller_cwd`
        (`/`, the home folder, a folder above it), which makes it an
        all-projects search for the policy; None when it does not."""
        return why_wide(project_roots(cwd), project_roots(caller_cwd))

    def recall(self, query: str = "", question: str | None = None, all_projects: bool = False,
               cwd: str | None = None, session_id: str | None = None, limit: int | None = None,
               cursor: str | None = None, *, caller_session: str | None = None,
               confirm: Confirm | None = None, caller_cwd: str | None = None, for_model: bool = False,
               roles: Iterable[str] = (), sources: Iterable[str] = (), since: str | None = None,
               until: str | None = None) -> Envelope:
        """Ranked, gated passages for `query` (terms ANDed) and/or `question`.
        `caller_cwd`: where the caller stands (default: this process's
        directory); a `cwd` at or above its project is an all-projects search.
        `for_model`: shorter passages, and a page whose JSON fits a model's
        tool result (docs/recall.md, "Passages"). Filters, exact (applied in
        the SQL of every engine): `roles` of the matching message, `sources`
        (kinds) of its session, and its own timestamp from `since`
        (inclusive) to `until` (exclusive), ISO 8601 instants."""
        refused = self.engine.refusal(query, question)
        if refused is not None:  # before first use could read (or build) anything
            return refused
        gaps = self._first_use()
        env = self.engine.recall(query, question, all_projects=all_projects, cwd=cwd, session_id=session_id,
                                 limit=limit, cursor=cursor, caller_session=caller_session, confirm=confirm,
                                 caller_cwd=caller_cwd, for_model=for_model,
                                 filters=Filters(tuple(roles), tuple(sources), since, until), screened=True)
        env.gaps.update(gaps)
        if env.status == "empty_index" and not gaps:  # (a gap says why a build did not fill it)
            env.hint = self._empty_index_hint()
        return env

    def recall_more(self, anchor: str, *, cwd: str | None = None, all_projects: bool = False,
                    caller_session: str | None = None, confirm: Confirm | None = None,
                    caller_cwd: str | None = None) -> Envelope:
        """Widen one passage (by its anchor_id) to its whole turn."""
        return self.engine.recall_more(anchor, cwd=cwd, all_projects=all_projects, caller_session=caller_session,
                                       confirm=confirm, caller_cwd=caller_cwd)

    def locate_session(self, session: str, *, cwd: str | None = None, all_projects: bool = False,
                       confirm: Confirm | None = None, caller_cwd: str | None = None) -> Located:
        """The session that `session` (an id, or a unique prefix of one) names,
        wherever it lives, under the gates and the all_projects policy
        (Engine.locate_session); `.session_id` is its full id, or None with a
        status and hint."""
        return self.engine.locate_session(session, cwd=cwd, all_projects=all_projects, confirm=confirm,
                                          caller_cwd=caller_cwd)

    def show(self, session: str, *, cwd: str | None = None, all_projects: bool = False,
             confirm: Confirm | None = None, caller_cwd: str | None = None,
             caller_session: str | None = None) -> Envelope:
        """A whole session (an id, or a unique prefix of one), every message in
        order, redacted, in scope: one result whose passage is the session."""
        located = self.locate_session(session, cwd=cwd, all_projects=all_projects, confirm=confirm,
                                      caller_cwd=caller_cwd)
        return self.show_located(located, caller_session=caller_session)

    def show_located(self, located: Located, *, caller_session: str | None = None) -> Envelope:
        """show() of what locate_session() found; with nothing found, the
        envelope of its status and hint."""
        return self.engine.show(located, caller_session=caller_session)

    def search(self, query: str, limit: int = 10, *, roles: Iterable[str] = (), sources: Iterable[str] = (),
               since: str | None = None, until: str | None = None) -> list[tuple[Match, dict]]:
        """Every message matching all terms of `query` in all projects, best
        first, with its session: the same retrieval as recall (its filters
        too), without gates, passages or quotas (for scripts and tests)."""
        terms = self.engine.tokenizer.parse(query)
        out: list[tuple[Match, dict]] = []
        if not terms:
            return out
        c = self.store.reader
        run = Run(filters=Filters(tuple(roles), tuple(sources), since, until))
        for hit in self.engine.retriever.hits(terms, Scope("all", "/"), run,
                                              first=self.engine.ranking.fts_first_page):
            role, mid, ts, text, atts = one(c.execute(
                "SELECT role, message_id, ts, text, attachments FROM messages WHERE id = ?", (hit.rowid,)))
            out.append((Match(mid, role, ts, text, orjson.loads(atts) if atts else [], hit.score), self.session(hit.session)))
            if len(out) >= limit:
                break
        return out

    def session(self, rowid: int) -> dict:
        row = one(self.store.reader.execute(
            "SELECT source, cwd, session_id, coalesce(title, prompt), started_at FROM sessions WHERE id = ?", (rowid,)
        ))
        return dict(zip(("source", "cwd", "session_id", "title", "started_at"), row))

    def status(self) -> dict:
        """What the index holds: sessions, messages, skipped lines by reason,
        sources, versions, and what is owed (Store.status)."""
        return self.store.status()
