"""The `claude-code` and `codex` sources (contract section 2): every shared
sample indexes with the sessions, titles, cwds and message counts asserted
here; words of tool results and tool-call arguments are found; sub-agent
transcripts land in their parent session; a Codex message carried twice (as an
event and as a response item) is indexed once; `.jsonl.zst` rollouts read like
plain ones; `auto` tells the kinds apart.

The expected counts below are hard-coded. They were verified by reading the
samples: one message per non-empty `text` block (or string content), per
`tool_use` and per non-empty `tool_result` of a newline-terminated `user` or
`assistant` line (Claude Code); one per `user_message`/`agent_message` event,
per tool call and per non-empty tool output (Codex).

The samples are public fixtures kept outside the project, in `shared/data/`
beside it; the tests that need them are skipped when that folder is absent.
The small synthetic logs in fixtures/claude-code and fixtures/codex cover what
the samples lack (images, titles of each rank, both sub-agent layouts, a
sub-agent thread, a local shell call, injected context).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_recall import Index
from session_recall.indexer import files as F
from session_recall.indexer.sources import Skip, detect_kind, kinds
from session_recall.indexer.sources.claude_code import ClaudeCodeParser
from session_recall.indexer.sources.codex import CodexParser
from session_recall.model import MessageEvent, SessionEvent, TitleEvent

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="the shared samples folder (../shared/data beside the "
                                                          "project) is not present")

PLACEHOLDER = re.compile("\ue000([a-z_]+):[0-9a-f]+\ue001")
CC = "claude-code"
CX = "codex"
S_PRIVATE = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
S_INCR = "e9fb405b-169f-40eb-9396-7e75076f045d"
S_ROLLOUT = "019e1625-789d-76c0-80ab-3724b5ddb799"
ROLLOUT = "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"


def roles(user=0, assistant=0, tool_call=0, tool_result=0) -> dict[str, int]:
    return {k: v for k, v in dict(user=user, assistant=assistant, tool_call=tool_call,
                                  tool_result=tool_result).items() if v}


# Per sample file, indexed alone: session_id -> (cwd, title, started_at, messages by role).
# The three daaain samples end without a final newline and their last line is
# the `summary`: a line without its newline waits for it (docs/indexing.md),
# so they index with no title (test_unterminated_summary_titles_once_complete).
SAMPLES: dict[str, tuple[str, dict[str, tuple]]] = {
    "claude-code/codemie-ai-codemie-code/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl": (CC, {
        S_PRIVATE: ("/tmp/private", None, "2025-12-10T19:37:45.343Z", roles(3, 4, 6, 5))}),
    "claude-code/codemie-ai-codemie-code/-tmp-private/agent-36541525.jsonl": (CC, {
        S_PRIVATE: ("/tmp/private", None, "2025-12-10T19:37:37.159Z", roles(1, 1))}),
    "claude-code/codemie-ai-codemie-code/-tmp-private/agent-50243ee8.jsonl": (CC, {
        S_PRIVATE: ("/tmp/private", None, "2025-12-10T19:37:37.157Z", roles(1, 1))}),
    "claude-code/codemie-ai-codemie-code/incremental-subagents/turn-2.jsonl": (CC, {
        # its `summary` names a message (leafUuid) of no session here: it titles nothing
        S_INCR: ("/Users/User/repo/codemie-ai/codemie-code", None, "2026-01-14T19:20:03.207Z", roles(1, 5, 14, 13))}),
    "claude-code/codemie-ai-codemie-code/incremental-subagents/turn-2/subagents/agent-a485154.jsonl": (CC, {
        S_INCR: ("/Users/User/repo/codemie-ai/codemie-code", None, "2026-01-14T19:20:13.501Z", roles(1, 3, 20, 20))}),
    "claude-code/daaain-claude-code-log/edge_cases.jsonl": (CC, {
        "edge_cases": ("/tmp", None, "2025-06-14T11:00:00Z", roles(7, 2, 2, 1)),
        # one line of another session, as the fixture has it
        "todowrite_session": ("/tmp", None, "2025-06-14T10:02:00Z", roles(tool_call=1))}),
    "claude-code/daaain-claude-code-log/representative_messages.jsonl": (CC, {
        "test_session": ("/tmp", None, "2025-06-14T10:00:00Z", roles(4, 3, 2, 2))}),
    "claude-code/daaain-claude-code-log/todowrite_examples.jsonl": (CC, {
        "todowrite_session": ("/tmp", None, "2025-06-14T10:00:00Z", roles(2, 3, 3, 3))}),
    "claude-code/simonw-claude-code-transcripts/sample_session.jsonl": (CC, {
        # (so does its summary's `test-leaf-uuid`)
        "test-session-id": ("/project", None, "2025-12-24T10:00:00.000Z", roles(2, 2, 2, 2))}),
    f"codex/codemie-ai-codemie-code/{ROLLOUT}": (CX, {
        S_ROLLOUT: ("/Users/Sample_User/repos/codemie-ai/codemie-code", None, "2026-05-11T08:26:55.042Z",
                    roles(2, 13, 105, 102))}),
    "codex/codemie-ai-codemie-code/turn-2.jsonl": (CX, {
        "a1b2c3d4-e5f6-7890-abcd-ef1234567890": ("/home/user/project", None, "2026-05-12T09:59:55.000Z", roles(2, 2))}),
    "codex/codemie-ai-codemie-code/turn-spawn-skill.jsonl": (CX, {
        "spawn-test-uuid": ("/home/user/project", None, "2026-05-12T09:59:55.000Z", roles(1, 0, 3, 1))}),
    # token counts only, no session_meta: a rollout with nothing to index
    "codex/ryoppippi-ccusage/session-alpha.jsonl": (CX, {}),
}


def sessions(ix: Index) -> dict[str, tuple]:
    """session_id -> (source, cwd, title, started_at, messages by role)."""
    conn = ix.store.conn
    out = {}
    for rowid, source, sid, cwd, title, started in conn.execute(
            "SELECT id, source, session_id, cwd, title, started_at FROM sessions"):
        by_role = Counter(dict(conn.execute("SELECT role, count(*) FROM messages WHERE session = ? GROUP BY role",
                                            (rowid,))))
        assert sid not in out, f"session {sid} indexed twice"
        out[sid] = (source, cwd, title, started, dict(by_role))
    return out


def found(ix: Index, query: str) -> list[tuple[str, str, str]]:
    """(session_id, message_id, role) of every message the query finds."""
    return sorted((s["session_id"], m.message_id, m.role) for m, s in ix.search(query, limit=100))


def texts(ix: Index, session_id: str) -> list[tuple[str, str, str, str]]:
    """(message_id, turn_id, role, text) of one session, in order. A redaction
    placeholder's hash is keyed per database: only its kind is kept here."""
    return [(m, t, r, PLACEHOLDER.sub(r"[\1]", x)) for m, t, r, x in ix.store.conn.execute(
        "SELECT m.message_id, m.turn_id, m.role, m.text FROM messages m JOIN sessions s ON s.id = m.session "
        "WHERE s.session_id = ? ORDER BY m.seq", (session_id,))]



