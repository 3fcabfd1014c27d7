"""Secrets and recall (contract section 9): one sample per secret kind of the
redactor (tests/secret_samples.py: text to plant, the secret itself, which
must never come out); a credential-shaped query is refused before any corpus
is touched; redaction in both output modes; no planted secret in any output."""

from __future__ import annotations

import json
import re

import pytest

from session_recall.text.redact import KINDS, find_secret
from tests.helpers import anchors
from tests.secret_samples import SECRETS


def test_every_secret_kind_has_a_sample():
    assert set(SECRETS) == set(KINDS)
    for kind, (text, _) in SECRETS.items():
        assert find_secret(text) == kind, kind


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_credential_shaped_query_is_refused_before_any_corpus_is_touched(proj, corpus, kind):
    sample, fragment = SECRETS[kind]
    corpus.session("s1", proj).message("m1", f"we deployed with {sample}")
    ix = corpus.open()
    statements: list[str] = []

    def trace(cursor, sql, bindings):
        statements.append(sql)
        return True

    ix.store.conn.exec_trace = ix.store.reader.exec_trace = trace  # the write path and the queries'
    try:
        envs = [ix.recall(sample, cwd=str(proj)), ix.recall(f"deployed {sample}", cwd=str(proj)),
                ix.recall("", question=f"what was {sample} for?", cwd=str(proj)),
                ix.recall(sample, cwd=str(proj), all_projects=True)]
    finally:
        ix.store.conn.exec_trace = ix.store.reader.exec_trace = None
    touched = [q for q in statements if "messages" in q or "message_fts" in q or "sessions" in q]
    assert touched == [], touched
    for env in envs:
        assert env.status == "refused" and env.results == [] and env.hint
        assert kind in env.hint
        out = env.model_dump_json()
        assert fragment not in out and sample not in out


def test_redaction_mask_and_hash(proj, corpus):
    gh, _ = SECRETS["github_token"]
    sk, _ = SECRETS["openai_key"]
    corpus.session("s1", proj, title=f"rotate {gh}").message(
        "m1", f"rotate the token {gh} now; the old {gh} and {sk} are dead")
    mask = corpus.open(redaction="mask")
    env = mask.recall("rotate", cwd=str(proj))
    text = env.results[0].passage.messages[0].text
    assert text == ("rotate the token [redacted:github_token] now; the old [redacted:github_token] and "
                    "[redacted:openai_key] are dead")
    assert env.results[0].title == "rotate [redacted:github_token]"
    assert env.redacted == 4  # three in the text, one in the title
    hashed = corpus.open(redaction="hash")
    env = hashed.recall("rotate", cwd=str(proj))
    text = env.results[0].passage.messages[0].text
    marks = re.findall(r"#[0-9a-f]{8}\b", text)
    assert len(marks) == 3
    assert marks[0] == marks[1] != marks[2]  # two mentions of one secret compare equal
    assert env.results[0].title == f"rotate {marks[0]}"
    assert env.redacted == 4
    assert "redacted" not in text
    # nothing to redact: the count is zero
    corpus.session("s2", proj).message("m1", "plain words")
    corpus.sync(hashed)
    assert hashed.recall("plain", cwd=str(proj)).redacted == 0


def test_no_planted_secret_appears_in_any_output(tmp_path, proj, corpus, run_recall):
    other = tmp_path / "other"
    other.mkdir()
    for n, (kind, (sample, _)) in enumerate(SECRETS.items()):
        cwd = proj if n % 2 else other
        s = corpus.session(f"s-{kind}", cwd, title=f"deploy notes {sample}", started_at=f"2026-11-{n % 28 + 1:02d}T{8 + n // 28:02d}:00:00Z")
        s.message("u1", f"deploy with {sample} please")
        s.message("c1", json.dumps({"command": f"curl -H '{sample}' https://api.example.com/deploy"}),
                  role="tool_call", tool_name="Bash")
        s.message("r1", json.dumps({"output": f"deploy ok\\n{sample}\\nsymbols a->b"}), role="tool_result")
        s.message("a1", f"done: deploy used {sample}, a->b", role="assistant",
                  attachments=[{"id": f"f{n}", "name": f"deploy {sample}.txt", "mime_type": "text/plain", "bytes": 9}])
    outputs: list[str] = []
    for mode in ("mask", "hash"):
        ix = corpus.open(redaction=mode)
        envs = []
        for kw in ({"query": "deploy"}, {"query": "deploy ok"}, {"query": "->"}, {"query": "curl"},
                   {"query": "", "question": "how did we deploy?"}, {"query": "deploy", "question": "what key?"},
                   {"query": "example"}, {"query": "api"}, {"query": "com"}, {"query": "redacted"}):
            for scope in ({"cwd": str(proj)}, {"all_projects": True}):
                env = ix.recall(limit=50, caller_session="s-email", **kw, **scope)
                envs.append(env)
                envs += [ix.recall_more(a, all_projects=True, caller_session="s-email") for a in anchors(env)]
        assert any(e.redacted for e in envs)
        outputs += [e.model_dump_json() for e in envs]
        outputs += [json.dumps(hit.text) + json.dumps(sess) for hit, sess in ix.search("deploy", limit=100)]
    for args in (["search", "deploy", "--all-projects"], ["search", "deploy", "--all-projects", "--json"],
                 ["search", "--question", "how did we deploy?", "--cwd", str(proj)]):
        done = run_recall("--db", corpus.db, *args)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    blob = "\n".join(outputs)
    assert "deploy" in blob
    for kind, (sample, fragment) in SECRETS.items():
        assert fragment not in blob, kind
        assert json.dumps(fragment)[1:-1] not in blob, kind
