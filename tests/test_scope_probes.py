"""Scope probes (contract §6, docs/recall.md "Gates"): generated queries that
try to see sessions the policy does not allow, through the Python API, the
CLI and the real MCP server over stdio.

One machine, built in a temporary folder with its own $HOME:

    home/src/own        a git project (the caller's), with pkg/deep below it
    home/src/other      a project without git, with sub/ below it
    home/src/secret     denied in most configurations; home/src/Secret is its case twin
    home/src/secret2    the target of the deny entry `deny-link` when the configuration is read
    home/src/café       recorded once in NFC and once in NFD
    elsewhere/proj      outside $HOME
    a-b/c and a/b-c     Claude Code sessions whose project slugs collide (-…-a-b-c)

Sessions are recorded with `..`, `.`, doubled and trailing slashes; the same
session id lives in own and in secret; a Claude Code sub-agent file filed
under own's slug belongs to a parent session recorded in secret, and a
session of secret has a sub-agent that recorded own (started after a `cd`):
both are denied with secret, and so is own's namesake of the twin id. After
indexing, symlinks appear: `home/src/ghost` (a recorded cwd) now points into
own, `own/hole` (a recorded cwd) now points into secret; and `deny-link` is
re-pointed.

The oracle is a table written by hand: which labelled sessions each caller
spelling may see, and which spellings are wider than one project. Every probe
asserts that no result lies outside that table (0 results outside the policy,
0 bypasses) and, where the search answered, that nothing inside it is missing.

CI runs RECALL_SCOPE_PROBES (default 1200) API probes; the long form is
`RECALL_SCOPE_PROBES=20000 python -m pytest -q tests/test_scope_probes.py -s`.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import unicodedata
from collections import Counter
from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall import Index
from session_recall.config import Settings
from session_recall.model import Envelope

PROBES = int(os.environ.get("RECALL_SCOPE_PROBES", "1200"))
CAFE_NFC = unicodedata.normalize("NFC", "café")
CAFE_NFD = unicodedata.normalize("NFD", "café")
MARK = re.compile(r"\bmk(\d+)\b")
QUERIES = ["probe", "probe 部署", "部署", "部", "a->b", "->", "probe nosuchword"]


class Machine:
    """The folders, links, sessions and the hand-written oracle."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "home"
        src = self.home / "src"
        self.src = src
        self.d = {
            "own": src / "own", "pkg": src / "own" / "pkg", "deep": src / "own" / "pkg" / "deep",
            "other": src / "other", "other-sub": src / "other" / "sub",
            "secret": src / "secret", "secret-deep": src / "secret" / "deep", "Secret": src / "Secret",
            "secret2": src / "secret2", "cafe": src / CAFE_NFC,
            "elsewhere": tmp / "elsewhere" / "proj", "ab-c": tmp / "a-b" / "c", "a-bc": tmp / "a" / "b-c",
        }
        for p in self.d.values():
            p.mkdir(parents=True, exist_ok=True)
        (self.d["own"] / ".git").mkdir()
        # links that exist before indexing and before the configuration is read
        (tmp / "ownlink").symlink_to(self.d["own"], target_is_directory=True)
        (tmp / "secretlink").symlink_to(self.d["secret"], target_is_directory=True)
        (tmp / "deny-link").symlink_to(self.d["secret2"], target_is_directory=True)
        (tmp / "rootlink").symlink_to("/", target_is_directory=True)
        (tmp / "homelink").symlink_to(self.home, target_is_directory=True)
        self.canonical = tmp / "logs-canonical"
        self.claude = tmp / "logs-claude"
        self.canonical.mkdir()
        self.claude.mkdir()
        self.label: dict[int, str] = {}  # marker -> label
        self.sid: dict[int, str] = {}  # marker -> session id
        own, sec = str(self.d["own"]), str(self.d["secret"])
        canon = [
            ("own-1", own, "own"), ("own-2", f"{own}/pkg", "own"), ("own-3", f"{own}/./pkg/../", "own"),
            ("own-4", own + "/", "own"), ("twin", own, "own"), ("hole-1", f"{own}/hole", "own"),
            ("oth-1", str(self.d["other"]), "other"), ("oth-2", f"{own}/../other", "other"),
            ("sec-1", sec, "secret"), ("sec-2", f"{sec}/deep", "secret"), ("sec-3", f"{own}/../secret", "secret"),
            ("sec-4", f"{sec}//x/", "secret"), ("twin", sec, "secret"),
            ("case-1", str(self.d["Secret"]), "secret-case"), ("sec2-1", str(self.d["secret2"]), "secret2"),
            ("ghost-1", str(src / "ghost"), "ghost"),
            ("cafe-1", str(src / CAFE_NFC), "cafe"), ("cafe-2", str(src / CAFE_NFD), "cafe"),
            ("far-1", str(self.d["elsewhere"]), "elsewhere"),
        ]
        for n, (sid, cwd, label) in enumerate(canon):
            self._canonical(n, sid, cwd, label)
        # Claude Code: two projects whose slugs collide, and a sub-agent of a session in secret
        # filed under own's slug.
        slug = "-" + str(tmp).strip("/").replace("/", "-").replace("_", "-") + "-a-b-c"
        base = len(canon)
        self._claude(self.claude / slug / "11111111-0000-0000-0000-00000000000a.jsonl", base,
                     "11111111-0000-0000-0000-00000000000a", str(self.d["ab-c"]), "ab-c")
        self._claude(self.claude / slug / "11111111-0000-0000-0000-00000000000b.jsonl", base + 1,
                     "11111111-0000-0000-0000-00000000000b", str(self.d["a-bc"]), "a-bc")
        parent = "22222222-0000-0000-0000-00000000000c"
        own_slug = "-" + own.strip("/").replace("/", "-").replace("_", "-")
        self._claude(self.claude / own_slug / parent / "subagents" / "agent-x1.jsonl", base + 2, parent, sec,
                     "secret", sidechain=True)
        # a session started in secret whose sub-agent started after a `cd` into own: the sub-agent's
        # lines record own, and its messages are the denied parent's
        sec_slug = "-" + sec.strip("/").replace("/", "-").replace("_", "-")
        cd = "33333333-0000-0000-0000-00000000000d"
        self._claude(self.claude / sec_slug / f"{cd}.jsonl", base + 3, cd, sec, "secret")
        self._claude(self.claude / sec_slug / cd / "subagents" / "agent-y1.jsonl", base + 4, cd, own, "own",
                     sidechain=True)
        self.n = base + 5
        # denied with: a session that shares its source and id with a session in a denied folder
        self.deny_as = {n: "secret" for n in range(self.n) if self.sid[n] in ("twin", cd)}

    def _canonical(self, n: int, sid: str, cwd: str, label: str) -> None:
        lines = [{"type": "session", "session_id": sid, "cwd": cwd, "started_at": f"2026-11-{1 + n:02d}T09:00:00Z"},
                 {"type": "message", "session_id": sid, "message_id": f"m{n}", "turn_id": "t1", "role": "user",
                  "ts": f"2026-11-{1 + n:02d}T09:00:01Z", "text": f"probe mk{n} a->b 部署"}]
        (self.canonical / f"{n:03d}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
        self.label[n], self.sid[n] = label, sid

    def _claude(self, path: Path, n: int, sid: str, cwd: str, label: str, sidechain: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"type": "user", "uuid": f"u-{n}", "sessionId": sid, "cwd": cwd, "isSidechain": sidechain,
                "timestamp": f"2026-11-{1 + n:02d}T09:00:01Z",
                "message": {"role": "user", "content": f"probe mk{n} a->b 部署"}}
        path.write_bytes(orjson.dumps(line) + b"\n")
        self.label[n], self.sid[n] = label, sid

    def late_links(self) -> None:
        """Symlinks that appear after indexing, at recorded cwds."""
        (self.src / "ghost").symlink_to(self.d["own"], target_is_directory=True)
        (self.d["own"] / "hole").symlink_to(self.d["secret"], target_is_directory=True)

    # --- the oracle ---------------------------------------------------------------

    def callers(self) -> dict[str, frozenset[str] | None]:
        """Caller cwd spellings -> the labels of the sessions in their scope; None: wider than one project."""
        d, tmp, home, src = self.d, self.tmp, self.home, self.src
        own = frozenset({"own"})
        return {
            str(d["own"]): own, str(d["own"]) + "/": own, f"{d['own']}/pkg/..": own, str(d["pkg"]): own,
            str(d["deep"]): own, f"{d['own']}/./pkg//deep/../": own, str(tmp / "ownlink"): own,
            str(src / "ghost"): frozenset({"own", "ghost"}),  # link to own now; ghost's own recorded cwd too
            str(d["own"] / "hole"): frozenset({"own", "secret"}),  # inside own's git tree, and resolves to secret
            str(d["other"]): frozenset({"other"}), f"{d['own']}/../other": frozenset({"other"}),
            str(d["other-sub"]): frozenset(),  # no git: a subdirectory is its own scope
            str(d["secret"]): frozenset({"secret"}), str(tmp / "secretlink"): frozenset({"secret"}),
            str(d["Secret"]): frozenset({"secret-case"}), str(d["secret2"]): frozenset({"secret2"}),
            str(src / CAFE_NFC): frozenset({"cafe"}), str(src / CAFE_NFD): frozenset({"cafe"}),
            str(d["elsewhere"]): frozenset({"elsewhere"}),
            str(d["ab-c"]): frozenset({"ab-c"}), str(d["a-bc"]): frozenset({"a-bc"}),
            str(tmp / "a-b"): frozenset({"ab-c"}), str(tmp / "a"): frozenset({"a-bc"}),
            str(tmp / "nowhere"): frozenset(),
            # wider than one project
            "/": None, "//": None, "/..": None, "/./": None, str(home): None, str(home) + "/": None, "~": None,
            "~/": None, str(src): None, f"{d['own']}/..": None, f"{d['own']}/../..": None, str(tmp): None,
            str(tmp / "rootlink"): None, str(tmp / "homelink"): None, str(home).upper(): None,
            f"{d['pkg']}/../../../src": None, f"{d['own']}/../../src/.": None,
        }

    def configs(self) -> list[tuple[dict, frozenset[str]]]:
        """Settings (lists) -> the labels they deny or do not allow."""
        d, tmp, src = self.d, self.tmp, self.src
        secret = frozenset({"secret", "secret-case"})  # a deny covers case twins
        outside = frozenset({"elsewhere", "ab-c", "a-bc"})
        return [
            ({}, frozenset()),
            ({"deny_cwds": [str(d["secret"])]}, secret),
            ({"deny_cwds": ["~/src/secret/"]}, secret),
            ({"deny_cwds": [str(src / "SECRET")]}, secret),
            ({"deny_cwds": [f"{d['own']}/../secret"]}, secret),
            ({"deny_cwds": [str(tmp / "secretlink")]}, secret),
            ({"deny_cwds": [str(tmp / "deny-link")]}, frozenset({"secret2"})),
            ({"deny_cwds": [str(src / CAFE_NFD)]}, frozenset({"cafe"})),
            ({"deny_cwds": [str(d["ab-c"])]}, frozenset({"ab-c"})),
            ({"allow_cwds": [str(src)], "deny_cwds": [str(d["secret"])]}, secret | outside),
            ({"allow_cwds": [str(src)]}, outside),
            # an allowlist keeps out what it does not cover, and with it every session sharing
            # a source and id with one it keeps out (the sub-agent that `cd`ed into own)
            ({"allow_cwds": [str(d["own"])]}, frozenset(set(self.label.values()) - {"own"})),
        ]


def markers(env: Envelope) -> set[int]:
    found = set()
    for r in env.results:
        for m in r.passage.messages:
            found.update(int(x) for x in MARK.findall(m.text))
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = Path(os.path.realpath(tmp_path_factory.mktemp("scope")))
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(tmp / "home"))
    mp.setenv("RECALL_CONFIG", str(tmp / "no-config.toml"))
    for k in [k for k in os.environ if k.startswith("RECALL_") and k not in ("RECALL_CONFIG", "RECALL_SCOPE_PROBES")]:
        mp.delenv(k)
    (tmp / "no-config.toml").write_text("", encoding="utf-8")
    m = Machine(tmp)
    db = tmp / "recall.db"
    with Index.open(db, settings=Settings()) as ix:
        ix.sync([str(m.canonical)], kind="canonical")
        ix.sync([str(m.claude)], kind="claude-code")
        # every marker is indexed, each in its own session
        env = ix.recall("probe", all_projects=True, limit=50)
        assert markers(env) == set(range(m.n)), markers(env)
        anchors = []
        for r in env.results:
            (mk,) = {int(x) for msg in r.passage.messages for x in MARK.findall(msg.text)}
            anchors.append((r.passage.anchor_id, mk))
    yield {"m": m, "db": db, "anchors": anchors}
    mp.undo()


