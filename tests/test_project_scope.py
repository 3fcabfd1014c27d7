"""The default scope through the real `recall` command (contract §6): from a
subdirectory of a git work tree, the project is the top of the tree; outside
git, the directory itself; never `$HOME` or `/` implicitly, not even when a
dotfiles repository sits at `~`. The envelope names the root it used."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from session_recall import Index
from session_recall.model import Envelope


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def recall_in(tmp_path: Path, home: Path, recall_cmd):
    """`recall_in(DIR, ARGS...)`: the real command run in DIR with a temporary
    HOME and an empty config; returns the envelope of a `--json` search."""
    config = tmp_path / "config.toml"
    config.write_text("")

    def run(where: Path, *args: str, config_text: str | None = None) -> subprocess.CompletedProcess:
        if config_text is not None:
            config.write_text(config_text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
        env.update(HOME=str(home), RECALL_CONFIG=str(config), XDG_DATA_HOME=str(tmp_path / "xdg-data"))
        return subprocess.run([*recall_cmd, "--db", str(tmp_path / "r.db"), *args], capture_output=True,
                              text=True, timeout=60, cwd=where, env=env)

    return run


def git_init(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30)


def index_sessions(tmp_path: Path, canonical, sessions: dict[str, Path]) -> None:
    """One session per (id -> cwd), each saying `flux` and its own id, indexed
    into the database the command reads."""
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    for sid, cwd in sessions.items():
        log = canonical(sid, cwd=str(cwd))
        (logs / f"{sid}.jsonl").write_bytes(log.session() + log.message("m1", f"flux capacitor {sid}"))
    with Index.open(tmp_path / "r.db") as ix:
        ix.sync([str(logs)])


def search(recall_in, where: Path, *args: str, config_text: str | None = None) -> Envelope:
    done = recall_in(where, "search", "flux", "--json", *args, config_text=config_text)
    assert done.returncode in (0, 1, 3), done.stderr  # found, no match, denied (README, "Exit codes")
    return Envelope.model_validate(json.loads(done.stdout))


def found(env: Envelope) -> set[str]:
    return {r.session_id for r in env.results}


def test_from_a_subdirectory_of_a_git_repository_search_finds_the_project(tmp_path, home, recall_in, canonical):
    repo = home / "work" / "repo"
    git_init(repo)
    (repo / "src" / "deep").mkdir(parents=True)
    index_sessions(tmp_path, canonical, {"at-top": repo, "in-src": repo / "src", "elsewhere": home / "x"})
    for where in (repo, repo / "src" / "deep"):
        env = search(recall_in, where)
        assert found(env) == {"at-top", "in-src"}, where
        assert env.project_root == str(repo)
    # the schema that `recall schema` prints names the field
    assert "project_root" in Envelope.model_json_schema()["properties"]


def test_a_dotfiles_repository_at_home_makes_no_project_of_home(tmp_path, home, recall_in, canonical):
    git_init(home)  # a dotfiles repository at ~
    notes = home / "notes"
    (notes / "sub").mkdir(parents=True)
    index_sessions(tmp_path, canonical,
                   {"in-home": home, "in-notes": notes, "in-sub": notes / "sub", "other": home / "other"})
    # outside any work tree but the one at ~, the project is the directory itself
    env = search(recall_in, notes)
    assert found(env) == {"in-notes", "in-sub"} and env.project_root == str(notes)
    # in ~ itself, by default: only the sessions started in ~, never every project below it
    env = search(recall_in, home)
    assert found(env) == {"in-home"} and env.project_root == str(home)
    # all projects only when asked for
    assert found(search(recall_in, home, "--all-projects")) == {"in-home", "in-notes", "in-sub", "other"}
    # a cwd of ~ given explicitly is an all-projects search, for the policy
    denied = search(recall_in, notes, "--cwd", str(home), config_text='all_projects = "deny"\n')
    assert denied.status == "denied" and not denied.results


def test_from_the_root_directory_the_default_is_not_every_project(tmp_path, home, recall_in, canonical):
    index_sessions(tmp_path, canonical, {"other": home / "other"})
    env = search(recall_in, Path("/"))
    assert not env.results and env.project_root == "/" and env.gaps.get("scope")
    assert "all projects" in env.hint
