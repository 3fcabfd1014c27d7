"""The `recall` command in a subprocess: the envelope's JSON schema, search
and more on the command line."""

from __future__ import annotations

import json


from session_recall.model import Envelope


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
    s.say("u1", "Which font should we use for the résumé?")
    s.say("a1", "Let's pick Source Serif 4 for the body.", role="assistant")
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
    # failures print their hint, not a traceback, and exit normally
    done = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj, "--session", "nope")
    assert done.returncode == 0 and "nope" in done.stdout and "Traceback" not in done.stderr
    done = run_recall("--db", corpus.db, "search", "sk-ant-api03-Zq8xVw2LmN4pRt6y", "--cwd", proj, "--json")
    assert json.loads(done.stdout)["status"] == "refused"
    assert "Zq8xVw2LmN4pRt6y" not in done.stdout