# --- every sample -------------------------------------------------------------------


@needs_data
def test_the_sample_list_is_complete():
    """Every transcript in the shared folders has its expectations here."""
    on_disk = {p.relative_to(DATA).as_posix() for kind in (CC, CX) for p in (DATA / kind).rglob("*.jsonl")}
    assert on_disk == set(SAMPLES)


@needs_data
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_indexes(sample, open_index):
    kind, expected = SAMPLES[sample]
    ix = open_index()
    report = ix.sync([str(DATA / sample)])  # kind `auto`: detected from the first lines
    assert report.files == 1 and report.files_read == 1
    assert ix.store.conn.execute("SELECT kind FROM files").fetchone()[0] == kind
    got = sessions(ix)
    assert set(got) == set(expected)
    for sid, (cwd, title, started, by_role) in expected.items():
        assert got[sid] == (kind, cwd, title, started, by_role), sid


@needs_data
def test_sample_folders_index_whole(open_index):
    """Both folders as sources, as a user would point at them: every session once."""
    ix = open_index()
    report = ix.sync([str(DATA / CC), str(DATA / CX)])
    # The one other file, simonw's sample_session.json, is that project's
    # `{"loglines": [...]}` export, not a transcript: it is not a `.jsonl`.
    assert report.files == len(SAMPLES)
    got = sessions(ix)
    assert {sid: v[4] for sid, v in got.items()} == {
        S_PRIVATE: roles(5, 6, 6, 5),
        S_INCR: roles(2, 8, 34, 33),
        "edge_cases": roles(7, 2, 2, 1),
        # the edge_cases line of this session repeats a message of its own file: the same message
        "todowrite_session": roles(2, 3, 3, 3),
        "test_session": roles(4, 3, 2, 2),
        "test-session-id": roles(2, 2, 2, 2),
        S_ROLLOUT: roles(2, 13, 105, 102),
        "a1b2c3d4-e5f6-7890-abcd-ef1234567890": roles(2, 2),
        "spawn-test-uuid": roles(1, 0, 3, 1),
    }
    assert {v[0] for sid, v in got.items() if sid in (S_ROLLOUT, "spawn-test-uuid")} == {CX}
    # a session starts with its earliest line, whichever file holds it (Claude
    # Code starts its warm-up sub-agents before the first prompt)
    assert got[S_INCR][3] == "2026-01-14T19:20:03.207Z"
    assert got[S_PRIVATE][3] == "2025-12-10T19:37:37.157Z"


