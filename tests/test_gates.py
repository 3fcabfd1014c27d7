"""Gates (contract section 6): who may see which sessions, on every path.

The pure functions first (paths compared resolved and by whole components),
then real indexes built from canonical logs: the default scope is the caller's
project, `session_id` narrows it, `all_projects` obeys its policy and fails
closed, allow/deny lists apply everywhere (deny wins), `recall_more` cannot
reach outside the scope, and a generated run of probes never sees a session
outside its scope."""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from session_recall.config import Settings
from session_recall.query.gates import Scope, cwd_permitted, decide_scope, resolve, under
from session_recall.query.passages import anchor_id

# --- pure functions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a/b", "/a/b", True),
        ("/a/b/c", "/a/b", True),
        ("/a/b/c/d", "/a/b", True),
        ("/a/bc", "/a/b", False),  # a common prefix is not a parent
        ("/a/b-old", "/a/b", False),
        ("/a/b.bak/c", "/a/b", False),
        ("/a", "/a/b", False),  # a parent is not inside its child
        ("/x/b", "/a/b", False),  # same basename, another project
        ("/a/b", "/", True),
        ("/", "/", True),
    ],
)
def test_under_compares_whole_components(path, root, inside):
    assert under(path, root) is inside


def test_resolve_normalises_dots_slashes_and_trailing_slashes(tmp_path):
    base = resolve(str(tmp_path))
    assert resolve(f"{tmp_path}/a/../b") == f"{base}/b"
    assert resolve(f"{tmp_path}/./a//b/") == f"{base}/a/b"
    assert resolve(f"{tmp_path}/a/b/") == resolve(f"{tmp_path}/a/b")
    assert resolve(f"{tmp_path}/a/b/..") == f"{base}/a"
    assert os.path.isabs(resolve("relative/dir"))


def test_dot_dot_segments_cannot_climb_into_or_out_of_a_project(tmp_path):
    root = resolve(str(tmp_path / "proj" / "a"))
    # a sibling spelled through the project is outside it
    assert not under(resolve(f"{tmp_path}/proj/a/../b"), root)
    assert not under(resolve(f"{tmp_path}/proj/a/../a-old"), root)
    # a path into the project spelled through a sibling is inside it
    assert under(resolve(f"{tmp_path}/proj/b/../a/sub"), root)


def test_a_callers_symlinked_cwd_counts_in_both_spellings_and_recorded_cwds_are_never_resolved(tmp_path):
    real = tmp_path / "real" / "proj"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    linked = tmp_path / "link" / "proj"
    assert resolve(str(linked)) == resolve(str(real))
    # the caller stands in the link: sessions recorded in the target and in the link are its own
    scope = decide_scope(Settings(), cwd=str(linked), session_id=None, all_projects=False).scope
    assert scope.covers_cwd(str(real), Settings()) and scope.covers_cwd(str(linked / "sub"), Settings())
    # the caller stands in the target: a session recorded through a link is where its log says,
    # outside (recorded cwds are normalised at ingest, never resolved)
    scope = decide_scope(Settings(), cwd=str(real), session_id=None, all_projects=False).scope
    assert scope.covers_cwd(str(real / "sub"), Settings())
    assert not scope.covers_cwd(str(linked / "sub"), Settings())


def test_two_projects_with_the_same_basename_are_different(tmp_path):
    scope = Scope("project", resolve(str(tmp_path / "x" / "app")))
    assert scope.covers_cwd(str(tmp_path / "x" / "app"), Settings())
    assert not scope.covers_cwd(str(tmp_path / "y" / "app"), Settings())


def test_a_session_cwd_that_is_not_absolute_is_in_no_project(tmp_path, monkeypatch):
    """A log may carry a relative cwd; it must not land in whatever project
    the querying process happens to stand in."""
    monkeypatch.chdir(tmp_path)
    scope = Scope("project", resolve(str(tmp_path)))
    for cwd in (".", "sub", "./sub", "~", "~/x"):
        assert not scope.covers_cwd(cwd, Settings()), cwd


