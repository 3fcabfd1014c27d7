"""Gemini CLI chat recordings: `<gemini>/tmp/<project>/chats/session-*.jsonl`
(`<gemini>` is `~/.gemini`, or `$GEMINI_CLI_HOME/.gemini`). See docs/formats.md.

The file is a log of records, replayed as Gemini's own reader replays it:

- a metadata record (`sessionId`, `projectHash`, `startTime`, `kind`...) opens
  the session; a whole legacy conversation on one line (with `messages`) is
  also one, and so is a legacy `session-*.json` document, read whole;
- a message record (`id`, `type`, `timestamp`, `content`): `user` is user
  text, `gemini` assistant text plus one tool_call and one tool_result per
  entry of `toolCalls`; `info`, `warning` and `error` are system text, not
  indexed, but their place is kept for rewinds. A record written again with
  the same `id` replaces the earlier copy (`replaces`);
- `{"$set": {...}}` updates the metadata (`summary` titles the session); a
  `$set` with `messages` is a checkpoint that replaces every message;
- `{"$rewindTo": id}` takes back that message and every message after it (all
  of them when the id is unknown): they leave the index (ForgetEvent).

Message ids: a record's `id` for its text, `<id>#<call id>` for a tool call
and `<id>#<call id>:result` for its result. A user record starts a turn (its
id). Sub-agents write `chats/<parent session id>/<id>.jsonl`: their messages
land in the parent session. The cwd is not in the file: it is the project's
root as Gemini's own registry names it (`.project_root` in the project's
folder, else `projects.json`), else the project's folder under `tmp` itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import PurePath

from ...model import ForgetEvent, MessageEvent, SessionEvent, TitleEvent, is_role
from ..project import project
from . import media
from .base import Parser, Skip, load_object

# The message types (for the sync's noise test: a line with a "type" that is
# none of these is skipped unread). Metadata, $set and $rewindTo records have
# no "type" at all and are always parsed.
_INDEXED_TYPES = re.compile(rb'"type"\s*:\s*"(?:user|gemini|info|warning|error)"')
_TYPES = {"user", "gemini", "info", "warning", "error"}
# Records kept for rewinds (ids in order): far more than a session has.
_MAX_IDS = 100_000


def _parts_text(content) -> str:
    """The text of a PartListUnion: a string, a part, or a list of them
    (`{"text": ...}`; other parts carry no text of their own)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) and not content.get("thought") else ""
    if isinstance(content, list):
        return "\n".join(t for t in (_parts_text(p) for p in content) if t)
    return ""


def _result_text(call: dict) -> str:
    """A tool call's result: the `output` (or `error`) of its function
    responses, else the text it displayed."""
    texts: list[str] = []
    result = call.get("result")
    for part in result if isinstance(result, list) else [result] if isinstance(result, dict) else []:
        if not isinstance(part, dict):
            continue
        fr = part.get("functionResponse")
        if isinstance(fr, dict):
            resp = fr.get("response")
            if isinstance(resp, dict):
                for key in ("output", "error"):
                    if isinstance(resp.get(key), str):
                        texts.append(resp[key])
                        break
                else:
                    if resp:
                        texts.append(media.json_text(resp))
            elif isinstance(resp, str):
                texts.append(resp)
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(t for t in texts if t)


def project_root(project_dir: str, project_hash: str | None) -> str | None:
    """The project a Gemini project folder (`<gemini>/tmp/<slug or hash>`)
    belongs to, from Gemini's own registry: the folder's `.project_root`
    marker, else `<gemini>/projects.json` (`{"projects": {path: slug}}`),
    whose path has the folder's name as its slug or as its SHA-256 (the
    older hash folders, and the `projectHash` of the records)."""
    try:
        with open(os.path.join(project_dir, ".project_root"), encoding="utf-8") as fh:
            root = fh.read().strip()
        if os.path.isabs(root):
            return root
    except (OSError, UnicodeDecodeError):
        pass
    name = os.path.basename(project_dir)
    registry = os.path.join(os.path.dirname(os.path.dirname(project_dir)), "projects.json")
    try:
        with open(registry, encoding="utf-8") as fh:
            projects = json.load(fh).get("projects")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(projects, dict):
        return None
    for path, slug in projects.items():
        if not isinstance(path, str) or not os.path.isabs(path):
            continue
        digest = hashlib.sha256(path.encode("utf-8")).hexdigest()
        if slug == name or digest == name or digest == project_hash:
            return path
    return None


