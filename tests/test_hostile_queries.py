"""Hostile queries (contract sections 3, 6 and 8): whatever a caller passes in
any parameter, every call returns an envelope with a documented status and a
hint, never an exception, and the envelope can be written as JSON.

Against a real index of canonical logs (two projects, CJK, symbols,
attachments, secrets), the attacks are FTS5 syntax (`"`, `NEAR(`, `*`, `^`,
`:`, column filters, `AND`/`OR`/`NOT`, parentheses), control characters, NUL,
100 KB queries, lone surrogates (as the Python API and `recall` on a
non-UTF-8 argv receive them), forged cursors and anchors, in `query`,
`question`, `cwd`, `session_id`, `cursor` and `recall_more`'s anchor; a fixed
list first, then hypothesis.

RECALL_HOSTILE_EXAMPLES sets the number of hypothesis examples (CI: 500; by
hand: `RECALL_HOSTILE_EXAMPLES=10000 python -m pytest tests/test_hostile_queries.py -s`,
which prints the count of calls and the slowest).
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
import typing

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_recall import Index
from session_recall.config import Settings
from session_recall.model import Envelope, Status
from session_recall.query.envelope import make_cursor
from session_recall.query.gates import resolve, under
from session_recall.query.passages import anchor_id
from session_recall.text.fold import replace_lone_surrogates

EXAMPLES = int(os.environ.get("RECALL_HOSTILE_EXAMPLES", "500"))
STATUSES = set(typing.get_args(Status))
# What a hostile call may answer, by the parameter it attacks.
OK = {"ok", "partial", "no_match"}
STATS = {"calls": 0, "slowest_s": 0.0, "slowest": ""}

KB100 = 100_000
ATTACKS: list[str] = [
    # FTS5 syntax, alone and around real words
    '"', '""', '"""', '"deploy', 'deploy"', '"deploy checklist', '" OR "', 'deploy" OR "x',
    "NEAR(", "NEAR(deploy checklist)", "NEAR(deploy checklist, 2)", "NEAR/2", "deploy NEAR checklist",
    "*", "**", "deploy*", "*deploy", "d*", "^", "^deploy", "deploy^", ":", "::", "body:", "body:deploy",
    "body : deploy", "{body}:deploy", "{body deploy}", "-body:deploy", "message_fts:deploy", "rank:1", "rowid:1",
    "- deploy", "+deploy", "AND", "OR", "NOT", "and", "deploy AND", "AND deploy", "deploy OR checklist",
    "deploy NOT checklist", "NOT NOT NOT", "(", ")", "()", "(deploy", "deploy)", "((deploy))",
    "(deploy OR checklist) AND font", '"(" ")"', "deploy ; DROP TABLE messages; --", "' OR 1=1 --",
    "%", "_", "%deploy%", "deploy_", "\\", "\\\\", "'", "`", "$", "{", "}", "[", "]", "|", "&&", "->",
    # control characters, NUL, unusual space and format characters
    "\x00", "deploy\x00checklist", "\x00deploy", "\x01\x02\x03", "\x1b[31mdeploy\x1b[0m", "\x7f", "\x85",
    "\t\n\r\x0b\x0c", "\u2028\u2029", "\u200b", "\u200d", "\ufeff", "\u202e", "\u3000", "\xa0deploy\xa0",
    "\ue000openai_key:12345678\ue001", "\ue000", "\ue001", "redacted", "[redacted:email]", "#0a1b2c3d",
    "\ufffd", "\U0010ffff", "\U000e0001",
    # lone surrogates, high and low, paired in the wrong order, mixed with words
    "\ud800", "\udfff", "\udcff", "deploy\ud800", "\ud800deploy", "a\udfffb", "\udc00\ud800", "简\ud800历",
    # scripts, combining marks, emoji
    "简历", "简", "模板 简历", "ｄｅｐｌｏｙ", "DEPLOY", "e\u0301", "\u0301", "🙂", "🙂🙂", "👩‍💻",
    # long queries
    "deploy " * (KB100 // 7), "x" * KB100, "简" * (KB100 // 3), "->" * (KB100 // 2), '"' * KB100,
    "(" * KB100, "NEAR(" * (KB100 // 5), "\x00" * KB100, " ".join(str(i) for i in range(20_000))[:KB100],
    ("deploy 简历 a->b " * 7000)[:KB100], ("\ud800" * KB100),
]


# --- the corpus -------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real index of two projects: words, CJK, symbols, attachments, a
    secret, several turns; with the anchors and a real cursor it returns."""
    from conftest import Corpus

    root = tmp_path_factory.mktemp("hostile")
    proj, other = root / "proj", root / "other"
    proj.mkdir()
    other.mkdir()
    corpus = Corpus(root)
    for n in range(12):
        cwd = proj if n % 3 else other
        s = corpus.session(f"s{n}", cwd, title=f"deploy notes {n} 简历", started_at=f"2026-11-{n + 1:02d}T08:00:00Z")
        s.message("u1", f"deploy checklist font {n}: 简历模板 a->b 100% C++ body:x NEAR(a b) \"quoted\" x*y",
                  turn_id="t1")
        s.message("a1", f"the font is serif; 显示 浮窗 deploy {n} with sk-proj-Q7mW2xN9bV4cK8jH3gF6{n:02d}",
                  role="assistant", turn_id="t1",
                  attachments=[{"id": f"f{n}", "name": f"screen {n}.png", "mime_type": "image/png", "bytes": 10}])
        s.message("c1", json.dumps({"command": f"grep -r deploy src/{n}"}), role="tool_call", tool_name="Bash",
                  turn_id="t2")
        s.message("r1", json.dumps({"stdout": f"src/{n}/deploy.sh: checklist"}), role="tool_result", turn_id="t2")
    ix = Index.open(corpus.db, settings=Settings())
    ix.sync([str(corpus.logs)], kind="canonical")
    page = ix.recall("deploy", cwd=str(proj), limit=2)
    assert page.status == "ok" and page.next_cursor, page.hint
    everything = ix.recall("deploy", all_projects=True, limit=50)
    anchors = [r.passage.anchor_id for r in everything.results]
    try:
        yield {"ix": ix, "proj": str(proj), "other": str(other), "anchors": anchors, "cursor": page.next_cursor}
    finally:
        ix.close()


def check(env, *, call: str, t0: float, scope_cwd: str | None = None, expect: set[str] | None = None) -> None:
    """The invariants of every answer: an Envelope, a documented status, a
    hint, JSON that reads back to the same envelope, results only when the
    status says so, and none outside the caller's project."""
    elapsed = time.perf_counter() - t0
    STATS["calls"] += 1
    if elapsed > STATS["slowest_s"]:
        STATS.update(slowest_s=elapsed, slowest=call[:120])
    assert isinstance(env, Envelope), call
    assert env.status in STATUSES, (call, env.status)
    if expect is not None:
        assert env.status in expect, (call, env.status, env.hint)
    assert isinstance(env.hint, str) and env.hint.strip(), call
    text = env.model_dump_json()  # must not raise (no lone surrogate, nothing unencodable)
    text.encode("utf-8")
    assert Envelope.model_validate_json(text) == env, call
    if env.status not in ("ok", "partial"):
        assert env.results == [] and env.next_cursor is None, (call, env.status)
    if scope_cwd is not None:
        root = resolve(scope_cwd)
        for r in env.results:
            assert under(resolve(r.cwd), root), (call, r.cwd)


def caller_root(cwd: str | None) -> str:
    """The project a caller's cwd names (None or empty: the process's cwd;
    lone surrogates read as U+FFFD)."""
    return replace_lone_surrogates(cwd or os.getcwd())


def calls(w: dict, value: str):
    """Every parameter a value can be passed in, with the statuses allowed there."""
    proj = w["proj"]
    yield "query", dict(query=value, cwd=proj), None
    yield "query/all", dict(query=value, all_projects=True), None
    yield "question", dict(query="", question=value, cwd=proj), None
    yield "query+question", dict(query="deploy", question=value, cwd=proj), None
    yield "cwd", dict(query="deploy", cwd=value), OK
    yield "cwd/relative", dict(query="deploy", cwd="rel/" + value), OK
    yield "session_id", dict(query="deploy", cwd=proj, session_id=value), OK | {"unknown_session"}
    yield "cursor", dict(query="deploy", cwd=proj, limit=2, cursor=value), {"stale_cursor"}


def run_all(w: dict, value: str) -> None:
    ix, proj = w["ix"], w["proj"]
    for name, kw, expect in calls(w, value):
        t0 = time.perf_counter()
        try:
            env = ix.recall(**kw)
        except Exception as e:  # the point of the test: say which call raised
            pytest.fail(f"recall({name}={value[:60]!r}) raised {type(e).__name__}: {e}")
        scope = None if kw.get("all_projects") else caller_root(kw.get("cwd"))
        check(env, call=f"{name}={value[:60]!r}", t0=t0, scope_cwd=scope, expect=expect)
    for anchor_value, kw in ((value, {}), (value, {"cwd": proj}), (value, {"all_projects": True}),
                             (w["anchors"][0], {"cwd": value})):
        t0 = time.perf_counter()
        try:
            env = ix.recall_more(anchor_value, **kw)
        except Exception as e:
            pytest.fail(f"recall_more({anchor_value[:60]!r}, {kw!r:.60}) raised {type(e).__name__}: {e}")
        check(env, call=f"recall_more {anchor_value[:40]!r} {kw!r:.40}", t0=t0,
              expect={"ok", "unknown_anchor"})


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{i:03d}" for i in range(len(ATTACKS))])
def test_every_attack_in_every_parameter_gets_an_envelope(world, attack):
    run_all(world, attack)


def test_a_query_of_fts5_syntax_is_searched_as_plain_text(world):
    """Operators are words or symbols like any other, never syntax: the
    message that literally holds them is found, and nothing else is."""
    ix, proj = world["ix"], world["proj"]
    for q in ('NEAR(a b)', 'body:x', '"quoted"', "x*y", "C++", "100%"):
        env = ix.recall(q, cwd=proj, limit=50)
        assert env.status == "ok", (q, env.hint)
        assert {m.message_id for r in env.results for m in r.passage.messages if m.is_anchor} == {"u1"}, q
    for q in ("AND", "OR", "NOT", "NEAR", "rank:1", "rowid:1", "deploy*"):
        env = ix.recall(q, cwd=proj)
        assert env.status in ("no_match", "ok"), (q, env.hint)


def test_forged_cursors_and_anchors_are_hints(world):
    ix, proj, other = world["ix"], world["proj"], world["other"]
    real = world["cursor"]
    key = orjson.loads(base64.urlsafe_b64decode(real + "=" * (-len(real) % 4)))["k"]
    generation = ix.engine.generation()

    def raw(obj) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(obj)).rstrip(b"=").decode()

    cursors = [real + "x", real[:-1], "=" * 8, raw([]), raw({"k": key}), raw({"k": key, "o": -1, "g": generation}),
               raw({"k": key, "o": 1.5, "g": generation}), raw({"k": key, "o": "2", "g": generation}),
               raw({"k": key, "o": 2**62, "g": generation}), raw({"k": key, "o": 10**6, "g": generation}),
               raw({"k": key, "o": True, "g": generation}), raw({"k": key, "o": 2, "g": generation + 1}),
               raw({"k": key, "o": 2, "g": None}), make_cursor(key, 0, generation), "%" * 1000,
               base64.urlsafe_b64encode(b"\xff" * 300).decode(), base64.urlsafe_b64encode(b"[" * 10000).decode()]
    for c in cursors:
        t0 = time.perf_counter()
        env = ix.recall("deploy", cwd=proj, limit=2, cursor=c)
        check(env, call=f"cursor {c[:40]}", t0=t0, scope_cwd=proj, expect=OK | {"stale_cursor"})
        # the cursor of the caller's project never pages another project
        env = ix.recall("deploy", cwd=other, limit=2, cursor=c)
        check(env, call=f"cursor {c[:40]} other", t0=t0, scope_cwd=other, expect=OK | {"stale_cursor"})
    anchors = [raw(["canonical", proj, "s1"]), raw(["canonical", proj, "s1", "u1", "x"]), raw([1, 2, 3, 4]),
               raw({"a": 1}), raw(["canonical", other, "s0", "u1"]), raw(["canonical", proj + "/", "s1", "u1"]),
               raw(["canonical", proj + "/../other", "s0", "u1"]), raw(["canonical", "", "", ""]),
               anchor_id("canonical", proj, "s1\x00", "u1"), base64.urlsafe_b64encode(rb'["\ud800","\udfff","s","m"]').decode(),
               anchor_id("canonical", proj, "s1", "u1" + "x" * KB100), "A" * KB100]
    for a in anchors:
        t0 = time.perf_counter()
        env = ix.recall_more(a, cwd=proj)
        check(env, call=f"anchor {a[:40]}", t0=t0, scope_cwd=proj, expect={"ok", "unknown_anchor"})