def out(m: Machine, n: int, hidden: frozenset[str]) -> bool:
    """Session n is denied or not allowed by the lists (or shares its id with one denied)."""
    return m.label[n] in hidden or m.deny_as.get(n, m.label[n]) in hidden


def visible(m: Machine, labels: frozenset[str], hidden: frozenset[str], sid: str | None) -> set[int]:
    return {n for n in range(m.n)
            if m.label[n] in labels and not out(m, n, hidden) and (sid is None or m.sid[n] == sid)}


def permitted(m: Machine, hidden: frozenset[str], sid: str | None) -> set[int]:
    return visible(m, frozenset(m.label.values()), hidden, sid)


class Answer:
    def __init__(self, value):
        self.value, self.asked = value, 0

    def __call__(self, _question: str):
        self.asked += 1
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_recorded_cwds_are_stored_normalised_and_never_resolved(world):
    m = world["m"]
    with Index.open(world["db"], settings=Settings()) as ix:
        stored = {c for (c,) in ix.engine.conn.execute("SELECT cwd FROM sessions")}
    own = str(m.d["own"])
    assert own in stored and f"{own}/pkg" in stored and f"{own}/hole" in stored
    assert str(m.d["other"]) in stored and f"{m.d['secret']}/x" in stored
    assert not any(c.endswith("/") or "/./" in c or "/../" in c or "//" in c for c in stored), stored


