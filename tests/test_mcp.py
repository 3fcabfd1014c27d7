"""The MCP server, `recall mcp`, as a real subprocess driven by the SDK's own
stdio client (ClientSession + stdio_client; one test also uses `Client`, which
negotiates the newer protocol era where a question is returned from the call).

The fixture sessions were recorded in /home/ada/..., and every server here runs
in a temporary directory, so searches pass `all_projects` or `cwd`."""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import INVALID_REQUEST, ElicitResult, ErrorData

from session_recall import Index
from session_recall.model import Envelope

RECALL_PARAMS = ["query", "question", "all_projects", "cwd", "session_id", "limit", "cursor"]
SCREENSHOT_SESSION = "b7e9d0c1-0002"  # 简历模板…: its message u2 carries an image attachment
CALLER_META_KEY = "session-recall/caller_session"
FIXTURE_SESSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "sessions"


@pytest.fixture(scope="module")
def recall_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("mcp-db") / "recall.db"
    with Index.open(db) as ix:
        report = ix.sync([str(FIXTURE_SESSIONS)], kind="canonical")
        assert report.as_dict()["messages_added"] > 0
    return db


@pytest.fixture
def server(tmp_path: Path, recall_db: Path, recall_cmd: list[str]):
    """`server(config=..., env=..., args=...)` -> StdioServerParameters for
    `recall --db DB [--config C] mcp [ARGS]`, run in an empty temporary directory."""

    def params(config: str | None = None, env: dict[str, str] | None = None, args: tuple[str, ...] = ()):
        argv = [*recall_cmd, "--db", str(recall_db)]
        if config is not None:
            cfg = tmp_path / "config.toml"
            cfg.write_text(config, encoding="utf-8")
            argv += ["--config", str(cfg)]
        argv += ["mcp", *args]
        workdir = tmp_path / "project"
        workdir.mkdir(exist_ok=True)
        return StdioServerParameters(
            command=argv[0], args=argv[1:], cwd=str(workdir),
            env={"XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
                 "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})})

    return params


@asynccontextmanager
async def session_for(params: StdioServerParameters, elicitation_callback=None):
    """An initialized ClientSession (the classic handshake) over stdio."""
    with anyio.fail_after(30):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=20,
                                     elicitation_callback=elicitation_callback) as session:
                await session.initialize()
                yield session


async def call(session, tool: str, args: dict, meta: dict | None = None) -> Envelope:
    """Call a tool; it must answer with an envelope, never an error."""
    result = await session.call_tool(tool, args, meta=meta)
    assert not result.is_error, result.content
    env = Envelope.model_validate(result.structured_content)
    # the same answer as text, for clients that read only text; diagnostics stay structured
    text = result.content[0].text
    assert text.startswith(f"status: {env.status}\n") and env.hint in text and "elapsed_ms" not in text
    return env


class Answers:
    """An elicitation callback whose answer the test sets; records the questions."""

    def __init__(self):
        self.mode = "yes"
        self.asked: list = []
        self.release = anyio.Event()

    async def __call__(self, context, params):
        self.asked.append(params)
        if self.mode == "yes":
            return ElicitResult(action="accept", content={"allow": True})
        if self.mode == "no":
            return ElicitResult(action="accept", content={"allow": False})
        if self.mode in ("decline", "cancel"):
            return ElicitResult(action=self.mode)
        if self.mode == "error":
            return ErrorData(code=INVALID_REQUEST, message="cannot show a form")
        await self.release.wait()  # "silent": answers only after the server gave up
        return ElicitResult(action="accept", content={"allow": True})


def test_lists_two_tools_with_described_inputs_and_the_envelope_as_output(server):
    async def main():
        async with session_for(server()) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"recall", "recall_more"}
        recall, more = tools["recall"], tools["recall_more"]
        assert list(recall.input_schema["properties"]) == RECALL_PARAMS
        assert recall.input_schema.get("required", []) == []
        assert list(more.input_schema["properties"])[0] == "anchor" and more.input_schema["required"] == ["anchor"]
        for tool in (recall, more):
            for name, prop in tool.input_schema["properties"].items():
                assert len(prop.get("description", "")) > 20, (tool.name, name)
            assert tool.annotations.read_only_hint is True
        # the envelope's schema, published once (recall_more answers with the same envelope)
        assert recall.output_schema == Envelope.model_json_schema() and more.output_schema is None
        # written for a model: when to use which, the syntax, and how to read the answer
        # (what each status means is in the answer's own hint)
        for words in ("recall_more", "AND", "Chinese", "substring", "double quotes", "`hint`", "`gaps`",
                      "`partial`", "`status`", "next_cursor"):
            assert words in recall.description, words
        assert "anchor_id" in more.description and "same envelope" in more.description

    anyio.run(main)


