"""The `recall` command in a subprocess: index, status and search end to end
on the shipped fixtures; the envelope's JSON schema; search and more on the
command line."""

from __future__ import annotations

import json
import os

from session_recall.model import Envelope
from session_recall.text.redact import REDACTOR_VERSION
from session_recall.text.tokens import TOKENIZER_VERSION


def test_recall_schema_prints_the_envelope_json_schema(run_recall):
    done = run_recall("schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["type"] == "object" and schema["title"] == "Envelope"
    for key in ("query", "results", "next_cursor", "hint", "gaps", "diagnostics", "redacted", "status"):
        assert key in schema["properties"], key
    assert {"Result", "Passage", "PassageMessage", "Material", "Diagnostics"} <= set(schema["$defs"])
    assert set(schema["required"]) >= {"query", "hint", "diagnostics", "status"}


def test_recall_search_and_more_on_the_command_line(proj, corpus, run_recall):
    s = corpus.session("s1", proj, title="Résumé layout", started_at="2026-11-20T09:12:00Z")
    s.message("u1", "Which font should we use for the résumé?")
    s.message("a1", "Let's pick Source Serif 4 for the body.", role="assistant")
    corpus.open().close()
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Résumé layout" in out and "2026-11-20" in out and str(proj) in out
    assert "Source Serif 4 for the body" in out and "Which font should we use" in out
    assert "1 passage from 1 session" in out
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj, "--json")
    env = Envelope.model_validate_json(done.stdout)
    assert env.status == "ok" and env.results[0].title == "Résumé layout"
    done = run_recall("--db", corpus.db, "more", env.results[0].passage.anchor_id, "--cwd", proj, "--json")
    assert done.returncode == 0, done.stderr
    more = Envelope.model_validate_json(done.stdout)
    assert more.status == "ok" and [m.message_id for m in more.results[0].passage.messages] == ["u1", "a1"]
    # failures print their hint, not a traceback, and exit as grep does (test_cli_exit.py)
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj, "--session", "nope")
    assert done.returncode == 2 and "nope" in done.stderr and "Traceback" not in done.stderr
    done = run_recall("--db", corpus.db, "search", "sk-ant-api03-Zq8xVw2LmN4pRt6y", "--cwd", proj, "--json")
    assert json.loads(done.stdout)["status"] == "refused" and done.returncode == 3
    assert "Zq8xVw2LmN4pRt6y" not in done.stdout


def test_cli_index_status_search(run_recall, tmp_path, fixture_sessions):
    db = tmp_path / "cli.db"

    # a status of an index that does not exist (a mistyped --db) says so and creates nothing
    typo = run_recall("--db", db, "status", "--json")
    assert typo.returncode == 2 and typo.stdout == "" and "no index at" in typo.stderr, typo.stderr
    assert f"recall --db {db} index" in typo.stderr and not db.exists()

    first = run_recall("--db", db, "index", fixture_sessions)
    assert first.returncode == 0, first.stderr
    assert "12 messages added" in first.stdout

    st = run_recall("--db", db, "status", "--json")
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert (status["sessions"], status["messages"]) == (3, 12)
    assert status["skipped"] == {"noise": 4}
    assert [{k: s[k] for k in ("path", "kind", "files")} for s in status["sources"]] == [
        {"path": os.path.realpath(fixture_sessions), "kind": "auto", "files": 3}
    ]
    assert isinstance(status["sources"][0]["last_indexed_at"], str)
    assert status["schema_version"] >= 1
    assert (status["tokenizer_version"], status["redactor_version"]) == (TOKENIZER_VERSION, REDACTOR_VERSION)

    again = run_recall("--db", db, "index", "--json")  # every known source
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["messages_added"], report["files_read"], report["files"]) == (0, 0, 3)

    # The fixtures' sessions live in other projects than this test's cwd.
    found_cjk = run_recall("--db", db, "search", "--all-projects", "字体")
    assert found_cjk.returncode == 0, found_cjk.stderr
    assert "上周给简历选的什么字体" in found_cjk.stdout

    found_en = run_recall("--db", db, "search", "--all-projects", "--json", "serif")
    assert found_en.returncode == 0, found_en.stderr
    hits = {
        (r["session_id"], m["message_id"])
        for r in json.loads(found_en.stdout)["results"]
        for m in r["passage"]["messages"]
        if m["is_hit"]
    }
    assert {s for s, _ in hits} == {"a3f1c2d4-0001", "b7e9d0c1-0002"}  # both sessions that say Serif