# --- hypothesis -------------------------------------------------------------------

FRAGMENTS = ['"', "NEAR(", "NEAR/3", "*", "^", ":", "body:", "{body}", "AND", "OR", "NOT", "(", ")", "-", "+",
             "deploy", "checklist", "font", "简历", "模板", "显示", "a->b", "100%", "C++", "x*y", "\x00", "\x1b",
             "\ud800", "\udc00", "\ue000", "\ue001", "redacted", "sk-", "ghp_", "@", "/", "..", "~", "%", "_",
             "\\", "'", "🙂", "e\u0301", "ｆｏｎｔ", "\u3000", "\ufeff"]
ANY_CHAR = st.characters(codec=None, categories=None)  # every code point, lone surrogates included
piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(ANY_CHAR, max_size=12),
                  st.text(st.sampled_from('"*^:(){}-+ \t\n'), max_size=6))
hostile = st.one_of(
    st.lists(piece, max_size=12).map(lambda parts: " ".join(parts)),
    st.lists(piece, max_size=12).map("".join),
    st.text(ANY_CHAR, max_size=200),
    st.builds(lambda p, n: (p * n)[:KB100], st.sampled_from(FRAGMENTS + ["deploy ", "a b "]),
              st.integers(1, KB100)),
)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(value=hostile, field=st.sampled_from(["query", "question", "cwd", "session_id", "cursor", "anchor",
                                               "everywhere"]),
       all_projects=st.booleans(), limit=st.one_of(st.none(), st.integers(-3, 10_000)))