def test_links_appearing_after_indexing_change_nothing_and_then_the_probes(world):
    """First the same probes before and after the late links appear (callers
    that do not stand in them): identical answers. Then PROBES generated
    probes over callers x lists x policies x queries x session ids x
    recall_more x cursors, each checked against the oracle."""
    m, anchors = world["m"], world["anchors"]
    callers = m.callers()
    configs = m.configs()
    rng = random.Random(20261203)
    # where the caller stands (its own project: own, or other); the spellings marked wide in
    # the oracle are wide from both (home/src is above either)
    caller_cwds = [str(m.d["pkg"]), str(m.d["deep"]), str(m.d["other"])]
    indexes: dict[tuple[int, str], Index] = {}

    def index(i: int, policy: str) -> Index:
        if (i, policy) not in indexes:
            indexes[i, policy] = Index.open(world["db"], settings=Settings(all_projects=policy, **configs[i][0]))
        return indexes[i, policy]

    stable = [c for c in callers if "ghost" not in c and "hole" not in c]
    narrow = [c for c, labels in callers.items() if labels is not None]
    wide_cwds = [c for c, labels in callers.items() if labels is None]

    def snapshot():
        out = {}
        for c in stable:
            for i in (0, 1, 6):
                env = index(i, "allow").recall("probe", cwd=c, limit=50, caller_cwd=str(m.d["pkg"]))
                out[c, i] = (env.status, sorted(markers(env)))
        return out

    try:
        before = snapshot()
        m.late_links()
        assert snapshot() == before
        counts: Counter = Counter()
        engines: Counter = Counter()
        outside = bypass = 0
        while sum(counts.values()) < PROBES:
            i = rng.randrange(len(configs))
            settings, hidden = configs[i]
            policy = rng.choices(["allow", "deny", "confirm"], weights=[4, 3, 3])[0]
            ix = index(i, policy)
            # two thirds of the probes stand in one project, a third asks wider
            cwd = rng.choice(narrow if rng.random() < 0.67 else wide_cwds)
            labels = callers[cwd]
            caller_cwd = rng.choice(caller_cwds)
            all_projects = rng.random() < 0.15
            answer = Answer(rng.choice([True, True, False, None, RuntimeError("no terminal")]))
            wide = all_projects or labels is None
            opens = policy == "allow" or (policy == "confirm" and answer.value is True)
            kind = rng.choices(["recall", "more", "pages"], weights=[6, 3, 1])[0]
            where = (kind, cwd, caller_cwd, all_projects, policy, settings)
            if kind == "more":
                anchor, mk = rng.choice(anchors)
                env = ix.recall_more(anchor, cwd=cwd, all_projects=all_projects, confirm=answer,
                                     caller_cwd=caller_cwd)
                allowed = (permitted(m, hidden, None) if all_projects else
                           visible(m, labels, hidden, None) if labels is not None else
                           _under_wide(m, cwd, hidden))
                if wide and not opens:
                    assert env.status == "denied" and env.results == [], where
                elif mk in allowed:
                    assert env.status == "ok" and markers(env) == {mk}, (where, mk)
                else:
                    assert env.status == "unknown_anchor" and env.results == [], (where, mk)
                assert answer.asked == (1 if wide and policy == "confirm" else 0), where
                outside += len(markers(env) - allowed)
                counts["recall_more"] += 1
                continue
            sid = None if rng.random() < 0.5 else rng.choice(
                ["twin", "own-1", "sec-1", "case-1", "cafe-2", "ghost-1", "22222222-0000-0000-0000-00000000000c",
                 "11111111-0000-0000-0000-00000000000a", "33333333-0000-0000-0000-00000000000d", "missing"])
            q = rng.choice(QUERIES)
            if all_projects:
                allowed = permitted(m, hidden, sid)
            elif labels is not None:
                allowed = visible(m, labels, hidden, sid)
            else:
                allowed = _under_wide(m, cwd, hidden) & permitted(m, hidden, sid)
            if q == "probe nosuchword":
                allowed_hits: set[int] | None = None  # only partial matches
            else:
                allowed_hits = allowed
            limit = 2 if kind == "pages" else 50
            env = ix.recall(q, cwd=cwd, session_id=sid, all_projects=all_projects, limit=limit, confirm=answer,
                            caller_cwd=caller_cwd)
            got = markers(env)
            pages = 1
            while kind == "pages" and env.next_cursor and pages < 40:
                env = ix.recall(q, cwd=cwd, session_id=sid, all_projects=all_projects, limit=limit,
                                confirm=answer, caller_cwd=caller_cwd, cursor=env.next_cursor)
                got |= markers(env)
                pages += 1
            outside += len(got - allowed)
            bypass += int(wide and not opens and bool(got))
            assert got <= allowed, (where, q, sid, sorted(got - allowed))
            assert answer.asked == (pages if wide and policy == "confirm" else 0), (where, answer.asked)
            if wide and not opens:
                assert env.status == "denied" and "all projects" in env.hint, where
            elif allowed_hits is not None and env.status in ("ok", "no_match"):
                assert got == allowed_hits, (where, q, sid, sorted(allowed_hits - got))
            elif env.status == "unknown_session":
                assert sid is not None and not allowed, where
            counts[kind] += 1
            engines[env.status if env.status in ("denied", "unknown_session") else env.diagnostics.engine] += 1
        assert outside == 0 and bypass == 0
        print(f"\nscope probes (API): {sum(counts.values())} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()) if v)}), "
              f"{outside} results outside the policy, {bypass} bypasses; "
              f"served by {', '.join(f'{k} {v}' for k, v in sorted(engines.items()))}")
    finally:
        for ix in indexes.values():
            ix.close()


