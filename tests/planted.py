"""The planted-secret corpus: session logs in the real formats (Claude Code,
Codex, canonical) with a fresh random secret of every kind
(tests/planted_kinds.py), in every syntax of the kind, in every field of
every format, and a manifest of what was planted where.

    python -m tests.planted --out DIR [--full] [--seed N]

writes DIR/claude-code/..., DIR/codex/..., DIR/canonical/... and
DIR/manifest.json. Every planted value is distinct, so a piece of one found
anywhere names its kind, syntax, format and field. Streamed text (canonical
`message_delta`, Codex `agent_message_delta`) is split at awkward places:
through the middle of each secret, right before it (between a key and its
value) and inside a token's prefix.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__:  # python -m tests.planted
    from .planted_kinds import PLACEHOLDERS, SYNTAXES, Kind, kinds
else:  # imported by a test (pytest puts tests/ on the path, as for conftest and oracle)
    from planted_kinds import PLACEHOLDERS, SYNTAXES, Kind, kinds

CWD = "/home/ada/shop"
PLACEHOLDER_WORD = "plugboard"
SEED = 20261203


@dataclass
class Plant:
    id: int
    kind: str
    syntax: str
    format: str
    field: str
    value: str  # the value as written
    secret: str  # the part that must never be stored or shown
    text: str  # the rendering that holds it
    file: str


def marker(kind: Kind) -> str:
    """A word only this kind's sessions hold, to search for the words around a secret."""
    return "mk" + kind.name.replace("_", "")


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(hashlib.md5("/".join(parts).encode()).hexdigest()))


def _line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