@needs_data
def test_skipped_lines_are_counted(open_index):
    ix = open_index()
    report = ix.sync([str(DATA / CC / "daaain-claude-code-log" / "edge_cases.jsonl")])
    # a bare string, a bare number and a bare list; an object without `type`;
    # a `message` that is a string and one whose `content` key is misspelt
    assert report.skipped == {"not_object": 3, "missing_type": 1, "invalid_fields": 2}
    report = open_index("b").sync([str(DATA / CC / "codemie-ai-codemie-code" / "-tmp-private" / f"{S_PRIVATE}.jsonl")])
    # file-history-snapshot lines, and a Bash result with no output
    assert report.skipped == {"noise": 6, "empty": 1}


@needs_data
def test_unterminated_summary_titles_once_complete(tmp_path, open_index):
    """The daaain samples' last line (a `summary`) has no newline yet: it is
    read, and titles its session, when the newline arrives."""
    folder = tmp_path / "daaain"
    shutil.copytree(DATA / CC / "daaain-claude-code-log", folder)
    ix = open_index()
    ix.sync([str(folder)])
    assert {sid: v[2] for sid, v in sessions(ix).items()} == {"edge_cases": None, "test_session": None,
                                                              "todowrite_session": None}
    for log in folder.glob("*.jsonl"):
        with open(log, "ab") as fh:
            fh.write(b"\n")
    ix.sync([str(folder)])
    titles = {sid: v[2] for sid, v in sessions(ix).items()}
    assert titles["todowrite_session"] == "Feature Implementation with Task Management"
    assert titles["test_session"].startswith("User learned about Python decorators")
    assert titles["edge_cases"].startswith("Tested various edge cases")


# --- what is searchable -------------------------------------------------------------


