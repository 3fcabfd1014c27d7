"""Claude Code transcripts: `<root>/<project-slug>/<session-id>.jsonl`, with
sub-agent transcripts beside the session (`agent-<id>.jsonl`) or below it
(`<session-id>/subagents/agent-<id>.jsonl`). See docs/formats.md.

A `user` or `assistant` line carries `message.content`: a string or a list of
blocks. Each block that is indexed becomes its own message: `text` (user or
assistant), `tool_use` (tool_call: the tool name and the string values of its
input), `tool_result` (tool_result: its text content). `thinking` is not
indexed. `image` and `document` blocks become attachments of the line's first
text message, or, in a line without text, one message of their own with empty
text. The first message of a line takes the line's `uuid` as its id, the
others `<uuid>#<block index>`.

Every line names its session (`sessionId`); sub-agent lines name their
parent's, so they land in the parent session with ids of their own. A session's
cwd is the one of the first line that opened it in the file. `ai-title` and
`custom-title` lines title the session they name; a `summary` titles the
session that holds the message its `leafUuid` names, whichever log of the
same project folder that is (a user's custom title outranks an AI title, which outranks a summary). A
session without a title is named by its first prompt.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePath

from ...model import Attachment, LeafTitleEvent, MessageEvent, Role, SessionEvent, TitleEvent, is_role
from ..project import project
from . import media
from .base import Parser, Skip

# Lines whose bytes name none of the types indexed here (progress,
# file-history-snapshot, system, queue-operation...) are noise, skipped
# without being parsed. A quote inside a JSON string is escaped, so these
# bytes only ever match JSON structure.
_INDEXED_TYPES = re.compile(rb'"type"\s*:\s*"(?:user|assistant|summary|ai-title|custom-title)"')
_TITLE_FIELD = {"summary": "summary", "ai-title": "aiTitle", "custom-title": "customTitle"}
_TITLE_RANK = {"summary": 1, "ai-title": 2, "custom-title": 3}
# Types that only Claude Code writes, for `auto`.
_OWN_TYPES = {"user", "assistant", "summary", "ai-title", "custom-title", "file-history-snapshot",
              "queue-operation", "progress", "system", "agent-name", "last-prompt"}
_OWN_KEYS = ("sessionId", "leafUuid", "parentUuid", "messageId", "uuid")
_SUFFIXES = (".jsonl.zst", ".jsonl")


def _stem(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _line_id(line: bytes) -> str:
    return "h" + hashlib.blake2b(line, digest_size=10).hexdigest()


class ClaudeCodeParser(Parser):
    kind = "claude-code"
    home_env, home, folders = "CLAUDE_CONFIG_DIR", ".claude", ("projects",)
    indexed_types = _INDEXED_TYPES

    def __init__(self, path: str, state: dict | None = None):
        super().__init__(path, state)
        p = PurePath(path)
        self.subagent = p.name.startswith("agent-") or (len(p.parts) >= 2 and p.parts[-2] == "subagents")

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        if obj.get("type") not in _OWN_TYPES:
            return False
        if obj["type"] in ("user", "assistant") and isinstance(obj.get("message"), dict):
            return True
        return any(k in obj for k in _OWN_KEYS)

    # --- lines ------------------------------------------------------------------

    def parse(self, obj: dict, raw: bytes):
        kind = obj["type"]
        if kind in ("user", "assistant"):
            return self._line(obj, kind, raw)
        if kind in _TITLE_FIELD:
            return self._title(obj, kind)
        raise Skip("noise")

    def _session_of_path(self) -> str | None:
        """The session a file belongs to by its place, for lines without
        `sessionId`: `<session>/subagents/agent-x.jsonl` or `<session>.jsonl`
        (a flat `agent-x.jsonl` does not say)."""
        p = PurePath(self.path)
        if len(p.parts) >= 3 and p.parts[-2] == "subagents":
            return p.parts[-3]
        if not p.name.startswith("agent-"):
            return _stem(p.name)
        return None

    def _open(self, session_id: str, cwd, ts: str | None) -> tuple[str, list]:
        """The session's cwd, and the events that open it the first time this
        file names it."""
        sessions = self.state.setdefault("sessions", {})
        known = sessions.get(session_id)
        if known is not None:
            unstarted = self.state.get("unstarted", {})
            if ts and unstarted.pop(session_id, None):  # opened by a line without a timestamp
                return known, [SessionEvent(session_id=session_id, cwd=known, started_at=ts)]
            return known, []
        if not isinstance(cwd, str) or not cwd:
            raise Skip("no_session")
        sessions[session_id] = cwd
        if not self.subagent and "main" not in self.state:
            self.state["main"] = session_id
        pending = self.state.get("pending", {})
        candidates = [pending.pop(session_id, None)]
        if self.state.get("main") == session_id:
            candidates.append(pending.pop("", None))
        best = max((c for c in candidates if c), key=lambda c: c[1], default=None)
        events: list = []
        if best is not None:
            self.state.setdefault("rank", {})[session_id] = best[1]
        title = best[0] if best else None
        rank = best[1] if best else 0
        if ts:
            events.append(SessionEvent(session_id=session_id, cwd=cwd, started_at=ts, title=title, title_rank=rank))
        else:
            self.state.setdefault("unstarted", {})[session_id] = True
            if title is not None:
                events.append(TitleEvent(session_id=session_id, cwd=cwd, title=title, rank=rank))
        return cwd, events

    def _title(self, obj: dict, kind: str):
        if self.subagent:
            raise Skip("subagent_title")  # a sub-agent's titles never rename its parent
        title = obj.get(_TITLE_FIELD[kind])
        if not isinstance(title, str) or not title.strip():
            raise Skip("invalid_fields")
        rank = _TITLE_RANK[kind]
        if kind == "summary":
            # A summary names its session by the last message it summarised,
            # which may be another session's (a resumed log carries the
            # summaries of the sessions before it): the writer finds it.
            leaf = obj.get("leafUuid")
            if not isinstance(leaf, str) or not leaf:
                raise Skip("invalid_fields")
            return [LeafTitleEvent(leaf=leaf, title=title, rank=rank)]
        sid = obj.get("sessionId")
        if not isinstance(sid, str) or not sid:
            sid = self.state.get("main")  # a title without a session id titles the session of this file
        cwd = self.state.get("sessions", {}).get(sid) if sid else None
        if cwd is None or not sid:  # (without a sid, cwd is None already)
            # Titles often come first (a summary heads the file): kept until
            # the session opens.
            pending = self.state.setdefault("pending", {})
            key = sid or ""
            if pending.get(key) is None or rank >= pending[key][1]:
                pending[key] = [self.redact(title), rank]  # the state is stored: no secret in it
            return []
        ranks = self.state.setdefault("rank", {})
        if rank < ranks.get(sid, 0):
            raise Skip("outranked_title")
        ranks[sid] = rank
        return [TitleEvent(session_id=sid, cwd=cwd, title=title, rank=rank)]

    def _line(self, obj: dict, kind: str, raw: bytes):
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise Skip("invalid_fields")
        content = msg.get("content")
        if isinstance(content, str):
            blocks: list = [content]
        elif isinstance(content, list):
            blocks = content
        else:
            raise Skip("invalid_fields")
        if kind == "user" and (obj.get("isMeta") or obj.get("isCompactSummary")):
            # Text Claude Code injects into the conversation (caveats, skill
            # bodies, the summary a compaction continues from): system text.
            raise Skip("role_system")
        ts = obj.get("timestamp")
        if isinstance(ts, str) and ts:
            self.state["ts"] = ts
        else:
            ts = None
        uuid = obj.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            uuid = _line_id(raw)

        # (block index, role, text, tool_name, attachments) per message
        parts: list[tuple[int, str, str, str | None, list[Attachment]]] = []
        loose: list[tuple[int, Attachment]] = []  # images/documents of the line itself
        thinking = 0
        for i, block in enumerate(blocks):
            if isinstance(block, str):
                if block:
                    parts.append((i, kind, block, None, []))
                continue
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    parts.append((i, kind, text, None, []))
            elif btype == "tool_use":
                name = block.get("name") if isinstance(block.get("name"), str) else None
                args = block.get("input")
                parts.append((i, "tool_call", media.json_text(args), name, []))
            elif btype == "tool_result":
                text, atts = self._result_content(block.get("content"), f"{uuid}#{i}")
                parts.append((i, "tool_result", text, None, atts))
            elif btype in ("image", "document"):
                att = self._media(block, f"{uuid}#{i}", len(loose) + 1)
                if att is not None:
                    loose.append((i, att))
            elif btype in ("thinking", "redacted_thinking"):
                thinking += 1
        if loose:
            own = next((k for k, p in enumerate(parts) if p[1] == kind), None)
            if own is None:
                parts.append((loose[0][0], kind, "", None, [a for _, a in loose]))
                parts.sort(key=lambda p: p[0])
            else:
                parts[own][4].extend(a for _, a in loose)
        if not parts:
            raise Skip("thinking" if thinking else "empty")

        visible: list[tuple[int, Role, str, list[Attachment]]] = []
        for i, role, text, tool_name, atts in parts:
            shown = project(role, text, tool_name)
            # project() indexes no role but a Role
            if shown is not None and (shown or atts) and is_role(role):
                visible.append((i, role, shown, atts))
        if not visible:
            raise Skip("empty")

        sid = obj.get("sessionId")
        if not isinstance(sid, str) or not sid:
            sid = self._session_of_path()
            if sid is None:
                raise Skip("no_session")
        cwd, events = self._open(sid, obj.get("cwd"), ts)
        ts = ts or self.state.get("ts", "")
        # A prompt (user text or a pasted image, not a tool result) starts a turn.
        if kind == "user" and any(v[1] == "user" for v in visible):
            self.state["turn"] = uuid
        turn = self.state.get("turn") or uuid
        for n, (i, role, text, atts) in enumerate(visible):
            events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=uuid if n == 0 else f"{uuid}#{i}",
                                       turn_id=turn, role=role, ts=ts, text=text, attachments=atts,
                                       prompt=role == "user" and not self.subagent))
        return events

    # --- blocks -------------------------------------------------------------------

    def _result_content(self, content, base_id: str) -> tuple[str, list[Attachment]]:
        """The text of a tool_result (a string, or a list of text blocks) and
        the images it returned."""
        if isinstance(content, str):
            return content, []
        texts: list[str] = []
        atts: list[Attachment] = []
        if isinstance(content, list):
            for j, item in enumerate(content):
                if isinstance(item, str):
                    texts.append(item)
                elif isinstance(item, dict):
                    if item.get("type") == "text" and isinstance(item.get("text"), str):
                        texts.append(item["text"])
                    elif item.get("type") in ("image", "document"):
                        att = self._media(item, f"{base_id}.{j}", len(atts) + 1)
                        if att is not None:
                            atts.append(att)
        elif content is not None:
            texts.append(media.json_text(content))
        return "\n".join(t for t in texts if t), atts

    def _media(self, block: dict, where: str, n: int) -> Attachment | None:
        source = block.get("source")
        if not isinstance(source, dict):
            self.notes["bad_attachment"] += 1
            return None
        kind = "image" if block.get("type") == "image" else "document"
        mime = source.get("media_type") if isinstance(source.get("media_type"), str) else ""
        size = 0
        name = None
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            size = media.base64_size(source["data"])
        elif source.get("type") == "url" and isinstance(source.get("url"), str):
            name = PurePath(source["url"].split("?", 1)[0]).name or None
        elif source.get("type") == "text" and isinstance(source.get("data"), str):
            size = len(source["data"].encode("utf-8", "replace"))
            mime = mime or "text/plain"
        title = block.get("title")
        if isinstance(title, str) and title.strip():
            name = title.strip()
        mime = mime or ("image/png" if kind == "image" else "application/octet-stream")
        name = name or f"{kind}-{n}.{media.extension(mime)}"
        att = media.make(block.get("id"), media.stable_id(where), name, mime, size)
        if att is None:
            self.notes["bad_attachment"] += 1
        return att