def test_generated_hostile_values_get_an_envelope(world, value, field, all_projects, limit):
    ix, proj = world["ix"], world["proj"]
    t0 = time.perf_counter()
    call = f"{field}={value[:80]!r} all_projects={all_projects} limit={limit}"
    if field == "anchor":
        try:
            env = ix.recall_more(value, cwd=proj, all_projects=all_projects)
        except Exception as e:
            pytest.fail(f"{call} raised {type(e).__name__}: {e}")
        check(env, call=call, t0=t0, expect={"ok", "unknown_anchor"})
        return
    kw = {"query": "deploy", "cwd": proj, "all_projects": all_projects, "limit": limit}
    if field == "everywhere":
        kw.update(query=value, question=value, cwd=value, session_id=value, cursor=value)
    elif field == "question":
        kw.update(query="", question=value)
    else:
        kw[field] = value
    try:
        env = ix.recall(**kw)
    except Exception as e:
        pytest.fail(f"{call} raised {type(e).__name__}: {e}")
    check(env, call=call, t0=t0, scope_cwd=None if all_projects else caller_root(kw["cwd"]))


def test_report_hostile_figures(world):
    """Runs last in this file: prints the figures for docs/reliability.md."""
    print(f"\nhostile queries: {STATS['calls']} calls ({EXAMPLES} generated examples), 0 exceptions; "
          f"slowest {STATS['slowest_s'] * 1000:.0f} ms: {STATS['slowest']}")