@needs_data
def test_claude_tool_arguments_and_results_are_found(open_index):
    ix = open_index()
    ix.sync([str(DATA / CC)])
    # Edit's file_path argument, and the result that names the file
    assert found(ix, "decorator_example") == [("test_session", "msg_004", "tool_call"),
                                              ("test_session", "msg_005", "tool_result"),
                                              ("test_session", "msg_008", "tool_call")]
    # a Bash command line
    assert ("test-session-id", "msg-004", "tool_call") in found(ix, "commit")
    # a Grep pattern and a Glob pattern (a sub-agent's calls)
    assert {r for _, _, r in found(ix, "specs")} == {"tool_call", "tool_result"}
    # words only in tool results: the program output, an error text
    assert ("test_session", "msg_009", "tool_result") in found(ix, "Alice")
    assert ("edge_cases", "edge_005", "tool_result") in found(ix, "Command not found")
    # JSON punctuation of the arguments never reaches the text
    call = dict((m, t) for m, _, r, t in texts(ix, "test-session-id") if r == "tool_call")
    assert call["msg-004"] == "Bash\ngit add . && git commit -m 'Add hello function'\nCommit changes"
    # thinking is not indexed (a phrase of a thinking block of turn-2.jsonl)
    assert found(ix, '"the user wants me to use the solution-architect"') == []


@needs_data
def test_codex_tool_arguments_and_results_are_found(open_index):
    ix = open_index()
    ix.sync([str(DATA / CX)])
    # an exec_command argument (the command line)
    assert [h for h in found(ix, "brainstorming") if h[0] == "spawn-test-uuid"] == [
        ("spawn-test-uuid", "call_skill1", "tool_call")]
    # a web search query
    assert {(s, r) for s, _, r in found(ix, "autocompact")} == {(S_ROLLOUT, "tool_call")}
    # apply_patch input and exec output
    hits = found(ix, "OPENCODE_CONFIG_CONTENT")
    assert {r for _, _, r in hits} >= {"tool_call", "tool_result"}
    # a word only in a tool output
    assert {r for _, _, r in found(ix, "SUBAGENT-STOP")} == {"tool_result"}
    # an output is paired with its call: same turn, id `<call_id>:output`
    rows = {m: (t, r) for m, t, r, _ in texts(ix, "spawn-test-uuid")}
    assert rows["call_skill1:output"] == (rows["call_skill1"][0], "tool_result")
    # the {"output", "metadata"} envelope of a custom tool's output is unwrapped
    patched = [t for m, _, r, t in texts(ix, S_ROLLOUT) if r == "tool_result" and m.startswith("call_0gOiGG")]
    assert patched == ["Success. Updated the following files:\nM src/agents/plugins/__tests__/"
                       "codemie-code-reasoning.test.ts\n"]


@needs_data
def test_codex_messages_carried_twice_are_indexed_once(open_index):
    ix = open_index()
    ix.sync([str(DATA / CX)])
    turn2 = texts(ix, "a1b2c3d4-e5f6-7890-abcd-ef1234567890")
    assert [(r, t) for _, _, r, t in turn2] == [
        ("user", "Hello, Codex! Please explain what you do."),
        ("assistant", "I am Codex, an AI coding assistant by OpenAI."),
        ("user", "What languages can you work with?"),
        ("assistant", "I can work with many programming languages including Python, JavaScript, TypeScript, Go, "
                      "and Rust."),
    ]
    # turns are Codex's own
    assert [t for _, t, _, _ in turn2] == ["b2c3d4e5-f600-7891-bcde-f12345678901"] * 2 + \
                                          ["c3d4e5f6-a700-7012-cdef-123456789012"] * 2
    assert [h for h in found(ix, "explain") if h[0] == "a1b2c3d4-e5f6-7890-abcd-ef1234567890"] == [
        ("a1b2c3d4-e5f6-7890-abcd-ef1234567890", turn2[0][0], "user")]
    big = texts(ix, S_ROLLOUT)
    said = [t for _, _, r, t in big if r in ("user", "assistant")]
    assert len(said) == len(set(said)) == 15
    # injected context (developer permissions, environment_context, AGENTS.md) is not indexed
    assert found(ix, "sandboxing") == []  # turn-2.jsonl's developer message
    assert found(ix, "herestring") == []  # the rollout's developer message
    assert found(ix, "Vilnius") == []  # its environment_context (and turn_context) time zone
    # a user_message with no response_item twin is indexed all the same
    assert [r for _, _, r, _ in texts(ix, "spawn-test-uuid")][0] == "user"


