"""The canonical parser (contract 2.1) and the projection of 2.2.

Properties: a message line gives back exactly the text it carries, whatever
Unicode, escaping or layout it was written with; a line of any other type is
noise and never becomes an event, even when its payload talks about messages;
no sequence of bytes makes the parser raise anything but Skip.
"""

from __future__ import annotations

import json
import random

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oracle import without_escapes

from session_recall.indexer.project import project, visible_text
from session_recall.indexer.sources import Skip
from session_recall.indexer.sources.canonical import CanonicalParser
from session_recall.model import MessageEvent, SessionEvent

OUR_TYPES = ("session", "title", "message", "message_delta")
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- writing lines the ways a harness might ------------------------------------

STYLES = ("orjson", "ascii", "utf8", "compact", "spaced")


def encode(obj: dict, style: str) -> bytes:
    """One JSON line as some writer would emit it (never with a newline inside)."""
    if style == "orjson":
        return orjson.dumps(obj)
    if style == "ascii":
        return json.dumps(obj, ensure_ascii=True).encode()
    if style == "utf8":
        return json.dumps(obj, ensure_ascii=False).encode()
    if style == "compact":
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(obj, ensure_ascii=True, separators=(" , ", " : ")).encode()


def shuffled(obj: dict, seed: int) -> dict:
    items = list(obj.items())
    random.Random(seed).shuffle(items)
    return dict(items)


def session_line(session_id: str = "s1", cwd: str = "/home/ada/p") -> bytes:
    return orjson.dumps({"type": "session", "session_id": session_id, "cwd": cwd,
                         "started_at": "2026-11-20T09:00:00Z"})


def message_obj(text, *, kind="message", role="user", session_id="s1", message_id="m1", **extra) -> dict:
    return {"type": kind, "session_id": session_id, "message_id": message_id, "turn_id": "t1",
            "role": role, "ts": "2026-11-20T09:00:01Z", "text": text, **extra}


def opened(session_id: str = "s1", cwd: str = "/home/ada/p") -> CanonicalParser:
    """A parser that has read the session line of `session_id`."""
    parser = CanonicalParser("log.jsonl")
    [event] = parser.feed(session_line(session_id, cwd))
    assert isinstance(event, SessionEvent)
    return parser


def skip_reason(parser: CanonicalParser, line: bytes) -> str:
    with pytest.raises(Skip) as info:
        parser.feed(line)
    return info.value.reason


# Text a message may hold: anything Unicode (hypothesis leaves out lone
# surrogates, tested apart below), plus a dense mix of the characters that
# JSON escaping and line splitting get wrong.
TRICKY = st.lists(st.sampled_from([
    '"', "\\", "\\u", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff",
    "/", "{", "}", "[", "]", ":", ",", " ", "a", "é", "e\u0301", "ß", "İ", "中", "文", "模型", "😀",
    "🎉", "👩‍💻", "\U0010ffff", '"type": "message"',
])).map("".join)
# Text a log can carry as UTF-8: no lone surrogates (their escapes are covered
# by their own test, which expects U+FFFD).
_CHARS = st.characters(exclude_categories=("Cs",))
TEXTS = st.one_of(st.text(_CHARS), TRICKY, st.text(st.characters(min_codepoint=0x80, exclude_categories=("Cs",))))
IDS = st.text(_CHARS, min_size=1)


# --- properties of the parser --------------------------------------------------


@PROPERTY
@given(text=TEXTS, role=st.sampled_from(["user", "assistant"]), kind=st.sampled_from(["message", "message_delta"]),
       session_id=IDS, message_id=IDS, turn_id=st.text(), cwd=IDS, style=st.sampled_from(STYLES),
       seed=st.integers(0, 2**16), pad=st.sampled_from([b"", b" ", b"\t", b"\r", b"  \r"]))
@example(text='say "hi" \\ back\\slash \\"', role="user", kind="message", session_id="s", message_id="m",
         turn_id="t", cwd="/c", style="ascii", seed=0, pad=b"\r")
