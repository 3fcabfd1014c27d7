"""Secrets (contract section 6): redacted at ingest, so the derived database
never holds one, and a credential-shaped query is refused.

Secrets of every kind the redactor knows are planted in canonical logs: in
user and assistant messages, session titles (on the session line and on a
title line), tool-call arguments, tool results (inside a JSON envelope),
attachment names, system messages (not indexed at all), and in streaming
deltas that split a secret, settled later or never, read in one sync or
across several (as the watcher reads a log being written). After indexing,
the raw bytes of the database, its WAL and its shm file are searched, while
the writer still holds them open (before a checkpoint) and after a
checkpoint, for every 8-character piece of each secret's body and its
case-folded form (FTS5 stores folded tokens): none may be there. Then no
envelope of any query (mask and hash modes), no recall_more and no command
output holds one, and every credential-shaped query is refused with a hint.
An index built by an older redactor is rebuilt without the secrets it held.

RECALL_SECRET_SPLITS sets how many places each secret is split at when it
streams (CI: 3, just before its body, where the body begins and in its
middle; more are drawn at random; `RECALL_SECRET_SPLITS=0` splits at every
position). Each split streams twice: once settled at the end, once never.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from session_recall import Index
from session_recall.config import Settings
from session_recall.text.redact import KINDS, REDACTOR_VERSION, find_secret
from tests.conftest import CorpusSession
from tests.helpers import found, messages, write
from tests.secret_samples import SAMPLES

SPLITS = int(os.environ.get("RECALL_SECRET_SPLITS", "3"))
WINDOW = 8  # a piece of a secret this long found anywhere is a leak
_rng = random.Random(20261201)  # where streamed deltas split a secret


def pieces(body: str) -> set[str]:
    """Every WINDOW-character piece of a secret's body, as written and folded."""
    out = set()
    for i in range(max(1, len(body) - WINDOW + 1)):
        w = body[i : i + WINDOW]
        out |= {w, w.casefold()}
    return out


