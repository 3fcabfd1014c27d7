"""Filters of a recall (roles, source kinds, a time range of the message's own
timestamp) are exact: the index path with filters returns the oracle's
matches that pass them, row for row, through the FTS5 path and the exact
scan; and `recall search --role/--source/--since/--until` on the command line."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from pathlib import Path

import oracle
import pytest

from session_recall import Index
from session_recall.config import Settings
from tests.helpers import ago

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Latin words go through FTS5, CJK words too (bigrams; the scan when FTS5
# finds nothing), `100%` and `c++` through the exact scan (no tokens).
WORDS = ["serif", "font", "deploy", "字体", "简历", "100%", "c++", "résumé", "模板"]
ROLES = ["user", "assistant", "tool_call", "tool_result"]


def stamp(rng: random.Random, when: dt.datetime) -> str:
    """One instant in one of the spellings logs use."""
    form = rng.randrange(4)
    if form == 0:
        return when.isoformat().replace("+00:00", "Z")
    if form == 1:
        return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if form == 2:  # the same instant at +08:00
        return when.astimezone(dt.timezone(dt.timedelta(hours=8))).isoformat()
    return when.astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30))).isoformat(timespec="milliseconds")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("filters")
    logs = root / "logs"
    logs.mkdir()
    rng = random.Random(19)
    start = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    when: dict[tuple[str, str, str], dt.datetime] = {}
    role_of: dict[tuple[str, str, str], str] = {}
    for s in range(8):
        sid, cwd = f"s{s}", rng.choice(["/home/ada/resume", "/home/ada/shop"])
        lines = [{"type": "session", "session_id": sid, "cwd": cwd, "started_at": "2026-11-01T00:00:00Z"}]
        for i in range(12):
            role = rng.choice(ROLES)
            t = start + dt.timedelta(seconds=rng.randrange(30 * 86400))
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            obj = {"type": "message", "session_id": sid, "message_id": f"m{i}", "turn_id": f"t{i // 3}",
                   "role": role, "ts": stamp(rng, t), "text": text}
            if role == "tool_call":
                obj["tool_name"] = "Bash"
            lines.append(obj)
            when[(cwd, sid, f"m{i}")], role_of[(cwd, sid, f"m{i}")] = t, role
        (logs / f"{sid}.jsonl").write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines))
    claude = root / "claude"
    shutil.copytree(FIXTURES / "claude-code", claude)
    ix = Index.open(root / "r.db", settings=Settings())
    ix.sync([str(logs)], kind="canonical")
    ix.sync([str(claude)], kind="claude-code")
    yield {"ix": ix, "oracle": oracle.read_logs(sorted(logs.glob("*.jsonl"))), "when": when, "role": role_of}
    ix.close()


def iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def test_filtered_hits_are_exactly_the_oracles_that_pass(world):
    ix, orc = world["ix"], world["oracle"]
    rng = random.Random(7)
    day = dt.timedelta(days=1)
    checked = 0
    for _ in range(60):
        query = " ".join(rng.sample(WORDS, rng.choice([1, 1, 2])))
        roles = tuple(rng.sample(ROLES, rng.randint(0, 2)))
        since = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc) + rng.randrange(30) * day if rng.random() < .6 else None
        until = since + rng.randint(1, 12) * day if since is not None and rng.random() < .7 else None
        matches = sorted(orc.search(query))
        if matches and since is not None and rng.random() < .3:  # a match's own instant: inclusive
            since = world["when"][rng.choice(matches)]
        if matches and until is not None and rng.random() < .3:  # exclusive
            until = world["when"][rng.choice(matches)]
            since = None if since is not None and since > until else since
        expected = {k for k in matches
                    if (not roles or world["role"][k] in roles)
                    and (since is None or world["when"][k] >= since) and (until is None or world["when"][k] < until)}
        sources = rng.choice([(), ("canonical",), ("claude-code",), ("canonical", "claude-code")])
        if sources == ("claude-code",):
            expected = set()
        got = ix.search(query, limit=100_000, roles=roles, sources=sources,
                        since=None if since is None else iso(since), until=None if until is None else iso(until))
        canonical = {(s["cwd"], s["session_id"], m.message_id) for m, s in got if s["source"] == "canonical"}
        assert canonical == expected, (query, roles, since, until, sources)
        assert len(canonical) == sum(s["source"] == "canonical" for _, s in got)  # no row twice
        checked += len(expected)
        # the other source: exactly its unfiltered hits that pass
        if "claude-code" in sources and not (since or until):
            plain = {(s["cwd"], s["session_id"], m.message_id) for m, s in ix.search(query, limit=100_000)
                     if s["source"] == "claude-code" and (not roles or m.role in roles)}
            assert {(s["cwd"], s["session_id"], m.message_id) for m, s in got if s["source"] == "claude-code"} == plain
    assert checked > 50  # the filters were tried on real matches


def test_the_command_line_filters(proj, corpus, run_recall):
    s = corpus.session("s1", proj, started_at=ago(40))
    s.message("old", "serif chosen long ago", ts=ago(30))
    s.message("new", "serif chosen this week", role="assistant", ts=ago(2))
    s.message("tool", "serif in a tool result", role="tool_result", ts=ago(1))
    corpus.open().close()
    from tests.helpers import run_all

    week, assistant, none, bad, inverted, same, system, far = run_all(
        run_recall,
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--since", "7d", "--json"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--role", "assistant", "--role", "user", "--json"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--until", "2000-01-01", "--source", "canonical"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--since", "last tuesday"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--since", "2d", "--until", "7d"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--since", "7d", "--until", "7d"],  # one "now"
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--role", "system"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--since", "0001-01-01T00:00+01:00"])

    def hits(done) -> set[str]:
        assert done.returncode == 0, done.stderr
        return {m["message_id"] for r in json.loads(done.stdout)["results"] for m in r["passage"]["messages"]
                if m["is_anchor"]}
    assert hits(week) <= {"new", "tool"} and "new" in hits(week)
    assert hits(assistant) <= {"old", "new"} and "tool" not in hits(assistant)
    assert none.returncode == 1
    assert bad.returncode == 2 and "--since" in bad.stderr and "7d" in bad.stderr
    # an empty window is a mistake, not a silent miss; system text is not indexed, so not offered
    assert inverted.returncode == 2 and "--since 2d (" in inverted.stderr, inverted.stderr  # as typed
    assert "is not before --until 7d (" in inverted.stderr and "end of that day" not in inverted.stderr
    assert same.returncode == 2 and "is not before" in same.stderr, same.stderr
    assert system.returncode == 2 and "'system' is not one of" in system.stderr, system.stderr
    assert far.returncode == 2 and "out of range" in far.stderr and "Traceback" not in far.stderr, far.stderr


def test_a_miss_under_filters_says_the_filters_kept_it_out(proj, corpus, run_recall):
    """The words match, the filters keep every match out: the hint names the
    filters (a miss of --since is not a miss of the words)."""
    corpus.session("f1", proj).message("u1", "the heron nests by the pond", ts="2026-11-20T09:00:00Z")
    corpus.open().close()
    done = run_recall("--db", corpus.db, "search", "heron", "--cwd", proj, "--since", "2026-11-21",
                      "--role", "assistant")
    assert done.returncode == 1 and done.stdout == ""
    assert "filters keep (role, since)" in done.stderr and "other filters" in done.stderr, done.stderr
    plain = run_recall("--db", corpus.db, "search", "kingfisher", "--cwd", proj)
    assert plain.returncode == 1 and "filters keep" not in plain.stderr, plain.stderr


def test_the_roles_offered_are_the_roles_indexed():
    """`--role` offers exactly the roles whose text the projection indexes."""
    from session_recall.indexer.project import project
    from session_recall.model import ROLES, SEARCHABLE_ROLES

    assert [r for r in ROLES if project(r, "some words", "tool") is not None] == list(SEARCHABLE_ROLES)