def test_a_message_line_gives_back_its_text_exactly(text, role, kind, session_id, message_id, turn_id, cwd,
                                                     style, seed, pad):
    parser = opened(session_id, cwd)
    obj = shuffled({**message_obj(text, kind=kind, role=role, session_id=session_id, message_id=message_id),
                    "turn_id": turn_id}, seed)
    line = pad + encode(obj, style) + pad
    [event] = parser.feed(line)  # a settled empty message too: the writer lets it replace its deltas
    assert isinstance(event, MessageEvent)
    assert event.text == without_escapes(text)  # terminal escapes are not text (docs/formats.md)
    assert (event.session_id, event.message_id, event.turn_id, event.role, event.cwd) == (
        session_id, message_id, turn_id, role, cwd)
    assert event.settled is (kind == "message")


LONE_SURROGATES = st.text(alphabet=st.one_of(st.characters(codec="utf-8"), st.characters(categories=["Cs"])))


@PROPERTY
@given(text=LONE_SURROGATES.filter(bool))
@example(text="\ud800")
@example(text="a\udc00b\ud83c\udf89c\ud83c")
def test_lone_surrogate_escapes_are_kept_as_replacement_characters(text):
    # json.dumps writes every surrogate as a \uXXXX escape: valid JSON. A pair
    # of escapes is one character; a lone one becomes U+FFFD, never a drop.
    expected = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    line = json.dumps(message_obj(text)).encode()
    [event] = opened().feed(line)
    assert event.text == without_escapes(expected)
    event.text.encode("utf-8")  # storable: no lone surrogate left (it would raise)


def test_a_lone_surrogate_is_indexed_not_dropped():
    [event] = opened().feed(rb'{"type":"message","session_id":"s1","message_id":"m","turn_id":"t","role":"user",'
                            rb'"ts":"t","text":"half \ud800 a pair and a whole \ud83d\ude00"}')
    assert event.text == "half \ufffd a pair and a whole \U0001f600"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Payloads that look like ours from inside: the noise filter must not be
# fooled by a nested "type": "message", and a full parse must still say noise.
MENTIONS = st.sampled_from([
    message_obj("nested text"),
    message_obj("nested delta", kind="message_delta"),
    {"type": "session", "session_id": "s1", "cwd": "/x", "started_at": "t"},
    {"type": "title", "session_id": "s1", "title": "nested title"},
    {"message": {"type": "message", "text": "x"}},
    "message",
    '"type": "message"',
])


@PROPERTY
@given(kind=st.text().filter(lambda t: t not in OUR_TYPES), payload=JSON_VALUES, mention=MENTIONS,
       extra=st.dictionaries(st.text(max_size=10).filter(lambda k: k != "type"), JSON_VALUES, max_size=3),
       where=st.sampled_from(["data", "message", "payload.item", "none"]), style=st.sampled_from(STYLES),
       seed=st.integers(0, 2**16))
@example(kind="progress", payload=None, mention=message_obj("x"), extra={}, where="message", style="compact", seed=0)
@example(kind="Message", payload=1, mention="message", extra={}, where="data", style="orjson", seed=0)
@example(kind="message ", payload=1, mention="message", extra={}, where="data", style="orjson", seed=0)
def test_lines_of_other_types_are_noise_and_never_events(kind, payload, mention, extra, where, style, seed):
    obj = {"type": kind, **extra, "payload": payload}
    if where == "data":
        obj["data"] = mention
    elif where == "message":
        obj["message"] = mention
    elif where == "payload.item":
        obj["payload"] = {"item": mention, "more": payload}
    parser = opened()
    assert skip_reason(parser, encode(shuffled(obj, seed), style)) == "noise"
    assert parser.state == opened().state  # noise leaves nothing behind


@PROPERTY
@given(data=st.binary(max_size=400))
@example(data=b"")
@example(data=b"\xff\xfe\x00")
@example(data=b"[" * 100_000)
@example(data=b"{" + b'"a":' * 50_000 + b"}")
@example(data=b'{"type":"message"}')
@example(data=b'{"type":"message","session_id":"s1","message_id":"m","role":"tool_result","ts":"t","text":"'
              + b"[" * 1_500 + b'"')
def test_arbitrary_bytes_raise_nothing_but_skip(data):
    parser = opened()
    try:
        events = parser.feed(data)
    except Skip as skip:
        assert skip.reason and isinstance(skip.reason, str)
    else:
        assert isinstance(events, list)
    orjson.dumps(parser.state)  # whatever happened, the state can still be saved


