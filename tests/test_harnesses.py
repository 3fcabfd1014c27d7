"""Every harness kind beyond Claude Code and Codex, end to end: its logs laid
out under a temporary HOME as the harness lays them out are found by
`recall index` with no path, and each session is found by its own words
through the real CLI and the real MCP server, in its own project (cwd).

HARNESSES says, per kind, where its fixture goes under HOME (and under the
folder its environment variable names), and a word, the project and the
session that word must find."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anyio
from conftest import recall_command
from mcp import ClientSession, StdioServerParameters, stdio_client

from session_recall import Index
from session_recall.config import Settings, default_sources
from session_recall.model import Envelope

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass(frozen=True)
class Harness:
    kind: str
    fixture: str  # a folder under fixtures/
    at_home: str  # where that folder goes under HOME
    env: str  # the variable that moves it
    under_env: str  # where it goes under that variable's folder
    folder: str  # the source folder `recall index` names, under HOME
    word: str
    cwd: str
    session_id: str


HARNESSES = [
    Harness("gemini", "gemini", ".gemini", "GEMINI_CLI_HOME", ".gemini", ".gemini/tmp",
            "narwhal", "/home/ada/shop", "5e0a7c2d-1b3f-4e55-9a61-0c4d8e2f7a10"),
    Harness("opencode", "opencode", ".local/share/opencode", "XDG_DATA_HOME", "opencode", ".local/share/opencode",
            "pangolin", "/home/ada/shop", "ses_4a1f0c2e7ffeQ1b2C3d4E5f6G7"),
    Harness("cursor", "cursor", ".cursor", "", "", ".cursor/projects",
            "manatee", "/home/ada/shop", "8d2c4e6f-1a3b-4c5d-9e7f-0a1b2c3d4e5f"),
    Harness("copilot", "copilot", ".copilot", "COPILOT_HOME", ".", ".copilot/session-state",
            "jackalope", "/home/ada/shop", "3b7e1f20-5c4d-4a9b-8e6f-1a2b3c4d5e6f"),
    Harness("pi", "pi", ".pi/agent", "PI_CODING_AGENT_DIR", ".", ".pi/agent/sessions",
            "wombat", "/home/ada/shop", "0c9f3e2a-6b1d-4c8e-9a7f-2d4b6e8f0a11"),
]


def lay_out(fixture: str, dest: Path) -> None:
    """Copy a fixture folder to where its harness keeps it; an SQL script in
    it becomes the SQLite database of the same name, in WAL mode (OpenCode's)."""
    shutil.copytree(FIXTURES / fixture, dest, dirs_exist_ok=True)
    for script in dest.rglob("*.sql"):
        db = sqlite3.connect(script.with_suffix(".db"))
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(script.read_text(encoding="utf-8"))
        db.commit()
        db.close()
        script.unlink()
ENV_PREFIXES = ("RECALL_", "CLAUDE_", "CODEX_", "OPENCODE_", *(h.env for h in HARNESSES if h.env))


def _env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
    # (XDG_DATA_HOME unset: OpenCode's folder is then under HOME; the index is --db)
    env.update({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")})
    env.update(extra or {})
    return env


def _recall(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([*recall_command(), "--db", str(tmp_path / "r.db"), *args], capture_output=True,
                         text=True, timeout=60, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out


def test_each_harness_is_indexed_from_home_and_found_by_cli_and_mcp(tmp_path: Path):
    home = tmp_path / "home"
    for h in HARNESSES:
        lay_out(h.fixture, home / h.at_home)
    env = _env(tmp_path)
    out = _recall(tmp_path, env, "index", "--json")
    for h in HARNESSES:
        assert f"{home / h.folder} ({h.kind})" in out.stderr, out.stderr
    report = json.loads(out.stdout)
    assert {s["kind"] for s in report["sources"]} == {h.kind for h in HARNESSES}
    assert all(s["files"] >= 1 for s in report["sources"]) and report["messages_added"] > 0
    with Index.open(tmp_path / "r.db") as ix:  # (in this process: a second pass adds nothing)
        again = ix.sync()
        assert (again.messages_added, again.messages_updated, again.files_read) == (0, 0, 0)

    for h in HARNESSES:
        got = json.loads(_recall(tmp_path, env, "search", h.word, "--cwd", h.cwd, "--json").stdout)
        assert got["status"] == "ok", (h.kind, got)
        assert {(r["session_id"], r["source"], r["cwd"]) for r in got["results"]} == {
            (h.session_id, h.kind, h.cwd)}, h.kind

    async def main():
        params = StdioServerParameters(command=recall_command()[0],
                                       args=[*recall_command()[1:], "--db", str(tmp_path / "r.db"), "mcp"],
                                       cwd=str(tmp_path), env=env)
        with anyio.fail_after(30):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=20) as session:
                    await session.initialize()
                    for h in HARNESSES:
                        result = await session.call_tool("recall", {"query": h.word, "cwd": h.cwd})
                        assert not result.is_error, result.content
                        envelope = Envelope.model_validate(result.structured_content)
                        assert envelope.status == "ok", (h.kind, envelope.hint)
                        assert {(r.session_id, r.source) for r in envelope.results} == {(h.session_id, h.kind)}
                        assert any(h.word in m.text for r in envelope.results for m in r.passage.messages)

    anyio.run(main)


def test_each_harness_folder_moves_with_its_variable(tmp_path: Path, monkeypatch):
    """(Cursor's folder has no variable: it stays under HOME.)"""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in [k for k in os.environ if k.startswith(ENV_PREFIXES)]:
        monkeypatch.delenv(name)
    want = set()
    for h in HARNESSES:
        if not h.env:
            lay_out(h.fixture, tmp_path / "home" / h.at_home)
            want.add((str(tmp_path / "home" / h.folder), h.kind))
            continue
        moved = tmp_path / f"elsewhere-{h.kind}"
        lay_out(h.fixture, moved / h.under_env)
        monkeypatch.setenv(h.env, str(moved))
        want.add((str(moved / h.under_env / Path(h.folder).relative_to(h.at_home)), h.kind))
    origin, found = default_sources(Settings())
    assert origin == "defaults"
    assert set(found) == want
