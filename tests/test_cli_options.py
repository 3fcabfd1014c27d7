"""Options of the `recall` command: the global ones before or after the
subcommand, --version."""

from __future__ import annotations

import os
from importlib.metadata import version

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from session_recall.model import Envelope
from tests.helpers import run_all


def test_global_options_work_after_the_subcommand_too(proj, corpus, run_recall, tmp_path):
    corpus.session("s1", proj, title="Fonts").message("u1", "Which serif font for the résumé?")
    corpus.open().close()
    config = tmp_path / "deny.toml"
    config.write_text('all_projects = "deny"\n')
    after, before, status, denied, version_out = run_all(
        run_recall,
        ["search", "serif", "--cwd", proj, "--json", "--db", corpus.db],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--json"],
        ["status", "--json", "--db", corpus.db],
        ["--db", corpus.db, "search", "serif", "--all-projects", "--config", config],
        ["--version"])
    assert after.returncode == 0, after.stderr
    assert Envelope.model_validate_json(after.stdout).results[0].session_id == "s1"
    assert before.returncode == 0 and Envelope.model_validate_json(before.stdout).results == \
        Envelope.model_validate_json(after.stdout).results
    assert '"sessions": 1' in status.stdout, status.stderr
    assert denied.returncode == 3 and "deny" in denied.stderr  # --config after the command is read
    assert version_out.returncode == 0 and version_out.stdout.strip() == f"recall, version {version('session-recall')}"


def test_recall_mcp_takes_the_db_after_the_subcommand(proj, corpus, recall_cmd, tmp_path):
    corpus.session("s1", proj, title="Fonts").message("u1", "Which serif font for the résumé?")
    corpus.open().close()
    params = StdioServerParameters(
        command=recall_cmd[0], args=[*recall_cmd[1:], "mcp", "--db", str(corpus.db)], cwd=str(proj),
        env={"XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
             "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "RECALL_CONFIG": os.environ["RECALL_CONFIG"]})

    async def ask() -> Envelope:
        with anyio.fail_after(30):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=20) as session:
                    await session.initialize()
                    result = await session.call_tool("recall", {"query": "serif"})
                    return Envelope.model_validate(result.structured_content)

    env = anyio.run(ask)
    assert env.status == "ok" and env.results[0].session_id == "s1"



def test_shell_completion_offers_commands_options_and_their_choices(recall_cmd, tmp_path):
    import subprocess

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_RECALL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        done = subprocess.run(recall_cmd, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        return done.stdout.splitlines()

    assert "plain,show" in complete("recall sh", 1)
    assert {"plain,user", "plain,assistant", "plain,tool_result"} <= set(complete("recall search x --role ", 4))
    assert "plain,--since" in complete("recall search x --si", 3)


def test_a_query_that_starts_with_a_dash_is_shown_the_way_in(proj, corpus, run_recall):
    """`recall search '->'` reads as an unknown option: the error says to put
    `--` before such words, and with it they are searched; a near miss of a
    real option still gets click's suggestion alone."""
    corpus.session("s1", proj).message("u1", "the arrow -> points at the cause")
    corpus.open().close()
    dash, dashed, near = run_all(
        run_recall,
        ["--db", corpus.db, "search", "->", "--cwd", proj],
        ["--db", corpus.db, "search", "--cwd", proj, "--json", "--", "->"],
        ["--db", corpus.db, "search", "x", "--limt", "3", "--cwd", proj])
    assert dash.returncode == 2 and "put -- after the options and before the words" in dash.stderr, dash.stderr
    assert dashed.returncode == 0, dashed.stderr
    assert [r.session_id for r in Envelope.model_validate_json(dashed.stdout).results] == ["s1"]
    assert near.returncode == 2 and "--limit" in near.stderr and "put --" not in near.stderr