def test_recall_finds_chinese_and_english_and_recall_more_widens(server):
    async def main():
        async with session_for(server()) as s:
            zh = await call(s, "recall", {"query": "字体", "all_projects": True})
            assert zh.status == "ok" and zh.results
            assert any("字体" in m.text for r in zh.results for m in r.passage.messages if m.is_hit)
            assert zh.results[0].session_id == SCREENSHOT_SESSION

            en = await call(s, "recall", {"query": "font", "cwd": "/home/ada/resume"})
            assert en.status == "ok"
            assert en.results[0].session_id == "a3f1c2d4-0001"
            assert any("font" in m.text.lower() for m in en.results[0].passage.messages if m.is_hit)

            # the server's own directory is the default project: nothing of /home/ada there
            here = await call(s, "recall", {"query": "font"})
            assert here.status == "no_match" and not here.results

            anchor = zh.results[0].passage.anchor_id
            more = await call(s, "recall_more", {"anchor": anchor, "all_projects": True})
            assert more.status == "ok" and len(more.results) == 1
            assert more.results[0].passage.anchor_id == anchor
            assert any(m.is_anchor for m in more.results[0].passage.messages)
            # outside the scope, an anchor reads like an unknown one; the hint says what to try
            # first (a model that forgot the recall's all_projects), whichever it is
            lost = await call(s, "recall_more", {"anchor": anchor})
            assert lost.status == "unknown_anchor" and "passed all_projects or a cwd" in lost.hint, lost.hint
            assert (await call(s, "recall_more", {"anchor": "not-an-anchor"})).status == "unknown_anchor"

    anyio.run(main)


def test_materials_get_a_resource_only_in_the_callers_own_session(server):
    def resources(env: Envelope) -> list:
        return [mat.resource for r in env.results for m in r.passage.messages for mat in m.materials]

    async def main():
        # the caller's session is one of the project it works in (the server's cwd, or `cwd`)
        args = {"query": "浮窗", "cwd": "/home/ada/resume"}
        async with session_for(server(env={"RECALL_CALLER_SESSION": SCREENSHOT_SESSION})) as s:
            own = await call(s, "recall", args)
            assert resources(own) == [f"recall://sessions/{SCREENSHOT_SESSION}/attachments/img_01"]
            # the request's _meta names another caller: it wins over the environment
            other = await call(s, "recall", args, meta={CALLER_META_KEY: "some-other-session"})
            assert resources(other) == [None]
        async with session_for(server()) as s:
            assert resources(await call(s, "recall", args)) == [None]  # no caller known
            named = await call(s, "recall", args, meta={CALLER_META_KEY: SCREENSHOT_SESSION})
            assert resources(named) == [f"recall://sessions/{SCREENSHOT_SESSION}/attachments/img_01"]

    anyio.run(main)