def leaks(blob: bytes, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(kind, piece) of every secret piece found in `blob` (kinds in `skip` aside)."""
    found = []
    for kind, _text, body in SAMPLES:
        if kind in skip:
            continue
        for piece in sorted(pieces(body)):
            if piece.encode() in blob:
                found.append((kind, piece))
                break
    return found


def test_the_samples_cover_every_kind_the_redactor_knows():
    assert {k for k, _, _ in SAMPLES} == set(KINDS)
    for kind, text, body in SAMPLES:
        assert find_secret(text) == kind, (kind, text)
        assert body in text


# --- planting -------------------------------------------------------------------------


def split_points(text: str, body: str) -> list[int]:
    """Offsets in `text` to split a streamed message at: inside the secret."""
    start = text.index(body)
    points = list(range(max(1, start - 8), start + len(body)))
    if SPLITS and len(points) > SPLITS:
        # always just before the body, where it begins (the head alone may already be
        # a secret, as a private key's header is) and in its middle; then at random
        fixed = [start - 1, start, start + len(body) // 2]
        rest = [p for p in points if p not in fixed]
        points = sorted([*fixed, *_rng.sample(rest, max(0, SPLITS - len(fixed)))])
    return points


def plant(logs: Path, cwd: str) -> list[tuple[CorpusSession, list[tuple[str, list[str], bool]]]]:
    """Write one log per sample with the secret everywhere; return the
    streams still to be delivered: (log, [(message_id, [later deltas], the
    settled text or None)])."""
    streams = []
    for i, (kind, text, body) in enumerate(SAMPLES):
        log = CorpusSession(logs / f"{i:02d}-{kind}.jsonl", f"secret-{i:02d}", cwd, "2026-11-20T09:00:00Z")
        log.session(f"deploy notes {text}")
        log.title(f"deploy again {text} later")
        (log.message("u1", f"deploy with {text} please")
            .message("a1", f"done: deploy used\n{text}\nand more", role="assistant")
            .message("c1", json.dumps({"command": f"curl -H '{text}' https://api.example.org/deploy",
                                       "env": {"KEY": text}}), role="tool_call", tool_name="Bash", turn_id="t2")
            .message("r1", json.dumps({"stdout": f"deploy ok\n{text}\n", "exit_code": 0}), role="tool_result",
                     turn_id="t2")
            .message("s1", f"system prompt with {text}", role="system")
            .message("f1", "deploy screenshot attached", role="user", turn_id="t3",
                     attachments=[{"id": f"att{i}", "name": f"deploy {text}.png", "mime_type": "image/png",
                                   "bytes": 100}])
            .message("f2", "", role="user", turn_id="t3",
                     attachments=[{"id": f"bt{i}", "name": text, "mime_type": "text/plain", "bytes": 5}]))
        pending = []
        for j, at in enumerate(split_points(f"deploy stream {text} end", body)):
            full = f"deploy stream {text} end"
            pieces_ = [full[:at], full[at:]]
            # a third split inside the second half, when there is room
            if len(pieces_[1]) > 6:
                cut = len(pieces_[1]) // 2
                pieces_ = [pieces_[0], pieces_[1][:cut], pieces_[1][cut:]]
            for settles in (True, False):  # one stream settles, its twin never does
                mid = f"d{j}{'s' if settles else 'n'}"
                log.delta(mid, pieces_[0], role="assistant", turn_id="t4")
                pending.append((mid, pieces_[1:], full if settles else None))
        streams.append((log, pending))
    return streams


def deliver(streams, step: int) -> bool:
    """Append the `step`-th later delta of every stream (then the settling
    message); return whether anything was written."""
    wrote = False
    for log, pending in streams:
        for mid, rest, settle in pending:
            if step < len(rest):
                log.delta(mid, rest[step], role="assistant", turn_id="t4")
                wrote = True
            elif step == len(rest) and settle is not None:
                log.message(mid, "settled: " + settle, role="assistant", turn_id="t4")
                wrote = True
    return wrote


def drop_streams(logs: Path) -> None:
    """Remove the deltas from the logs: what is left has secrets everywhere but in streams."""
    for f in logs.iterdir():
        kept = [ln for ln in f.read_bytes().splitlines(keepends=True) if b'"message_delta"' not in ln]
        f.write_bytes(b"".join(kept))


def database_files(db: Path) -> dict[str, bytes]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            out[p.name] = p.read_bytes()
    return out


def assert_no_leak(files: dict[str, bytes], when: str, skip: tuple[str, ...] = ()) -> None:
    found = {name: leaks(blob, skip) for name, blob in files.items()}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"secret pieces in the database files {when}: {found}"


@pytest.fixture
def planted(tmp_path, isolated_settings):
    proj = tmp_path / "proj"
    proj.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    return proj, logs, plant(logs, str(proj))




@pytest.mark.parametrize("reads", [
    "settled only",
    "streamed, one sync",
    "streamed, a sync per delta",
])
def test_no_secret_reaches_the_database_its_wal_or_its_shm(tmp_path, planted, reads):
    proj, logs, streams = planted
    db = tmp_path / "recall.db"
    ix = Index.open(db, settings=Settings())
    try:
        if reads == "settled only":  # no delta at all: every place but streams
            drop_streams(logs)
            report = ix.sync([str(logs)], kind="canonical")
        elif reads == "streamed, one sync":
            step = 0
            while deliver(streams, step):
                step += 1
            report = ix.sync([str(logs)], kind="canonical")
        else:  # the watcher's way: each delta is read (and committed) before the next is written
            report = ix.sync([str(logs)], kind="canonical")
            step = 0
            while deliver(streams, step):
                ix.sync([str(logs)], kind="canonical")
                step += 1
        assert report.secrets_redacted > 0
        st = ix.status()
        assert st["messages"] > 0 and (st["streaming"] > 0) == (reads != "settled only")
        # Contract 2.1 makes a stream searchable as it arrives, and an e-mail
        # address's local part is an ordinary word until its `@` comes, so it
        # is stored until the fragment that completes it replaces it; the pass
        # that replaces it owes a wipe (its superseded FTS5 tokens, its old
        # row), paid before the pass returns (docs/indexing.md), so nothing is
        # skipped here. Every credential kind is held back.
        skip: tuple[str, ...] = ()
        with ix.store.writer():  # the writer holds the files open, nothing checkpointed since the last commit
            files = database_files(db)
            # (empty when the pass ended with a wipe, which truncates the WAL)
            assert any(name.endswith("-wal") for name in files)
            assert_no_leak(files, f"({reads}) before a checkpoint", skip)
        ix.store.conn.execute("PRAGMA wal_checkpoint(FULL)")
        assert_no_leak(database_files(db), f"({reads}) after a checkpoint", skip)
    finally:
        ix.close()
    assert_no_leak(database_files(db), f"({reads}) after close", skip)


def _outputs(ix: Index, proj: Path, mode: str) -> list[str]:
    out = []
    kws = [{"query": "deploy"}, {"query": "deploy stream"}, {"query": "settled"}, {"query": "screenshot"},
           {"query": "curl"}, {"query": "example"}, {"query": "com"}, {"query": "png"}, {"query": "redacted"},
           {"query": "", "question": "how did we deploy?"}, {"query": "deploy", "question": "which key?"},
           {"query": "BEGIN"}, {"query": "PRIVATE KEY"}, {"query": "@"}, {"query": "://"}, {"query": "="}]
    for kw in kws:
        for scope in ({"cwd": str(proj)}, {"all_projects": True}):
            env = ix.recall(limit=50, caller_session="secret-01", **kw, **scope)
            out.append(env.model_dump_json())
            for r in env.results:
                more = ix.recall_more(r.passage.anchor_id, cwd=str(proj), caller_session="secret-01")
                out.append(more.model_dump_json())
    for hit, sess in ix.search("deploy", limit=10**6):  # every message, not only the best 50
        out.append(json.dumps([hit.text, hit.attachments, sess]))
    return out


@pytest.mark.parametrize("reads", ["settled only", "streamed"])
def test_no_secret_reaches_an_envelope_or_the_terminal(tmp_path, planted, run_recall, reads):
    proj, logs, streams = planted
    db = tmp_path / "recall.db"
    if reads == "settled only":
        drop_streams(logs)
    with Index.open(db, settings=Settings()) as ix:
        ix.sync([str(logs)], kind="canonical")
        step = 0
        while reads == "streamed" and deliver(streams, step):
            ix.sync([str(logs)], kind="canonical")
            step += 1
    blob: list[str] = []
    redacted = 0
    for mode in ("mask", "hash"):
        with Index.open(db, settings=Settings(redaction=mode)) as ix:
            outs = _outputs(ix, proj, mode)
            blob += outs
            redacted += sum(o["redacted"] for o in map(json.loads, outs) if isinstance(o, dict))
            text = "\n".join(outs)
            assert ("[redacted:" in text) == (mode == "mask")
    for args in (["search", "deploy", "--all-projects", "--limit", "50"],
                 ["search", "deploy", "--all-projects", "--json", "--limit", "50"],
                 ["search", "--question", "which key did we deploy with?", "--cwd", str(proj)]):
        done = run_recall("--db", db, *args)
        assert done.returncode == 0, done.stderr
        blob.append(done.stdout + done.stderr)
    assert redacted > 0
    joined = "\n".join(blob)
    assert "deploy" in joined
    found = leaks(joined.encode()) + leaks(json.dumps(joined).encode())
    assert not found, found


def test_every_credential_shaped_query_is_refused_with_a_hint(tmp_path, planted, run_recall):
    """Over one index of every planted log (one sync: a refusal touches no
    corpus, so the index need not be rebuilt per sample); the command line
    is asked for every fourth sample."""
    proj, logs, _ = planted
    db = tmp_path / "recall.db"
    with Index.open(db, settings=Settings()) as ix:
        ix.sync([str(logs)], kind="canonical")
        for kind, text, body in SAMPLES:
            for kw in ({"query": text}, {"query": f"deploy {text}"}, {"query": f'"{text}"'},
                       {"query": "", "question": f"what was {text} used for?"},
                       {"query": "deploy", "question": f"and {text}?"}, {"query": text, "all_projects": True},
                       {"query": text, "session_id": "secret-00"}):
                env = ix.recall(cwd=str(proj), **kw)
                assert env.status == "refused" and env.results == [] and env.next_cursor is None, (kind, kw)
                assert kind in env.hint and "search for the words around it" in env.hint, (kind, env.hint)
                assert not leaks(env.model_dump_json().encode()), kw
    for kind, text, body in SAMPLES[::4]:
        done = run_recall("--db", db, "search", "--json", "--", text)
        assert done.returncode == 3 and json.loads(done.stdout)["status"] == "refused", done.stderr
        assert not leaks(done.stdout.encode())


def test_a_claude_code_title_waiting_for_its_session_is_not_stored_bare(tmp_path, isolated_settings):
    """Claude Code writes title and summary lines that can come before the
    session's first message (at the head of a file, or a file read while it
    is being written): the parser keeps them until the session opens, in its
    state, which the index stores with the file's offset."""
    _, token, token_body = SAMPLES[11]  # ghp_
    _, key, key_body = SAMPLES[8]  # sk-proj-
    sid = "5f0c1d2e-0000-4000-8000-00000000beef"
    folder = tmp_path / "claude" / "-home-ada-shop"
    folder.mkdir(parents=True)
    log = folder / f"{sid}.jsonl"
    log.write_text(json.dumps({"type": "custom-title", "customTitle": f"deploy with {token}", "sessionId": sid})
                   + "\n" + json.dumps({"type": "summary", "summary": f"rotate {key}", "leafUuid": "x"}) + "\n")
    db = tmp_path / "recall.db"
    with Index.open(db, settings=Settings()) as ix:
        ix.sync([str(tmp_path / "claude")], kind="claude-code")
        with ix.store.writer():
            assert_no_leak(database_files(db), "while a Claude Code title waits for its session")


