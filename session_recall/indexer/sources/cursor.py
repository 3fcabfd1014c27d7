"""Cursor agent transcripts:
`~/.cursor/projects/<project slug>/agent-transcripts/<id>/<id>.jsonl` (or
`agent-transcripts/<id>.jsonl`), sub-agents' transcripts below
`agent-transcripts/<id>/`. See docs/formats.md.

A line is `{"role": "user" | "assistant", "message": {"content": [...]}}`
with Anthropic-style content blocks: `text`, `tool_use` (tool_call: its
name and the string values of its input), `tool_result` (tool_result: its
text); `thinking` is not indexed. `{"type": "turn_ended", ...}` lines are
noise. A user's text is what its `<user_query>` tags hold when it has them
(the rest of a user line is context Cursor attaches).

The lines carry no ids and no times: a message's id is the session id, the
number of the line among the file's message lines and, after a `#`, its
block's index (the file is only appended to; a rewritten file is read again
whole). Times are unknown (empty); the session starts at the file's
modification time when it is first read. The session is the transcript's
id; a sub-agent's lines land in its parent's session. The cwd is the project
slug decoded: the existing folder whose slug it is (a `-` in the slug is a
`/` or a `-` of the path), else every `-` read as `/`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import PurePath

from ...model import MessageEvent, SessionEvent, is_role
from ...text.fold import WHITE_SPACE_CLASS
from ..project import project
from . import media
from .base import Parser, Skip, load_object

_INDEXED_TYPES = re.compile(rb'"role"\s*:\s*"(?:user|assistant)"')
# The white space around a query is the Unicode White_Space property's (as
# matching means it), not the regex \s, which also takes the information
# separators U+001C..U+001F: those are the user's text.
_USER_QUERY = re.compile(f"<user_query>[{WHITE_SPACE_CLASS}]*(.*?)[{WHITE_SPACE_CLASS}]*</user_query>", re.S)
_SLUG_CHAR = re.compile(r"[^A-Za-z0-9]")


def decode_slug(slug: str, root: str = "/") -> str:
    """The folder whose Cursor project slug is `slug` (its path without the
    leading `/`, every other character but a letter or digit as `-`): the
    existing folder found by walking down from `root`, else `/` and the slug
    with every `-` read as `/`."""
    parts = slug.split("-")
    found = _walk(root, parts, 0)
    return found or "/" + "/".join(p for p in parts if p)


def _walk(at: str, parts: list[str], depth: int) -> str | None:
    if not parts:
        return at
    if depth > 64:
        return None
    try:
        names = os.listdir(at)
    except OSError:
        return None
    # The longest run of parts that names an entry here, first.
    for n in range(len(parts), 0, -1):
        want = "-".join(parts[:n])
        for name in names:
            if _SLUG_CHAR.sub("-", name) == want and os.path.isdir(os.path.join(at, name)):
                found = _walk(os.path.join(at, name), parts[n:], depth + 1)
                if found:
                    return found
    return None


class CursorParser(Parser):
    kind = "cursor"
    home_env, home, folders = None, ".cursor", ("projects",)
    indexed_types = _INDEXED_TYPES

    def __init__(self, path: str, state: dict | None = None):
        super().__init__(path, state)
        p = PurePath(path)
        parts = p.parts
        self.slug = None
        self.session = p.name.removesuffix(".zst").removesuffix(".jsonl")
        if "agent-transcripts" in parts:
            i = len(parts) - 1 - parts[::-1].index("agent-transcripts")
            self.slug = parts[i - 1] if i >= 1 else None
            if len(parts) > i + 2:  # agent-transcripts/<id>/...: the session is <id>
                self.session = parts[i + 1]
        # Message ids begin with the file's own id (a sub-agent's, or the session's).
        self.prefix = p.name.removesuffix(".zst").removesuffix(".jsonl")

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        return (obj.get("role") in ("user", "assistant") and isinstance(obj.get("message"), dict)
                and "type" not in obj and isinstance(obj["message"].get("content"), (list, str)))

    def feed(self, line: bytes):
        stripped = line.strip()
        if not stripped:
            raise Skip("blank")
        if self.is_noise(stripped):
            raise Skip("noise")
        obj = load_object(stripped, typed=False)
        if "role" not in obj and isinstance(obj.get("type"), str):
            raise Skip("noise")  # turn_ended and the like
        return self.parse(obj, stripped)

    def _open(self) -> tuple[str, str, list]:
        if self.state.get("open"):
            return self.state["sid"], self.state["cwd"], []
        cwd = decode_slug(self.slug) if self.slug else None
        if not cwd:
            raise Skip("no_session")
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError:
            mtime = 0
        started = dt.datetime.fromtimestamp(mtime, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        self.state.update(open=True, sid=self.session, cwd=cwd)
        return self.session, cwd, [SessionEvent(session_id=self.session, cwd=cwd, started_at=started)]

    def parse(self, obj: dict, raw: bytes):
        role = obj.get("role")
        msg = obj.get("message")
        if role not in ("user", "assistant") or not isinstance(msg, dict):
            raise Skip("invalid_fields")
        n = self.state.get("n", 0) + 1
        self.state["n"] = n
        base = f"{self.prefix}:{n}"
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
            content if isinstance(content, list) else []
        parts: list[tuple[int, str, str, str | None]] = []
        thinking = 0
        for i, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                if role == "user":
                    queries = _USER_QUERY.findall(text)
                    text = "\n".join(queries) if queries else text
                parts.append((i, role, text, None))
            elif btype == "tool_use":
                name = block.get("name") if isinstance(block.get("name"), str) else None
                parts.append((i, "tool_call", media.json_text(block.get("input") or {}), name))
            elif btype == "tool_result":
                result = block.get("content")
                if isinstance(result, list):
                    result = "\n".join(b["text"] for b in result
                                       if isinstance(b, dict) and isinstance(b.get("text"), str))
                parts.append((i, "tool_result", result if isinstance(result, str) else "", None))
            elif btype in ("thinking", "redacted_thinking"):
                thinking += 1
        events: list = []
        opened = False
        first = True
        if role == "user" and any(p[1] == "user" for p in parts):
            self.state["turn"] = base
        turn = self.state.get("turn") or base
        for i, r, text, tool_name in parts:
            visible = project(r, text, tool_name)
            if visible is None or not is_role(r) or not visible:
                continue
            if not opened:
                sid, cwd, events = self._open()
                opened = True
            events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=base if first else f"{base}#{i}",
                                       turn_id=turn, role=r, ts="", text=visible))
            first = False
        if not opened:
            raise Skip("thinking" if thinking else "empty")
        return events
