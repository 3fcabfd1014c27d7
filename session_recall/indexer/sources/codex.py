"""OpenAI Codex CLI rollouts: `<root>/YYYY/MM/DD/rollout-*.jsonl` (or
`.jsonl.zst`), one line `{"timestamp", "type", "payload"}` each. See
docs/formats.md.

- `session_meta` names the session (`id`, `cwd`, `timestamp`). A sub-agent
  thread's rollout names its parent (`parent_thread_id`, or
  `source.subagent.thread_spawn.parent_thread_id`) and belongs to the parent's
  session. A second `session_meta` (history copied into a fork) is skipped.
- User and assistant text is carried by `event_msg` `user_message` and
  `agent_message`. The same text also comes as a `response_item` `message`,
  which is never indexed: the response items also hold what Codex injects as
  user or developer messages (`<environment_context>`, `<user_instructions>`,
  AGENTS.md bodies, permission notes), while the events hold exactly what the
  person typed and what the agent said, and only the events exist for every
  message (a rollout may have a `user_message` with no response item).
- Tool calls are response items: `function_call`, `custom_tool_call`,
  `local_shell_call` and `web_search_call` (tool_call: the tool name and the
  string values of its arguments), `function_call_output` and
  `custom_tool_call_output` (tool_result, paired with its call by `call_id`:
  ids `<call_id>` and `<call_id>:output`, same turn). `reasoning` and every
  other event (token counts, exec/patch ends that repeat the outputs) are noise.
- Turns: Codex's own turn id (`task_started`, `turn_context`); a user message
  that arrives when the current turn already has one starts a turn of its own.
- Messages without a call id get `<kind>-<hash of turn and payload>`
  (`-2`, `-3`... for a repeat within the turn): deterministic, and the same
  item copied into a fork's history keeps its id.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import PurePath

import orjson

from ...model import Attachment, MessageEvent, SessionEvent, TitleEvent, is_role
from ..project import project, visible_text
from . import media
from .base import Parser, Skip

_INDEXED_TYPES = re.compile(
    rb'"type"\s*:\s*"(?:session_meta|turn_context|task_started|user_message|agent_message|thread_name_updated'
    rb'|function_call|function_call_output|custom_tool_call|custom_tool_call_output|local_shell_call'
    rb'|web_search_call)"'
)
_LINE_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_UUID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")
_MAX_OPEN_CALLS = 512
# A rename recorded in the rollout (`thread_name_updated`), and Codex's index
# of names, which it writes with every rename and reads first.
_RENAME_RANK, _INDEX_RANK = 3, 4


# Where Codex keeps the names of its threads: `session_index.jsonl` in its
# home (beside `sessions/` and `archived_sessions/`), one line
# `{"id", "thread_name", "updated_at"}` per rename, appended; the last line of
# an id is its name. Read once per process while it does not change.
SESSION_INDEX = "session_index.jsonl"
_NAMES: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}


def session_index_of(rollout: str) -> str | None:
    """The session index of the Codex home that holds this rollout (the
    parent of its `sessions` or `archived_sessions` folder), if there is one."""
    for folder in list(PurePath(rollout).parents)[:5]:
        if folder.name in ("sessions", "archived_sessions"):
            index = os.path.join(folder.parent, SESSION_INDEX)
            return index if os.path.isfile(index) else None
    return None


def thread_names(index: str) -> dict[str, str]:
    """Thread id -> its latest name, from a session index (empty when it
    cannot be read). Lines that are not such an entry are passed over."""
    try:
        st = os.stat(index)
        cached = _NAMES.get(index)
        if cached is not None and cached[0] == (st.st_size, st.st_mtime_ns):
            return cached[1]
        with open(index, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    names: dict[str, str] = {}
    for line in data.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("thread_name"), str):
            name = entry["thread_name"].strip()
            if name:
                names[entry["id"]] = name
    _NAMES[index] = ((st.st_size, st.st_mtime_ns), names)
    return names


def _parent_of(meta: dict) -> str | None:
    parent = meta.get("parent_thread_id")
    if isinstance(parent, str) and parent:
        return parent
    source = meta.get("source")
    if isinstance(source, dict):
        sub = source.get("subagent")
        if isinstance(sub, dict):
            spawn = sub.get("thread_spawn")
            if isinstance(spawn, dict) and isinstance(spawn.get("parent_thread_id"), str) and spawn["parent_thread_id"]:
                return spawn["parent_thread_id"]
    return None


def _strings(value, skip_keys: tuple[str, ...] = ("type",)) -> list[str]:
    """String leaves of a JSON value, without the values of `skip_keys` of
    its top-level object and without repeats."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in skip_keys}
    if value is None:
        return []
    text = visible_text(media.json_text(value)) if isinstance(value, (dict, list)) else str(value)
    return list(dict.fromkeys(t for t in text.split("\n") if t))