def test_deny_wins_over_allow_and_an_empty_allowlist_allows_all(tmp_path):
    s = Settings(allow_cwds=[str(tmp_path / "work")], deny_cwds=[str(tmp_path / "work" / "secret")])
    assert cwd_permitted(str(tmp_path / "work" / "app"), s)
    assert not cwd_permitted(str(tmp_path / "work" / "secret"), s)
    assert not cwd_permitted(str(tmp_path / "work" / "secret" / "deeper"), s)
    assert cwd_permitted(str(tmp_path / "work" / "secret-not"), s)  # whole components
    assert not cwd_permitted(str(tmp_path / "home"), s)  # outside a non-empty allowlist
    assert cwd_permitted(str(tmp_path / "anywhere"), Settings())
    # deny wins even when the allowlist names the very same folder
    same = Settings(allow_cwds=[str(tmp_path / "p")], deny_cwds=[str(tmp_path / "p") + "/"])
    assert not cwd_permitted(str(tmp_path / "p" / "q"), same)


def test_decide_scope_default_is_the_callers_resolved_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    v = decide_scope(Settings(), cwd=None, session_id=None, all_projects=False)
    assert v.scope == Scope("project", resolve(str(tmp_path)))
    v = decide_scope(Settings(), cwd=f"{tmp_path}/a/../b/", session_id="s", all_projects=False)
    assert v.scope == Scope("project", resolve(str(tmp_path / "b")), "s")


def test_a_caller_in_a_subdirectory_of_a_git_project_sees_the_project(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "src" / "deep").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    v = decide_scope(Settings(), cwd=str(proj / "src" / "deep"), session_id=None, all_projects=False,
                     caller_cwd=str(proj / "src"))
    assert v.scope == Scope("project", resolve(str(proj)))
    assert v.scope.covers_cwd(str(proj), Settings()) and v.scope.covers_cwd(str(proj / "other"), Settings())
    assert not v.scope.covers_cwd(str(tmp_path / "proj-old"), Settings())
    # a repository at or above $HOME (dotfiles) is not a project
    monkeypatch.setenv("HOME", str(proj))
    v = decide_scope(Settings(), cwd=str(proj / "src"), session_id=None, all_projects=False,
                     caller_cwd=str(proj / "src"))
    assert v.scope == Scope("project", resolve(str(proj / "src")))


@pytest.mark.parametrize("policy", ["deny", "confirm"])
def test_a_cwd_at_root_home_or_above_the_project_is_all_projects(tmp_path, monkeypatch, policy):
    home = tmp_path / "home"
    proj = home / "src" / "proj"
    proj.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    s = Settings(all_projects=policy)
    for cwd in ("/", "/..", "//", str(home), "~", str(home) + "/", f"{proj}/../..", str(home / "src"),
                str(tmp_path), str(home).upper() if policy == "deny" else str(home)):
        ask = Asked(None)
        v = decide_scope(s, cwd=cwd, session_id=None, all_projects=False, confirm=ask, caller_cwd=str(proj))
        assert v.scope is None and "all projects" in v.hint, cwd
        assert len(ask.questions) == (policy == "confirm"), cwd
    # a yes opens the folder asked for (not the whole machine)
    v = decide_scope(Settings(all_projects="confirm"), cwd=str(home / "src"), session_id=None, all_projects=False,
                     confirm=Asked(True), caller_cwd=str(proj))
    assert v.scope.kind == "project" and v.scope.cwd == resolve(str(home / "src"))
    # the project itself, a folder inside it and another project are not wider
    for cwd in (str(proj), str(proj / "sub"), str(home / "src" / "other")):
        v = decide_scope(s, cwd=cwd, session_id=None, all_projects=False, caller_cwd=str(proj))
        assert v.scope is not None, cwd