def _under_wide(m: Machine, cwd: str, hidden: frozenset[str]) -> set[int]:
    """What a wide cwd opens once the policy lets it: the sessions recorded
    under the folder (lexically; in the spelling given or resolved)."""
    given = os.path.normpath(os.path.abspath(os.path.expanduser(cwd)))
    roots = {given, os.path.realpath(given)}
    found = set()
    for n in range(m.n):
        if out(m, n, hidden):
            continue
        rec = _recorded(m, n)
        if any(rec == r or rec.startswith(r.rstrip("/") + "/") for r in roots):
            found.add(n)
    return found


def _recorded(m: Machine, n: int) -> str:
    path = m.canonical / f"{n:03d}.jsonl"
    if path.exists():
        cwd = orjson.loads(path.read_bytes().splitlines()[0])["cwd"]
    else:
        cwd = next(orjson.loads(p.read_bytes())["cwd"] for p in m.claude.rglob("*.jsonl")
                   if f"mk{n} " in p.read_text(encoding="utf-8"))
    return unicodedata.normalize("NFC", os.path.normpath(cwd))


def test_a_deny_link_re_pointed_later_changes_nothing_for_a_reader_that_has_it(world):
    m = world["m"]
    link = m.tmp / "deny-link"
    own, sec2, other = str(m.d["own"]), m.d["secret2"], m.d["other"]
    with Index.open(world["db"], settings=Settings(deny_cwds=[str(link)])) as ix:
        def seen():
            return {c: markers(ix.recall("probe", cwd=c, limit=50, caller_cwd=own)) for c in (str(sec2), str(other))}
        before = seen()
        link.unlink()
        link.symlink_to(other, target_is_directory=True)
        try:
            assert seen() == before
            assert before[str(sec2)] == set() and before[str(other)]
            # a reader that reads the configuration now resolves the link anew
            with Index.open(world["db"], settings=Settings(deny_cwds=[str(link)])) as fresh:
                assert markers(fresh.recall("probe", cwd=str(other), limit=50, caller_cwd=own)) == set()
                assert markers(fresh.recall("probe", cwd=str(sec2), limit=50, caller_cwd=own))
        finally:
            link.unlink()
            link.symlink_to(sec2, target_is_directory=True)