def test_hostile_input_gets_an_envelope_and_a_credential_is_refused(server):
    hostile = ['"NEAR(a b) OR *', "x" * 100_000, "*", ")(", "NOT AND OR", "'; DROP TABLE messages; --",
               "\x00\ufffd\U0001f600", '"' * 1000, "字" * 30_000]

    async def main():
        async with session_for(server()) as s:
            for query in hostile:
                env = await call(s, "recall", {"query": query, "all_projects": True})
                assert env.status in ("ok", "partial", "no_match", "empty_query"), (query[:20], env.status)
                assert len(env.hint) < 600  # a hint stays a sentence, whatever the query
            for args in ({"query": "font", "limit": -5, "all_projects": True},
                         {"query": "font", "limit": 10**9, "all_projects": True},
                         {"query": "font", "cursor": "garbage", "all_projects": True},
                         {"query": "font", "session_id": "nope"},
                         {"query": "font", "cwd": "../../../.."},
                         {"query": "", "question": "?" * 50_000}):
                await call(s, "recall", args)
            for anchor in ("", "x" * 100_000, "WyJhIl0"):
                assert (await call(s, "recall_more", {"anchor": anchor})).status == "unknown_anchor"
            secret = "sk-proj-abcdefghijklmnopqrstuv1234"
            env = await call(s, "recall", {"query": secret, "all_projects": True})
            assert env.status == "refused" and not env.results
            assert secret not in env.model_dump_json()
            # the index still answers afterwards
            assert (await call(s, "recall", {"query": "字体", "all_projects": True})).status == "ok"

    anyio.run(main)


def test_all_projects_denied_by_policy(server):
    async def main():
        async with session_for(server(config='all_projects = "deny"\n'), elicitation_callback=Answers()) as s:
            env = await call(s, "recall", {"query": "字体", "all_projects": True})
            assert env.status == "denied" and not env.results and "deny" in env.hint
            # the caller's own project is still searchable
            assert (await call(s, "recall", {"query": "字体", "cwd": "/home/ada/resume"})).status == "ok"
            anchor = (await call(s, "recall", {"query": "字体", "cwd": "/home/ada/resume"})).results[0].passage.anchor_id
            assert (await call(s, "recall_more", {"anchor": anchor, "all_projects": True})).status == "denied"
            # without it, unknown here, and no advice to ask for what the policy denies
            lost = await call(s, "recall_more", {"anchor": anchor})
            assert lost.status == "unknown_anchor" and "all_projects" not in lost.hint, lost.hint

    anyio.run(main)


def test_confirm_fails_closed_without_elicitation(server):
    async def main():
        async with session_for(server(config='all_projects = "confirm"\n')) as s:  # no elicitation callback
            env = await call(s, "recall", {"query": "字体", "all_projects": True})
            assert env.status == "denied" and not env.results
            assert "elicitation" in env.gaps["all_projects"]
            assert "could not be asked" in env.hint and "so that the user is asked" not in env.hint
            assert "terminal" not in env.hint  # words for the command line are not the model's

    anyio.run(main)


def test_confirm_asks_the_user_and_only_yes_allows(server):
    answers = Answers()

    async def main():
        params = server(config='all_projects = "confirm"\n', args=("--confirm-timeout", "0.5"))
        async with session_for(params, elicitation_callback=answers) as s:
            env = await call(s, "recall", {"query": "字体", "all_projects": True})
            assert env.status == "ok" and env.results
            question = answers.asked[-1]
            assert "字体" in question.message and "ALL projects" in question.message
            assert question.requested_schema["properties"]["allow"]["type"] == "boolean"

            anchor = env.results[0].passage.anchor_id
            assert (await call(s, "recall_more", {"anchor": anchor, "all_projects": True})).status == "ok"

            for mode in ("no", "decline", "cancel", "error", "silent"):
                answers.mode = mode
                env = await call(s, "recall", {"query": "字体", "all_projects": True})
                assert env.status == "denied" and not env.results, mode
                assert env.gaps["all_projects"], mode
                # the user's own no, or a question nobody answered: the hint says which
                said = "did not allow" if mode in ("no", "decline") else "could not be asked or did not answer"
                assert said in env.hint, (mode, env.hint)
            assert "0.5s" in env.gaps["all_projects"]  # the silent client: nobody answered in time
            answers.release.set()

            # nothing to search: nobody is asked
            asked = len(answers.asked)
            answers.mode = "yes"
            assert (await call(s, "recall", {"query": "sk-proj-abcdefghijklmnopqrstuv1234",
                                             "all_projects": True})).status == "refused"
            assert (await call(s, "recall", {"query": "", "all_projects": True})).status == "empty_query"
            assert (await call(s, "recall", {"query": "字体", "cwd": "/home/ada/resume"})).status == "ok"
            assert len(answers.asked) == asked

    anyio.run(main)


