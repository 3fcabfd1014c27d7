"""The `gemini` source (Gemini CLI chat recordings, docs/formats.md): the
shared samples (two legacy documents and one JSONL recording) index with the
counts asserted here; the fixture in fixtures/gemini, laid out as Gemini CLI
lays out `~/.gemini` (see its README), covers what the samples lack: a
`$rewindTo`, `$set` updates, a record written again whole, a sub-agent, the
project registry (a `.project_root` marker, `projects.json` by hash) and a
project no registry names.

Expected counts were verified by reading the samples: per `user` record one
message, per `gemini` record one message if its content has text, plus one
tool_call and one tool_result (when it has an output) per tool call.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import pytest
from test_sources import DATA, PLACEHOLDER, found, needs_data, roles, sessions, texts

from session_recall.indexer import files as F
from session_recall.indexer.sources import detect_kind, kinds

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
G = "gemini"
MAIN = "5e0a7c2d-1b3f-4e55-9a61-0c4d8e2f7a10"
SUB = "9b1d3e5f-7a2c-4d6e-8f01-23456789abcd"
LEGACY = "3c5e7a9b-2d4f-4a6b-8c0d-1e2f3a4b5c6d"
LONELY = "7d7d7d7d-0000-4000-8000-000000000001"
SHOP_LOG = "tmp/shop/chats/session-2026-11-20T09-00-5e0a7c2d.jsonl"
THOUGHT = "Laying the Foundation"  # a thought's subject in the pomodoro sample
UNREGISTERED = "tmp/b3b0dce3c0dc9ae781766bff5cda4906838318234750e22d420a61ec31ebca83"

SAMPLES = {
    "gemini-cli/yoavf-ai-sessions/tmp/2d33ff9193c39ffa4b8352af23f3b106d1ceaff756665e12408cb64657965d22/chats/"
    "session-2025-10-21T20-04-0b23371a.json":
        ("0b23371a-ce2e-4b1c-81a0-44af5d94d9ce", "2025-10-21T20:04:20.819Z", roles(5, 14, 11, 11)),
    "gemini-cli/BrianV1981-aim/tmp/3552c39649fd7ebce02a101299e1829cd63719431875ef6ef01ee673b666187d/chats/"
    "session-2026-03-26T04-33-84ae60e4.json":
        ("84ae60e4-75a7-4cff-a3bc-73f09b2983f0", "2026-03-26T04:33:35.454Z", roles(2, 2, 33, 33)),
    "gemini-cli/jazzyalex-agent-sessions/tmp/0b7dfb1274ee51b336813b17f2ddab1f56b6591f723e7314126bbd502c69e9c9/"
    "chats/session-2026-04-29T21-39-gemini_s.jsonl":
        ("gemini_stage0_jsonl", "2026-04-29T21:39:22.319Z", roles(1, 1, 1, 1)),
}


def head(path: Path) -> list[bytes]:
    """What `auto` reads of a log: a document whole, else its first lines."""
    if F.is_document(str(path)):
        return [path.read_bytes()]
    return [line for line, _ in itertools.islice(F.read_lines(str(path), 0), 8)]



@needs_data
def test_the_sample_list_is_complete():
    on_disk = {p.relative_to(DATA).as_posix() for p in (DATA / "gemini-cli").rglob("session-*.json*")}
    assert on_disk == set(SAMPLES)


@needs_data
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_indexes(sample, open_index):
    sid, started, by_role = SAMPLES[sample]
    ix = open_index()
    report = ix.sync([str(DATA / sample)])  # auto
    assert report.files == 1 and report.files_read == 1 and report.skipped.keys() <= {"empty"}
    assert ix.store.conn.execute("SELECT kind FROM files").fetchone()[0] == G
    # no registry beside the samples: the cwd is the project's folder under
    # tmp, as its real path (sync reads sources through their real paths)
    folder = os.path.realpath((DATA / sample).parents[1])
    assert sessions(ix) == {sid: (G, folder, None, started, by_role)}


@needs_data
def test_sample_words_are_found(open_index):
    ix = open_index()
    ix.sync([str(DATA / "gemini-cli")])
    # a user prompt, assistant text, a tool call's arguments and its output
    assert {r for _, _, r in found(ix, "Pomodoro")} >= {"user", "assistant"}
    assert ("gemini_stage0_jsonl", "g-assistant-1#run_shell_command_stage0", "tool_call") in found(ix, "ls -F")
    assert ("gemini_stage0_jsonl", "g-assistant-1#run_shell_command_stage0:result", "tool_result") in \
        found(ix, "AgentSessions")
    # thoughts are not indexed
    assert found(ix, THOUGHT) == []


@needs_data
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_auto_detects_each_sample_as_one_kind(sample):
    lines = head(DATA / sample)
    assert [name for name, parser in kinds().items() if parser.detect(lines)] == [G]
    assert detect_kind(lines) == G


def test_auto_detects_the_fixture_as_one_kind():
    logs = [p for p in (FIXTURES / G).rglob("*") if p.is_file() and F.is_log(p.name)]
    assert len(logs) == 4
    for path in logs:
        lines = head(path)
        assert [name for name, parser in kinds().items() if parser.detect(lines)] == [G], path
    # and no other kind's fixture is taken for Gemini's
    for other in ("claude-code", "codex", "sessions"):
        for path in (FIXTURES / other).rglob("*.jsonl"):
            assert not kinds()[G].detect(head(path)), path


def test_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / G)])
    assert report.files == 4
    got = sessions(ix)
    assert got == {
        # the slug folder's .project_root names the project; the sub-agent lands in its parent
        MAIN: (G, "/home/ada/shop", "Checkout button alignment", "2026-11-20T09:00:00.000Z", roles(3, 3, 1, 1)),
        # a legacy document in a hash folder: projects.json names the path whose SHA-256 it is
        LEGACY: (G, "/home/ada/recipes", "Sourdough for three", "2025-10-02T18:00:00.000Z", roles(1, 1)),
        # no registry names this project: its folder is its cwd
        LONELY: (G, str((FIXTURES / G / UNREGISTERED).resolve()), None, "2026-01-05T10:00:00.000Z", roles(1)),
    }
    rows = {m: (t, r, x) for m, t, r, x in texts(ix, MAIN)}
    # the rewound prompt and its answer are gone; the info record is system text
    assert found(ix, "flamingo") == []
    assert found(ix, "cancelled") == []
    # thoughts are not indexed; the tool call and its result are, in the prompt's turn
    assert found(ix, "zebrafish") == []
    g1 = "a1c0e8e2-0000-4000-8000-000000000002"
    assert rows[f"{g1}#grep_search_1763629210000_0"] == ("u-0001", "tool_call", "grep_search\ncheckout-button\nsrc/styles")
    assert found(ix, "quokka") == [(MAIN, f"{g1}#grep_search_1763629210000_0:result", "tool_result")]
    # the sub-agent's words, in the parent session, in a turn of its own
    assert found(ix, "narwhal") == [(MAIN, "b2d0e8e2-0000-4000-8000-000000000002", "assistant")]
    assert rows["b2d0e8e2-0000-4000-8000-000000000002"][0] == "b2d0e8e2-0000-4000-8000-000000000001"
    assert found(ix, "sourdough") == [(LEGACY, "c3e0e8e2-0000-4000-8000-000000000001", "user")]
    assert found(ix, "axolotl") == [(LONELY, "d4e0e8e2-0000-4000-8000-000000000001", "user")]
    again = ix.sync([str(FIXTURES / G)])
    assert (again.messages_added, again.messages_updated, again.files_read) == (0, 0, 0)


def test_resumed_reads_equal_one_read(tmp_path, open_index):
    """Cut the recording after every line, index, append the rest, index:
    the same as one read, whether the rewind's target was read in an earlier
    pass (its messages then leave the index) or in the same one."""
    log = FIXTURES / G / SHOP_LOG
    data = log.read_bytes()
    whole = open_index("whole")
    whole.sync([str(log)])
    want = sessions(whole), texts(whole, MAIN)
    cuts = [i + 1 for i, b in enumerate(data) if b == ord("\n")][:-1]
    forgotten = 0
    for n, cut in enumerate(cuts):
        copy = tmp_path / f"cut{n}" / "tmp" / "shop"
        (copy / "chats").mkdir(parents=True)
        shutil.copy(FIXTURES / G / "tmp" / "shop" / ".project_root", copy)
        part = copy / "chats" / log.name
        part.write_bytes(data[:cut])
        ix = open_index(f"cut{n}")
        ix.sync([str(part)])
        with open(part, "ab") as fh:
            fh.write(data[cut:])
        forgotten += ix.sync([str(part)]).messages_forgotten
        assert (sessions(ix), texts(ix, MAIN)) == want, cut
        assert ix.store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == sum(
            want[0][MAIN][4].values())
    assert forgotten > 0  # some cuts fell between the rewound messages and the rewind


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _project(tmp_path: Path, root: str = "/home/ada/garden") -> Path:
    chats = tmp_path / ".gemini" / "tmp" / "garden" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_text(root)
    return chats


def test_rewind_checkpoint_and_rewrite(tmp_path, open_index):
    """A rewind to an unknown id takes back everything; a `$set` checkpoint
    replaces the messages with its own; a recording rewritten whole (Gemini
    writes a clean one beside an unreadable one, then renames it over)
    replaces what the index held of it; a record written again with other
    text replaces its text. Nothing is duplicated, nothing rewound remains."""
    log = _project(tmp_path) / "session-2026-11-21T08-00-aaaa0000.jsonl"
    meta = {"sessionId": "s-garden", "projectHash": "x" * 64, "startTime": "2026-11-21T08:00:00.000Z",
            "lastUpdated": "2026-11-21T08:00:00.000Z", "kind": "main"}

    def rec(i: str, kind: str, text: str) -> dict:
        return {"id": i, "timestamp": "2026-11-21T08:00:01.000Z", "type": kind, "content": text}

    log.write_text(_line(meta) + _line(rec("u1", "user", "plant tomatoes")) + _line(rec("g1", "gemini", "tomatoes need sun")))
    ix = open_index()
    ix.sync([str(log)])
    assert len(found(ix, "tomatoes")) == 2
    with open(log, "a") as fh:
        fh.write(_line({"$rewindTo": "no-such-id"}) + _line(rec("u2", "user", "plant basil")))
    r = ix.sync([str(log)])
    assert r.messages_forgotten == 2 and found(ix, "tomatoes") == []
    assert [m for m, _, _ in [(m, t, x) for m, t, _, x in texts(ix, "s-garden")]] == ["u2"]
    with open(log, "a") as fh:
        fh.write(_line(rec("g2", "gemini", "basil likes warmth")) + _line(rec("g2", "gemini", "basil likes heat")))
        fh.write(_line({"$set": {"messages": [rec("u2", "user", "plant basil"), rec("g9", "gemini", "compressed")]}}))
    ix.sync([str(log)])
    assert [(m, x) for m, _, _, x in texts(ix, "s-garden")] == [("u2", "plant basil"), ("g9", "compressed")]
    assert found(ix, "warmth") == [] and found(ix, "heat") == []
    # rewritten whole through a new file renamed over the old one
    tmp = log.with_name(log.name + ".tmp-1")
    tmp.write_text(_line(meta) + _line(rec("u2", "user", "plant basil")) + _line(rec("g3", "gemini", "mulch it")))
    tmp.replace(log)
    r = ix.sync([str(log.parent)])
    assert r.files_reset == 1
    assert [(m, x) for m, _, _, x in texts(ix, "s-garden")] == [("u2", "plant basil"), ("g3", "mulch it")]
    assert {s: v[1] for s, v in sessions(ix).items()} == {"s-garden": "/home/ada/garden"}


def test_legacy_document_rewritten_whole(tmp_path, open_index):
    """The legacy writer rewrites `session-*.json` whole at every message:
    each change is read again whole, nothing duplicated or lost."""
    doc = _project(tmp_path) / "session-2025-10-01T10-00-bbbb0000.json"
    conv = {"sessionId": "s-legacy", "projectHash": "y" * 64, "startTime": "2025-10-01T10:00:00.000Z",
            "lastUpdated": "2025-10-01T10:00:00.000Z",
            "messages": [{"id": "u1", "timestamp": "2025-10-01T10:00:01.000Z", "type": "user",
                          "content": "prune the roses"}]}
    doc.write_text(json.dumps(conv, indent=2))  # no final newline, as the writer leaves it
    ix = open_index()
    assert ix.sync([str(doc.parent)]).messages_added == 1
    conv["messages"].append({"id": "g1", "timestamp": "2025-10-01T10:00:05.000Z", "type": "gemini",
                             "content": "Prune the roses in late winter."})
    doc.write_text(json.dumps(conv, indent=2))
    ix.sync([str(doc.parent)])
    assert sorted(found(ix, "roses")) == [("s-legacy", "g1", "assistant"), ("s-legacy", "u1", "user")]
    conv["messages"] = conv["messages"][1:]
    doc.write_text(json.dumps(conv, indent=2))
    ix.sync([str(doc.parent)])
    assert found(ix, "roses") == [("s-legacy", "g1", "assistant")]


def test_secrets_in_a_recording_are_redacted(tmp_path, open_index):
    log = _project(tmp_path) / "session-2026-11-21T09-00-cccc0000.jsonl"
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4 + "-abcdefAA"
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": f"export KEY={key}"},
            "status": "success", "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                                                                   "response": {"output": f"echo {key}"}}}]}
    log.write_text(_line({"sessionId": "s-secret", "projectHash": "z" * 64, "startTime": "2026-11-21T09:00:00Z"})
                   + _line({"id": "g1", "timestamp": "2026-11-21T09:00:01Z", "type": "gemini", "content": "",
                            "toolCalls": [call]}))
    ix = open_index()
    assert ix.sync([str(log)]).secrets_redacted == 2
    stored = [x for _, _, _, x in texts(ix, "s-secret")]
    assert len(stored) == 2 and all(key not in x and "[anthropic_key]" in PLACEHOLDER.sub(r"[\1]", x) for x in stored)
    assert key.encode() not in (tmp_path / "recall.db").read_bytes()


def test_a_legacy_document_resumed_into_jsonl_is_indexed_once(tmp_path, open_index):
    """Resuming a legacy `session-x.json` makes Gemini CLI copy it into
    `session-x.jsonl` beside it (the same session and message ids) and go
    on there: each message is indexed once, and a rewind in the new file
    takes its messages back even though the old document still holds them."""
    chats = _project(tmp_path)
    conv = {"sessionId": "s-moved", "projectHash": "w" * 64, "startTime": "2025-10-01T10:00:00.000Z",
            "lastUpdated": "2025-10-01T10:00:00.000Z",
            "messages": [{"id": "u1", "timestamp": "2025-10-01T10:00:01.000Z", "type": "user", "content": "repot the fern"},
                         {"id": "g1", "timestamp": "2025-10-01T10:00:02.000Z", "type": "gemini",
                          "content": "Use a fern mix."}]}
    (chats / "session-2025-10-01T10-00-s-moved.json").write_text(json.dumps(conv, indent=2))
    ix = open_index()
    ix.sync([str(chats)])
    meta = {k: v for k, v in conv.items() if k != "messages"}
    lines = [meta, *conv["messages"], {"$set": {"sessionId": "s-moved"}},
             {"id": "u2", "timestamp": "2025-10-02T10:00:00.000Z", "type": "user", "content": "and the moss?"}]
    (chats / "session-2025-10-01T10-00-s-moved.jsonl").write_text("".join(_line(x) for x in lines))
    ix.sync([str(chats)])
    assert [m for m, _, _, _ in texts(ix, "s-moved")] == ["u1", "g1", "u2"]
    assert len(found(ix, "fern")) == 2
    with open(chats / "session-2025-10-01T10-00-s-moved.jsonl", "a") as fh:
        fh.write(_line({"$rewindTo": "g1"}))
    ix.sync([str(chats)])
    assert [m for m, _, _, _ in texts(ix, "s-moved")] == ["u1"]


def test_an_untitled_recording_is_named_by_its_first_prompt(open_index):
    """No `summary` in the recording: the session is named as a Claude Code
    or Codex one is, by its first prompt (it read "(untitled)" before)."""
    ix = open_index()
    ix.sync([str(FIXTURES / G)])
    env = ix.recall("axolotl", all_projects=True)
    assert [r.title for r in env.results] == ["Where did I leave the axolotl notes?"]
    # a summary still outranks the prompt, and the sub-agent's task never names its parent
    env = ix.recall("narwhal", all_projects=True)
    assert [r.title for r in env.results] == ["Checkout button alignment"]