# --- the CLI ------------------------------------------------------------------


def test_cli_probes(world, recall_cmd):
    m = world["m"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
    env.update(HOME=str(m.home), XDG_CONFIG_HOME=str(m.tmp / "xdg"))
    cfg = m.tmp / "cli.toml"
    anchor_secret = next(a for a, mk in world["anchors"] if m.label[mk] == "secret")
    n = 0

    def run(policy: str, *args: str, cwd: Path = m.d["pkg"]) -> dict:
        nonlocal n
        cfg.write_text(f'all_projects = "{policy}"\ndeny_cwds = ["{m.d["secret"]}"]\n', encoding="utf-8")
        out = subprocess.run([*recall_cmd, "--db", str(world["db"]), "--config", str(cfg), *args, "--json"],
                             capture_output=True, text=True, timeout=60, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
        e = json.loads(out.stdout)
        # the exit status says what the envelope does (README, "Exit codes")
        assert out.returncode == {"ok": 0, "partial": 1, "no_match": 1, "denied": 3}.get(e["status"], 2), out.stderr
        n += 1
        return e

    for policy in ("deny", "confirm"):
        for cwd in ("/", "~", "../..", str(m.src)):
            e = run(policy, "search", "probe", "--cwd", cwd)
            assert e["status"] == "denied" and e["results"] == [], (policy, cwd)
        e = run(policy, "search", "probe", "--all-projects")  # no terminal to ask: no
        assert e["status"] == "denied" and e["results"] == []
        e = run(policy, "more", anchor_secret, "--cwd", "/")
        assert e["status"] == "denied" and e["results"] == []
    # the project itself, from a subdirectory: the whole git project, nothing else
    e = run("deny", "search", "probe", "--limit", "50")
    got = {int(x) for r in e["results"] for msg in r["passage"]["messages"] for x in MARK.findall(msg["text"])}
    assert got == visible(m, frozenset({"own"}), frozenset({"secret", "secret-case"}), None)
    # allow: `/` is the whole machine, still without the denied project
    e = run("allow", "search", "probe", "--cwd", "/", "--limit", "50")
    got = {int(x) for r in e["results"] for msg in r["passage"]["messages"] for x in MARK.findall(msg["text"])}
    assert got == permitted(m, frozenset({"secret", "secret-case"}), None)
    print(f"\nscope probes (CLI): {n} calls, 0 results outside the policy")


# --- the real MCP server ------------------------------------------------------


def test_mcp_probes(world, recall_cmd):
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.types import ElicitResult

    m = world["m"]
    callers = m.callers()
    hidden = frozenset({"secret", "secret-case"})
    cfg = m.tmp / "mcp.toml"
    cfg.write_text(f'all_projects = "confirm"\ndeny_cwds = ["{m.d["secret"]}"]\n', encoding="utf-8")
    env = {"HOME": str(m.home), "XDG_CONFIG_HOME": str(m.tmp / "xdg"), "XDG_DATA_HOME": str(m.tmp / "xdg-data"),
           "PATH": os.environ.get("PATH", "")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=recall_cmd[0], args=[*recall_cmd[1:], "--db", str(world["db"]),
                                                                "--config", str(cfg), "mcp"],
                                   cwd=str(m.d["pkg"]), env=env)
    rng = random.Random(7)
    state = {"answer": "no", "asked": 0}

    async def elicit(context, p):
        state["asked"] += 1
        if state["answer"] == "yes":
            return ElicitResult(action="accept", content={"allow": True})
        return ElicitResult(action="decline" if state["answer"] == "decline" else "accept",
                            content=None if state["answer"] == "decline" else {"allow": False})

    counts: Counter = Counter()

    async def main():
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=30, elicitation_callback=elicit) as s:
                    await s.initialize()
                    for _ in range(50):
                        cwd = rng.choice(list(callers))
                        labels = callers[cwd]
                        all_projects = rng.random() < 0.2
                        state["answer"] = rng.choice(["yes", "no", "decline"])
                        asked = state["asked"]
                        wide = all_projects or labels is None
                        more = rng.random() < 0.3
                        if more:
                            anchor, mk = rng.choice(world["anchors"])
                            res = await s.call_tool("recall_more", {"anchor": anchor, "cwd": cwd,
                                                                    "all_projects": all_projects})
                        else:
                            res = await s.call_tool("recall", {"query": "probe", "cwd": cwd, "limit": 50,
                                                               "all_projects": all_projects})
                        e = Envelope.model_validate(res.structured_content)
                        got = markers(e)
                        opens = state["answer"] == "yes"
                        if all_projects:
                            allowed = permitted(m, hidden, None)
                        elif labels is not None:
                            allowed = visible(m, labels, hidden, None)
                        else:
                            allowed = _under_wide(m, cwd, hidden)
                        assert got <= allowed, (cwd, all_projects, sorted(got - allowed))
                        assert state["asked"] - asked == int(wide), (cwd, all_projects)
                        if wide and not opens:
                            assert e.status == "denied" and e.results == [], (cwd, all_projects, e.status)
                        elif not more:
                            assert got == allowed, (cwd, all_projects, sorted(allowed - got))
                        counts["recall_more" if more else "recall"] += 1
                        counts["asked"] += int(wide)

    anyio.run(main)
    print(f"\nscope probes (MCP): {counts['recall'] + counts['recall_more']} calls in one session "
          f"({counts['recall']} recall, {counts['recall_more']} recall_more, {counts['asked']} asked the user), "
          "0 results outside the policy")


# --- the migration ------------------------------------------------------------


def test_m008_normalises_stored_cwds_and_merges_spelling_twins(tmp_path):
    import apsw

    from session_recall import migrations

    conn = apsw.Connection(str(tmp_path / "old.db"))
    migrations.apply(conn, upto=5)
    rows = [(1, "/p/a/", "s1"), (2, "/p/a", "s1"), (3, "/p/./b/../c", "s2"), (4, "rel/../x", "s3")]
    for rid, cwd, sid in rows:
        conn.execute("INSERT INTO sessions(id, source, cwd, session_id, started_at, title) "
                     "VALUES (?, 'src', ?, ?, ?, ?)",
                     (rid, cwd, sid, f"2026-11-0{rid}T00:00:00Z", None if rid == 2 else f"t{rid}"))
    for mid, (session, message_id) in enumerate([(1, "m1"), (1, "m2"), (2, "m2"), (3, "m1")], start=1):
        conn.execute("INSERT INTO messages(id, session, message_id, turn_id, seq, role, text, settled) "
                     "VALUES (?, ?, ?, 't', 0, 'user', 'x', 1)", (mid, session, message_id))
        conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, 'x')", (mid,))
    migrations.apply(conn)
    got = sorted(conn.execute("SELECT id, cwd, session_id, started_at, title FROM sessions"))
    assert got == [(2, "/p/a", "s1", "2026-11-01T00:00:00Z", "t1"), (3, "/p/c", "s2", "2026-11-03T00:00:00Z", "t3"),
                   (4, "rel/../x", "s3", "2026-11-04T00:00:00Z", "t4")]
    assert sorted(conn.execute("SELECT session, message_id FROM messages")) == [(2, "m1"), (2, "m2"), (3, "m1")]
    assert "m008_normalise_cwds" in migrations.applied(conn)