def test_an_index_built_by_redactor_version_1_is_rebuilt_without_its_secrets(index, db_path, logs_dir, canonical):
    """Version 1 did not know keyed values in env form (`DB_PASSWORD=...`):
    an index it built holds them, in text, titles and attachment names. A
    version change rebuilds it, messages whose file is gone included, and no
    byte of those secrets is left in the database or its WAL."""
    from session_recall.indexer.ingest import fts_body

    secret, gone = "Zq8xVw2LmN4pRt6yHun", "Pk7wQ2zXc9Lm4Rt8Vb"
    a, b = canonical("sa"), canonical("sb", cwd="/home/ada/b")
    write(logs_dir / "a.jsonl", a.session(), a.message("m1", f"export DB_PASSWORD={secret} then deploy"))
    write(logs_dir / "b.jsonl", b.session(), b.message("m1", f"gone: DB_PASSWORD={gone} shrike"))
    index.sync([logs_dir])
    (logs_dir / "b.jsonl").unlink()
    index.sync([logs_dir])
    conn = index.store.conn
    with index.store.writer():  # what version 1 stored: the values bare
        for rowid, text in list(conn.execute("SELECT id, text FROM messages")):
            bare = text.replace(text[text.index("=") + 1 : text.index(" ", text.index("="))],
                                secret if "export" in text else gone)
            conn.execute("UPDATE messages SET text = ? WHERE id = ?", (bare, rowid))
            conn.execute("DELETE FROM message_fts WHERE rowid = ?", (rowid,))
            conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (rowid, fts_body(bare, [])[0]))
        conn.execute("UPDATE sessions SET title = ?", (f"title DB_PASSWORD={gone}",))
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'redactor_version'")
    assert found(index, "shrike") == [("sb", "m1")]
    assert index.status()["stale"]

    report = index.sync([logs_dir])
    assert report.rebuilt is True
    assert index.status()["redactor_version"] == REDACTOR_VERSION
    assert found(index, "shrike") == [("sb", "m1")] and found(index, "deploy") == [("sa", "m1")]
    for text, _ in messages(index).values():
        assert secret not in text and gone not in text
    titles = [t for (t,) in conn.execute("SELECT title FROM sessions")]
    assert all(gone not in (t or "") for t in titles)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for suffix in ("", "-wal"):
        p = Path(f"{db_path}{suffix}")
        if p.exists():
            blob = p.read_bytes()
            for s in (secret, gone):
                for piece in {s[i : i + 8] for i in range(len(s) - 7)} | {s[i : i + 8].lower() for i in range(len(s) - 7)}:
                    assert piece.encode() not in blob, (p.name, piece)