@needs_data
def test_claude_subagents_belong_to_their_parent(open_index):
    ix = open_index()
    folder = DATA / CC / "codemie-ai-codemie-code"
    ix.sync([str(folder)])
    got = sessions(ix)
    assert set(got) == {S_PRIVATE, S_INCR}
    ids = {sid: {m for m, _, _, _ in texts(ix, sid)} for sid in got}
    for agent, parent in [("-tmp-private/agent-36541525.jsonl", S_PRIVATE),
                          ("-tmp-private/agent-50243ee8.jsonl", S_PRIVATE),
                          ("incremental-subagents/turn-2/subagents/agent-a485154.jsonl", S_INCR)]:
        uuids = {orjson.loads(line)["uuid"] for line in (folder / agent).read_bytes().splitlines()}
        assert uuids & ids[parent], agent
    # every file's messages, none lost and none twice
    assert sum(sum(v[4].values()) for v in got.values()) == 18 + 2 + 2 + 33 + 44
    # a word found only in the sub-agent's tool results
    assert found(ix, "normalizePathSeparators") == [(S_INCR, "af6311b5-a866-423b-b7e4-8c61f2eeb743", "tool_result")]
    # a sub-agent's prompt starts a turn of its own
    turns = {m: t for m, t, _, _ in texts(ix, S_INCR)}
    assert turns["6fd20231-9460-41d5-92ce-81fa88a96ffc"] == "6fd20231-9460-41d5-92ce-81fa88a96ffc"
    assert turns["82a116b8-ccf6-4a91-92ba-51c1816e4785"] == "6fd20231-9460-41d5-92ce-81fa88a96ffc"


# --- .zst ------------------------------------------------------------------------------


@needs_data
def test_codex_zst_rollout_reads_like_the_plain_one(tmp_path, open_index):
    plain = DATA / CX / "codemie-ai-codemie-code" / ROLLOUT
    day = tmp_path / "sessions" / "2026" / "05" / "11"
    day.mkdir(parents=True)
    (day / f"{ROLLOUT}.zst").write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    zix = open_index("zst")
    report = zix.sync([str(tmp_path / "sessions")])
    assert report.files == 1
    pix = open_index("plain")
    pix.sync([str(plain)])
    assert sessions(zix) == sessions(pix)
    assert texts(zix, S_ROLLOUT) == texts(pix, S_ROLLOUT)
    assert found(zix, "autocompact") == found(pix, "autocompact")
    # beside its plain sibling, the compressed file is not read at all
    shutil.copy(plain, day / ROLLOUT)
    both = open_index("both")
    assert both.sync([str(tmp_path / "sessions")]).files == 1
    assert texts(both, S_ROLLOUT) == texts(pix, S_ROLLOUT)


# --- auto -----------------------------------------------------------------------------


def first_lines(path: Path) -> list[bytes]:
    out = []
    for line, _ in F.read_lines(str(path), 0):
        out.append(line)
        if len(out) == 8:
            break
    return out


@needs_data
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_auto_detects_each_sample(sample):
    kind = SAMPLES[sample][0]
    lines = first_lines(DATA / sample)
    assert detect_kind(lines) == kind
    assert [name for name, parser in kinds().items() if parser.detect(lines)] == [kind]


def test_auto_detects_fixtures():
    for path in (FIXTURES / "claude-code").rglob("*.jsonl"):
        assert detect_kind(first_lines(path)) == CC, path
    for path in (FIXTURES / "codex").rglob("*.jsonl"):
        assert detect_kind(first_lines(path)) == CX, path
    for path in (FIXTURES / "sessions").rglob("*.jsonl"):
        assert detect_kind(first_lines(path)) == "canonical", path
    assert not ClaudeCodeParser.detect([b'{"type":"session","session_id":"s","cwd":"/x","started_at":"t"}'])
    assert not CodexParser.detect([b'{"type":"message","session_id":"s","message_id":"m","role":"user"}'])


