"""`recall doctor`: check the database, and rebuild a damaged one from its sources.

The index is derived data (contract section 1), so a damaged database is
never patched: `repair` moves it aside (with its WAL and shm files), builds
a new one in its place from the sources it had registered, and says what it
did. When the damaged database cannot even say which its sources were, the
sources come from the config (else the harnesses' default folders), and the
report says so. Sessions whose log files were deleted since they were
indexed (the index is where they survived) cannot come back from the
sources; the damaged file is kept, so nothing is lost that was still there.
It still holds text that the new index may since have wiped (a pruned log, a
re-redacted secret), so it is made readable by its owner alone (0600), and the
report says so: deleting it is the user's call.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import apsw

from .config import Settings, default_sources
from .indexer.files import Limits
from .indexer.sync import Syncer
from .store import NotAnIndex, Store, check_database, refuse_foreign, writer_lock


def _read_old(path: Path) -> tuple[list[tuple[str, str]] | None, str | None, str]:
    """The sources (path, kind) and the redaction key of a damaged database,
    as far as they can be read; None for what cannot be, and why."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as e:
        return None, None, str(e)
    try:
        try:
            sources = [(str(p), str(k)) for p, k in conn.execute("SELECT path, kind FROM sources ORDER BY id")]
            why = ""
        except apsw.Error as e:
            sources, why = None, str(e)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'redaction_key'").fetchone()
            key = row[0] if row else None
        except apsw.Error:
            key = None
        return sources, key, why
    finally:
        conn.close()


def _aside(path: Path) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return target


def doctor(path: str | os.PathLike[str], settings: Settings, *, repair: bool = False) -> dict:
    """Check the database at `path`; with `repair`, rebuild it if damaged.

    Returns a report: `ok` (healthy now), `problems` (what the check found),
    `repaired`, `moved_to`, `sources`, `sources_from` ("database", "config",
    "defaults"), `messages`/`sessions` after a rebuild, and `message`, the
    same in words."""
    path = Path(path).expanduser().resolve()
    report: dict = {"db": str(path), "ok": False, "problems": [], "repaired": False, "moved_to": None,
                    "sources": [], "sources_from": None, "message": ""}
    if not path.exists():
        report["problems"] = ["no database at this path"]
        report["message"] = f"{path}: no database here (nothing to check; `recall index` builds one)."
        return report
    try:
        refuse_foreign(path)  # another program's database is not damaged, and never repaired
    except NotAnIndex as e:
        report["problems"] = ["not a session-recall index"]
        report["message"] = str(e)
        return report
    try:
        problems = check_database(path)
    except apsw.BusyError:
        report["message"] = (f"{path}: could not be checked now: an indexer held the write lock longer than the "
                             "busy timeout (FTS5's check needs it for a moment). Try again.")
        return report
    report["problems"] = problems
    if not problems:
        report["ok"] = True
        report["message"] = f"{path}: healthy (SQLite integrity check and FTS5 integrity check passed)."
        return report
    summary = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    if not repair:
        report["message"] = (f"{path} is damaged: {summary}. Run `recall doctor --repair` to move it aside and "
                             "rebuild the index from its session logs.")
        return report
    with writer_lock(path):  # no indexer may write to it (or to its replacement) meanwhile
        old_sources, old_key, why = _read_old(path)
        moved = _aside(path)
        for suffix in ("", "-wal", "-shm"):  # the WAL belongs to the damaged file, never to the new one
            src = Path(f"{path}{suffix}")
            if src.exists():
                os.replace(src, Path(f"{moved}{suffix}"))
                # It still holds every message's text (redacted, but private
                # all the same), and nothing wipes it: only its owner may read it.
                os.chmod(Path(f"{moved}{suffix}"), 0o600)
        report["moved_to"] = str(moved)
        store = Store(path)
        try:
            if old_key:  # hash-mode output stays the same for the same secret
                with store.atomic():
                    store.set_meta("redaction_key", old_key)
            if old_sources:
                sources, origin = old_sources, "database"
            else:
                origin, sources = default_sources(settings)
            report["sources"] = [{"path": p, "kind": k} for p, k in sources]
            report["sources_from"] = origin
            if sources:
                Syncer(store).register(sources)
                Syncer(store, limits=Limits.of(settings)).run(None)
            counts = store.counts()
            report["sessions"], report["messages"] = counts["sessions"], counts["messages"]
        finally:
            store.close()
        after = check_database(path)
    report["ok"] = not after
    report["repaired"] = not after
    listed = ", ".join(f"{p} ({k})" for p, k in sources) or "none"
    if origin == "database":
        where = f"the {len(sources)} sources the damaged database listed: {listed}"
    elif old_sources == []:
        where = f"the damaged database listed no sources, so the {origin} ones: {listed}"
    else:
        where = (f"the damaged database's list of sources could not be read ({why or 'unreadable'}), so the "
                 f"sources of the {'config' if origin == 'config' else 'default locations'}: {listed}")
    report["message"] = (
        f"{path} was damaged ({summary}). Moved it aside to {moved} (with its -wal and -shm files) and built a "
        f"new index from {where}: {report['sessions']} sessions, {report['messages']} messages. Sessions whose "
        "log files were deleted since they were indexed cannot be rebuilt from the sources; they remain in the "
        "damaged file, which is why it is kept. It still holds the text of every message it had (made readable by "
        "you alone, mode 0600): delete it once you no longer need it."
        + ("" if not after else f" The new database fails its check too: {'; '.join(after[:3])}.")
    )
    return report