def test_confirm_on_the_newer_protocol_era(server):
    """`Client` negotiates the era where a server cannot ask mid-call: the
    question is returned from the call and the client retries with the answer."""
    answers = Answers()

    async def main():
        with anyio.fail_after(30):
            transport = stdio_client(server(config='all_projects = "confirm"\n'))
            async with Client(transport, elicitation_callback=answers) as client:
                assert client.session.protocol_version >= "2026"
                result = await client.call_tool("recall", {"query": "font", "all_projects": True})
                assert Envelope.model_validate(result.structured_content).status == "ok"
                assert answers.asked
                answers.mode = "decline"
                result = await client.call_tool("recall", {"query": "font", "all_projects": True})
                env = Envelope.model_validate(result.structured_content)
                assert env.status == "denied" and "declined" in env.gaps["all_projects"]

    anyio.run(main)


def test_arguments_of_the_wrong_type_get_an_envelope_that_names_them(server):
    """A model that sends a number for `query`, "abc" for `limit` or no
    `anchor` gets the envelope (status bad_argument) with a hint naming the
    argument and what it takes, as for every other failure; never the
    validator's error text, and never the rejected value quoted back."""
    cases = [("recall", {"query": 12345}, "`query`"),
             ("recall", {"query": "font", "limit": "abc", "all_projects": True}, "`limit`"),
             ("recall", {"query": "font", "all_projects": "perhaps"}, "`all_projects`"),
             ("recall", {"query": ["font", "serif"]}, "`query`"),
             ("recall_more", {}, "`anchor`"),
             ("recall_more", {"anchor": 42}, "`anchor`"),
             ("recall_more", {"anchor": "WyJhIl0", "cwd": ["/"]}, "`cwd`"),
             # a cwd names a folder by its absolute path: relative or NUL is no quiet other scope
             ("recall", {"query": "font", "cwd": "resume"}, "absolute path"),
             ("recall", {"query": "font", "cwd": "../.."}, "absolute path"),
             ("recall", {"query": "font", "cwd": "\x00"}, "NUL"),
             ("recall", {"query": "font", "cwd": "/home/ada/resume\n"}, "control character"),
             ("recall", {"query": "font", "cwd": " /home/ada/resume"}, "white space"),
             ("recall", {"query": "font", "cwd": "~nosuchuser-zz/x"}, "names no user's home folder"),
             ("recall_more", {"anchor": "WyJhIl0", "cwd": "./x"}, "absolute path")]

    async def main():
        async with session_for(server()) as s:
            for tool, args, named in cases:
                env = await call(s, tool, args)
                assert env.status == "bad_argument" and not env.results, (tool, args, env.status)
                assert named in env.hint and "again" in env.hint, env.hint
                assert "pydantic" not in env.hint and "perhaps" not in env.hint and "12345" not in env.hint
                assert "Value error" not in env.hint
            # a well-typed call on the same session still answers; `~` may lead a cwd, blank is none
            assert (await call(s, "recall", {"query": "字体", "all_projects": True})).status == "ok"
            for cwd in ("~", "  "):
                assert (await call(s, "recall", {"query": "字体", "cwd": cwd})).status != "bad_argument", cwd
            # JSON read as the SDK reads it (README, "MCP"): "true" is true, "3" is 3, unknown names ignored
            loose = await call(s, "recall", {"query": "字体", "all_projects": "true", "limit": "1", "colour": 1})
            assert loose.status == "ok" and len(loose.results) == 1 and loose.project_root is None

    anyio.run(main)