# --- the synthetic fixtures: what the samples lack ---------------------------------------


SHOP = "5f0c1d2e-0000-4000-8000-000000000001"
ROUNDING = "7a1e0000-0000-4000-8000-000000000001"


def test_claude_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / "claude-code")], kind=CC)
    assert report.files == 3
    assert report.skipped == {"noise": 3, "role_system": 1, "outranked_title": 1, "subagent_title": 1}
    got = sessions(ix)
    # a custom title outranks the AI title and the summary, whatever their order
    assert got == {SHOP: (CC, "/home/ada/shop", "Checkout redesign", "2026-11-20T09:00:00.000Z",
                          roles(4, 4, 3, 3))}
    rows = {m: (t, r, x) for m, t, r, x in texts(ix, SHOP)}
    # one message per block: the line's uuid, then uuid#<block index>; thinking is not indexed
    assert rows["cc-0002"] == ("cc-0001", "assistant", "I'll look at the stylesheet.")
    assert rows["cc-0002#2"] == ("cc-0001", "tool_call", "Grep\ncheckout-button\nsrc/styles")
    assert found(ix, "zebrafish") == []
    # a pasted image rides with the prompt's text; a document alone is a message of its own
    atts = {m: orjson.loads(a) for m, a in ix.store.conn.execute(
        "SELECT message_id, attachments FROM messages WHERE attachments IS NOT NULL")}
    assert [(a["name"], a["mime_type"], a["bytes"]) for a in atts["cc-0001"]] == [("image-1.png", "image/png", 16)]
    assert [(a["name"], a["mime_type"], a["bytes"]) for a in atts["cc-0004"]] == [
        ("invoice-march.pdf", "application/pdf", 9)]
    assert rows["cc-0004"] == ("cc-0004", "user", "")
    assert found(ix, "invoice") == [(SHOP, "cc-0004", "user")]
    # both sub-agent layouts land in the parent session, with turns of their own
    assert found(ix, "quokka") == [(SHOP, "sa-0003", "tool_result")]
    assert found(ix, "narwhal") == [(SHOP, "sb-0002", "assistant")]
    assert rows["sa-0004"] == ("sa-0001", "assistant", "Found two uses.")  # no sessionId: its folder says
    # injected text (isMeta) is system text: not indexed
    assert found(ix, "Caveat") == []


def test_codex_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / "codex")], kind=CX)
    assert report.files == 2
    assert report.skipped == {"noise": 9, "extra_session_meta": 1, "subagent_title": 1}
    got = sessions(ix)
    # the sub-agent thread belongs to its parent; the parent's name is its title
    assert got == {ROUNDING: (CX, "/home/ada/shop", "Invoice rounding", "2026-11-20T09:59:58.000Z",
                              roles(3, 3, 5, 4))}
    rows = texts(ix, ROUNDING)
    assert [(r, x) for _, _, r, x in rows][:4] == [
        ("user", "Why does the invoice total round wrong?"),
        ("tool_call", "local_shell\nbash -lc grep -rn roundHalfEven src\n/home/ada/shop"),
        ("tool_result", "src/money.ts:7:   return roundHalfEven(total)\n"),
        ("assistant", "The total uses banker's rounding (roundHalfEven)."),
    ]
    assert {t for _, t, _, _ in rows} == {"turn-a", "turn-b", "turn-c"}
    # injected context, reasoning and the response_item twins are not indexed
    for word in ("walrus", "zsh", "pelican"):
        assert found(ix, word) == [], word
    assert len(found(ix, "banker's")) == 1
    # the user's images: a pasted data URL and a local file
    atts = orjson.loads(ix.store.conn.execute(
        "SELECT attachments FROM messages WHERE role = 'user' AND text LIKE 'Why does%'").fetchone()[0])
    assert [(a["name"], a["mime_type"], a["bytes"]) for a in atts] == [("image-1.png", "image/png", 16),
                                                                        ("receipt-scan.png", "image/png", 0)]
    assert found(ix, "receipt") != []
    # the sub-agent's tool output, found in the parent session
    assert found(ix, "ledgerBalance") == [(ROUNDING, "call_r1:output", "tool_result")]


