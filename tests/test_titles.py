"""Titles are right (docs/formats.md, "Titles"): a Claude Code `summary`
titles the session that holds the message its `leafUuid` names, whichever log
carries it and in whichever order the logs are read, and nothing else (a
resumed log carries the summaries of the sessions before it); Codex names a
thread from its home's `session_index.jsonl` (the last line of an id wins);
a session without a title shows its first real prompt, trimmed (not text a
harness injected, not a sub-agent's prompt). Logs are built as the harnesses
write them; the CLI test runs the real `recall`."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from session_recall import Index

PLAN, FLAKY, BARE = ("aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b",
                     "cccccccc-0000-4000-8000-00000000000c")
CWD = "/home/ada/shop"
LONG = ("Please look at why the nightly export to the warehouse drops every row whose customer name has an "
        "apostrophe in it, and fix it")


def jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def cc_line(session: str, uuid: str, kind: str, content, parent: str | None = None, **extra) -> dict:
    """A Claude Code `user` or `assistant` line, with the envelope fields it writes."""
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": session,
            "version": "2.1.7", "gitBranch": "main", "type": kind, "uuid": uuid,
            "timestamp": f"2026-11-2{'0' if session == PLAN else '1'}T10:00:{len(uuid):02d}.000Z",
            "message": {"role": kind, "content": content}, **extra}


def claude_logs(root: Path) -> tuple[Path, Path, Path]:
    """Three sessions of one project: PLAN (no title line of its own);
    FLAKY, resumed after it, whose log heads with the summaries Claude Code
    carried over (PLAN's, one of a session that is not here, and its own);
    BARE, untitled, whose first user lines are injected text, with a
    sub-agent that warmed up before the first prompt."""
    project = root / "-home-ada-shop"
    plan = jsonl(project / f"{PLAN}.jsonl", [
        cc_line(PLAN, "p-u1", "user", "plan the checkout flow for guests"),
        cc_line(PLAN, "p-a1", "assistant", [{"type": "text", "text": "Three steps: cart, address, pay (noted)."}], "p-u1"),
    ])
    flaky = jsonl(project / f"{FLAKY}.jsonl", [
        {"type": "summary", "summary": "Guest checkout plan", "leafUuid": "p-a1"},
        {"type": "summary", "summary": "A session nobody kept", "leafUuid": "gone-0001"},
        {"type": "summary", "summary": "Flaky payment test", "leafUuid": "f-a1"},
        {"type": "file-history-snapshot", "messageId": "f-u1", "snapshot": {"messageId": "f-u1",
                                                                              "trackedFileBackups": {}}},
        cc_line(FLAKY, "f-u1", "user", "why does test_payment fail one run in ten?"),
        cc_line(FLAKY, "f-a1", "assistant", [{"type": "text", "text": "A shared clock between tests (noted)."}], "f-u1"),
    ])
    bare = jsonl(project / f"{BARE}.jsonl", [
        cc_line(BARE, "c-u0", "user", "<command-name>/clear</command-name>\n<command-message>clear</command-message>"
                "\n<command-args></command-args>"),
        cc_line(BARE, "c-u1", "user", "<local-command-stdout></local-command-stdout>", "c-u0"),
        cc_line(BARE, "c-u2", "user", [{"type": "text", "text": LONG}], "c-u1"),
        cc_line(BARE, "c-a2", "assistant", [{"type": "text", "text": "The quote is not escaped (noted)."}], "c-u2"),
    ])
    jsonl(project / BARE / "subagents" / "agent-w1.jsonl", [
        {**cc_line(BARE, "w-u1", "user", "Warmup"), "isSidechain": True, "agentId": "w1",
         "timestamp": "2026-11-21T09:59:00.000Z"},
    ])
    return plan, flaky, bare


def titles(ix: Index) -> dict[str, tuple[str | None, str | None]]:
    """session_id -> (title, the title shown)."""
    return {sid: (title, ix.session(row)["title"]) for row, sid, title in
            ix.store.conn.execute("SELECT id, session_id, title FROM sessions")}


EXPECTED = {PLAN: ("Guest checkout plan", "Guest checkout plan"),
            FLAKY: ("Flaky payment test", "Flaky payment test"),
            BARE: (None, "Please look at why the nightly export to the warehouse drops every row whose…")}


@pytest.mark.parametrize("order", ["resumed log first", "summarised log first", "together"])
def test_a_summary_titles_the_session_of_its_leaf_whichever_log_is_read_first(tmp_path, order):
    plan, flaky, _bare = claude_logs(tmp_path / "projects")
    with Index.open(tmp_path / "recall.db") as ix:
        if order == "together":
            ix.sync([str(tmp_path / "projects")], kind="claude-code")
        else:
            first, second = (flaky, plan) if order == "resumed log first" else (plan, flaky)
            ix.sync([str(first)], kind="claude-code")
            ix.sync([str(tmp_path / "projects")], kind="claude-code")
            assert second.exists()
        assert titles(ix) == EXPECTED


@pytest.mark.parametrize("order", ["summary first", "leaf first", "together"])
def test_a_summary_in_another_project_folder_titles_nothing(tmp_path, order):
    """A log in one project's folder must not title a session of another
    (its text would show in that project's results and get past a denylist):
    a summary names a leaf of its own folder, sub-agents below it included."""
    plan, _flaky, _bare = claude_logs(tmp_path / "projects")
    other = jsonl(tmp_path / "projects" / "-home-ada-other" / "dddddddd-0000-4000-8000-00000000000d.jsonl", [
        {"type": "summary", "summary": "Written in the other project", "leafUuid": "p-a1"},
        {"type": "summary", "summary": "Nor through a sub-agent", "leafUuid": "w-u1"},
    ])
    with Index.open(tmp_path / "recall.db") as ix:
        if order == "together":
            ix.sync([str(tmp_path / "projects")], kind="claude-code")
        else:
            ix.sync([str(other if order == "summary first" else plan)], kind="claude-code")
            ix.sync([str(tmp_path / "projects")], kind="claude-code")
        assert titles(ix) == EXPECTED


def test_a_summary_does_not_outrank_a_title_of_higher_rank_from_another_log(tmp_path):
    plan, _flaky, _bare = claude_logs(tmp_path / "projects")
    with open(plan, "ab") as fh:  # the user named the session (written after the resumed log's summary was)
        fh.write(orjson.dumps({"type": "custom-title", "customTitle": "Checkout for guests", "sessionId": PLAN})
                 + b"\n")
    with Index.open(tmp_path / "recall.db") as ix:
        ix.sync([str(plan)], kind="claude-code")
        ix.sync([str(tmp_path / "projects")], kind="claude-code")
        assert titles(ix) == {**EXPECTED, PLAN: ("Checkout for guests", "Checkout for guests")}


def codex_rollout(home: Path, sid: str, minute: int, prompt: str, *, name: str | None = None) -> Path:
    """A Codex rollout as codex-tui writes it: session_meta, the injected
    developer and environment messages (response items), then the turn."""
    ts = f"2026-11-20T10:{minute:02d}:00.000Z"
    turn = f"{sid[:8]}-turn-1"
    lines = [
        {"timestamp": ts, "type": "session_meta", "payload": {
            "id": sid, "timestamp": ts, "cwd": CWD, "originator": "codex_cli_rs", "cli_version": "0.125.0",
            "source": "cli", "model_provider": "openai", "base_instructions": {"text": "You are Codex."}}},
        {"timestamp": ts, "type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "<permissions instructions>\nworkspace-write\n</permissions instructions>"}]}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"# AGENTS.md instructions for {CWD}\n\n<INSTRUCTIONS>\nbe brief\n"
                                           "</INSTRUCTIONS>"}]}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{CWD}</cwd>\n</environment_context>"}]}},
        {"timestamp": ts, "type": "turn_context", "payload": {"turn_id": turn, "cwd": CWD, "model": "gpt-5.5"}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": prompt}]}},
        {"timestamp": ts, "type": "event_msg", "payload": {"type": "user_message", "message": prompt, "images": [],
                                                           "local_images": [], "text_elements": []}},
        {"timestamp": ts, "type": "event_msg", "payload": {"type": "agent_message", "message": "On it: rounding (noted).",
                                                           "phase": "final_answer"}},
    ]
    if name:
        lines.append({"timestamp": ts, "type": "event_msg", "payload": {"type": "thread_name_updated",
                                                                        "thread_id": sid, "thread_name": name}})
    day = home / "sessions" / "2026" / "11" / "20"
    return jsonl(day / f"rollout-2026-11-20T10-{minute:02d}-00-{sid}.jsonl", lines)


NAMED, UNNAMED = "019e0000-0000-7000-8000-00000000000d", "019e0000-0000-7000-8000-00000000000e"


def codex_home(home: Path) -> Path:
    codex_rollout(home, NAMED, 1, "the invoice total rounds wrong", name="Invoice rounding")
    codex_rollout(home, UNNAMED, 2, "  add a --dry-run flag\n\nto the export command  ")
    # Codex appends a line per rename; the last one of an id is its name
    jsonl(home / "session_index.jsonl", [
        {"id": NAMED, "thread_name": "Invoice rounding", "updated_at": "2026-11-20T10:05:00Z"},
        {"id": "019e0000-0000-7000-8000-0000000000ff", "thread_name": "Another thread",
         "updated_at": "2026-11-20T10:06:00Z"},
        {"id": NAMED, "thread_name": "Invoice rounding: half-even", "updated_at": "2026-11-20T10:07:00Z"},
    ])
    return home / "sessions"


def test_codex_names_come_from_its_session_index_else_the_first_prompt(tmp_path):
    sessions = codex_home(tmp_path / ".codex")
    with Index.open(tmp_path / "recall.db") as ix:
        ix.sync([str(sessions)], kind="codex")
        assert titles(ix) == {NAMED: ("Invoice rounding: half-even", "Invoice rounding: half-even"),
                              UNNAMED: (None, "add a --dry-run flag to the export command")}


def test_an_index_built_before_is_retitled_by_the_next_index(tmp_path):
    """Projection version 2 titled a resumed log's session with every summary
    it carried (the last one read): the rebuild names it right."""
    claude_logs(tmp_path / "projects")
    with Index.open(tmp_path / "recall.db") as ix:
        ix.sync([str(tmp_path / "projects")], kind="claude-code")
        with ix.store.writer(), ix.store.atomic():
            ix.store.conn.execute("UPDATE sessions SET title = 'A session nobody kept', title_rank = 1, "
                                  "prompt = NULL WHERE session_id = ?", (BARE,))
            ix.store.conn.execute("UPDATE meta SET value = '2' WHERE key = 'projection_version'")
        assert ix.sync([str(tmp_path / "projects")], kind="claude-code").rebuilt
        assert titles(ix) == EXPECTED


def test_search_shows_the_right_titles_through_the_command(tmp_path, run_recall):
    projects, sessions = tmp_path / "projects", codex_home(tmp_path / ".codex")
    claude_logs(projects)
    db = tmp_path / "recall.db"
    r = run_recall("--db", db, "index", projects, sessions)
    assert r.returncode == 0, r.stderr
    r = run_recall("--db", db, "search", "noted", "--all-projects", "--json", "--limit", "20")
    env = json.loads(r.stdout)
    shown = {res["session_id"]: res["title"] for res in env["results"]}
    assert shown == {PLAN: "Guest checkout plan", FLAKY: "Flaky payment test", BARE: EXPECTED[BARE][1],
                     NAMED: "Invoice rounding: half-even", UNNAMED: "add a --dry-run flag to the export command"}