def test_shapes_from_outside_the_table_stay_out_of_the_database_and_the_mcp_answers(tmp_path, recall_cmd, canonical):
    """The OUTSIDE shapes of tests/secret_samples.py (provider prefixes and
    syntaxes from public scanners, not the table's examples) planted in a
    user message, a tool call's JSON arguments, a tool result's JSON envelope
    and an attachment's name; indexed; then read back by
    the real MCP server over stdio: no piece of any of them is in the
    database files or in any answer of `recall` or `recall_more`, and each
    one asked for is refused."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from tests.secret_samples import OUTSIDE

    proj = tmp_path / "proj"
    proj.mkdir()
    log = canonical("outside-1", cwd=str(proj))
    lines = [log.session(title="outside shapes")]
    for i, (text, _secret) in enumerate(OUTSIDE):
        lines += [log.message(f"u{i}", f"ferrule {text}", turn_id=f"t{i}"),
                  log.message(f"c{i}", json.dumps({"command": f"ferrule {text}"}), role="tool_call",
                              tool_name="Bash", turn_id=f"t{i}"),
                  log.message(f"r{i}", json.dumps({"content": [{"type": "text", "text": f"ferrule {text}"}]}),
                              role="tool_result", turn_id=f"t{i}"),
                  log.message(f"a{i}", "ferrule attached", role="assistant", turn_id=f"t{i}",
                              attachments=[{"id": f"att{i}", "name": f"ferrule {text}.txt",
                                            "mime_type": "text/plain", "bytes": 10}])]
    (tmp_path / "logs").mkdir()
    write(tmp_path / "logs" / "outside.jsonl", *lines)
    db = tmp_path / "recall.db"
    with Index.open(db, settings=Settings()) as ix:
        assert ix.sync([str(tmp_path / "logs")], kind="canonical").as_dict()["messages_added"] == 4 * len(OUTSIDE)

    def outside_leaks(blob: bytes) -> list[str]:
        return [p for _, secret in OUTSIDE for p in sorted(pieces(secret)) if p.encode() in blob][:5]

    for f in tmp_path.glob("recall.db*"):
        assert not outside_leaks(f.read_bytes()), f.name

    async def main() -> list[str]:
        params = StdioServerParameters(command=recall_cmd[0], args=[*recall_cmd[1:], "--db", str(db), "mcp"],
                                       cwd=str(proj), env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                                                           "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        answers = []
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write_), ClientSession(read, write_) as s:
                await s.initialize()
                cursor = None
                for _page in range(40):
                    args = {"query": "ferrule", "limit": 50, **({"cursor": cursor} if cursor else {})}
                    res = await s.call_tool("recall", args)
                    answers.append(res.model_dump_json())
                    env = res.structured_content or {}
                    for r in env.get("results", []):
                        more = await s.call_tool("recall_more", {"anchor": r["passage"]["anchor_id"]})
                        answers.append(more.model_dump_json())
                    cursor = env.get("next_cursor")
                    if not cursor:
                        break
                for text, _secret in OUTSIDE:
                    res = await s.call_tool("recall", {"query": text})
                    assert (res.structured_content or {}).get("status") == "refused", text
                    answers.append(res.model_dump_json())
        return answers

    answers = anyio.run(main)
    joined = "\n".join(answers)
    assert joined.count("ferrule") > len(OUTSIDE) and "[redacted:" in joined
    assert not outside_leaks(joined.encode())
    assert not outside_leaks(json.loads(json.dumps(joined)).encode())


ID_SECRETS = {"session": "ghp_Qm4Zt8Xw2Nc6Vb9Lk3Hj7Gf5Ds1Ap0Ry4Eu8", "message": "sk-ant-api03-Wn5Zs4Yb7Rq9fVxT2Lm8Kp3",
              "turn": "sk-proj-Tq2Lm8Wn5Zs4Yb7Rq9fVxK", "ts": "xoxb-2048-17761-Zs4Yb7Rq9fVxT2",
              "mime": "glpat-Lm8Kp3Wn7Zs4Yb7Rq9fV"}


def _id_logs(logs: Path, cwd: Path, canonical) -> None:
    s = ID_SECRETS
    log = canonical(s["session"], cwd=str(cwd))
    write(logs / "ids-a.jsonl", log.session(title="ids"),
          log.delta(s["message"], "kestrel streamed ", turn_id=s["turn"]),
          log.delta(s["message"], "in parts", turn_id=s["turn"]),
          log.message(s["message"], "kestrel settled whole", role="assistant", turn_id=s["turn"]),
          log.message("m2", "kestrel at a strange time", turn_id=s["turn"], ts=f"2026-11-20T10:00:09Z {s['ts']}"),
          log.message("m3", "kestrel with a file", turn_id=s["turn"],
                      attachments=[{"id": "a1", "name": "notes.txt", "mime_type": f"text/plain; key={s['mime']}",
                                    "bytes": 3}]))
    # the same session, read from a second log: still one session
    write(logs / "ids-b.jsonl", log.session(), log.message("m4", "kestrel again", turn_id="t2"))


def test_ids_times_and_media_types_holding_a_secret_are_not_stored_or_shown(tmp_path, canonical, run_recall):
    """Contract section 6: every stored field that is shown. A session id, a
    message id and a turn id holding a secret are stored as their keyed hash
    (`redacted-` and 16 hex digits, the same at every read, so the session and
    the streamed message stay one); a timestamp holding one is no time; a
    media type holding one is the default. The rows of the index and every
    output of `recall search`, `show` and `more` hold no piece of them."""
    proj, logs, db = tmp_path / "proj", tmp_path / "logs", tmp_path / "recall.db"
    proj.mkdir()
    logs.mkdir()
    _id_logs(logs, proj, canonical)
    done = run_recall("--db", db, "index", "--kind", "canonical", logs)
    assert done.returncode == 0, done.stderr
    with Index.open(db) as ix:
        rows = [repr(r) for table in ("sessions", "messages", "leaf_titles")
                for r in ix.store.conn.execute(f"SELECT * FROM {table}")]
        sessions = list(ix.store.conn.execute("SELECT session_id FROM sessions"))
        texts = sorted(t for (t,) in ix.store.conn.execute("SELECT text FROM messages"))
    assert len(sessions) == 1 and sessions[0][0].startswith("redacted-")
    assert texts == ["kestrel again", "kestrel at a strange time", "kestrel settled whole", "kestrel with a file"]
    outs = ["\n".join(rows)]
    found_env = json.loads(run_recall("--db", db, "search", "kestrel", "--cwd", proj, "--json").stdout)
    sid = found_env["results"][0]["session_id"]
    for args in (["search", "kestrel", "--cwd", proj], ["show", sid, "--cwd", proj],
                 ["show", sid, "--cwd", proj, "--format", "json"], ["more", "1"],
                 ["more", found_env["results"][0]["passage"]["anchor_id"], "--json", "--cwd", proj]):
        done = run_recall("--db", db, *args)
        assert done.returncode == 0, (args, done.stderr)
        outs.append(done.stdout + done.stderr)
    outs.append(json.dumps(found_env))
    joined = "\n".join(outs)
    assert "kestrel" in joined and sid[:17] in outs[1]  # the short id tells a redacted id by its hash
    for secret in ID_SECRETS.values():
        assert not any(p in joined for p in pieces(secret.split("-", 1)[-1].split("_", 1)[-1])), secret


def test_an_index_built_by_redactor_version_2_is_rebuilt_without_secrets_in_its_ids(tmp_path, canonical):
    """Version 2 stored ids as written. A rebuild maps them as the writer
    does now: a log still there is read again into the same session, and the
    messages of a log that is gone keep theirs, mapped in place."""
    proj, logs, db = tmp_path / "proj", tmp_path / "logs", tmp_path / "recall.db"
    proj.mkdir()
    logs.mkdir()
    _id_logs(logs, proj, canonical)
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="canonical")
        conn = ix.store.conn
        with ix.store.writer():  # what version 2 stored: the ids as written
            conn.execute("UPDATE sessions SET session_id = ?", (ID_SECRETS["session"],))
            conn.execute("UPDATE messages SET message_id = ? WHERE text LIKE '%settled%'", (ID_SECRETS["message"],))
            conn.execute("UPDATE messages SET turn_id = ? WHERE turn_id LIKE 'redacted-%'", (ID_SECRETS["turn"],))
            conn.execute("UPDATE meta SET value = '2' WHERE key = 'redactor_version'")
        (logs / "ids-b.jsonl").unlink()  # its message survives in the index alone
        assert ix.sync([str(logs)], kind="canonical").rebuilt is True
        rows = "\n".join(repr(r) for table in ("sessions", "messages")
                         for r in conn.execute(f"SELECT * FROM {table}"))
        assert [n for (n,) in conn.execute("SELECT n_messages FROM sessions")] == [4]
        assert len(found(ix, "kestrel")) == 4
    for secret in ID_SECRETS.values():
        assert secret not in rows, secret