@pytest.mark.parametrize("name", [
    f"claude-code/-home-ada-shop/{SHOP}.jsonl",
    f"codex/2026/11/20/rollout-2026-11-20T09-59-58-{ROUNDING}.jsonl",
])
def test_resumed_reads_equal_one_read(name, tmp_path, open_index):
    """The parser state saved with the offset (session, turn, pending title,
    open calls) makes a read resumed at any line boundary equal to one read."""
    data = (FIXTURES / name).read_bytes()
    whole = open_index("whole")
    whole.sync([str(FIXTURES / name)])
    want = sessions(whole), texts(whole, SHOP if name.startswith("claude") else ROUNDING)
    cuts = [i + 1 for i, b in enumerate(data) if b == ord("\n")][:-1]
    for n, cut in enumerate(cuts):
        log = tmp_path / f"cut{n}" / Path(name).name
        log.parent.mkdir()
        log.write_bytes(data[:cut])
        ix = open_index(f"cut{n}")
        ix.sync([str(log)])
        with open(log, "ab") as fh:
            fh.write(data[cut:])
        ix.sync([str(log)])
        assert (sessions(ix), texts(ix, SHOP if name.startswith("claude") else ROUNDING)) == want, cut



# --- no line breaks a parser ----------------------------------------------------------

_WORDS = ["type", "user", "assistant", "text", "content", "name", "id", "data", "source", "input", "output",
          "sessionId", "cwd", "uuid", "call_id", "turn_id", "command", "action", "images", "local_images",
          "message", "title", "media_type", "data:image/png;base64,AA==", "/x", "s1", "agent-"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                     st.sampled_from(_WORDS), st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_WORDS), inner, max_size=4)), max_leaves=12)


@st.composite
def _corrupt(draw, obj: dict) -> dict:
    """`obj` with up to two of its keys given any value at all."""
    obj = dict(obj)
    if draw(st.integers(0, 3)):
        return obj
    for key in draw(st.lists(st.sampled_from(sorted(obj)), max_size=2, unique=True)):
        obj[key] = draw(_VALUES)
    return obj


def _shaped(kind_values: list[str], fields: dict[str, st.SearchStrategy],
            required: tuple[str, ...] = ()) -> st.SearchStrategy:
    """An object with a `type` from kind_values, the `required` fields and
    some of the others, now and then with a value of the wrong shape."""
    right = st.fixed_dictionaries({"type": st.sampled_from(kind_values), **{k: fields[k] for k in required}},
                                  optional={k: v for k, v in fields.items() if k not in required})
    return right.flatmap(_corrupt)


_CC_BLOCK = _shaped(["text", "tool_use", "tool_result", "image", "document", "thinking"], {
    "text": st.text(max_size=6), "name": st.text(max_size=4), "input": _VALUES, "id": st.text(max_size=4),
    "content": st.one_of(st.text(max_size=6), st.lists(_VALUES, max_size=3)),
    "source": st.fixed_dictionaries({"type": st.sampled_from(["base64", "url", "text"])},
                                    optional={"data": _VALUES, "media_type": _VALUES, "url": _VALUES}),
    "title": _VALUES}, required=("text", "content", "input", "source"))
