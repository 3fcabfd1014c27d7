"""What the MCP server costs an agent's context, through the real `recall mcp`
and the SDK's stdio client: tools/list at most half its first size, a default
`recall` answer of about 8,000 characters on the real Claude Code and Codex
transcripts (indexed through the CLI), no answer over 48,000 characters
(Codex cuts longer tool results in the middle), and the diagnostics in the
structured content only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import orjson
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from session_recall.model import Envelope

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="the shared samples folder (../shared/data beside the "
                                                          "project) is not present")
# tools/list of the first release: 14,529 characters (the `recall`
# description alone 2,919, each tool's output schema 3,984).
TOOLS_LIST_BEFORE = 14_529
DEFAULT_ANSWER = 8_000
MAX_ANSWER = 48_000
QUERIES = ["the", "error", "git", "test", "file", "codex", "run", "code"]


def chars(value) -> int:
    """Characters of compact JSON: what Claude Code and Codex hand a model
    from structured content (JSON.stringify, serde_json::to_string)."""
    return len(orjson.dumps(value).decode())


def serve(recall_cmd: list[str], db: Path, workdir: Path) -> StdioServerParameters:
    return StdioServerParameters(command=recall_cmd[0], args=[*recall_cmd[1:], "--db", str(db), "mcp"],
                                 cwd=str(workdir), env={"XDG_CONFIG_HOME": str(workdir / "xdg-config"),
                                                        "PYTHONPATH": os.environ.get("PYTHONPATH", "")})


async def _session_run(params: StdioServerParameters, body) -> None:
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as session:
                await session.initialize()
                await body(session)


async def call(session: ClientSession, args: dict) -> tuple[Envelope, dict, str]:
    result = await session.call_tool("recall", args)
    assert not result.is_error, result.content
    text = "".join(c.text for c in result.content if c.type == "text")
    return Envelope.model_validate(result.structured_content), result.structured_content, text


@needs_data
def test_default_answers_on_real_transcripts_fit_8000_characters(tmp_path: Path, recall_cmd):
    db = tmp_path / "real.db"
    subprocess.run([*recall_cmd, "--db", str(db), "index", str(DATA / "claude-code"), str(DATA / "codex")],
                   check=True, capture_output=True, timeout=60, cwd=tmp_path)
    pages = []

    async def body(s: ClientSession) -> None:
        for q in QUERIES:
            env, data, text = await call(s, {"query": q, "all_projects": True})
            assert env.status == "ok" and env.results, q
            pages.append((q, chars(data), len(text)))
            # diagnostics: in the structured content, never in the text
            assert "engine" in data["diagnostics"]
            assert "elapsed_ms" not in text and "diagnostics" not in text and "sessions_scanned" not in text
            assert f"status: {env.status}" in text and env.hint in text
            assert all(r.passage.anchor_id in text for r in env.results)
            if env.next_cursor:  # what did not fit is on the next page, not lost
                nxt, _, _ = await call(s, {"query": q, "all_projects": True, "cursor": env.next_cursor})
                assert nxt.status == "ok" and nxt.results
                first = {(r.session_id, r.passage.anchor_id) for r in env.results}
                assert not first & {(r.session_id, r.passage.anchor_id) for r in nxt.results}

    anyio.run(_session_run, serve(recall_cmd, db, tmp_path), body)
    for q, structured, text in pages:
        assert structured <= DEFAULT_ANSWER and text <= DEFAULT_ANSWER, (q, structured, text)


def test_tools_list_is_half_its_first_size_and_no_answer_is_over_48000_characters(tmp_path: Path, recall_cmd,
                                                                                  canonical):
    logs = tmp_path / "logs"
    logs.mkdir()
    for s in range(8):
        log = canonical(f"s{s}", cwd=f"/home/ada/p{s}")
        lines = [log.session(title=f"session {s}")]
        for m in range(8):
            lines.append(log.message(f"m{m}", f"needle {m} " + "lorem ipsum dolor " * 150, turn_id=f"t{m}",
                                     role="assistant"))
        (logs / f"s{s}.jsonl").write_bytes(b"".join(lines))
    db = tmp_path / "big.db"
    subprocess.run([*recall_cmd, "--db", str(db), "index", str(logs)], check=True, capture_output=True,
                   timeout=60, cwd=tmp_path)
    sizes = []
    listed = {}

    async def body(s: ClientSession) -> None:
        tools = await s.list_tools()
        listed["size"] = chars(tools.model_dump(mode="json", by_alias=True, exclude_none=True))
        listed["recall"] = next(t for t in tools.tools if t.name == "recall")
        for args in ({"query": "needle", "all_projects": True, "limit": 50},
                     {"query": "needle", "all_projects": True, "limit": 50, "question": "lorem " * 9_000},
                     {"query": "needle", "all_projects": True}):
            env, data, text = await call(s, args)
            sizes.append((chars(data), len(text), len(env.results)))
        more = await s.call_tool("recall_more", {"anchor": env.results[0].passage.anchor_id, "all_projects": True})
        sizes.append((chars(more.structured_content), len("".join(c.text for c in more.content)), 1))

    anyio.run(_session_run, serve(recall_cmd, db, tmp_path), body)
    assert listed["size"] <= TOOLS_LIST_BEFORE // 2, listed["size"]
    assert len(listed["recall"].description) <= 1200
    for structured, text, _ in sizes:
        assert structured <= MAX_ANSWER and text <= MAX_ANSWER, sizes
    assert sizes[0][2] > 5  # a larger limit still gets a larger page
    assert sizes[2][0] <= DEFAULT_ANSWER, sizes