def _mutate(line: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(line)
    for pos, cut, insert in edits:
        pos %= len(out) + 1
        out[pos:pos + cut] = insert
    return bytes(out)


VALID_LINES = st.sampled_from([
    orjson.dumps(message_obj("a plain message")),
    orjson.dumps(message_obj("tool output", role="tool_result")),
    orjson.dumps(message_obj('{"stdout": "ok", "code": [1, 2.5, {"x": null}]}', role="tool_result")),
    orjson.dumps(message_obj('["ls", "-la"]', role="tool_call", tool_name="bash")),
    orjson.dumps(message_obj("system prompt", role="system")),
    orjson.dumps(message_obj("", attachments=[{"id": "a1", "name": "shot.png", "mime_type": "image/png",
                                               "bytes": 10}])),
    orjson.dumps(message_obj("part", kind="message_delta", role="assistant")),
    session_line("s2"),
    orjson.dumps({"type": "title", "session_id": "s1", "title": "t"}),
])


@PROPERTY
@given(line=VALID_LINES, edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 4),
                                                   st.binary(max_size=4) | st.sampled_from(
                                                       [b'"', b"\\", b"[", b"{", b"}", b"\\u", b"\\ud800", b"\x00",
                                                        b"1e999", b"99999999999999999999999", b"null", b"\xc3"])),
                                         min_size=1, max_size=4))
def test_damaged_message_lines_raise_nothing_but_skip(line, edits):
    parser = opened()
    try:
        events = parser.feed(_mutate(line, edits))
    except Skip:
        return
    for event in events:
        orjson.dumps(event.model_dump())  # every event can be written
    orjson.dumps(parser.state)


# --- the parser on specific lines ----------------------------------------------