# --- the other interfaces ---------------------------------------------------------


def test_the_command_line_takes_non_utf8_arguments(world, run_recall):
    """argv that is not UTF-8 reaches Python as lone surrogates
    (surrogateescape): `recall search` and `recall more` answer with an
    envelope, in JSON and on the terminal."""
    ix = world["ix"]
    db = str(ix.store.path)
    bad = os.fsdecode(b"deploy\xff\xfe")
    for args in (["search", bad, "--json"], ["search", "deploy", "--cwd", os.fsdecode(b"/tmp/\xff"), "--json"],
                 ["search", "deploy", "--session", bad, "--json", "--cwd", world["proj"]],
                 ["search", "deploy", "--cursor", bad, "--json", "--cwd", world["proj"]],
                 ["search", "", "--question", bad, "--json"], ["more", bad, "--json"],
                 ["search", bad], ["more", bad]):
        done = run_recall("--db", db, *args)
        assert done.returncode in (0, 1, 2), (args, done.stderr[-2000:])  # an answer, not a crash
        if "--json" in args:
            env = Envelope.model_validate_json(done.stdout)
            assert env.status in STATUSES and env.hint
        assert "Traceback" not in done.stderr


def test_the_mcp_server_survives_a_lone_surrogate_escape(world, recall_cmd, tmp_path):
    """Over MCP, `"\\ud800"` is a valid JSON escape but not text: the SDK's
    JSON-RPC parser refuses the request before session-recall sees it (it
    goes unanswered). The server must go on answering the next requests."""
    proc = subprocess.Popen([*recall_cmd, "--db", str(world["ix"].store.path), "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=world["proj"])

    def send(text: str) -> None:
        proc.stdin.write(text.encode() + b"\n")
        proc.stdin.flush()

    def answer(want_id: int, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                msg = json.loads(proc.stdout.readline())
                if msg.get("id") == want_id:
                    return msg
        raise AssertionError(f"no answer to request {want_id}")

    def call(i: int, args: str) -> str:
        return ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"recall","arguments":%s}}'
                % (i, args))

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "1"}}}))
        answer(1)
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send(call(2, r'{"query":"deploy\ud800","cwd":"\udfff","session_id":"\ud800"}'))
        send(call(3, r'{"query":"deploy \u0000 NEAR( \"","cwd":"/tmp/\u0000"}'))
        send(call(4, r'{"query":"deploy","question":"\ud83d\ude00 font?"}'))
        for i in (3, 4):
            msg = answer(i)
            env = Envelope.model_validate(msg["result"]["structuredContent"])
            assert env.status in STATUSES and env.hint
        assert proc.poll() is None
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
        proc.stdout.close()