class Builder:
    def __init__(self, out: Path, *, full: bool, seed: int):
        self.out = out
        self.rng = random.Random(seed)
        self.kinds = kinds(full)
        self.plants: list[Plant] = []
        self.seen: set[str] = set()
        self.clock = 0

    # --- values -------------------------------------------------------------------

    def plant(self, kind: Kind, syntax: str, fmt: str, field: str, file: Path) -> Plant:
        while True:
            value, secret = kind.sample(self.rng)
            if secret not in self.seen:
                break
        self.seen.add(secret)
        text = SYNTAXES[syntax](kind.key, value) if syntax in SYNTAXES else value
        p = Plant(len(self.plants), kind.name, syntax, fmt, field, value, secret, text,
                  str(file.relative_to(self.out)))
        self.plants.append(p)
        return p

    def renderings(self, kind: Kind, fmt: str, field: str, file: Path) -> list[Plant]:
        return [self.plant(kind, s, fmt, field, file) for s in kind.syntaxes]

    def joined(self, kind: Kind, fmt: str, field: str, file: Path, sep: str = "\n") -> tuple[str, list[Plant]]:
        """Text with every syntax of the kind, a fresh value each, between the
        words around it."""
        ps = self.renderings(kind, fmt, field, file)
        m = marker(kind)
        return sep.join(f"{m} rotate step {i}: {p.text}" for i, p in enumerate(ps)), ps

    def ts(self) -> str:
        self.clock += 1
        return f"2026-11-20T{10 + self.clock // 3600 % 10:02d}:{self.clock // 60 % 60:02d}:{self.clock % 60:02d}.000Z"

    # --- streaming -------------------------------------------------------------------

    @staticmethod
    def split_points(text: str, ps: list[Plant]) -> list[int]:
        """Awkward places to split streamed text: right before each value
        (between key and value), inside a token's prefix, through the
        middle of the secret, one character before the secret ends."""
        points: set[int] = set()
        pos = 0
        for p in ps:
            at = text.find(p.value, pos)
            if at < 0:
                at = text.find(p.secret, pos)
                if at < 0:
                    continue
            s = text.find(p.secret, at)
            points |= {at, at + 3, s + len(p.secret) // 2, s + len(p.secret) - 1}
            k = text.rfind("=", pos, at + 1)
            if k > 0:
                points.add(k)  # between key and `=`
            pos = s + len(p.secret)
        return sorted(q for q in points if 0 < q < len(text))

    @staticmethod
    def fragments(text: str, points: list[int]) -> list[str]:
        bounds = [0, *points, len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    # --- Claude Code ----------------------------------------------------------------

    def claude_code(self, kind: Kind, n: int) -> None:
        sid = _uuid("cc", kind.name)
        path = self.out / "claude-code" / "-home-ada-shop" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = marker(kind)
        lines: list[dict] = []
        parent = None

        def entry(typ: str, message: dict, **extra) -> dict:
            nonlocal parent
            u = _uuid("cc", kind.name, str(len(lines)))
            obj = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
                   "sessionId": sid, "version": "2.0.14", "gitBranch": "main", "type": typ,
                   "message": message, "uuid": u, "timestamp": self.ts(), **extra}
            parent = u
            lines.append(obj)
            return obj

        lines.append({"type": "summary", "summary": f"{m} early summary", "leafUuid": _uuid("leaf", sid)})
        text, _ = self.joined(kind, "claude-code", "user_text", path)
        entry("user", {"role": "user", "content": text})
        text, _ = self.joined(kind, "claude-code", "user_block", path)
        entry("user", {"role": "user", "content": [{"type": "text", "text": text}]})
        text, _ = self.joined(kind, "claude-code", "thinking", path)
        entry("assistant", {"id": f"msg_{n}a", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                            "content": [{"type": "thinking", "thinking": text, "signature": "sig"}]})
        text, _ = self.joined(kind, "claude-code", "assistant_text", path)
        entry("assistant", {"id": f"msg_{n}b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                            "content": [{"type": "text", "text": text}]})
        # tool_use: a command line, and an input object that holds the value under its key
        text, _ = self.joined(kind, "claude-code", "tool_use_command", path)
        obj_plant = self.plant(kind, "json_object", "claude-code", "tool_use_object", path)
        calls = [("toolu_" + _uuid(sid, "c1")[:20], {"command": text, "description": f"{m} rotate"}),
                 ("toolu_" + _uuid(sid, "c2")[:20],
                  {"file_path": f"{CWD}/config.json",
                   "content": json.dumps({kind.key.lower(): obj_plant.value, "note": m}),
                   "env": {kind.key: obj_plant.value}})]
        for cid, inp in calls:
            entry("assistant", {"id": f"msg_{n}c", "type": "message", "role": "assistant",
                                "model": "claude-sonnet-4-5",
                                "content": [{"type": "tool_use", "id": cid, "name": "Bash", "input": inp}]})
        text_s, _ = self.joined(kind, "claude-code", "tool_result_string", path)
        text_b, _ = self.joined(kind, "claude-code", "tool_result_blocks", path)
        text_j, _ = self.joined(kind, "claude-code", "tool_result_json", path)
        results = [text_s, [{"type": "text", "text": text_b}], json.dumps({"stdout": text_j, "exit_code": 0})]
        for j, content in enumerate(results):
            entry("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0][0],
                                                        "content": content, "is_error": False}]},
                  toolUseResult={"stdout": "(see content)", "stderr": "", "interrupted": False})
        # attachments: a document's title is its name
        for p in self.renderings_single(kind, "claude-code", "attachment_name", path):
            entry("user", {"role": "user", "content": [
                {"type": "text", "text": f"{m} the file is attached"},
                {"type": "document", "title": f"{m} {p.text}.txt",
                 "source": {"type": "text", "media_type": "text/plain", "data": "hello"}}]})
        # injected text (system, not indexed) and noise
        text, _ = self.joined(kind, "claude-code", "meta_user", path)
        entry("user", {"role": "user", "content": text}, isMeta=True)
        text, _ = self.joined(kind, "claude-code", "progress_noise", path)
        lines.append({"type": "progress", "sessionId": sid, "uuid": _uuid(sid, "p"), "timestamp": self.ts(),
                      "data": {"type": "bash_progress", "output": text}})
        # titles: one line per syntax (the last wins; earlier ones must leave nothing either)
        for fieldname, typ, key in (("custom_title", "custom-title", "customTitle"),
                                    ("ai_title", "ai-title", "aiTitle")):
            for p in self.renderings(kind, "claude-code", fieldname, path):
                lines.append({"type": typ, key: f"{m} {p.text}", "sessionId": sid})
        for p in self.renderings(kind, "claude-code", "summary", path):
            lines.append({"type": "summary", "summary": f"{m} {p.text}", "leafUuid": parent})
        path.write_text("".join(_line(o) for o in lines))

    def renderings_single(self, kind: Kind, fmt: str, field: str, file: Path) -> list[Plant]:
        """One value for fields that hold a value alone (a file name): bare
        when the kind has a shape of its own, else after its key (a random
        string with neither is no secret anybody can tell)."""
        return [self.plant(kind, "name" if kind.shaped else "env", fmt, field, file)]

    # --- Codex ------------------------------------------------------------------------

    def codex(self, kind: Kind, n: int) -> None:
        sid = _uuid("cx", kind.name)
        path = self.out / "codex" / "2026" / "11" / "20" / f"rollout-2026-11-20T10-{n // 60 % 60:02d}-{n % 60:02d}-{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = marker(kind)
        lines: list[dict] = []

        def put(typ: str, payload: dict) -> None:
            lines.append({"timestamp": self.ts(), "type": typ, "payload": payload})

        put("session_meta", {"id": sid, "timestamp": self.ts(), "cwd": CWD, "originator": "codex_cli_rs",
                             "cli_version": "0.46.0", "instructions": None, "source": "cli"})
        turn = _uuid(sid, "turn")
        put("event_msg", {"type": "task_started", "turn_id": turn, "model_context_window": 272000})
        put("turn_context", {"turn_id": turn, "cwd": CWD, "approval_policy": "on-request",
                             "sandbox_policy": {"mode": "workspace-write"}, "model": "gpt-5-codex"})
        text, _ = self.joined(kind, "codex", "user_message", path)
        atts = self.renderings_single(kind, "codex", "attachment_path", path)
        put("event_msg", {"type": "user_message", "message": text, "images": [],
                          "local_images": [f"{CWD}/shots/{m}-{p.text.replace('/', '_')}.png" for p in atts]})
        text, _ = self.joined(kind, "codex", "response_item_message", path)
        put("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        text, _ = self.joined(kind, "codex", "reasoning", path)
        put("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}],
                              "content": None, "encrypted_content": "gAAAA"})
        # function calls: arguments are a JSON string
        text, _ = self.joined(kind, "codex", "function_call_args", path)
        c1 = "call_" + _uuid(sid, "1")[:24]
        put("response_item", {"type": "function_call", "name": "shell", "call_id": c1,
                              "arguments": json.dumps({"command": ["bash", "-lc", text], "workdir": CWD,
                                                       "timeout_ms": 120000})})
        op = self.plant(kind, "json_object", "codex", "function_call_args_object", path)
        c2 = "call_" + _uuid(sid, "2")[:24]
        put("response_item", {"type": "function_call", "name": "write_config", "call_id": c2,
                              "arguments": json.dumps({kind.key.lower(): op.value, "note": m})})
        text, _ = self.joined(kind, "codex", "function_call_output", path)
        put("response_item", {"type": "function_call_output", "call_id": c1,
                              "output": json.dumps({"output": text, "metadata": {"exit_code": 0,
                                                                                   "duration_seconds": 0.4}})})
        text, _ = self.joined(kind, "codex", "function_call_output_plain", path)
        put("response_item", {"type": "function_call_output", "call_id": c2, "output": text})
        text, _ = self.joined(kind, "codex", "custom_tool_call", path)
        patch = "*** Begin Patch\n*** Add File: .env\n" + "".join(f"+{ln}\n" for ln in text.split("\n")) + "*** End Patch"
        c3 = "call_" + _uuid(sid, "3")[:24]
        put("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": c3,
                              "name": "apply_patch", "input": patch})
        text, _ = self.joined(kind, "codex", "custom_tool_call_output", path)
        put("response_item", {"type": "custom_tool_call_output", "call_id": c3,
                              "output": json.dumps({"output": text, "metadata": {"exit_code": 0}})})
        text, _ = self.joined(kind, "codex", "local_shell_call", path)
        put("response_item", {"type": "local_shell_call", "call_id": "call_" + _uuid(sid, "4")[:24],
                              "status": "completed",
                              "action": {"type": "exec", "command": ["bash", "-lc", text], "working_directory": CWD}})
        # the agent's answer, streamed first (Codex's deltas are not persisted as messages: noise)
        text, ps = self.joined(kind, "codex", "agent_message_delta", path)
        for frag in self.fragments(text, self.split_points(text, ps)):
            put("event_msg", {"type": "agent_message_delta", "delta": frag})
        text, _ = self.joined(kind, "codex", "agent_message", path)
        put("event_msg", {"type": "agent_message", "message": text})
        put("event_msg", {"type": "token_count", "info": None, "rate_limits": None})
        for p in self.renderings(kind, "codex", "thread_name", path):
            put("event_msg", {"type": "thread_name_updated", "thread_id": sid, "thread_name": f"{m} {p.text}"})
        path.write_text("".join(_line(o) for o in lines))

    # --- canonical ----------------------------------------------------------------------

    def canonical(self, kind: Kind, n: int) -> None:
        sid = f"planted-{kind.name}"
        path = self.out / "canonical" / f"{n:03d}-{kind.name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = marker(kind)
        lines: list[dict] = []

        def msg(mid: str, role: str, text: str, turn: str = "t1", typ: str = "message", **extra) -> None:
            lines.append({"type": typ, "session_id": sid, "message_id": mid, "turn_id": turn, "role": role,
                          "ts": self.ts(), "text": text, **extra})

        titles = self.renderings(kind, "canonical", "session_title", path)
        lines.append({"type": "session", "session_id": sid, "cwd": CWD, "started_at": "2026-11-20T09:00:00Z",
                      "title": f"{m} {titles[0].text}"})
        for p in titles[1:]:  # a later session line may set the title
            lines.append({"type": "session", "session_id": sid, "cwd": CWD, "started_at": "2026-11-20T09:00:00Z",
                          "title": f"{m} {p.text}"})
        for p in self.renderings(kind, "canonical", "title_line", path):
            lines.append({"type": "title", "session_id": sid, "title": f"{m} {p.text}"})
        for field, role in (("user", "user"), ("assistant", "assistant"), ("system", "system")):
            text, _ = self.joined(kind, "canonical", field, path)
            msg(field, role, text)
        text, _ = self.joined(kind, "canonical", "tool_call", path)
        msg("c1", "tool_call", json.dumps({"command": text, "description": f"{m} rotate"}), "t2", tool_name="Bash")
        op = self.plant(kind, "json_object", "canonical", "tool_call_object", path)
        msg("c2", "tool_call", json.dumps({kind.key.lower(): op.value, "path": "config.json"}), "t2",
            tool_name="Write")
        text, _ = self.joined(kind, "canonical", "tool_result", path)
        msg("r1", "tool_result", json.dumps({"stdout": text, "exit_code": 0}), "t2")
        text, _ = self.joined(kind, "canonical", "tool_result_plain", path)
        msg("r2", "tool_result", text, "t2")
        for p in self.renderings_single(kind, "canonical", "attachment_name", path):
            msg("f1", "user", f"{m} the file is attached", "t3",
                attachments=[{"id": f"att-{p.id}", "name": f"{m} {p.text}.txt", "mime_type": "text/plain",
                              "bytes": 10}])
        text, _ = self.joined(kind, "canonical", "noise", path)
        lines.append({"type": "progress", "session_id": sid, "output": text})
        # streams: split at awkward places; one settles, one never does
        for field, settles in (("delta_settled", True), ("delta_unsettled", False)):
            text, ps = self.joined(kind, "canonical", field, path)
            for frag in self.fragments(text, self.split_points(text, ps)):
                msg(field, "assistant", frag, "t4", typ="message_delta")
            if settles:
                msg(field, "assistant", text, "t4")
        path.write_text("".join(_line(o) for o in lines))

    # --- placeholders --------------------------------------------------------------------

    def placeholders(self) -> None:
        text = f"{PLACEHOLDER_WORD} examples from the README:\n" + "\n".join(PLACEHOLDERS)
        (self.out / "canonical").mkdir(parents=True, exist_ok=True)
        (self.out / "canonical" / "zzz-placeholders.jsonl").write_text(
            _line({"type": "session", "session_id": "planted-placeholders", "cwd": CWD,
                   "started_at": "2026-11-20T09:00:00Z"})
            + _line({"type": "message", "session_id": "planted-placeholders", "message_id": "u1", "turn_id": "t1",
                     "role": "user", "ts": "2026-11-20T09:00:01Z", "text": text}))

    def build(self) -> dict:
        for n, kind in enumerate(self.kinds):
            self.claude_code(kind, n)
            self.codex(kind, n)
            self.canonical(kind, n)
        self.placeholders()
        manifest = {"kinds": [{"name": k.name, "ci": k.ci, "shaped": k.shaped, "source": k.source,
                               "marker": marker(k)} for k in self.kinds],
                    "placeholders": PLACEHOLDERS, "placeholder_word": PLACEHOLDER_WORD,
                    "plants": [asdict(p) for p in self.plants]}
        (self.out / "manifest.json").write_text(json.dumps(manifest))
        return manifest


def build(out: Path, *, full: bool = False, seed: int = SEED) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    return Builder(out, full=full, seed=seed).build()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--full", action="store_true", help="every kind (default: the CI set)")
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    m = build(a.out, full=a.full, seed=a.seed)
    print(f"{len(m['kinds'])} kinds, {len(m['plants'])} planted values in {a.out}")


if __name__ == "__main__":
    main()