@pytest.mark.parametrize("line, reason", [
    (b"", "blank"),
    (b"   \t", "blank"),
    (b'{"type": "progress", "percent": 3}', "noise"),
    (b"[1, 2]", "not_object"),
    (b"42", "not_object"),
    (b'"a string"', "not_object"),
    (b"null", "not_object"),
    (b'{"type": "message", "text": ', "malformed_json"),
    (b'{"type": "message", "text": "x",}', "malformed_json"),
    (b'{"type": "message", "text": "\xff"}', "invalid_utf8"),
    (b'{"type": "message", "text": "a\x00b"}', "nul_bytes"),
    (b"\x00\x00\x00\x00", "nul_bytes"),
    (b"[" * 100_000, "too_deep"),
    (b'{"type": "message", "deep": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "too_deep"),
    (b'{"type": "message", "session_id": "s1"}', "invalid_fields"),
    (orjson.dumps(message_obj(12345)), "invalid_fields"),
    (orjson.dumps(message_obj("x", role="robot")), "invalid_fields"),
    (orjson.dumps(message_obj("x", session_id="elsewhere")), "no_session"),
    (orjson.dumps(message_obj("x", role="system")), "role_system"),
])
def test_each_bad_line_is_skipped_under_its_reason(line, reason):
    assert skip_reason(opened(), line) == reason


def test_an_empty_settled_message_reaches_the_writer_which_counts_it(tmp_path):
    """The parser passes it on (its empty text replaces any deltas); the
    writer stores nothing for it and counts it as `empty`."""
    [event] = opened().feed(orjson.dumps(message_obj("")))
    assert event.settled and event.text == "" and not event.attachments


def test_huge_numbers_in_fields_nobody_reads_do_not_lose_the_message():
    digits = b"9" * 5_000  # beyond Python's 4,300-digit int conversion limit
    obj = orjson.dumps(message_obj("still here"))
    for extra in (b'"usage": ' + digits, b'"cost": 1e400', b'"neg": -' + digits, b'"tiny": 1e-400'):
        [event] = opened().feed(obj[:-1] + b"," + extra + b"}")
        assert event.text == "still here"


def test_an_attachment_too_large_for_64_bits_is_malformed_not_fatal():
    line = orjson.dumps(message_obj("with attachment", attachments=[{"id": "a1", "name": "n", "bytes": 1}]))
    parser = opened()
    [event] = parser.feed(line.replace(b'"bytes":1', b'"bytes":1' + b"0" * 400))
    assert (event.text, event.attachments, parser.notes) == ("with attachment", [], {"bad_attachment": 1})


@pytest.mark.parametrize("attachments, good, bad", [
    ([{"id": "a1", "name": "ok.png", "mime_type": "image/png", "bytes": 3}], 1, 0),
    ([{"id": "../etc", "name": "x", "bytes": 1}], 0, 1),
    ([{"id": "a1", "bytes": 1}], 0, 1),
    ([{"id": "a1", "name": "x", "bytes": -1}], 0, 1),
    (["shot.png", 7, None], 0, 3),
    ({"id": "a1", "name": "x", "bytes": 1}, 0, 1),
    ("shot.png", 0, 1),
    ([{"id": "a1", "name": "ok.png", "bytes": 3}, {"id": "", "name": "x", "bytes": 1}], 1, 1),
])
def test_a_malformed_attachment_is_counted_and_the_message_kept(attachments, good, bad):
    parser = opened()
    [event] = parser.feed(orjson.dumps(message_obj("has files", attachments=attachments)))
    assert event.text == "has files"
    assert len(event.attachments) == good
    assert parser.notes.get("bad_attachment", 0) == bad


def test_a_message_before_its_session_line_is_counted_and_the_session_still_opens():
    parser = CanonicalParser("log.jsonl")
    assert skip_reason(parser, orjson.dumps(message_obj("early"))) == "no_session"
    parser.feed(session_line())
    [event] = parser.feed(orjson.dumps(message_obj("on time", message_id="m2")))
    assert event.text == "on time"


def test_noise_with_our_type_only_nested_is_fully_parsed_and_still_noise():
    parser = opened()
    line = orjson.dumps({"type": "progress", "data": message_obj("hidden")})
    assert skip_reason(parser, line) == "noise"


# --- projection (contract 2.2) ---------------------------------------------------


def test_user_and_assistant_text_is_indexed_as_written():
    text = '{"not": "decoded"} \\ "quoted"'
    assert project("user", text) == text
    assert project("assistant", text) == text


def test_system_text_is_not_indexed():
    assert project("system", "You are a helpful assistant") is None
    assert skip_reason(opened(), orjson.dumps(message_obj("system prompt", role="system"))) == "role_system"


def test_a_tool_call_indexes_its_name_and_visible_arguments_not_json_punctuation():
    args = json.dumps({"command": "grep -rn \"TODO\" src/", "path": "/home/ada/shop/src/total.cc",
                       "options": {"timeout": 30, "query": "报表 rounding", "dry_run": False}})
    projected = project("tool_call", args, "bash")
    lines = projected.split("\n")
    assert lines[0] == "bash"
    assert 'grep -rn "TODO" src/' in lines
    assert "/home/ada/shop/src/total.cc" in lines
    assert "报表 rounding" in lines
    assert "30" in lines
    for punctuation in ('{"', '":', '\\"', '",', "}", "["):
        assert punctuation not in projected


def test_a_tool_call_without_json_arguments_keeps_them_as_text():
    assert project("tool_call", "ls -la", "bash") == "bash\nls -la"
    assert project("tool_call", "ls -la") == "ls -la"
    assert project("tool_call", "{not json", "bash") == "bash\n{not json"


def test_a_tool_result_is_decoded_from_its_json_envelope():
    inner = 'line one\nsaid "hi" \\ and left\n中文输出 🎉'
    envelope = json.dumps({"content": [{"type": "text", "text": inner}], "is_error": False})
    projected = project("tool_result", envelope)
    assert inner in projected
    assert '\\"' not in projected and '\\n' not in projected and '{"' not in projected


def test_a_plain_tool_result_is_kept_as_is():
    assert project("tool_result", "total 48\ndrwxr-xr-x") == "total 48\ndrwxr-xr-x"


def test_a_deeply_nested_tool_result_is_decoded_without_recursion():
    text = "[" * 1_020 + '"deep leaf"' + "]" * 1_020
    assert visible_text(text) == "deep leaf"
    [event] = opened().feed(orjson.dumps(message_obj(text, role="tool_result")))
    assert event.text == "deep leaf"


@PROPERTY
@given(value=JSON_VALUES)
def test_visible_text_keeps_every_string_leaf_of_an_envelope(value):
    text = json.dumps({"envelope": value})
    out = visible_text(text)
    leaves: list[str] = []

    def walk(v):
        if isinstance(v, str):
            if v:
                leaves.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    pos = 0
    for leaf in leaves:  # each leaf, in order
        found = out.find(leaf, pos)
        assert found != -1
        pos = found + len(leaf)
