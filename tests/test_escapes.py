"""Terminal escape sequences are not text (docs/formats.md, "What is
searchable"): a tool result that printed `\\x1b[31mFAILED\\x1b[0m` is stored
and found as `FAILED`, through the real `recall` command; an index built by
the projection before (version 1, which kept them) is rebuilt by the next
`recall index`, the messages whose log is gone included."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from session_recall import Index
from session_recall.indexer.ingest import fts_body
from session_recall.indexer.project import PROJECTION_VERSION, strip_escapes

SID = "3b1f0c2a-5d6e-4f70-8a91-b2c3d4e5f601"
GONE = "3b1f0c2a-5d6e-4f70-8a91-b2c3d4e5f602"
CWD = "/home/ada/shop"
# What pytest printed to a terminal, as a tool result keeps it: colours (SGR),
# a window title (OSC 2, ended by BEL), a clipboard write (OSC 52, ended by
# ST), a screen clear (CSI 2J) and a charset switch (nF).
PRINTED = ("\x1b]2;pytest\x07\x1b[2J\x1b(B============ test session starts ============\n"
           "tests/test_cart.py::test_total \x1b[31mFAILED\x1b[0m\x1b[31m                [100%]\x1b[0m\n"
           "\x1b]52;c;c2VjcmV0\x1b\\\x1b[1m\x1b[31mE       assert 41 == 42\x1b[0m")
SEEN = ("============ test session starts ============\n"
        "tests/test_cart.py::test_total FAILED                [100%]\n"
        "E       assert 41 == 42")


def claude_log(path: Path, session_id: str, printed: str) -> None:
    """A Claude Code transcript: a prompt, a Bash tool call, its result as
    Claude Code writes it (a tool_result block in a user line)."""
    base = {"isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": session_id,
            "version": "2.1.7", "gitBranch": "main"}
    lines = [
        {**base, "parentUuid": None, "type": "user", "uuid": f"{session_id[-3:]}-u1",
         "timestamp": "2026-11-20T10:00:00.000Z", "message": {"role": "user", "content": "run the cart tests"}},
        {**base, "parentUuid": f"{session_id[-3:]}-u1", "type": "assistant", "uuid": f"{session_id[-3:]}-a1",
         "timestamp": "2026-11-20T10:00:02.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": f"toolu_{session_id[-3:]}", "name": "Bash",
              "input": {"command": "pytest --color=yes tests/test_cart.py", "description": "Run the cart tests"}}]}},
        {**base, "parentUuid": f"{session_id[-3:]}-a1", "type": "user", "uuid": f"{session_id[-3:]}-r1",
         "timestamp": "2026-11-20T10:00:05.000Z",
         "message": {"role": "user", "content": [
             {"tool_use_id": f"toolu_{session_id[-3:]}", "type": "tool_result", "content": printed,
              "is_error": True}]},
         "toolUseResult": {"stdout": printed, "stderr": "", "interrupted": False}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def anchors_text(env: dict) -> list[str]:
    return [m["text"] for res in env["results"] for m in res["passage"]["messages"] if m["is_anchor"]]


def test_escape_sequences_are_dropped_as_the_docs_list_them():
    assert strip_escapes(PRINTED) == SEEN
    assert strip_escapes("a\x1b]8;;https://example.org\x1b\\link\x1b]8;;\x1b\\b") == "alinkb"  # OSC 8 hyperlink
    assert strip_escapes("\x9b1mbold\x9b0m \x9d0;title\x9cdone") == "bold done"  # the one-character forms
    assert strip_escapes("cut \x1b[38;5") == "cut "  # cut off before its final byte
    assert strip_escapes("no end \x1b]0;title\nnext line") == "no end \nnext line"
    assert strip_escapes("save\x1b7 restore\x1b8 lone\x1b") == "save restore lone"
    assert strip_escapes("carriage\rback\bspace 字体 ✓") == "carriage\rback\bspace 字体 ✓"


def test_a_coloured_tool_result_is_found_by_its_words_through_the_command(run_recall, tmp_path):
    logs, db = tmp_path / "projects", tmp_path / "recall.db"
    claude_log(logs / "-home-ada-shop" / f"{SID}.jsonl", SID, PRINTED)
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="claude-code")
        # the words an escape stood against are words again
        assert [m.text for m, _ in ix.search("assert 41")] == [SEEN]
    r = run_recall("--db", db, "search", "FAILED", "--all-projects", "--json")
    env = json.loads(r.stdout)
    assert env["status"] == "ok", env
    assert anchors_text(env) == [SEEN]
    assert "\x1b" not in json.dumps(env, ensure_ascii=False)


def test_an_index_built_by_projection_version_1_is_rebuilt_by_the_next_index(run_recall, tmp_path):
    """Version 1 stored the escapes: `FAILED` was a token only as `31mfailed`.
    The next `recall index` rebuilds: the log still on disk is read again, and
    the stored text of the session whose log is gone loses its escapes in
    place (it cannot be read again)."""
    logs, db = tmp_path / "projects", tmp_path / "recall.db"
    kept, gone = logs / "-home-ada-shop" / f"{SID}.jsonl", logs / "-home-ada-shop" / f"{GONE}.jsonl"
    claude_log(kept, SID, PRINTED)
    claude_log(gone, GONE, PRINTED)
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="claude-code")
        gone.unlink()
        ix.sync([str(logs)], kind="claude-code")
        with ix.store.writer(), ix.store.atomic():  # what version 1 built
            conn = ix.store.conn
            for rowid, text in list(conn.execute("SELECT id, text FROM messages WHERE role = 'tool_result'")):
                assert text == SEEN
                conn.execute("UPDATE messages SET text = ? WHERE id = ?", (PRINTED, rowid))
                conn.execute("DELETE FROM message_fts WHERE rowid = ?", (rowid,))
                conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (rowid, fts_body(PRINTED, [])[0]))
            conn.execute("DELETE FROM meta WHERE key = 'projection_version'")
    with Index.open(db) as ix:  # an index of before has no projection version: the open records 1
        st = ix.status()
        assert (st["projection_version"], st["stale"]) == (1, True)
        assert ix.recall("FAILED", all_projects=True).results == []

    r = run_recall("--db", db, "index", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rebuilt"] is True
    with Index.open(db) as ix:
        st = ix.status()
        assert (st["projection_version"], st["stale"]) == (PROJECTION_VERSION, False)
        env = ix.recall("FAILED", all_projects=True)
        assert sorted(res.session_id for res in env.results) == [SID, GONE]
        assert [m.text for res in env.results for m in res.passage.messages if m.is_anchor] == [SEEN, SEEN]
        assert all("\x1b" not in t for (t,) in ix.store.conn.execute("SELECT text FROM messages"))
