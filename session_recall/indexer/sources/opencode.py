"""OpenCode sessions: the SQLite database of OpenCode 1.2 and later
(`opencode.db`, or `opencode-<channel>.db`), and the older JSON files
(`storage/message/<session id>/<message id>.json`, each with its parts in
`storage/part/<message id>/`). See docs/formats.md.

The database is read strictly read-only (a `mode=ro` connection and
`query_only`; never a write, never a lock held longer than one short query,
so the running app is not blocked), and incrementally: rows whose
`time_updated` is at or past the watermark of the last pass (less a margin
for clocks and late commits) are read again, which is harmless (a message
written again unchanged is not rewritten). Parts taken back (a revert that
OpenCode has applied) are noticed per session from a fingerprint of its parts
(their number and the sum of their creation times): a session whose
fingerprint changed has its messages set to exactly those its parts now give
(KeepEvent).

One message per part: `text` (user or assistant by its message's role;
`synthetic` and `ignored` text is OpenCode's own, not indexed), `tool`
(a tool_call: the tool's name and the string values of its input; and, once
it has one, a tool_result: its output or error). Reasoning, steps,
snapshots, patches and the rest are not indexed. Ids: `<message id>#<part
id>`, and `...:result` for a tool's result, the same in both layouts (the
importer keeps ids). A sub-agent's session (`parent_id`) lands in its
parent's session. The cwd is the session's `directory`.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import re
import sqlite3
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import PurePath

from ...model import Event, KeepEvent, MessageEvent, SessionEvent, is_role
from ..project import project
from . import media
from .base import Parser, Skip, SourceBusy, load_object

# Rows whose update time is this close before the watermark are read again.
MARGIN_MS = 10_000
BATCH_PARTS = 900  # (under SQLite's oldest bound on a statement's parameters, 999)
_TEXT_ROLES = {"user": "user", "assistant": "assistant"}


def iso(ms) -> str:
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not 0 < ms < 2**53:
        return ""
    t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _json(data) -> dict:
    if isinstance(data, (bytes, str)):
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def part_messages(mid: str, pid: str, role: str | None, part: dict) -> list[tuple[str, str, str, str | None]]:
    """(message id, role, text, tool name) of one part of a message."""
    base = f"{mid}#{pid}"
    ptype = part.get("type")
    if ptype == "text":
        text = part.get("text")
        if role in _TEXT_ROLES and isinstance(text, str) and not part.get("synthetic") and not part.get("ignored"):
            return [(base, _TEXT_ROLES[role], text, None)]
        return []
    if ptype == "tool":
        name = part.get("tool") if isinstance(part.get("tool"), str) else None
        state: dict = part["state"] if isinstance(part.get("state"), dict) else {}
        out = [(base, "tool_call", media.json_text(state.get("input") or {}), name)]
        result = state.get("output") if state.get("status") == "completed" else state.get("error")
        if isinstance(result, str) and result:
            out.append((f"{base}:result", "tool_result", result, None))
        elif result is not None and not isinstance(result, str):
            out.append((f"{base}:result", "tool_result", media.json_text(result), None))
        return out
    return []


def _events(sid: str, cwd: str, turn: str, ts: str, parts) -> list[Event]:
    out: list[Event] = []
    for mid, role, text, tool_name in parts:
        visible = project(role, text, tool_name)
        if visible is None or not is_role(role):
            continue
        # (An empty one still goes: a part emptied replaces its earlier text.)
        out.append(MessageEvent(session_id=sid, cwd=cwd, message_id=mid, turn_id=turn, role=role, ts=ts,
                                text=visible, replaces=True))
    return out


class OpenCodeParser(Parser):
    kind = "opencode"
    home_env, home, folders = "XDG_DATA_HOME", ".local/share", ("opencode",)
    names = r"opencode(?:-[A-Za-z0-9._-]+)?\.db|msg[_-].+\.json"
    indexed_types = re.compile(rb"(?!)")  # a legacy message has no "type": never noise
    database = True

    @classmethod
    def default_folders(cls) -> list[str]:
        data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        db = os.environ.get("OPENCODE_DB")
        if db and db != ":memory:" and os.path.isabs(db):
            return [db, os.path.join(data, "opencode", "storage")]
        return [os.path.join(data, "opencode")]

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        """A legacy message document."""
        return (isinstance(obj.get("sessionID"), str) and obj.get("role") in ("user", "assistant")
                and isinstance(obj.get("time"), dict) and "type" not in obj)

    @classmethod
    def recognizes_database(cls, path: str) -> bool:
        try:
            with _connect(path) as conn:
                names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except (SourceBusy, sqlite3.Error):
            return False
        return {"session", "message", "part"} <= names

    # --- the legacy JSON files: one message document, read whole ---------------

    def feed(self, line: bytes):
        stripped = line.strip()
        if not stripped:
            raise Skip("blank")
        return self.parse(load_object(stripped, typed=False), stripped)

    def parse(self, obj: dict, raw: bytes):
        if not self.recognizes(obj):
            raise Skip("invalid_fields")
        p = PurePath(self.path)
        mid = p.name[: -len(".json")]  # OpenCode's importer takes ids from the path
        osid = p.parent.name
        storage = str(p.parents[2])
        session = self._legacy_session(storage, osid)
        parent = session.get("parentID")
        root = parent if isinstance(parent, str) and parent else osid
        if root != osid:
            session = self._legacy_session(storage, root) or session
        cwd = session.get("directory")
        if not isinstance(cwd, str) or not cwd:
            cwd = self._legacy_cwd(storage, root, osid) or storage
        role = obj["role"]
        turn = mid if role == "user" else (obj.get("parentID") if isinstance(obj.get("parentID"), str) else mid)
        ts = iso((obj.get("time") or {}).get("created"))
        parts: list = []
        part_dir = os.path.join(storage, "part", mid)
        for name in sorted(os.listdir(part_dir)) if os.path.isdir(part_dir) else []:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(part_dir, name), "rb") as fh:
                    part = _json(fh.read())
            except OSError:
                self.notes["unreadable_part"] += 1
                continue
            parts += part_messages(mid, name[: -len(".json")], role, part)
        events: list[Event] = []
        if parts:
            title = session.get("title") if root == osid else None
            created = (session.get("time") or {}).get("created") if isinstance(session.get("time"), dict) else None
            events.append(SessionEvent(session_id=root, cwd=cwd, started_at=iso(created) or ts,
                                       title=title if isinstance(title, str) and title else None))
        events += _events(root, cwd, turn or mid, ts, parts)
        if not any(isinstance(e, MessageEvent) and e.text for e in events):
            raise Skip("empty")
        return events

    @staticmethod
    def _legacy_session(storage: str, osid: str) -> dict:
        for path in glob.glob(os.path.join(glob.escape(storage), "session", "*", glob.escape(osid) + ".json")):
            try:
                with open(path, "rb") as fh:
                    return _json(fh.read())
            except OSError:
                continue
        return {}

    @staticmethod
    def _legacy_cwd(storage: str, root: str, osid: str) -> str | None:
        """Without a session file: the `path.cwd` an assistant message of
        the session carries."""
        folder = os.path.join(storage, "message", osid)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            try:
                with open(os.path.join(folder, name), "rb") as fh:
                    msg = _json(fh.read())
            except OSError:
                continue
            where = msg.get("path")
            if isinstance(where, dict) and isinstance(where.get("cwd"), str) and where["cwd"]:
                return where["cwd"]
        return None

    # --- the database -------------------------------------------------------------

    @classmethod
    def read_database(cls, path: str, state: dict) -> Iterator[tuple[list[Event], dict, Counter[str]]]:
        """(events, state after them, skips) batches: what changed since `state`.
        The state moves on only with the last batch (a pass cut short reads
        the same rows again, which is harmless)."""
        try:
            with _connect(path) as conn:
                yield from _read(conn, dict(state))
        except sqlite3.OperationalError as e:
            raise SourceBusy("database_busy" if "lock" in str(e) else "database_unreadable") from None
        except sqlite3.DatabaseError:
            raise SourceBusy("database_unreadable") from None


class _connect:
    """A read-only connection to a source database: `mode=ro`, queries only,
    and a short wait for a lock (the app's writes come first)."""

    def __init__(self, path: str):
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        try:
            self.conn = sqlite3.connect(uri, uri=True, timeout=0.5, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA query_only = 1")
        except sqlite3.Error as e:
            raise SourceBusy("database_unreadable") from e

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc) -> None:
        self.conn.close()


def _read(conn: sqlite3.Connection, state: dict) -> Iterator[tuple[list[Event], dict, Counter[str]]]:
    skips: Counter[str] = Counter()
    sessions: dict[str, tuple] = {}
    for sid, parent, directory, title, created, updated in conn.execute(
            "SELECT id, parent_id, directory, title, time_created, time_updated FROM session"):
        sessions[sid] = (parent, directory, title, created, updated)

    def root_of(sid: str) -> str:
        seen = {sid}
        while True:
            parent = sessions.get(sid, (None,))[0]
            if not parent or parent not in sessions or parent in seen:
                return sid
            seen.add(parent)
            sid = parent

    def cwd_of(root: str) -> str:
        directory = sessions[root][1]
        return directory if isinstance(directory, str) and directory else "/"

    wm_s, wm_p = state.get("s", 0), state.get("p", 0)
    prints: dict = state.get("f", {})
    # Sessions whose parts were taken back or that are new: their fingerprint.
    now_prints = {sid: [n, int(total or 0)] for sid, n, total in conn.execute(
        "SELECT session_id, count(*), sum(time_created) FROM part GROUP BY session_id")}
    redo_roots = {root_of(sid) for sid, fp in prints.items() if sid in sessions and now_prints.get(sid) != fp}

    events: list[Event] = []
    opened: set[str] = set()

    def open_session(root: str) -> None:
        if root in opened or root not in sessions:
            return
        opened.add(root)
        _, _, title, created, _ = sessions[root]
        events.append(SessionEvent(session_id=root, cwd=cwd_of(root), started_at=iso(created) or "",
                                   title=title if isinstance(title, str) and title else None))

    # Sessions changed (a title, say) that have something to index: opened
    # again with their title.
    with_parts = {root_of(sid) for sid in now_prints if sid in sessions}
    for sid, (_, _, _, _, updated) in sessions.items():
        if isinstance(updated, int) and updated >= wm_s - MARGIN_MS and sid in with_parts:
            open_session(sid)
    max_s = max([wm_s] + [u for *_, u in sessions.values() if isinstance(u, int)])

    query = ("SELECT p.id, p.message_id, p.session_id, p.time_updated, p.data, m.data, m.time_created "
             "FROM part p JOIN message m ON m.id = p.message_id ")

    def emit(rows) -> None:
        for pid, mid, osid, _updated, pdata, mdata, mcreated in rows:
            if osid not in sessions:
                skips["no_session"] += 1
                continue
            root = root_of(osid)
            msg = _json(mdata)
            role = msg.get("role")
            turn = mid if role == "user" else (msg.get("parentID") if isinstance(msg.get("parentID"), str) else mid)
            part = _json(pdata)
            parts = part_messages(mid, pid, role if isinstance(role, str) else None, part)
            if not parts:
                skips["noise"] += 1
                continue
            ts = iso((part.get("time") or {}).get("start") if isinstance(part.get("time"), dict) else None) \
                or iso(mcreated)
            open_session(root)
            events.extend(_events(root, cwd_of(root), turn or mid, ts, parts))

    # Parts changed since the last pass: their row ids in update order (one
    # scan, no data), then their rows a batch at a time by row id (each batch
    # one short query: no read transaction held while the index writes).
    keys = conn.execute("SELECT rowid, time_updated FROM part WHERE time_updated >= ? "
                        "ORDER BY time_updated, id", (wm_p - MARGIN_MS,)).fetchall()
    max_p = max([wm_p] + [u for _, u in keys if isinstance(u, int)])
    for start in range(0, len(keys), BATCH_PARTS):
        chunk = [k for k, _ in keys[start:start + BATCH_PARTS]]
        rows = conn.execute(query + f"WHERE p.rowid IN ({','.join('?' * len(chunk))}) "
                            "ORDER BY p.time_updated, p.id", chunk).fetchall()
        emit(rows)
        if start + BATCH_PARTS < len(keys):
            yield events, state, skips
            events, skips = [], Counter()
            opened.clear()

    # Sessions whose parts were taken back: exactly what their parts give now.
    for root in sorted(redo_roots):
        tree = [sid for sid in sessions if root_of(sid) == root]
        marks = ",".join("?" * len(tree))
        rows = conn.execute(query + f"WHERE p.session_id IN ({marks}) ORDER BY p.id", tree).fetchall()
        before = len(events)
        emit(rows)
        keep = [e.message_id for e in events[before:] if isinstance(e, MessageEvent)]
        open_session(root)
        events.append(KeepEvent(session_id=root, cwd=cwd_of(root), message_ids=keep))
    new_state = {"s": max_s, "p": max_p, "f": now_prints}
    yield events, new_state, skips
