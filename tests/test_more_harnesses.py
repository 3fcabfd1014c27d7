"""The `cursor`, `copilot` and `pi` sources (docs/formats.md), from their
fixtures (fixtures/cursor, fixtures/copilot, fixtures/pi; each README names
what it was built from): sessions, cwds, titles and the words of each role;
what is not indexed (thinking, reasoning, injected text); sub-agents in
their parent session; a read resumed after any line equal to one read; a
log rewritten shorter (a Copilot rewind) read again with nothing left over
or doubled; secrets redacted; and, across every fixture of every kind,
exactly one kind recognising each log."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sources import PLACEHOLDER, found, roles, sessions, texts

from session_recall.indexer import files as F
from session_recall.indexer.sources import Skip, kinds
from session_recall.model import ForgetEvent, MessageEvent, SessionEvent, TitleEvent

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CURSOR = "8d2c4e6f-1a3b-4c5d-9e7f-0a1b2c3d4e5f"
COPILOT = "3b7e1f20-5c4d-4a9b-8e6f-1a2b3c4d5e6f"
PI = "0c9f3e2a-6b1d-4c8e-9a7f-2d4b6e8f0a11"
LOGS = {
    "cursor": f"cursor/projects/home-ada-shop/agent-transcripts/{CURSOR}/{CURSOR}.jsonl",
    "copilot": f"copilot/session-state/{COPILOT}/events.jsonl",
    "pi": f"pi/sessions/--home-ada-shop--/2025-11-20T09-00-00-000Z_{PI}.jsonl",
}
SESSION = {"cursor": CURSOR, "copilot": COPILOT, "pi": PI}



def head(path: Path) -> list[bytes]:
    if F.is_document(str(path)):
        return [path.read_bytes()]
    return [line for line, _ in itertools.islice(F.read_lines(str(path), 0), 8)]


def test_every_fixture_log_is_recognised_by_exactly_its_kind():
    expected = {"claude-code": "claude-code", "codex": "codex", "sessions": "canonical", "gemini": "gemini",
                "opencode": "opencode", "cursor": "cursor", "copilot": "copilot", "pi": "pi"}
    seen = set()
    for folder, kind in expected.items():
        for path in sorted((FIXTURES / folder).rglob("*")):
            if not path.is_file() or not F.is_log(path.name) or F.is_database(str(path)):
                continue
            lines = head(path)
            assert [name for name, parser in kinds().items() if parser.detect(lines)] == [kind], path
            seen.add(kind)
    assert seen == set(expected.values())  # (OpenCode's: its JSON message files)


def test_cursor_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / "cursor")])
    assert report.files == 2 and report.skipped == {"noise": 2}
    got = sessions(ix)
    # the sub-agent's transcript lands in its session; the project slug is the cwd
    assert {s: (v[0], v[1], v[2], v[4]) for s, v in got.items()} == {
        CURSOR: ("cursor", "/home/ada/shop", None, roles(2, 3, 1, 1))}
    rows = {m: (t, r, x) for m, t, r, x in texts(ix, CURSOR)}
    # what the user typed is what <user_query> holds: the attached context is not indexed
    assert rows[f"{CURSOR}:1"] == (f"{CURSOR}:1", "user", "Why is VAT added twice on the manatee invoice?")
    assert found(ix, "walrus") == [] and found(ix, "zebrafish") == []
    assert rows[f"{CURSOR}:2#2"] == (f"{CURSOR}:1", "tool_call", "Grep\naddVat\nsrc")
    assert found(ix, "tamarin") == [(CURSOR, f"{CURSOR}:3", "tool_result")]
    assert found(ix, "capybara") == [(CURSOR, "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b:2", "assistant")]


def test_copilot_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / "copilot")])
    assert report.files == 1
    assert sessions(ix) == {COPILOT: ("copilot", "/home/ada/shop", "Case-insensitive coupon codes",
                                      "2026-11-20T09:00:00.000Z", roles(1, 3, 1, 1))}
    # the transformed prompt and the reasoning are not indexed; the call is indexed once
    assert found(ix, "walrus") == [] and found(ix, "zebrafish") == []
    assert found(ix, "couponCode") == [(COPILOT, "toolu_01Cpn", "tool_call"),
                                       (COPILOT, "toolu_01Cpn:result", "tool_result")]
    rows = {m: (t, r) for m, t, r, _ in texts(ix, COPILOT)}
    assert rows["toolu_01Cpn:result"] == ("e0030000-0000-4000-8000-000000000003", "tool_result")
    # the sub-agent's events share the log: its words are in the session
    assert found(ix, "okapi") == [(COPILOT, "e0130000-0000-4000-8000-000000000013", "assistant")]


def test_pi_fixture(open_index):
    ix = open_index()
    report = ix.sync([str(FIXTURES / "pi")])
    assert report.skipped == {"noise": 4}
    assert sessions(ix) == {PI: ("pi", "/home/ada/shop", "Shipping fee charged twice", "2025-11-20T09:00:00.000Z",
                                 roles(2, 3, 2, 2))}
    rows = {m: (t, r, x) for m, t, r, x in texts(ix, PI)}
    assert rows["a0000004#2"] == ("a0000003", "tool_call", "grep\nshippingFee\nsrc")
    assert found(ix, "wombat") == [(PI, "a0000005", "tool_result")]
    assert found(ix, "kinkajou") == [(PI, "a0000007:output", "tool_result")]
    # both branches of the tree are kept; thinking, extension text and compactions are not indexed
    assert found(ix, "tapir") == [(PI, "a000000b", "assistant")]
    for word in ("zebrafish", "walrus", "pelican"):
        assert found(ix, word) == [], word
    atts = json.loads(ix.store.conn.execute("SELECT attachments FROM messages WHERE message_id = 'a0000003'")
                      .fetchone()[0])
    assert [(a["name"], a["mime_type"]) for a in atts] == [("image-1.png", "image/png")]


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_resumed_reads_equal_one_read(kind, tmp_path, open_index):
    log = FIXTURES / LOGS[kind]
    data = log.read_bytes()
    whole = open_index("whole")
    whole.sync([str(log)])
    want = sessions(whole), texts(whole, SESSION[kind])

    def timeless(state):  # a Cursor session starts at its file's time, which the copy does not keep
        return {s: v[:3] + v[4:] for s, v in state[0].items()}, state[1]

    if kind == "cursor":
        want = timeless(want)
    rel = Path(LOGS[kind]).relative_to(Path(LOGS[kind]).parts[0])
    for n, cut in enumerate(i + 1 for i, b in enumerate(data) if b == ord("\n")):
        part = tmp_path / f"cut{n}" / rel
        part.parent.mkdir(parents=True)
        part.write_bytes(data[:cut])
        ix = open_index(f"cut{n}")
        ix.sync([str(part)])
        with open(part, "ab") as fh:
            fh.write(data[cut:])
        ix.sync([str(part)])
        got = sessions(ix), texts(ix, SESSION[kind])
        assert (timeless(got) if kind == "cursor" else got) == want, (kind, cut)


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_a_log_rewritten_shorter_is_read_again(kind, tmp_path, open_index):
    """Copilot removes the events a rewind takes back from its log; any of
    these logs rewritten shorter replaces what the index held of it."""
    src = FIXTURES / LOGS[kind]
    log = tmp_path / Path(LOGS[kind]).relative_to(Path(LOGS[kind]).parts[0])
    log.parent.mkdir(parents=True)
    lines = src.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines))
    ix = open_index()
    ix.sync([str(log)])
    before = {m for m, _, _, _ in texts(ix, SESSION[kind])}
    keep = {"cursor": 2, "copilot": 6, "pi": 5}[kind]
    log.write_bytes(b"".join(lines[:keep]))
    report = ix.sync([str(log)])
    assert report.files_reset == 1
    after = [m for m, _, _, _ in texts(ix, SESSION[kind])]
    assert len(after) == len(set(after)) and set(after) < before and after
    log.write_bytes(b"".join(lines))
    ix.sync([str(log)])
    assert {m for m, _, _, _ in texts(ix, SESSION[kind])} == before


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_secrets_are_redacted(kind, tmp_path, open_index):
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4 + "-abcdefAA"
    src = FIXTURES / LOGS[kind]
    log = tmp_path / Path(LOGS[kind]).relative_to(Path(LOGS[kind]).parts[0])
    log.parent.mkdir(parents=True)
    log.write_text(src.read_text().replace("jackalope", key).replace("tamarin", key).replace("wombat", key))
    ix = open_index()
    assert ix.sync([str(log)]).secrets_redacted == 1
    stored = [x for _, _, _, x in texts(ix, SESSION[kind]) if "[anthropic_key]" in PLACEHOLDER.sub(r"[\1]", x)]
    assert len(stored) == 1
    assert key.encode() not in (tmp_path / "recall.db").read_bytes()


# --- no line breaks a parser ----------------------------------------------------------

_FIXTURE_LINES = {kind: (str(FIXTURES / rel), [json.loads(line) for line in (FIXTURES / rel).read_text().splitlines()])
                  for kind, rel in {**LOGS, "gemini": "gemini/tmp/shop/chats/session-2026-11-20T09-00-5e0a7c2d.jsonl"}
                  .items()}


def _deep_corrupt(draw, value, depth: int = 0):
    """`value` with some of its values, at any depth, replaced by anything."""
    from test_sources import _VALUES

    if depth < 4 and isinstance(value, dict) and value:
        return {k: (draw(_VALUES) if draw(st.integers(0, 5)) == 0 else _deep_corrupt(draw, v, depth + 1))
                for k, v in value.items()}
    if depth < 4 and isinstance(value, list) and value:
        return [_deep_corrupt(draw, v, depth + 1) for v in value]
    return value


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(sorted(_FIXTURE_LINES)))
def test_no_line_breaks_a_parser(data, kind):
    """Lines of each fixture with values of any shape anywhere: a parser
    returns events or raises Skip, and its state survives a JSON round trip
    (it is saved with the offset)."""
    path, lines = _FIXTURE_LINES[kind]
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=8))
    state: dict = {}
    for obj in picked:
        p = kinds()[kind](path, state)
        try:
            events = p.feed(json.dumps(_deep_corrupt(data.draw, obj), ensure_ascii=False)
                            .encode("utf-8", "surrogatepass"))
        except Skip:
            events = []
        assert all(isinstance(e, (MessageEvent, SessionEvent, TitleEvent, ForgetEvent)) for e in events)
        state = orjson.loads(orjson.dumps(p.state))


def test_a_cursor_user_query_keeps_the_information_separators(tmp_path):
    """Only white space (the Unicode property, as matching means it) is
    trimmed around a `<user_query>`: U+001C..U+001F are the user's text
    (the regex \\s takes them; the differential test found `❤\\n\\x1c`
    stored as `❤`)."""
    from session_recall.indexer.sources.cursor import CursorParser

    path = tmp_path / "cursor/projects/home-ada-shop/agent-transcripts/s1/s1.jsonl"
    parser = CursorParser(str(path))
    line = orjson.dumps({"role": "user", "message": {"content": [
        {"type": "text", "text": "<user_query>\n❤\n\x1c\x1f\n </user_query>"}]}})
    texts = [e.text for e in parser.feed(line) if isinstance(e, MessageEvent)]
    assert texts == ["❤\n\x1c\x1f"]


def test_an_unnamed_pi_session_is_named_by_its_first_prompt(tmp_path, open_index):
    """Without a `session_info` line the session is named by its first
    prompt, as a Claude Code or Codex one is (it read "(untitled)" before)."""
    log = tmp_path / "sessions" / "--home-ada-shop--" / Path(LOGS["pi"]).name
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join(line for line in (FIXTURES / LOGS["pi"]).read_bytes().splitlines(keepends=True)
                             if b'"session_info"' not in line))
    ix = open_index()
    ix.sync([str(tmp_path / "sessions")], kind="pi")
    env = ix.recall("tapir", all_projects=True)
    assert [r.title for r in env.results] == ["Why is the shipping fee charged twice?"]