# --- the path rules, property-based ---------------------------------------------

_PART = st.sampled_from(["a", "b", "A", "ab", "a-b", "b-c", ".", "..", "", CAFE_NFC, CAFE_NFD, "CAFÉ", "ß", "SS",
                         "secret", "Secret"])


def _spell(parts: list[str], trailing: bool) -> str:
    return "/" + "/".join(parts) + ("/" if trailing else "")


@settings(max_examples=int(os.environ.get("RECALL_SCOPE_PROBES", "1200")) // 6, deadline=None, derandomize=True)
@given(st.lists(_PART, max_size=6), st.lists(_PART, max_size=6), st.booleans(), st.booleans())
def test_no_spelling_of_a_recorded_cwd_gets_past_a_deny_entry(deny, cwd, trail_d, trail_c):
    """Paths no file system holds here (so nothing resolves): a recorded cwd
    whose normal form lies under the deny entry's normal form (NFC,
    casefolded, whole components) is never permitted, however either is
    spelled; one outside it is, when nothing else denies it."""
    from session_recall import paths
    from session_recall.query.gates import session_path

    entry, recorded = "/nonexistent-root" + _spell(deny, trail_d), "/nonexistent-root" + _spell(cwd, trail_c)
    rules = paths.PathRules.read([], [entry], [])  # what Settings(deny_cwds=[entry]) holds
    stored = paths.recorded(recorded)
    assert paths.recorded(stored) == stored and not stored.endswith("/") or stored == "/"

    def norm(p: str) -> list[str]:
        return [c for c in unicodedata.normalize("NFC", os.path.normpath(p)).casefold().split("/") if c]

    d, c = norm(entry), norm(recorded)
    assert rules.denied(session_path(stored)) is (c[:len(d)] == d)
