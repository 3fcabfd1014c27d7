"""GitHub Copilot CLI session logs:
`${COPILOT_HOME:-~/.copilot}/session-state/<session id>/events.jsonl` (older:
`session-state/<session id>.jsonl`). See docs/formats.md.

Every line is an event `{"type", "data", "id", "timestamp", "parentId"}`
(`agentId` on a sub-agent's events, which share the session's log):

- `session.start` (and `session.resume`): the session, `data.sessionId`,
  `data.startTime`, and the cwd `data.context.cwd`;
- `user.message`: user text (`data.content`, as the timeline shows it;
  a hidden skill injection, `source` `skill-...`, is system text);
- `assistant.message`: assistant text (`data.content`), and one tool_call
  per `data.toolRequests` entry (its name and the string values of its
  arguments), id its `toolCallId`;
- `tool.execution_start` for a call no assistant message announced (one the
  user asked for): its tool_call;
- `tool.execution_complete`: the call's tool_result (`result.content`, else
  `detailedContent`, or the error's message), id `<toolCallId>:result`, in
  the call's turn;
- `session.title_changed`: the title.

Reasoning, deltas (never persisted), usage, hooks and the rest are noise. A
user message starts a turn (its event id). A rewind removes events from the
log: the file is then rewritten, and read again whole.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from ...model import MessageEvent, SessionEvent, TitleEvent, is_role
from ..project import project
from . import media
from .base import Parser, Skip

_INDEXED_TYPES = re.compile(
    rb'"type"\s*:\s*"(?:session\.start|session\.resume|session\.title_changed|user\.message|assistant\.message'
    rb'|tool\.execution_start|tool\.execution_complete)"')
_EVENT_TYPE = re.compile(r"[a-z_]+\.[a-z_]+")
_MAX_CALLS = 512


class CopilotParser(Parser):
    kind = "copilot"
    home_env, home, folders = "COPILOT_HOME", ".copilot", ("session-state",)
    indexed_types = _INDEXED_TYPES

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        kind = obj.get("type")
        return (isinstance(kind, str) and _EVENT_TYPE.fullmatch(kind) is not None
                and isinstance(obj.get("data"), dict) and isinstance(obj.get("id"), str) and "parentId" in obj)

    def parse(self, obj: dict, raw: bytes):
        kind = obj["type"]
        data = obj.get("data")
        if not isinstance(data, dict):
            raise Skip("invalid_fields")
        stamp = obj.get("timestamp")
        ts = stamp if isinstance(stamp, str) else ""
        eid = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else None
        if kind in ("session.start", "session.resume"):
            return self._start(data, ts)
        if kind == "session.title_changed":
            title = data.get("title")
            if not isinstance(title, str) or not title.strip():
                raise Skip("invalid_fields")
            sid, cwd, events = self._open(ts)
            events.append(TitleEvent(session_id=sid, cwd=cwd, title=title))
            return events
        if eid is None:
            raise Skip("invalid_fields")
        if kind == "user.message":
            source = data.get("source")
            if isinstance(source, str) and source.startswith("skill-"):
                raise Skip("role_system")
            self.state["turn"] = eid
            return self._emit(ts, [(eid, "user", data.get("content"), None)])
        if kind == "assistant.message":
            parts: list = [(eid, "assistant", data.get("content"), None)]
            requests = data.get("toolRequests")
            for req in requests if isinstance(requests, list) else []:
                if isinstance(req, dict) and isinstance(req.get("toolCallId"), str) and req["toolCallId"]:
                    parts.append((req["toolCallId"], "tool_call", media.json_text(req.get("arguments") or {}),
                                  req.get("name") if isinstance(req.get("name"), str) else None))
                    self._call(req["toolCallId"])
            return self._emit(ts, parts)
        if kind == "tool.execution_start":
            cid = data.get("toolCallId")
            if not isinstance(cid, str) or not cid or cid in self.state.get("calls", {}):
                raise Skip("noise")  # (announced by its assistant message)
            self._call(cid)
            name = data.get("toolName") if isinstance(data.get("toolName"), str) else None
            return self._emit(ts, [(cid, "tool_call", media.json_text(data.get("arguments") or {}), name)])
        if kind == "tool.execution_complete":
            cid = data.get("toolCallId")
            if not isinstance(cid, str) or not cid:
                raise Skip("invalid_fields")
            result, error = data.get("result"), data.get("error")
            text = None
            if isinstance(result, dict):
                text = result.get("content") if isinstance(result.get("content"), str) and result.get("content") \
                    else result.get("detailedContent")
            if not text and isinstance(error, dict):
                text = error.get("message")
            turn = self.state.get("calls", {}).pop(cid, None)
            return self._emit(ts, [(f"{cid}:result", "tool_result", text, None)], turn)
        raise Skip("noise")

    def _call(self, cid: str) -> None:
        calls = self.state.setdefault("calls", {})
        calls[cid] = self.state.get("turn") or ""
        while len(calls) > _MAX_CALLS:
            del calls[next(iter(calls))]

    def _start(self, data: dict, ts: str):
        if "sid" not in self.state:
            sid = data.get("sessionId")
            if isinstance(sid, str) and sid:
                self.state["sid"] = sid
                start = data.get("startTime")
                self.state["started"] = start if isinstance(start, str) and start else ts
        ctx = data.get("context")
        if "cwd" not in self.state and isinstance(ctx, dict) and isinstance(ctx.get("cwd"), str) and ctx["cwd"]:
            self.state["cwd"] = ctx["cwd"]
        return []

    def _session_of_path(self) -> str:
        p = PurePath(self.path)
        return p.parent.name if p.name == "events.jsonl" else p.name.removesuffix(".zst").removesuffix(".jsonl")

    def _open(self, ts: str) -> tuple[str, str, list]:
        if self.state.get("open"):
            return self.state["sid"], self.state["cwd"], []
        cwd = self.state.get("cwd")
        if not cwd:
            raise Skip("no_session")
        sid = self.state.get("sid") or self._session_of_path()
        self.state.update(open=True, sid=sid)
        started = self.state.get("started") or ts
        return sid, cwd, [SessionEvent(session_id=sid, cwd=cwd, started_at=started)] if started else []

    def _emit(self, ts: str, parts: list, turn: str | None = None):
        events: list = []
        opened = False
        for mid, role, text, tool_name in parts:
            visible = project(role, text if isinstance(text, str) else "", tool_name)
            if visible is None or not is_role(role) or not visible:
                continue
            if not opened:
                sid, cwd, events = self._open(ts)
                opened = True
            events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=mid, ts=ts, role=role, text=visible,
                                       turn_id=turn or self.state.get("turn") or mid))
        if not opened:
            raise Skip("empty")
        return events