class Asked:
    """A confirm callback that records its questions and answers as told."""

    def __init__(self, answer):
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, question: str):
        self.questions.append(question)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "opens"),
    [(True, True), (False, False), (None, False), (RuntimeError("no terminal"), False),
     (KeyboardInterrupt(), False), ("yes", False), (1, False)],
    ids=["true", "false", "none", "raises", "interrupted", "truthy-string", "truthy-int"],
)
def test_confirm_policy_opens_all_projects_only_on_true(tmp_path, answer, opens):
    ask = Asked(answer)
    try:
        v = decide_scope(Settings(all_projects="confirm"), cwd=str(tmp_path), session_id=None, all_projects=True,
                         confirm=ask)
    except KeyboardInterrupt:
        # an interrupted prompt is the user leaving, not consent: stopping is as closed as a refusal
        assert isinstance(answer, KeyboardInterrupt)
        return
    assert len(ask.questions) == 1 and ask.questions[0].strip()
    if opens:
        assert v.scope is not None and v.scope.kind == "all"
    else:
        assert v.scope is None and v.hint
        # a no is the user's; anything else is a question nobody answered
        said = "did not allow" if answer is False else "could not be asked or did not answer"
        assert said in v.hint, v.hint


def test_confirm_without_anyone_to_ask_fails_closed(tmp_path):
    v = decide_scope(Settings(all_projects="confirm"), cwd=str(tmp_path), session_id=None, all_projects=True)
    assert v.scope is None and "confirm" in v.hint and "so that the user is asked" in v.hint


def test_allow_and_deny_policies(tmp_path):
    ask = Asked(True)
    v = decide_scope(Settings(all_projects="deny"), cwd=str(tmp_path), session_id=None, all_projects=True,
                     confirm=ask)
    assert v.scope is None and v.hint and ask.questions == []  # deny does not even ask
    v = decide_scope(Settings(), cwd=str(tmp_path), session_id=None, all_projects=True, confirm=ask)
    assert v.scope is not None and v.scope.kind == "all" and ask.questions == []


# --- end to end: a machine with several projects ----------------------------------