_CC_LINE = _shaped(["user", "assistant", "summary", "ai-title", "custom-title", "progress"], {
    "sessionId": st.sampled_from(["s1", "s2"]), "cwd": st.sampled_from(["/a", "/b"]), "uuid": st.text(max_size=4),
    "timestamp": st.sampled_from(["2026-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]), "isMeta": st.booleans(),
    "summary": st.text(max_size=5), "aiTitle": st.text(max_size=5), "customTitle": st.text(max_size=5),
    "message": st.fixed_dictionaries({}, optional={
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(st.text(max_size=6), st.lists(st.one_of(_CC_BLOCK, _VALUES), max_size=4))})},
    required=("message", "sessionId", "cwd", "uuid", "timestamp"))
_CX_PAYLOAD = _shaped(["user_message", "agent_message", "task_started", "thread_name_updated", "function_call",
                       "function_call_output", "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                       "web_search_call", "message", "reasoning", "token_count"], {
    "message": st.text(max_size=6), "images": st.lists(_VALUES, max_size=2), "local_images": _VALUES,
    "turn_id": st.sampled_from(["t1", "t2"]), "thread_name": st.text(max_size=5),
    "call_id": st.sampled_from(["c1", "c2"]),
    "name": st.text(max_size=4), "arguments": _VALUES, "input": _VALUES, "action": _VALUES,
    "output": st.one_of(st.text(max_size=6), st.lists(_VALUES, max_size=3)), "id": st.text(max_size=4),
    "cwd": st.sampled_from(["/a", "/b"]), "timestamp": _VALUES, "source": _VALUES, "parent_thread_id": _VALUES},
    required=("message", "call_id", "output", "arguments"))
_CX_LINE = _shaped(["session_meta", "event_msg", "response_item", "turn_context", "compacted"], {
    "timestamp": st.sampled_from(["2026-01-01T00:00:00Z"]), "payload": _CX_PAYLOAD}, required=("timestamp", "payload"))


def _line(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), parser=st.sampled_from([ClaudeCodeParser, CodexParser]),
       path=st.sampled_from(["/p/-x/s1.jsonl", "/p/-x/agent-a.jsonl", "/p/-x/s1/subagents/agent-b.jsonl",
                             "/s/2026/01/01/rollout-x.jsonl.zst"]))
def test_no_line_breaks_a_parser(data, parser, path):
    """Whatever the lines, a parser returns events or raises Skip, and its
    state survives a JSON round trip (it is saved with the offset)."""
    lines = data.draw(st.lists(_CC_LINE if parser is ClaudeCodeParser else _CX_LINE, max_size=6))
    if parser is CodexParser and data.draw(st.booleans()):
        lines.insert(0, {"type": "session_meta", "payload": {"id": "s1", "cwd": "/a", "timestamp": "t"}})
    state: dict = {}
    for obj in lines:
        p = parser(path, state)
        try:
            events = p.feed(_line(obj))
        except Skip:
            events = []
        assert all(isinstance(e, (MessageEvent, SessionEvent, TitleEvent)) for e in events)
        state = orjson.loads(orjson.dumps(p.state))


def test_kind_detection_reads_a_small_head_of_a_large_log(tmp_path, monkeypatch):
    """The first lines of a file (its kind) are read in 64 KiB chunks: a pass
    that detects the kind of thousands of logs does not read a whole MiB of
    each in the writer process."""
    from session_recall.indexer import files

    log = tmp_path / "big.jsonl"
    log.write_text("".join(json.dumps({"type": "progress", "n": i, "pad": "x" * 200}) + "\n" for i in range(20_000)))
    read: list[int] = []

    class Counted:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def read(self, n=-1):
            data = self.fh.read(n)
            read.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(files, "open", lambda *a, **k: Counted(open(*a, **k)), raising=False)
    first = [line for line, _ in zip(files.read_lines(str(log), 0), range(8))]
    assert [json.loads(line[0])["n"] for line in first] == list(range(8))
    assert 0 < sum(read) <= files.LINES_CHUNK < log.stat().st_size // 10
