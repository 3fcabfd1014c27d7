"""`recall index` and `recall watch` with no path: configured sources, else the
harnesses' own folders that exist on this machine, and they say which."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from conftest import recall_command

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _run(tmp_path: Path, env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RECALL_", "CLAUDE_", "CODEX_"))}
    env.update({"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
                "XDG_CONFIG_HOME": str(tmp_path / "config")})
    env.update(env_extra)
    return subprocess.run([*recall_command(), "--db", str(tmp_path / "r.db"), *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)


def _status(tmp_path: Path, env_extra: dict[str, str]) -> dict:
    out = _run(tmp_path, env_extra, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_harness_folders_under_home_are_used_and_named(tmp_path: Path):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude" / "projects")
    shutil.copytree(FIXTURES / "codex", home / ".codex" / "sessions")
    out = _run(tmp_path, {}, "index")
    assert out.returncode == 0, out.stderr
    assert "default locations found" in out.stderr
    assert str(home / ".claude" / "projects") in out.stderr and "(claude-code)" in out.stderr
    assert str(home / ".codex" / "sessions") in out.stderr and "(codex)" in out.stderr
    st = _status(tmp_path, {})
    kinds = {s["kind"]: s for s in st["sources"]}
    assert set(kinds) == {"claude-code", "codex"}
    assert all(s["files"] >= 1 for s in st["sources"])
    assert st["messages"] > 0
    again = _run(tmp_path, {}, "index", "--json")
    assert json.loads(again.stdout)["messages_added"] == 0


def test_environment_variables_move_the_harness_folders(tmp_path: Path):
    claude = tmp_path / "elsewhere-claude"
    codex = tmp_path / "elsewhere-codex"
    shutil.copytree(FIXTURES / "claude-code", claude / "projects")
    shutil.copytree(FIXTURES / "codex", codex / "archived_sessions")
    env = {"CLAUDE_CONFIG_DIR": str(claude), "CODEX_HOME": str(codex)}
    out = _run(tmp_path, env, "index")
    assert out.returncode == 0, out.stderr
    paths = {s["path"] for s in _status(tmp_path, env)["sources"]}
    assert paths == {str((claude / "projects").resolve()), str((codex / "archived_sessions").resolve())}


def test_configured_sources_win_over_the_defaults(tmp_path: Path):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude" / "projects")
    config = tmp_path / "config.toml"
    config.write_text(f'[[sources]]\npath = "{FIXTURES / "sessions"}"\nkind = "canonical"\n')
    out = _run(tmp_path, {"RECALL_CONFIG": str(config)}, "index")
    assert out.returncode == 0, out.stderr
    assert "configured sources" in out.stderr
    st = _status(tmp_path, {"RECALL_CONFIG": str(config)})
    assert [(s["kind"], s["files"]) for s in st["sources"]] == [("canonical", 3)]


def test_nothing_to_index_says_what_to_do(tmp_path: Path):
    out = _run(tmp_path, {}, "index")
    assert out.returncode == 0, out.stderr
    assert "give a PATH" in out.stderr


def test_a_source_kind_is_one_registry_entry():
    """The CLI's --kind choices, the sync's kinds, the config's allowed values
    and the default folders all come from the parsers' registry."""
    from session_recall.config import SourceConfig
    from session_recall.indexer import sources, sync

    names = set(sources.kinds())
    assert set(sync.KINDS) == names | {"auto"}
    for name in names:
        assert SourceConfig(path="x", kind=name).kind == name
    assert {kind for _, kind in sources.default_folders()} <= names
    assert {kind for _, kind in sources.default_folders()} == {n for n, p in sources.kinds().items() if p.home}
