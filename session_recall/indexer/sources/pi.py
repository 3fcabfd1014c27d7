"""Pi coding agent sessions: `<agent>/sessions/--<cwd>--/<time>_<id>.jsonl`
(`<agent>` is `~/.pi/agent`, or `$PI_CODING_AGENT_DIR`). See docs/formats.md.

The first line is the header `{"type": "session", "version", "id",
"timestamp", "cwd"}`; every later line is an entry with `id`, `parentId`
and `timestamp`. Entries form a tree (a branch is a child of an earlier
entry, the abandoned branch stays in the file): every entry is indexed,
whichever branch holds it. `message` entries carry an AgentMessage:

- `user`: user text (a string, or text blocks; image blocks are attachments);
- `assistant`: one message per block: `text` (assistant), `toolCall`
  (tool_call: its name and the string values of its arguments); `thinking`
  is not indexed;
- `toolResult`: tool_result (its text blocks), in the turn of its call;
- `bashExecution` (a command the user ran with `!`): a tool_call `bash` (the
  command) and its tool_result (the output);
- `custom`, `branchSummary`, `compactionSummary`: text Pi or an extension
  injected: system, not indexed.

`session_info` names the session (its title). Ids: the entry's `id` for its
first message, `<id>#<block index>` for the others; `<id>:output` for a
command's output. A user message starts a turn (its id).
"""

from __future__ import annotations

import hashlib
import re

from ...model import Attachment, MessageEvent, SessionEvent, TitleEvent, is_role
from ..project import project
from . import media
from .base import Parser, Skip

_INDEXED_TYPES = re.compile(rb'"type"\s*:\s*"(?:session|message|session_info)"')
_OWN_TYPES = {"session", "message", "session_info", "model_change", "thinking_level_change", "compaction",
              "branch_summary", "custom", "custom_message", "label"}
_SYSTEM_ROLES = {"custom", "branchSummary", "compactionSummary", "hookMessage"}


def _line_id(line: bytes) -> str:
    return "h" + hashlib.blake2b(line, digest_size=10).hexdigest()


class PiParser(Parser):
    kind = "pi"
    home_env, home, folders = "PI_CODING_AGENT_DIR", ".pi/agent", ("sessions",)
    indexed_types = _INDEXED_TYPES

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        kind = obj.get("type")
        if kind == "session":  # the header: `id` and `cwd`, never the canonical `session_id`
            return isinstance(obj.get("id"), str) and isinstance(obj.get("cwd"), str) and "session_id" not in obj
        return (kind in _OWN_TYPES and isinstance(obj.get("id"), str) and "parentId" in obj
                and "session_id" not in obj)

    def parse(self, obj: dict, raw: bytes):
        kind = obj["type"]
        if kind == "session":
            return self._header(obj)
        if kind == "session_info":
            name = obj.get("name")
            if not isinstance(name, str) or not name.strip():
                raise Skip("invalid_fields")
            sid, cwd, events = self._open(obj.get("timestamp"))
            events.append(TitleEvent(session_id=sid, cwd=cwd, title=name))
            return events
        if kind == "message":
            return self._message(obj, raw)
        raise Skip("noise")

    def _header(self, obj: dict):
        if "sid" in self.state:
            raise Skip("extra_session_header")
        sid, cwd = obj.get("id"), obj.get("cwd")
        if not isinstance(sid, str) or not sid or not isinstance(cwd, str) or not cwd:
            raise Skip("invalid_fields")
        ts = obj.get("timestamp")
        self.state.update(sid=sid, cwd=cwd, started=ts if isinstance(ts, str) else "")
        return []

    def _open(self, ts) -> tuple[str, str, list]:
        if "sid" not in self.state:
            raise Skip("no_session")
        sid, cwd = self.state["sid"], self.state["cwd"]
        if self.state.get("open"):
            return sid, cwd, []
        self.state["open"] = True
        started = self.state.get("started") or (ts if isinstance(ts, str) else "")
        return sid, cwd, [SessionEvent(session_id=sid, cwd=cwd, started_at=started)] if started else []

    def _message(self, obj: dict, raw: bytes):
        msg = obj.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise Skip("invalid_fields")
        role = msg["role"]
        if role in _SYSTEM_ROLES:
            raise Skip("role_system")
        eid: str = obj["id"] if isinstance(obj.get("id"), str) and obj["id"] else _line_id(raw)
        stamp = obj.get("timestamp")
        ts = stamp if isinstance(stamp, str) else ""
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
            content if isinstance(content, list) else []
        # (message id, role, text, tool name, attachments)
        parts: list[tuple[str, str, str, str | None, list[Attachment]]] = []
        if role == "user":
            texts, atts = self._texts(blocks, eid)
            parts.append((eid, "user", texts, None, atts))
            self.state["turn"] = eid
        elif role == "assistant":
            for i, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                mid = eid if not parts else f"{eid}#{i}"
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append((mid, "assistant", block["text"], None, []))
                elif block.get("type") == "toolCall":
                    name = block.get("name") if isinstance(block.get("name"), str) else None
                    parts.append((mid, "tool_call", media.json_text(block.get("arguments") or {}), name, []))
                    if isinstance(block.get("id"), str):
                        calls = self.state.setdefault("calls", {})
                        calls[block["id"]] = self.state.get("turn") or eid
                        while len(calls) > 512:
                            del calls[next(iter(calls))]
        elif role == "toolResult":
            texts, atts = self._texts(blocks, eid)
            parts.append((eid, "tool_result", texts, None, atts))
        elif role == "bashExecution":
            command, output = msg.get("command"), msg.get("output")
            if isinstance(command, str):
                parts.append((eid, "tool_call", command, "bash", []))
            if isinstance(output, str):
                parts.append((f"{eid}:output", "tool_result", output, None, []))
        else:
            raise Skip(f"role_{role}"[:40])
        turn = self.state.get("turn") or eid
        if role == "toolResult" and isinstance(msg.get("toolCallId"), str):
            turn = self.state.get("calls", {}).pop(msg["toolCallId"], None) or turn
        events: list = []
        opened = False
        for mid, r, text, tool_name, atts in parts:
            visible = project(r, text, tool_name)
            if visible is None or not is_role(r) or not (visible or atts):
                continue
            if not opened:
                sid, cwd, events = self._open(ts)
                opened = True
            events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=mid, turn_id=turn, role=r, ts=ts,
                                       text=visible, attachments=atts, prompt=r == "user"))
        if not opened:
            raise Skip("thinking" if any(isinstance(b, dict) and b.get("type") == "thinking" for b in blocks)
                       else "empty")
        return events

    def _texts(self, blocks: list, eid: str) -> tuple[str, list[Attachment]]:
        texts: list[str] = []
        atts: list[Attachment] = []
        for i, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "image":
                mime: str = block["mimeType"] if isinstance(block.get("mimeType"), str) else "image/png"
                data = block.get("data")
                size = media.base64_size(data) if isinstance(data, str) else 0
                att = media.make(None, media.stable_id(eid, str(i)), f"image-{len(atts) + 1}.{media.extension(mime)}",
                                 mime, size)
                if att is None:
                    self.notes["bad_attachment"] += 1
                else:
                    atts.append(att)
        return "\n".join(t for t in texts if t), atts