class GeminiParser(Parser):
    kind = "gemini"
    home_env, home, folders = "GEMINI_CLI_HOME", ".gemini", ("tmp",)
    names = r"session-.+\.json"
    indexed_types = _INDEXED_TYPES

    @classmethod
    def default_folders(cls) -> list[str]:
        # GEMINI_CLI_HOME stands for the home folder, which holds `.gemini`.
        home = os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")
        return [os.path.join(home, ".gemini", "tmp")]

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
            return True
        return isinstance(obj.get("$rewindTo"), str) or (isinstance(obj.get("$set"), dict) and len(obj) == 1)

    def __init__(self, path: str, state: dict | None = None):
        super().__init__(path, state)
        p = PurePath(path)
        # chats/session-*.jsonl, or chats/<parent>/<id>.jsonl for a sub-agent
        if len(p.parts) >= 3 and p.parts[-3] == "chats":
            self.parent: str | None = p.parts[-2]
            self.project_dir = str(p.parents[2])
        else:
            self.parent = None
            self.project_dir = str(p.parents[1]) if p.parent.name == "chats" else str(p.parent)

    def feed(self, line: bytes):
        stripped = line.strip()
        if not stripped:
            raise Skip("blank")
        if self.is_noise(stripped):
            raise Skip("noise")
        return self.parse(load_object(stripped, typed=False), stripped)

    # --- records --------------------------------------------------------------

    def parse(self, obj: dict, raw: bytes):
        if "$rewindTo" in obj:
            target = obj["$rewindTo"]
            if not isinstance(target, str):
                raise Skip("invalid_fields")
            return self._rewind(target)
        if "$set" in obj:
            update = obj["$set"]
            if not isinstance(update, dict):
                raise Skip("invalid_fields")
            return self._set(update)
        if isinstance(obj.get("id"), str):
            return self._record(obj)
        if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
            return self._metadata(obj)
        if isinstance(obj.get("type"), str):
            raise Skip("invalid_fields")  # a message record without its id
        raise Skip("missing_type")

    def _metadata(self, meta: dict):
        if "sid" not in self.state:
            self.state["sid"] = self.parent or meta["sessionId"]
            self.state["hash"] = meta["projectHash"]
            if self.parent or meta.get("kind") == "subagent":
                self.state["sub"] = True
            start = meta.get("startTime")
            if isinstance(start, str) and start:
                self.state["started"] = start
        return self._set(meta)

    def _set(self, update: dict):
        events: list = []
        summary = update.get("summary")
        if isinstance(summary, str) and summary.strip() and not self.state.get("sub"):
            sid, cwd, events = self._open("")
            events.append(TitleEvent(session_id=sid, cwd=cwd, title=summary))
        messages = update.get("messages")
        if isinstance(messages, list):
            # A checkpoint (or a legacy conversation): exactly these messages.
            keep = {m["id"] for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)}
            ids: dict = self.state.setdefault("ids", {})
            gone = [i for i in ids if i not in keep]
            if gone:
                events += self._forget(gone)
            for m in messages:
                if isinstance(m, dict) and isinstance(m.get("id"), str) and m.get("type") in _TYPES:
                    try:
                        events += self._record(m)
                    except Skip as s:
                        self.notes[s.reason] += 1
        return events

    def _rewind(self, target: str):
        ids: dict = self.state.setdefault("ids", {})
        order = list(ids)
        gone = order[order.index(target):] if target in ids else order
        return self._forget(gone)

    def _forget(self, gone: list[str]) -> list:
        ids: dict = self.state.setdefault("ids", {})
        for i in gone:
            ids.pop(i, None)
        self.state["turn"] = ids[next(reversed(ids))] if ids else None
        if not gone or not self.state.get("open"):
            return []
        return [ForgetEvent(session_id=self.state["sid"], cwd=self.state["cwd"], message_ids=gone)]

    # --- the session --------------------------------------------------------------

    def _open(self, ts: str) -> tuple[str, str, list]:
        if self.state.get("open"):
            return self.state["sid"], self.state["cwd"], []
        sid = self.state.get("sid") or self.parent
        if not sid:
            raise Skip("no_session")
        cwd = project_root(self.project_dir, self.state.get("hash")) or self.project_dir
        started = self.state.get("started") or ts
        self.state.update(open=True, sid=sid, cwd=cwd)
        return sid, cwd, [SessionEvent(session_id=sid, cwd=cwd, started_at=started)] if started else []

    def _record(self, rec: dict):
        rid = rec["id"]
        rtype = rec.get("type")
        if rtype not in _TYPES:
            raise Skip("invalid_fields")
        ids: dict = self.state.setdefault("ids", {})
        again = rid in ids
        if rtype == "user":
            turn = ids[rid] if again else rid
            if not again:
                self.state["turn"] = rid
        else:
            turn = ids.get(rid) or self.state.get("turn") or rid
        if not again:
            ids[rid] = turn
            while len(ids) > _MAX_IDS:
                del ids[next(iter(ids))]
        if rtype not in ("user", "gemini"):
            raise Skip("role_system")
        stamp = rec.get("timestamp")
        ts = stamp if isinstance(stamp, str) else ""
        parts: list[tuple[str, str, str, str | None]] = []  # (id, role, text, tool name)
        if rtype == "user":
            shown = rec.get("displayContent")
            text = _parts_text(shown) if shown else ""
            parts.append((rid, "user", text or _parts_text(rec.get("content")), None))
        else:
            parts.append((rid, "assistant", _parts_text(rec.get("content")), None))
            calls = rec.get("toolCalls")
            for n, call in enumerate(calls if isinstance(calls, list) else []):
                if not isinstance(call, dict):
                    continue
                cid = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else str(n)
                name = call.get("name") if isinstance(call.get("name"), str) else None
                parts.append((f"{rid}#{cid}", "tool_call", media.json_text(call.get("args") or {}), name))
                result = _result_text(call)
                if result:
                    parts.append((f"{rid}#{cid}:result", "tool_result", result, None))
        events: list = []
        opened = False
        for mid, role, text, tool_name in parts:
            visible = project(role, text, tool_name)
            if visible is None or not is_role(role) or not (visible or again):
                continue  # (a record written again with nothing left empties its earlier copy)
            if not opened:
                sid, cwd, events = self._open(ts)
                opened = True
            # A person's prompt names an untitled session; a sub-agent's was written by its parent.
            events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=mid, turn_id=turn, role=role, ts=ts,
                                       text=visible, replaces=again,
                                       prompt=role == "user" and not self.state.get("sub")))
        if not opened:
            raise Skip("empty")
        return events