def _unwrap(output: str) -> str:
    """A tool output in Codex's `{"output": "...", "metadata": {"exit_code",
    "duration_seconds"}}` envelope is its `output`; anything else is left to
    the projection (which decodes other JSON to its values)."""
    if not output.lstrip().startswith("{") or '"output"' not in output[:64]:
        return output
    try:
        value = orjson.loads(output)
    except orjson.JSONDecodeError:
        return output
    if isinstance(value, dict) and isinstance(value.get("output"), str) and set(value) <= {"output", "metadata"}:
        return value["output"]
    return output


class CodexParser(Parser):
    kind = "codex"
    home_env, home, folders = "CODEX_HOME", ".codex", ("sessions", "archived_sessions")
    indexed_types = _INDEXED_TYPES

    @classmethod
    def recognizes(cls, obj: dict) -> bool:
        return obj.get("type") in _LINE_TYPES and isinstance(obj.get("payload"), dict)

    # --- lines ------------------------------------------------------------------

    def parse(self, obj: dict, raw: bytes):
        kind = obj["type"]
        payload = obj.get("payload")
        if kind not in _LINE_TYPES:
            raise Skip("noise")
        if not isinstance(payload, dict):
            raise Skip("invalid_fields")
        stamp = obj.get("timestamp")
        ts: str = stamp if isinstance(stamp, str) else ""
        if kind == "session_meta":
            return self._meta(payload, ts)
        if kind == "turn_context":
            self._turn_context(payload)
            return []
        ptype = payload.get("type")
        if kind == "event_msg":
            if ptype == "task_started":
                turn = payload.get("turn_id")
                if isinstance(turn, str) and turn:
                    self._new_turn(turn)
                return []
            if ptype in ("user_message", "agent_message"):
                return self._text(payload, ptype, ts)
            if ptype == "thread_name_updated":
                return self._title(payload)
            raise Skip("noise")
        if kind == "response_item":
            if ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
                return self._call(payload, ptype, ts)
            if ptype in ("function_call_output", "custom_tool_call_output"):
                return self._output(payload, ts)
        raise Skip("noise")

    # --- session and turns --------------------------------------------------------

    def _meta(self, meta: dict, ts: str):
        if "sid" in self.state:
            raise Skip("extra_session_meta")
        sid = meta.get("id")
        if not isinstance(sid, str) or not sid:
            raise Skip("invalid_fields")
        parent = _parent_of(meta)
        self.state["sid"] = parent or sid
        if parent:
            self.state["sub"] = True
        cwd = meta.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.state["cwd"] = cwd
        started = meta.get("timestamp")
        self.state["started"] = started if isinstance(started, str) and started else ts
        return []

    def _turn_context(self, ctx: dict) -> None:
        cwd = ctx.get("cwd")
        if isinstance(cwd, str) and cwd and "tcwd" not in self.state:
            self.state["tcwd"] = cwd
        turn = ctx.get("turn_id")
        if isinstance(turn, str) and turn and turn != self.state.get("turn"):
            self._new_turn(turn)

    def _new_turn(self, turn: str) -> None:
        self.state["turn"] = turn
        self.state["prompted"] = False
        self.state["occ"] = {}

    def _session_of_path(self) -> str:
        name = PurePath(self.path).name
        m = _UUID.search(name)
        if m:
            return m.group(1)
        for suffix in (".jsonl.zst", ".jsonl"):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    def _open(self, ts: str) -> tuple[str, str, list]:
        """(session id, cwd) for an event, and the event that opens the
        session the first time."""
        if self.state.get("open"):
            return self.state["sid"], self.state["cwd"], []
        cwd = self.state.get("cwd") or self.state.get("tcwd")
        if not cwd:
            raise Skip("no_session")
        sid = self.state.get("sid") or self._session_of_path()
        self.state.update(open=True, sid=sid, cwd=cwd)
        started = self.state.get("started") or ts
        events: list = [SessionEvent(session_id=sid, cwd=cwd, started_at=started)] if started else []
        index = None if self.state.get("sub") else session_index_of(self.path)
        name = thread_names(index).get(sid) if index else None
        if name:  # Codex's own name for the thread outranks every other title
            events.append(TitleEvent(session_id=sid, cwd=cwd, title=name, rank=_INDEX_RANK))
        return sid, cwd, events

    def _hid(self, prefix: str, payload: dict) -> str:
        turn = self.state.get("turn") or ""
        body = media.json_dumps(payload, sort_keys=True).encode("utf-8", "replace")
        key = hashlib.blake2b(turn.encode() + b"\x00" + body, digest_size=10).hexdigest()
        occ = self.state.setdefault("occ", {})
        n = occ.get(key, 0) + 1
        occ[key] = n
        return f"{prefix}-{key}" if n == 1 else f"{prefix}-{key}-{n}"

    # --- messages -------------------------------------------------------------------

    def _message(self, message_id: str, turn: str, role: str, ts: str, text: str,
                 atts: list[Attachment] | None = None, tool_name: str | None = None, prompt: bool = False) -> list:
        visible = project(role, text, tool_name)
        if visible is None or not is_role(role):  # project() indexes no role but a Role
            raise Skip(f"role_{role}")
        if not visible and not atts:
            raise Skip("empty")
        sid, cwd, events = self._open(ts)
        events.append(MessageEvent(session_id=sid, cwd=cwd, message_id=message_id, turn_id=turn, role=role,
                                   ts=ts, text=visible, attachments=atts or [], prompt=prompt))
        return events

    def _text(self, p: dict, ptype: str, ts: str):
        text = p.get("message")
        if not isinstance(text, str):
            raise Skip("invalid_fields")
        role = "user" if ptype == "user_message" else "assistant"
        mid = self._hid("u" if role == "user" else "a", p)
        if role == "user":
            if not self.state.get("turn") or self.state.get("prompted"):
                self._new_turn(mid)
            self.state["prompted"] = True
        atts: list[Attachment] = []
        if role == "user":
            refs = [r for key in ("images", "local_images") if isinstance(p.get(key), list) for r in p[key]]
            for j, ref in enumerate(refs):
                if not isinstance(ref, str) or not ref:
                    continue
                where = media.stable_id(mid, str(j))
                att = (media.from_data_url(ref, where, len(atts) + 1) if ref[:5].lower() == "data:"
                       else media.from_path(ref, where))
                if att is None:
                    self.notes["bad_attachment"] += 1
                else:
                    atts.append(att)
        # A sub-agent thread's prompt was written by its parent, not typed.
        return self._message(mid, self.state.get("turn") or mid, role, ts, text, atts,
                             prompt=role == "user" and not self.state.get("sub"))

    def _title(self, p: dict):
        if self.state.get("sub"):
            raise Skip("subagent_title")  # a sub-agent's name never renames its parent
        title = p.get("thread_name")
        if not isinstance(title, str) or not title.strip():
            raise Skip("invalid_fields")
        sid, cwd, events = self._open("")
        events.append(TitleEvent(session_id=sid, cwd=cwd, title=title, rank=_RENAME_RANK))
        return events

    def _call(self, p: dict, ptype: str, ts: str):
        call_id = p.get("call_id") if isinstance(p.get("call_id"), str) and p.get("call_id") else None
        if ptype == "function_call":
            name, args = p.get("name"), p.get("arguments")
            text = args if isinstance(args, str) else media.json_text(args)
        elif ptype == "custom_tool_call":
            name, args = p.get("name"), p.get("input")
            text = args if isinstance(args, str) else media.json_text(args)
        elif ptype == "local_shell_call":
            name = "local_shell"
            action = p.get("action")
            text = "\n".join(_strings(action))
            if isinstance(action, dict) and isinstance(action.get("command"), list):
                # The command line as typed, then the rest (workdir...).
                command = " ".join(c for c in action["command"] if isinstance(c, str))
                rest = _strings({k: v for k, v in action.items() if k != "command"})
                text = "\n".join([command, *rest])
            call_id = call_id or (p.get("id") if isinstance(p.get("id"), str) and p.get("id") else None)
        else:  # web_search_call
            name = "web_search"
            text = "\n".join(_strings(p.get("action")))
            call_id = call_id or (p.get("id") if isinstance(p.get("id"), str) and p.get("id") else None)
        name = name if isinstance(name, str) and name else None
        turn = self.state.get("turn") or ""
        mid = call_id or self._hid("c", p)
        if call_id:
            calls = self.state.setdefault("calls", {})
            calls[call_id] = turn
            while len(calls) > _MAX_OPEN_CALLS:  # calls that never got an output
                del calls[next(iter(calls))]
        return self._message(mid, turn or mid, "tool_call", ts, text, tool_name=name)

    def _output(self, p: dict, ts: str):
        call_id = p.get("call_id") if isinstance(p.get("call_id"), str) and p.get("call_id") else None
        turn = self.state.setdefault("calls", {}).pop(call_id, None) if call_id else None
        turn = turn or self.state.get("turn") or ""
        mid = f"{call_id}:output" if call_id else self._hid("o", p)
        out = p.get("output")
        atts: list[Attachment] = []
        if isinstance(out, str):
            text = _unwrap(out)
        elif isinstance(out, list):  # content items: text, and images a tool returned
            texts: list[str] = []
            for j, item in enumerate(out):
                if isinstance(item, str):
                    texts.append(item)
                elif isinstance(item, dict):
                    if isinstance(item.get("text"), str):
                        texts.append(item["text"])
                    elif isinstance(item.get("image_url"), str):
                        att = media.from_data_url(item["image_url"], media.stable_id(mid, str(j)), len(atts) + 1)
                        if att is None:
                            self.notes["bad_attachment"] += 1
                        else:
                            atts.append(att)
            text = "\n".join(t for t in texts if t)
        elif out is None:
            text = ""
        else:  # an object envelope ({"content": ..., "success": ...}): its values
            text = media.json_text(out)
        return self._message(mid, turn or mid, "tool_result", ts, text, atts)
