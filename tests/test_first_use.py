"""First use through the real command and the real MCP client: an empty
index builds from the configured sources, else from the harness folders found
on this machine, before it answers; with nothing to build from, the hint
names where it looked and asks a model to run no command with a path it
cannot know."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from session_recall.model import Envelope

SHOP = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code" / "-home-ada-shop"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A machine with no index, no config and no harness folder yet."""
    config = tmp_path / "config.toml"
    config.write_text("first_use_budget_s = 8\n")
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home"), "RECALL_CONFIG": str(config), "XDG_DATA_HOME": str(tmp_path / "xdg"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
            "GEMINI_CLI_HOME": str(tmp_path / "gemini"), "COPILOT_HOME": str(tmp_path / "copilot"),
            "PI_CODING_AGENT_DIR": str(tmp_path / "pi"), "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "PATH": os.environ.get("PATH", "")}


def claude_code_appears(tmp_path: Path) -> None:
    """Claude Code's default folder, with one project's transcripts."""
    shutil.copytree(SHOP, tmp_path / "claude" / "projects" / SHOP.name, dirs_exist_ok=True)


def test_the_command_line_builds_an_empty_index_from_the_harness_folders(tmp_path, env, recall_cmd):
    claude_code_appears(tmp_path)
    db = tmp_path / "fresh.db"
    done = subprocess.run([*recall_cmd, "--db", str(db), "search", "checkout", "--all-projects", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    env_ = Envelope.model_validate(json.loads(done.stdout))
    assert env_.status == "ok" and env_.results, (env_.status, env_.hint, done.stderr)
    assert env_.results[0].source == "claude-code" and "first_use" not in env_.gaps


def test_mcp_hint_on_nothing_to_build_from_then_the_folder_that_appears(tmp_path, env, recall_cmd):
    db = tmp_path / "fresh.db"
    params = StdioServerParameters(command=recall_cmd[0], args=[*recall_cmd[1:], "--db", str(db), "mcp"],
                                   cwd=str(tmp_path), env=env)
    seen: list[Envelope] = []

    async def main() -> None:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=30) as s:
                    await s.initialize()
                    for _ in range(2):
                        result = await s.call_tool("recall", {"query": "checkout", "all_projects": True})
                        seen.append(Envelope.model_validate(result.structured_content))
                        claude_code_appears(tmp_path)

    anyio.run(main)
    empty, built = seen
    assert empty.status == "empty_index" and not empty.results
    # where it looked, and what the user can do; no placeholder path for a model to guess
    assert str(tmp_path / "claude" / "projects") in empty.hint
    assert "PATH" not in empty.hint and "index PATH" not in empty.hint
    assert built.status == "ok" and built.results[0].source == "claude-code", built.hint


def test_a_finished_first_build_leaves_no_gap_though_a_log_is_empty(tmp_path, env, recall_cmd):
    """A session file Claude Code created and never wrote to is read to its
    end (there is nothing in it): a first build that finished within its
    budget says nothing of files "not indexed yet", on this call or the next."""
    claude_code_appears(tmp_path)
    (tmp_path / "claude" / "projects" / SHOP.name / "0badc0de-0000-4000-8000-000000000000.jsonl").write_bytes(b"")
    db = tmp_path / "fresh.db"
    params = StdioServerParameters(command=recall_cmd[0], args=[*recall_cmd[1:], "--db", str(db), "mcp"],
                                   cwd=str(tmp_path), env=env)
    seen: list[Envelope] = []

    async def main() -> None:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=30) as s:
                    await s.initialize()
                    for _ in range(2):
                        result = await s.call_tool("recall", {"query": "checkout", "all_projects": True})
                        seen.append(Envelope.model_validate(result.structured_content))

    anyio.run(main)
    for env_ in seen:
        assert env_.status == "ok" and env_.results, env_.hint
        assert "first_use" not in env_.gaps, env_.gaps


def test_the_command_line_speaks_to_its_user_when_nothing_is_found(tmp_path, env, recall_cmd):
    """The empty-index hint asks a model to tell the user; on the command line
    the reader is the user, so it says what to do directly."""
    done = subprocess.run([*recall_cmd, "--db", str(tmp_path / "fresh.db"), "search", "checkout"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert "Add the folder of your session logs" in done.stderr and "Tell the user" not in done.stderr, done.stderr