@pytest.fixture
def machine(tmp_path, corpus):
    """Projects on one machine, each session saying `deploy checklist`, plus a
    marker word of its own (its key below) and the symbols `a->b`."""
    work = tmp_path / "work"
    dirs = {
        "app": work / "app",
        "app-sub": work / "app" / "sub",
        "app-old": work / "app-old",  # a sibling with a common prefix
        "apple": work / "apple",
        "other-app": tmp_path / "other" / "app",  # same basename, another project
        "secret": work / "app" / "secret",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    (tmp_path / "shortcut").symlink_to(work / "app", target_is_directory=True)
    spelled = {
        "app": str(dirs["app"]),
        "app-sub": str(dirs["app-sub"]) + "/",  # trailing slash in the log
        "app-old": f"{dirs['app']}/../app-old",  # `..` in the log
        "apple": str(dirs["apple"]),
        "other-app": str(dirs["other-app"]),
        "secret": str(dirs["secret"]),
        "linked": str(tmp_path / "shortcut" / "linked"),  # recorded through a symlink, inside app
    }
    (work / "app" / "linked").mkdir()
    for i, (key, cwd) in enumerate(spelled.items()):
        s = corpus.session(f"s-{key}", cwd, title=f"{key} session", started_at=f"2026-11-{10 + i:02d}T09:00:00Z")
        s.message("m1", f"deploy checklist for {key.replace('-', '')}marker", turn_id="t1")
        s.message("m2", f"run a->b then 部署 {key.replace('-', '')}marker", role="assistant", turn_id="t1")
    # the same session id in two projects
    corpus.session("dup", dirs["app"], title="dup here").message("m1", "deploy checklist twin, this project")
    corpus.session("dup", dirs["other-app"], title="dup there").message("m1", "deploy checklist twin, other project")
    return {"tmp": tmp_path, "dirs": dirs, "work": work}


def cwds(env) -> set[str]:
    return {r.cwd for r in env.results}


def ids(env) -> set[tuple[str, str]]:
    return {(r.session_id, r.cwd) for r in env.results}


def inside(cwd: str, root: Path) -> bool:
    """The reference predicate, written independently of the gates: the
    recorded cwd as written (normalised, never resolved) lies in the root as
    given or as resolved."""
    spelled = Path(os.path.normpath(cwd))
    return any(spelled.is_relative_to(r) for r in (Path(os.path.normpath(os.path.abspath(root))), root.resolve()))


def test_default_scope_is_the_callers_cwd_and_below(machine, corpus, monkeypatch):
    ix = corpus.open()
    app = machine["dirs"]["app"]
    monkeypatch.chdir(app)
    shortcut = machine["tmp"] / "shortcut"
    # s-linked was recorded through the link `shortcut`: only a caller standing in that spelling has it
    for env, linked in ((ix.recall("deploy checklist", limit=50), set()),
                        (ix.recall("deploy checklist", cwd=str(app), limit=50), set()),
                        (ix.recall("deploy checklist", cwd=str(app) + "/", limit=50), set()),
                        (ix.recall("deploy checklist", cwd=str(shortcut), limit=50), {"s-linked"}),
                        (ix.recall("deploy checklist", cwd=f"{app}/sub/..", limit=50), set())):
        assert env.status == "ok", env.hint
        got = {r.session_id for r in env.results}
        assert got == {"s-app", "s-app-sub", "s-secret", "dup"} | linked, got
        assert all(inside(c, app) or inside(c, shortcut) for c in cwds(env))
        assert ("dup", str(machine["dirs"]["other-app"])) not in ids(env)


def test_a_sibling_with_a_common_prefix_or_same_basename_is_never_in_scope(machine, corpus):
    ix = corpus.open()
    for word in ("appoldmarker", "applemarker", "otherappmarker"):
        env = ix.recall(word, cwd=str(machine["dirs"]["app"]))
        assert env.status == "no_match" and env.results == [], (word, env.results)
        assert env.hint
    # the sibling's own caller does see it
    env = ix.recall("appoldmarker", cwd=str(machine["dirs"]["app-old"]))
    assert [r.session_id for r in env.results] == ["s-app-old"]


def test_a_subproject_caller_does_not_see_its_parent(machine, corpus):
    ix = corpus.open()
    env = ix.recall("deploy", cwd=str(machine["dirs"]["app-sub"]), limit=50)
    assert {r.session_id for r in env.results} == {"s-app-sub"}


def test_session_id_restricts_to_that_session(machine, corpus):
    ix = corpus.open()
    app = str(machine["dirs"]["app"])
    env = ix.recall("deploy", cwd=app, session_id="s-app-sub", limit=50)
    assert env.status == "ok"
    assert {r.session_id for r in env.results} == {"s-app-sub"}
    # the scan path obeys it too
    env = ix.recall("->", cwd=app, session_id="s-app-sub", limit=50)
    assert env.diagnostics.engine == "session-scan"
    assert {r.session_id for r in env.results} == {"s-app-sub"}
    assert env.diagnostics.sessions_scanned == 1


def test_unknown_and_out_of_scope_session_ids_read_the_same(machine, corpus):
    ix = corpus.open()
    app = str(machine["dirs"]["app"])
    unknown = ix.recall("deploy", cwd=app, session_id="no-such-session")
    foreign = ix.recall("deploy", cwd=app, session_id="s-apple")  # exists, in a sibling project
    for env in (unknown, foreign):
        assert env.status == "unknown_session"
        assert env.results == [] and env.next_cursor is None
        assert env.hint
    # nothing tells an existing foreign session from one that does not exist
    assert foreign.hint.replace("s-apple", "X") == unknown.hint.replace("no-such-session", "X")
    # with all projects the foreign one is known
    env = ix.recall("deploy", all_projects=True, session_id="s-apple")
    assert env.status == "ok" and {r.session_id for r in env.results} == {"s-apple"}


def test_all_projects_under_allow_sees_every_project(machine, corpus):
    ix = corpus.open()
    env = ix.recall("deploy checklist", cwd=str(machine["dirs"]["app"]), all_projects=True, limit=50)
    assert env.status == "ok"
    assert {r.session_id for r in env.results} == {f"s-{k}" for k in
                                                  ("app", "app-sub", "app-old", "apple", "other-app", "secret",
                                                   "linked")} | {"dup"}


def test_all_projects_under_deny_is_refused_with_a_hint(machine, corpus):
    ix = corpus.open(all_projects="deny")
    env = ix.recall("deploy", cwd=str(machine["dirs"]["app"]), all_projects=True)
    assert env.status == "denied" and env.results == [] and env.hint and env.next_cursor is None
    # the project scope still works under deny
    assert ix.recall("deploy", cwd=str(machine["dirs"]["app"])).status == "ok"


@pytest.mark.parametrize("answer", [True, False, None, OSError("stdin closed"), "yes"])
def test_all_projects_under_confirm_opens_only_on_true(machine, corpus, answer):
    ix = corpus.open(all_projects="confirm")
    ask = Asked(answer)
    env = ix.recall("otherappmarker", cwd=str(machine["dirs"]["app"]), all_projects=True, confirm=ask)
    assert len(ask.questions) == 1
    if answer is True:
        assert env.status == "ok" and {r.session_id for r in env.results} == {"s-other-app"}
    else:
        assert env.status == "denied" and env.results == [] and env.hint
    # without a callback nobody answers: closed
    env = ix.recall("otherappmarker", cwd=str(machine["dirs"]["app"]), all_projects=True)
    assert env.status == "denied" and env.results == []


def test_deny_wins_over_allow_on_every_path(machine, corpus):
    d = machine["dirs"]
    ix = corpus.open(allow_cwds=[str(machine["work"])], deny_cwds=[str(d["app"]) + "/secret/"])
    for env in (ix.recall("deploy checklist", all_projects=True, limit=50),  # fts
                ix.recall("->", all_projects=True, limit=50),  # session scan
                ix.recall("部署", all_projects=True, limit=50)):  # CJK
        assert env.status == "ok", env.hint
        got = {r.session_id for r in env.results}
        assert "s-secret" not in got and "s-other-app" not in got, got  # denied; outside the allowlist
        assert {"s-app", "s-apple", "s-app-old"} <= got
        assert all(not inside(c, d["secret"]) and inside(c, machine["work"]) for c in cwds(env))
    # the project scope obeys the lists too, and session_id cannot reopen a denied session
    env = ix.recall("secretmarker", cwd=str(d["app"]))
    assert env.status == "no_match"
    env = ix.recall("deploy", cwd=str(d["app"]), session_id="s-secret")
    assert env.status == "unknown_session" and env.results == []


def test_recall_more_cannot_reach_outside_the_scope(machine, corpus):
    ix = corpus.open()
    app, other = machine["dirs"]["app"], machine["dirs"]["other-app"]
    found = ix.recall("otherappmarker", cwd=str(other))
    assert found.status == "ok"
    foreign = found.results[0].passage.anchor_id
    # the owner may widen it
    assert ix.recall_more(foreign, cwd=str(other)).status == "ok"
    refused = ix.recall_more(foreign, cwd=str(app))
    # a well-formed anchor of a message that does not exist, and garbage
    missing = ix.recall_more(anchor_id("canonical", str(app), "s-app", "no-such-message"), cwd=str(app))
    for env in (refused, missing):
        assert env.status == "unknown_anchor" and env.results == [] and env.next_cursor is None
        assert env.redacted == 0
    assert refused.hint == missing.hint
    assert "otherappmarker" not in refused.model_dump_json()
    # all_projects opens it, unless a list or the policy closes it
    assert ix.recall_more(foreign, cwd=str(app), all_projects=True).status == "ok"
    denied = corpus.open(deny_cwds=[str(other)])
    assert denied.recall_more(foreign, cwd=str(app), all_projects=True).hint == missing.hint
    closed = corpus.open(all_projects="confirm")
    env = closed.recall_more(foreign, cwd=str(app), all_projects=True, confirm=Asked(None))
    assert env.status == "denied" and env.results == []
    env = closed.recall_more(foreign, cwd=str(app), all_projects=True, confirm=Asked(True))
    assert env.status == "ok"


def test_garbage_anchors_are_refused_with_a_hint(machine, corpus):
    ix = corpus.open()
    for anchor in ("", "not-an-anchor", "W10", "eyJ4IjoxfQ", "!!!"):
        env = ix.recall_more(anchor, cwd=str(machine["dirs"]["app"]))
        assert env.status == "unknown_anchor" and env.results == [] and env.hint


def test_the_same_session_id_in_two_projects_stays_two_sessions(machine, corpus):
    ix = corpus.open()
    app, other = str(machine["dirs"]["app"]), str(machine["dirs"]["other-app"])
    env = ix.recall("twin", all_projects=True, limit=10)
    assert sorted((r.session_id, r.cwd, r.title) for r in env.results) == sorted([
        ("dup", app, "dup here"), ("dup", other, "dup there")])
    anchors = {r.passage.anchor_id for r in env.results}
    assert len(anchors) == 2
    for r in env.results:
        more = ix.recall_more(r.passage.anchor_id, all_projects=True)
        assert more.results[0].cwd == r.cwd
        assert [m.text for m in more.results[0].passage.messages] == [m.text for m in r.passage.messages]
    # session_id with the caller's project picks the twin there
    env = ix.recall("twin", cwd=app, session_id="dup")
    assert [(r.cwd, r.passage.messages[0].text) for r in env.results] == [
        (app, "deploy checklist twin, this project")]
    env = ix.recall("twin", cwd=other, session_id="dup")
    assert [r.cwd for r in env.results] == [other]
    # a query that only the other twin matches, in this project, finds nothing
    assert ix.recall("other", cwd=app, session_id="dup").status == "no_match"


def test_a_relative_session_cwd_is_not_in_the_callers_project(tmp_path, corpus, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    corpus.session("rel", "proj", title="relative").message("m1", "relativemarker here")
    corpus.session("home", "~/proj", title="home").message("m1", "relativemarker there")
    corpus.session("abs", str(proj), title="absolute").message("m1", "relativemarker absolute")
    ix = corpus.open()
    monkeypatch.chdir(tmp_path)
    for cwd in (None, str(tmp_path), str(proj)):
        env = ix.recall("relativemarker", cwd=cwd)
        assert {r.session_id for r in env.results} <= {"abs"}, (cwd, ids(env))
    # all projects still finds them (the whole machine)
    env = ix.recall("relativemarker", all_projects=True)
    assert {r.session_id for r in env.results} == {"rel", "home", "abs"}


# --- generated probes: no result outside its scope -----------------------------------

# RECALL_SCOPE_PROBES sets how many generated probes run (CI: 300; by hand:
# `RECALL_SCOPE_PROBES=1000 python -m pytest tests/test_gates.py -k probes -s`).
PROBES = int(os.environ.get("RECALL_SCOPE_PROBES", "300"))


def test_probes_never_see_a_session_outside_their_scope(machine, corpus):
    """Generated probes over caller cwds (spelled with `..`, trailing slashes,
    through symlinks, a string prefix that is not a parent), session ids of
    this and of other projects, all_projects, and allow/deny lists with
    overlapping prefixes: every result of recall, of every page a cursor
    leads to, and of recall_more on any anchor (of this project or another)
    lies inside the scope, computed here independently; the scoped result set
    is exactly what the same query finds unscoped, filtered by that
    reference scope; and a cursor never pages a scope it was not made in."""
    d, tmp, work = machine["dirs"], machine["tmp"], machine["work"]
    # a symlink inside the project that leads out of it, and a folder whose
    # name has the project's path as a string prefix
    (d["app"] / "escape").symlink_to(d["other-app"], target_is_directory=True)
    corpus.session("s-escape", d["app"] / "escape", started_at="2026-11-25T09:00:00Z").message(
        "m1", "deploy checklist through escapemarker a->b 部署")
    corpus.session("s-ap", work / "ap", started_at="2026-11-26T09:00:00Z").message(
        "m1", "deploy checklist for apmarker a->b 部署")
    rng = random.Random(20261120)
    callers = [str(d["app"]), str(d["app"]) + "/", f"{d['app-sub']}/..", str(tmp / "shortcut"),
               str(tmp / "shortcut") + "/", str(d["app-sub"]), str(d["apple"]), str(work), str(work) + "//", str(tmp),
               str(d["other-app"]), f"{d['apple']}/../app-old", str(tmp / "nowhere" / "app"), str(work / "ap"),
               str(d["app"] / "escape"), f"{d['app']}/./sub/../", str(d["secret"]), str(tmp / "other")]
    session_ids = [None, None, None, "s-app", "s-app-sub", "dup", "s-other-app", "s-linked", "s-apple",
                   "s-escape", "s-ap", "s-secret", "missing"]
    queries = ["deploy", "deploy checklist", "->", "部署", "a->b", "twin", "appmarker", "checklist 部署",
               "applemarker", "linkedmarker", "escapemarker", "apmarker", "deploy nosuchword"]
    lists = [
        {},
        {"deny_cwds": [str(d["secret"])]},
        {"allow_cwds": [str(work)]},
        {"allow_cwds": [str(d["app"])], "deny_cwds": [str(tmp / "shortcut" / "sub")]},
        {"deny_cwds": [str(tmp / "other") + "/"]},
        {"allow_cwds": [str(work / "ap")]},  # a string prefix of app and apple, the parent of neither
        {"allow_cwds": [str(work)], "deny_cwds": [str(d["app"])]},  # app-old and apple stay allowed
        {"allow_cwds": [str(d["app"]) + "/", f"{d['apple']}/../app-old"], "deny_cwds": [str(d["app-sub"])]},
        {"deny_cwds": [str(tmp / "shortcut" / "secret")]},  # a denial spelled through a symlink
        {"allow_cwds": [str(d["other-app"])], "deny_cwds": [str(tmp / "other")]},  # deny wider than allow
        {"allow_cwds": [str(d["app"]), str(d["app"] / "sub")], "deny_cwds": [str(d["app"] / "sub") + "/.."]},
    ]
    opened = {i: corpus.open(**lst) for i, lst in enumerate(lists)}
    everything = corpus.open()
    # every anchor there is, with its session's cwd: recall_more probes pick among them
    anchors = {}
    recorded: dict[str, set[str]] = {}  # session id -> the cwds it was recorded in
    for q in queries:
        for r in everything.recall(q, all_projects=True, limit=50).results:
            for m in r.passage.messages:
                anchors[anchor_id(r.source, r.cwd, r.session_id, m.message_id)] = (r.cwd, r.session_id)
            recorded.setdefault(r.session_id, set()).add(r.cwd)
    anchors = sorted(anchors.items())
    assert len(anchors) >= 15
    counts = Counter()

    def reference(caller: str, sid: str | None, all_projects: bool, lst: dict):
        def in_scope(cwd: str, session_id: str | None) -> bool:
            if not os.path.isabs(cwd):
                return all_projects and not lst  # only the whole machine, unfiltered, holds it
            if not all_projects and not inside(cwd, Path(caller)):
                return False
            if sid is not None and session_id is not None and session_id != sid:
                return False
            # a session that shares its id with a session the lists keep out is kept out with it
            twins = recorded.get(session_id, {cwd}) if session_id is not None else {cwd}
            return all(listed(c, lst) for c in twins | {cwd})
        return in_scope

    def listed(cwd: str, lst: dict) -> bool:
        """The lists pass the recorded cwd and its spelling through the links
        that existed when it was indexed (none of this test's links change)."""
        spellings = {cwd, os.path.realpath(cwd)}
        if any(inside(c, Path(p)) for c in spellings for p in lst.get("deny_cwds", [])):
            return False
        return not lst.get("allow_cwds") or all(any(inside(c, Path(p)) for p in lst["allow_cwds"]) for c in spellings)

    while sum(counts.values()) < PROBES:
        i = rng.randrange(len(lists))
        lst = lists[i]
        ix = opened[i]
        caller = rng.choice(callers)
        all_projects = rng.random() < 0.3
        kind = rng.choices(["recall", "more", "pages"], weights=[6, 3, 1])[0]
        if kind == "more":
            anchor, (owner, owner_id) = rng.choice(anchors)
            in_scope = reference(caller, None, all_projects, lst)
            env = ix.recall_more(anchor, cwd=caller, all_projects=all_projects)
            where = ("more", caller, all_projects, lst, owner)
            if in_scope(owner, owner_id):
                assert env.status == "ok" and [r.cwd for r in env.results] == [owner], where
            else:
                assert env.status == "unknown_anchor" and env.results == [], where
                assert "marker" not in env.model_dump_json(), where
            counts["recall_more"] += 1
            continue
        sid = rng.choice(session_ids)
        q = rng.choice(queries)
        in_scope = reference(caller, sid, all_projects, lst)
        where = (kind, q, caller, sid, all_projects, lst)
        if kind == "pages":
            env = ix.recall(q, cwd=caller, session_id=sid, all_projects=all_projects, limit=2)
            pages = [env]
            while pages[-1].next_cursor and len(pages) < 30:
                cursor = pages[-1].next_cursor
                pages.append(ix.recall(q, cwd=caller, session_id=sid, all_projects=all_projects, limit=2,
                                       cursor=cursor))
                # the same cursor in another caller's scope, or another session's, pages nothing
                other = rng.choice([c for c in callers if resolve(c) != resolve(caller)])
                for kw in ({"cwd": other, "session_id": sid, "all_projects": all_projects},
                           {"cwd": caller, "session_id": "s-other-app", "all_projects": all_projects},
                           {"cwd": caller, "session_id": sid, "all_projects": not all_projects}):
                    stale = ix.recall(q, limit=2, cursor=cursor, **kw)
                    assert stale.status in ("stale_cursor", "unknown_session") and stale.results == [], (where, kw)
                    counts["foreign cursor"] += 1
            for page in pages:
                for r in page.results:
                    assert in_scope(r.cwd, r.session_id), (where, r.cwd, r.session_id)
            counts["paged recall"] += 1
            continue
        env = ix.recall(q, cwd=caller, session_id=sid, all_projects=all_projects, limit=50)
        for r in env.results:
            assert in_scope(r.cwd, r.session_id), (where, r.cwd, r.session_id)
        # and nothing in scope is missing (same query, whole machine, filtered here)
        whole = everything.recall(q, all_projects=True, limit=50)
        expected = {(r.session_id, r.cwd, r.passage.anchor_id) for r in whole.results if in_scope(r.cwd, r.session_id)}
        got = {(r.session_id, r.cwd, r.passage.anchor_id) for r in env.results}
        if env.status in ("ok", "no_match"):
            assert got == expected, where
        elif env.status == "partial":
            # partial: no message in scope has every term; the partial matches are those of the
            # whole machine (when it too has only partial ones) inside the scope
            assert got == expected if whole.status == "partial" else not expected, where
        else:
            assert env.status == "unknown_session" and not expected and sid is not None, where
        counts["recall"] += 1
    print(f"\nscope probes: {sum(counts.values())} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), "
          "0 results outside their scope")


def test_a_caller_standing_in_a_link_keeps_its_spelling_from_pwd(tmp_path, corpus, monkeypatch):
    """A process started in `~/ln` (a link to `/srv/real`) has os.getcwd()
    resolved to `/srv/real`; the shell's $PWD keeps `~/ln`, so the sessions
    recorded under the link's spelling are the caller's too (docs/recall.md,
    "The caller's cwd is live"). A $PWD naming another folder is ignored."""
    real = tmp_path / "srv" / "real"
    real.mkdir(parents=True)
    (tmp_path / "ln").symlink_to(real, target_is_directory=True)
    corpus.session("via-link", tmp_path / "ln").message("m1", "ledger through the link")
    corpus.session("via-real", real).message("m1", "ledger at the real folder")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    corpus.session("far", elsewhere).message("m1", "ledger far away")
    ix = corpus.open()
    monkeypatch.chdir(tmp_path / "ln")
    monkeypatch.setenv("PWD", str(tmp_path / "ln"))
    assert {r.session_id for r in ix.recall("ledger").results} == {"via-link", "via-real"}
    monkeypatch.setenv("PWD", str(elsewhere))  # stale: not where the process is
    assert {r.session_id for r in ix.recall("ledger").results} == {"via-real"}
