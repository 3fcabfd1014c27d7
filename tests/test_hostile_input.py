"""Hostile input (issue 16): logs built to break the indexer or to cost it
without bound. Each case sits between good lines, in every source kind where
it applies, and is indexed through the real API on a real database: the good
lines around it are searchable, the case is counted under its reason in
`status()["skipped"]`, the files and sources after it are indexed, and the
watcher (the real watch loop with real watchdog events, and `recall watch` as
a process) keeps running and indexing the files that come after.

The CI form runs in well under a minute. RECALL_HOSTILE_LONG=1 adds the
larger sizes (a 1 GiB newline bomb, deeper nesting, longer lines).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
import zstandard

from session_recall import Index
from session_recall.config import Settings
from session_recall.indexer import files as F
from session_recall.indexer import sync as S
from session_recall.indexer.sources.canonical import CanonicalParser
from session_recall.indexer.watch import Watcher

LONG = os.environ.get("RECALL_HOSTILE_LONG") == "1"
ROOT = Path(__file__).resolve().parent.parent
CWD = "/home/ada/hostile"
TS = "2026-12-01T09:00:00Z"
DEADLINE_S = 20.0


# --- lines of each kind -----------------------------------------------------------


def dumps(obj: dict, raw: dict[str, bytes] | None = None) -> bytes:
    """`obj` as one line; a string value "@name@" is replaced by raw[name]
    (JSON deeper than orjson writes)."""
    out = orjson.dumps(obj)
    for name, value in (raw or {}).items():
        out = out.replace(b'"@' + name.encode() + b'@"', value)
    return out + b"\n"


def deep(depth: int, leaf: str) -> bytes:
    """A JSON value nested `depth` levels (objects in lists) around one string leaf."""
    half = depth // 2
    return b'{"k":[' * half + orjson.dumps(leaf) + b"]}" * half


class Canonical:
    kind = "canonical"

    def __init__(self, sid: str = "hostile"):
        self.sid = sid

    def name(self, tag: str) -> str:
        return f"{tag}.jsonl"

    def head(self) -> bytes:
        return dumps({"type": "session", "session_id": self.sid, "cwd": CWD, "started_at": TS})

    def say(self, mid: str, text: str, role: str = "user", raw: dict | None = None, **extra) -> bytes:
        return dumps({"type": "message", "session_id": self.sid, "message_id": mid, "turn_id": "t1",
                      "role": role, "ts": TS, "text": text, **extra}, raw)


class Claude:
    kind = "claude-code"

    def __init__(self, sid: str = "5f0c1d2e-0000-4000-8000-00000000beef"):
        self.sid = sid

    def name(self, tag: str) -> str:
        return f"-home-ada-hostile/{tag}-{self.sid}.jsonl"

    def head(self) -> bytes:
        return b""

    def line(self, uuid: str, role: str, content, raw: dict | None = None) -> bytes:
        return dumps({"type": role, "uuid": uuid, "sessionId": self.sid, "cwd": CWD, "timestamp": TS,
                      "message": {"role": role, "content": content}}, raw)

    def say(self, mid: str, text: str, role: str = "user") -> bytes:
        return self.line(mid, role, text)


class Codex:
    kind = "codex"

    def __init__(self, sid: str = "7a1e0000-0000-4000-8000-00000000beef"):
        self.sid = sid

    def name(self, tag: str) -> str:
        return f"2026/12/01/rollout-2026-12-01T09-00-00-{tag}-{self.sid}.jsonl"

    def head(self) -> bytes:
        return (self.item("session_meta", {"id": self.sid, "timestamp": TS, "cwd": CWD})
                + self.item("event_msg", {"type": "task_started", "turn_id": "turn-1"}))

    def item(self, line_type: str, payload: dict, raw: dict | None = None) -> bytes:
        return dumps({"timestamp": TS, "type": line_type, "payload": payload}, raw)

    def say(self, mid: str, text: str, role: str = "user") -> bytes:
        kind = "user_message" if role == "user" else "agent_message"
        return self.item("event_msg", {"type": kind, "message": text})


KINDS = {"canonical": Canonical(), "claude-code": Claude(), "codex": Codex()}


def write(folder: Path, fmt, tag: str, middle: list[bytes], zst: bool = False) -> Path:
    """A log of `fmt` with a good line before and after `middle`."""
    path = folder / fmt.name(tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join([fmt.head(), fmt.say("before", f"{tag}before is a good line"), *middle,
                     fmt.say("after", f"{tag}after is a good line", role="assistant")])
    if zst:
        path = path.with_name(path.name + ".zst")
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def found(ix: Index, word: str) -> int:
    return len(ix.search(word, limit=50))


def assert_around(ix: Index, tag: str) -> None:
    assert found(ix, f"{tag}before") == 1, f"{tag}before"
    assert found(ix, f"{tag}after") == 1, f"{tag}after"


def limited(tmp_path: Path, **limits) -> Index:
    return Index.open(tmp_path / "limited.db", settings=Settings(**limits))


# --- deep nesting, in each kind and field ----------------------------------------------

DEPTHS = (300, 1000, 3000, *((20_000,) if LONG else ()))


def deep_lines(kind: str, field: str, depth: int, word: str) -> tuple[list[bytes], bool]:
    """The hostile line(s) for one field, and whether the field is a string
    (JSON text inside a string: decoded at any depth)."""
    value = deep(depth, word)
    if kind == "canonical":
        fmt = KINDS[kind]
        if field == "tool_result_text":
            return [fmt.say("deep", value.decode(), role="tool_result")], True
        if field == "tool_call_text":
            return [fmt.say("deep", value.decode(), role="tool_call", tool_name="deeptool")], True
    if kind == "claude-code":
        fmt = KINDS[kind]
        if field == "tool_use_input":
            return [fmt.line("deep", "assistant", [{"type": "tool_use", "id": "tu1", "name": "Bash",
                                                    "input": "@v@"}], {"v": value})], False
        if field == "tool_result_content":
            return [fmt.line("deep", "user", [{"type": "tool_result", "tool_use_id": "tu1",
                                               "content": "@v@"}], {"v": value})], False
        if field == "tool_result_text":
            return [fmt.line("deep", "user", [{"type": "tool_result", "tool_use_id": "tu1",
                                               "content": value.decode()}])], True
    if kind == "codex":
        fmt = KINDS[kind]
        if field == "arguments_text":
            return [fmt.item("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                               "arguments": value.decode()})], True
        if field == "arguments_object":
            return [fmt.item("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                               "arguments": "@v@"}, {"v": value})], False
        if field == "output_text":
            return [fmt.item("response_item", {"type": "function_call_output", "call_id": "c1",
                                               "output": value.decode()})], True
        if field == "custom_input_object":
            return [fmt.item("response_item", {"type": "custom_tool_call", "name": "apply", "call_id": "c2",
                                               "input": "@v@"}, {"v": value})], False
    raise AssertionError((kind, field))


FIELDS = [("canonical", "tool_result_text"), ("canonical", "tool_call_text"),
          ("claude-code", "tool_use_input"), ("claude-code", "tool_result_content"),
          ("claude-code", "tool_result_text"),
          ("codex", "arguments_text"), ("codex", "arguments_object"), ("codex", "output_text"),
          ("codex", "custom_input_object")]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind,field", FIELDS)
def test_deep_nesting_is_decoded_or_counted_and_never_stops_the_file(kind, field, depth, tmp_path, index):
    fmt = KINDS[kind]
    tag = "deep"
    word = f"deepleaf{depth}"
    middle, is_text = deep_lines(kind, field, depth, word)
    write(tmp_path / "src", fmt, tag, middle)
    other = write(tmp_path / "other", Canonical("other"), "later", [])  # a second source after it

    index.sync([str(tmp_path / "src"), str(other.parent)])

    assert_around(index, tag)
    assert_around(index, "later")
    skipped = index.status()["skipped"]
    # A value the line parser takes (orjson: 1,024 levels for the whole line)
    # is decoded to its leaves at any depth; JSON text inside a string too.
    # A line nested deeper than that is counted, its neighbours indexed.
    if is_text or depth <= 1000:
        assert found(index, word) == 1
        assert "too_deep" not in skipped
    else:
        assert found(index, word) == 0
        assert skipped.get("too_deep") == 1
    assert "parse_error" not in skipped


def test_deep_values_keep_punctuation_out_of_the_index(tmp_path, index):
    fmt = KINDS["claude-code"]
    write(tmp_path, fmt, "punct", [fmt.line("deep", "assistant", [
        {"type": "tool_use", "id": "tu1", "name": "Bash", "input": "@v@"}], {"v": deep(600, "leafword")})])
    index.sync([str(tmp_path)])
    [(match, _)] = index.search("leafword")
    assert match.text == "Bash\nleafword"  # no repr(), no brackets


# --- any exception of a parser ------------------------------------------------------------


def test_a_parser_exception_is_counted_and_the_next_lines_are_indexed(tmp_path, index, monkeypatch):
    real = CanonicalParser._message

    def explode(self, m):
        if "boom" in m.text:
            raise KeyError("a bug the line found")
        if "recurse" in m.text:
            raise RecursionError("a recursion the line found")
        return real(self, m)

    monkeypatch.setattr(CanonicalParser, "_message", explode)
    fmt = Canonical()
    write(tmp_path / "src", fmt, "exc", [fmt.say("x1", "boom one"), fmt.say("x2", "recurse two"),
                                         fmt.say("x3", "boom three"), fmt.say("mid", "excmiddle stays")])
    write(tmp_path / "src", Canonical("second"), "next", [])

    index.sync([str(tmp_path / "src")])

    assert_around(index, "exc")
    assert_around(index, "next")
    assert found(index, "excmiddle") == 1
    assert index.status()["skipped"] == {"parse_error": 2, "too_deep": 1}


def test_a_file_that_fails_is_counted_and_the_other_files_and_sources_go_on(tmp_path, index, monkeypatch):
    real = S.Syncer._commit

    def failing(self, job, batch):
        if "broken" in job.path:
            raise RuntimeError("this file cannot be written")
        return real(self, job, batch)

    monkeypatch.setattr(S.Syncer, "_commit", failing)
    write(tmp_path / "a", Canonical("a"), "broken", [])
    write(tmp_path / "a", Canonical("b"), "sibling", [])
    write(tmp_path / "b", Canonical("c"), "nextsource", [])

    index.sync([str(tmp_path / "a"), str(tmp_path / "b")])

    assert found(index, "brokenbefore") == 0
    assert_around(index, "sibling")
    assert_around(index, "nextsource")
    assert index.status()["skipped"] == {"file_error": 1}


# --- NUL runs --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_message_after_a_run_of_nul_bytes_is_indexed(kind, tmp_path, index):
    fmt = KINDS[kind]
    hole = b"\x00" * 8192
    write(tmp_path, fmt, "nul", [
        hole + fmt.say("m1", "nulholeafter follows a hole"),           # a crash's hole before a line
        b'{"type": "mess' + hole + fmt.say("m2", "nulcutafter follows a cut line"),  # a line cut by one
        hole + b"\n",                                                    # zeros pre-allocated, then a newline
        fmt.say("m3", "nulescaped\u0000word stays"),                     # an escaped NUL is text
    ])
    index.sync([str(tmp_path)])
    assert_around(index, "nul")
    for word in ("nulholeafter", "nulcutafter", "nulescaped"):
        assert found(index, word) == 1, word
    assert index.status()["skipped"] == {"nul_bytes": 3}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_log_that_starts_with_a_byte_order_mark_keeps_its_first_line(kind, tmp_path, index):
    """An editor or a Windows tool may write a UTF-8 byte order mark before
    the first line: it is no part of the line, so the kind is still detected
    and the first line's message is indexed, with nothing skipped."""
    fmt = KINDS[kind]
    path = write(tmp_path, fmt, "bom", [fmt.say("mid", "bommiddle stays")])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    index.sync([str(tmp_path)])
    assert_around(index, "bom")
    assert index.status()["skipped"] == {}


# --- invalid UTF-8 -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_invalid_utf8_is_counted_in_every_kind(kind, tmp_path, index):
    fmt = KINDS[kind]
    bad = fmt.say("bad", "utf8bad XX here").replace(b"XX", b"\xff\xfe\xc3")
    write(tmp_path, fmt, "utf", [bad, fmt.say("mid", "utfmiddle stays")])
    index.sync([str(tmp_path)])
    assert_around(index, "utf")
    assert found(index, "utfmiddle") == 1
    assert found(index, "utf8bad") == 0
    assert index.status()["skipped"] == {"invalid_utf8": 1}


# --- over-long lines ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [300_000, 3_000_000])  # inside one read chunk, and across several
def test_a_line_over_the_bound_is_counted_and_never_held_whole(size, tmp_path):
    fmt = Canonical()
    write(tmp_path / "src", fmt, "long", [fmt.say("big", "longword " + "x" * size, role="tool_result"),
                                          fmt.say("mid", "longmiddle stays")])
    with limited(tmp_path, max_line_bytes=256 << 10) as ix:
        ix.sync([str(tmp_path / "src")])
        assert_around(ix, "long")
        assert found(ix, "longmiddle") == 1
        assert found(ix, "longword") == 0
        assert ix.status()["skipped"] == {"too_large": 1}
        # An append after it is read from the right offset (the prefix
        # signature was kept from the samples of the skipped line).
        log = tmp_path / "src" / fmt.name("long")
        with open(log, "ab") as fh:
            fh.write(fmt.say("late", "longlater appended"))
        report = ix.sync([str(tmp_path / "src")])
        assert report.files_reset == 0
        assert found(ix, "longlater") == 1
        assert found(ix, "longbefore") == 1


def test_read_blocks_holds_at_most_the_bound_of_a_long_line(tmp_path):
    log = tmp_path / "x.jsonl"
    log.write_bytes(b"a\n" + b"y" * (5 << 20) + b"\nb\n")
    limits = F.Limits(max_line_bytes=1 << 20)
    out = list(F.read_blocks(str(log), 0, limits=limits))
    assert [b for b in out if isinstance(b, bytes)] and all(len(b) <= 2 << 20 for b in out if isinstance(b, bytes))
    [long] = [b for b in out if isinstance(b, F.Overlong)]
    assert long.length == (5 << 20) + 1
    assert b"".join(b for b in out if isinstance(b, bytes)).split(b"\n") == [b"a", b"b", b""]


# --- .zst: bombs, damage, newlines ---------------------------------------------------------------


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def words_log(fmt, tag: str, n: int, seed: int = 16) -> list[bytes]:
    """n messages of random words (compress like real text, not to nothing)."""
    rng = random.Random(seed)
    return [fmt.say(f"w{i}", f"{tag}{i} " + " ".join(f"{rng.getrandbits(40):x}" for _ in range(20)))
            for i in range(n)]


@pytest.mark.parametrize("filler", [b"\n", b" ", b"{}\n"], ids=["newlines", "one-line", "short-lines"])
def test_a_zst_bomb_is_stopped_counted_and_the_rest_goes_on(filler, tmp_path, index):
    fmt = Canonical()
    size = (1 << 30) if LONG else (96 << 20)
    head = fmt.head() + fmt.say("before", "bombbefore is a good line")
    bomb = zstandard.ZstdCompressor().compress(head + filler * (size // len(filler))
                                                       + fmt.say("after", "bombafter never read"))
    assert len(bomb) < 100 << 10
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bomb.jsonl.zst").write_bytes(bomb)
    write(tmp_path / "src", Canonical("z"), "zneighbour", [])

    t0 = time.perf_counter()
    if filler == b"{}\n" and not LONG:
        # The default line bound (a million lines) costs seconds of parsing
        # on a shared CI machine: the short form stops at a fifth of it.
        with limited(tmp_path, zst_lines_after=200_000) as ix:
            ix.sync([str(tmp_path / "src")])
            assert found(ix, "bombbefore") == 1 and ix.status()["skipped"].get("zst_limit") == 1
        return
    index.sync([str(tmp_path / "src")])
    elapsed = time.perf_counter() - t0

    assert found(index, "bombbefore") == 1
    assert_around(index, "zneighbour")
    assert index.status()["skipped"].get("zst_limit") == 1
    assert elapsed < 20, elapsed
    # Counted once, and not decompressed again while the file is unchanged.
    report = index.sync([str(tmp_path / "src")])
    assert report.bytes_read == 0
    assert index.status()["skipped"].get("zst_limit") == 1


def test_the_absolute_zst_bound_is_a_setting(tmp_path):
    fmt = Canonical()
    lines = words_log(fmt, "abs", 20_000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "big.jsonl.zst").write_bytes(zst(fmt.head() + b"".join(lines)))
    with limited(tmp_path, zst_max_bytes=1 << 20) as ix:
        ix.sync([str(tmp_path / "src")])
        n = ix.status()["messages"]
        assert 0 < n < 20_000
        assert found(ix, "abs0") == 1
        assert ix.status()["skipped"] == {"zst_limit": 1}


@pytest.mark.parametrize("compressed", [False, True], ids=["jsonl", "zst"])
def test_a_log_of_newlines_is_fast(compressed, tmp_path, index):
    fmt = Canonical()
    n = (256 << 20) if LONG else (32 << 20)
    data = fmt.head() + fmt.say("m1", "nlbefore") + b"\n" * n + fmt.say("m2", "nlafter")
    name = "nl.jsonl"
    if compressed:
        data, name = zst(data), name + ".zst"
    (tmp_path / name).write_bytes(data)
    t0 = time.perf_counter()
    index.sync([str(tmp_path)])
    elapsed = time.perf_counter() - t0
    assert found(index, "nlbefore") == 1
    skipped = index.status()["skipped"]
    if compressed:
        # A few KB that inflate to millions of lines: a bomb by its lines.
        assert skipped["zst_limit"] == 1 and skipped["blank"] >= (1 << 20) - 2
    else:
        assert found(index, "nlafter") == 1
        assert skipped == {"blank": n}
    assert elapsed < 15, elapsed


def damaged(kind: str, good: bytes, rest: bytes) -> bytes:
    """A .zst of a good frame and a second frame (`rest`) damaged as `kind`."""
    second = zst(rest)
    if kind == "truncated":
        second = second[: len(second) // 2]
    elif kind == "flipped":
        b = bytearray(second)
        for i in range(len(b) // 3, len(b), 97):
            b[i] ^= 0x5A
        second = bytes(b)
    elif kind == "garbage":
        second = b"this is not a zstd frame at all" * 10
    elif kind == "cut-header":
        second = second[:3]
    return zst(good) + second


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "cut-header"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_damaged_zst_indexes_its_good_prefix_and_counts_the_damage(kind, damage, tmp_path, index):
    fmt = KINDS[kind]
    good = fmt.head() + fmt.say("before", "zdbefore is a good line") + b"".join(words_log(fmt, "zdgood", 50))
    rest = b"".join(words_log(fmt, "zdlost", 3000, seed=7))
    path = tmp_path / "src" / fmt.name("zd")
    path.parent.mkdir(parents=True)
    path = path.with_name(path.name + ".zst")
    path.write_bytes(damaged(damage, good, rest))
    write(tmp_path / "src", Canonical("y"), "zdneighbour", [])

    index.sync([str(tmp_path / "src")])

    assert found(index, "zdbefore") == 1
    assert all(found(index, f"zdgood{i}") == 1 for i in (0, 49))
    assert_around(index, "zdneighbour")
    skipped = index.status()["skipped"]
    if damage == "flipped":
        # Without a checksum in the frame, flipped bytes may decompress to
        # other bytes: the lines they break are counted as what they are.
        assert skipped.get("corrupt_zst", 0) + skipped.get("malformed_json", 0) + \
            skipped.get("invalid_utf8", 0) + skipped.get("invalid_fields", 0) >= 1
    else:
        assert skipped.get("corrupt_zst") == 1, skipped
    again = index.sync([str(tmp_path / "src")])
    assert again.bytes_read == 0  # the damage is remembered until the file changes
    assert index.status()["skipped"] == skipped


# --- the watcher -----------------------------------------------------------------------------------


def poll(predicate, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


def hostile_files(folder: Path) -> None:
    """One of each: a deep Claude Code line, a deep Codex payload, a bomb, a
    damaged .zst, a NUL hole, invalid UTF-8."""
    cc, cx, cn = KINDS["claude-code"], KINDS["codex"], Canonical("w")
    write(folder, cc, "wdeep", [cc.line("deep", "assistant", [{"type": "tool_use", "id": "t", "name": "Bash",
                                                                "input": "@v@"}], {"v": deep(1000, "x")})])
    write(folder, cx, "wcodex", [cx.item("response_item", {"type": "function_call", "name": "s", "call_id": "c",
                                                           "arguments": "@v@"}, {"v": deep(3000, "x")})])
    (folder / "wbomb.jsonl.zst").write_bytes(zst(cn.head() + b"\n" * (200 << 20)))
    (folder / "wdamaged.jsonl.zst").write_bytes(zst(Canonical("d").head()) + b"garbage")
    write(folder, Canonical("n"), "wnul", [b"\x00" * 4096 + Canonical("n").say("x", "wnulx")])
    write(folder, Canonical("u"), "wutf", [b"\xff\xfe\n"])


def test_the_watch_loop_survives_hostile_files_and_a_failing_pass(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    write(src, Canonical("start"), "wstart", [])
    ix = Index.open(tmp_path / "watch.db")
    ix.sync([str(src)])
    watcher = Watcher(ix.store, [str(src)], debounce=0.05, reconcile_every=3600)
    # One pass fails whole (an error no file accounts for): the loop logs it
    # and keeps watching.
    real = S.Syncer.sync_files
    calls = {"n": 0}

    def flaky(self, paths):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a pass that fails")
        return real(self, paths)

    monkeypatch.setattr(S.Syncer, "sync_files", flaky)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    reader = Index.open(tmp_path / "watch.db")
    try:
        poll(lambda: watcher._syncer is not None, "the watcher's first pass")
        write(src, Canonical("first"), "wfirst", [])  # its pass fails
        poll(lambda: watcher.failures == 1, "the failing pass")
        hostile_files(src)
        write(src, Canonical("late"), "wlate", [])
        poll(lambda: found(reader, "wlateafter") == 1, "a file written after the hostile ones")
        assert thread.is_alive()
        for word in ("wdeepbefore", "wdeepafter", "wcodexbefore", "wcodexafter", "wnulx", "wutfafter"):
            poll(lambda w=word: found(reader, w) == 1, word)
        skipped = reader.status()["skipped"]
        assert skipped.get("zst_limit") == 1 and skipped.get("too_deep") == 1, skipped
        write(src, Canonical("later"), "wlater", [])
        poll(lambda: found(reader, "wlaterafter") == 1, "a file written later still")
    finally:
        watcher.stop()
        thread.join(timeout=10)
        reader.close()
        ix.close()
    assert not thread.is_alive()


def test_recall_watch_survives_hostile_files(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write(src, Canonical("start"), "pstart", [])
    db = tmp_path / "proc.db"
    env = {k: v for k, v in os.environ.items() if k != "RECALL_DB"}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    err = open(tmp_path / "watch.stderr", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "session_recall.cli", "--db", str(db), "watch", str(src)],
                            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=tmp_path)
    try:
        poll(lambda: b"watching" in (tmp_path / "watch.stderr").read_bytes() or proc.poll() is not None,
             "the watcher to start")
        with Index.open(db) as reader:
            poll(lambda: found(reader, "pstartafter") == 1, "the first reconcile")
            hostile_files(src)
            write(src, Canonical("late"), "plate", [])
            poll(lambda: proc.poll() is None and found(reader, "plateafter") == 1,
                 "a file written after the hostile ones")
            write(src, Canonical("later"), "plater", [])
            poll(lambda: proc.poll() is None and found(reader, "platerafter") == 1, "a later file")
            assert found(reader, "wdeepafter") == 1 and found(reader, "wnulx") == 1
        assert proc.poll() is None, (tmp_path / "watch.stderr").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        err.close()


# --- per-character cost --------------------------------------------------------------------------


def test_a_long_run_of_combining_marks_folds_in_linear_time_and_exactly():
    import unicodedata

    from session_recall.text import fold as fold_mod

    rng = random.Random(16)
    soup = [chr(c) for c in range(0x300, 0x370)] + ["\u0f73", "\u0344", "\u1dc0", "\u20d0", "\u0345", "e",
                                                     "\u00e9", "\u3099", "\u304b", "\u1100", "\u1161"]
    for _ in range(200):  # the fast path is the normalization itself
        text = "x" * 4100 + "".join(rng.choice(soup) for _ in range(rng.randint(30, 300)))
        assert fold_mod._nfkc(text) == unicodedata.normalize("NFKC", text)

    def cost(k: int) -> float:
        text = "a" + "\u0301" * k + "\u0316" * k
        t0 = time.perf_counter()
        fold_mod.fold(text)
        return time.perf_counter() - t0

    cost(1000)  # builds the class of marks once
    # Out of order, 80,000 marks took 25 s (an insertion sort); now milliseconds.
    assert cost(40_000) < 2.0


def test_the_cost_bench_runs(tmp_path: Path) -> None:
    """`python -m bench.hostile_cost` on tiny inputs: a figure per case. No ratio is
    asserted (shared CI machines are noisy); the figures are in
    docs/reliability.md."""
    import json

    out = tmp_path / "cost.json"
    cases = "pipeline_nul_runs,pipeline_blank_runs,pipeline_zst_newlines,text_combining_marks"
    proc = subprocess.run([sys.executable, "-m", "bench.hostile_cost", "--mb", "0.02",
                           "--only", cases, "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [r["case"] for r in rows] == cases.split(",")
    assert all(r["t_n_s"] >= 0 and r["t_2n_s"] >= 0 for r in rows)


def test_a_worker_that_dies_costs_only_its_file(tmp_path, index, monkeypatch):
    """The parsing worker of a large pass is killed (out of memory, say)
    while it reads the first file: that file is counted, and the files
    queued behind it are read in this process."""
    import signal

    from session_recall.indexer import pipeline as P

    real_pool = P.worker_pool

    class Killing:
        """The real pool, whose process is killed once the first read is queued."""

        def __init__(self):
            self.pool = real_pool()
            self.killed = False

        def submit(self, *args):
            future = self.pool.submit(*args)
            if not self.killed:
                self.killed = True
                for proc in list(self.pool._processes.values()):
                    os.kill(proc.pid, signal.SIGKILL)
            return future

        def shutdown(self, *args, **kwargs):
            return self.pool.shutdown(*args, **kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.pool.shutdown(wait=True, cancel_futures=True)

    monkeypatch.setattr(P, "worker_pool", Killing)
    monkeypatch.setattr(P, "WORKER_MIN_BYTES", 0)
    for name in ("wa", "wb", "wc"):
        write(tmp_path / "src", Canonical(name), name, [])

    report = index.sync([str(tmp_path / "src")])

    assert report.skipped.get("file_error") == 1
    assert found(index, "wbafter") == 1 and found(index, "wcafter") == 1
    monkeypatch.setattr(P, "worker_pool", real_pool)
    index.sync([str(tmp_path / "src")])  # the next pass reads the first file
    assert found(index, "waafter") == 1


def test_recall_on_an_empty_index_answers_when_its_first_build_fails(tmp_path, monkeypatch):
    """First use builds an empty index before answering; if that build fails
    outright, the call still returns an envelope whose gaps say so."""
    write(tmp_path / "src", Canonical("fu"), "firstuse", [])
    with Index.open(tmp_path / "fu.db") as ix:
        S.Syncer(ix.store).register([(str(tmp_path / "src"), "auto")])

        def broken(self, *args, **kwargs):
            raise RuntimeError("a pass that fails")

        monkeypatch.setattr(S.Syncer, "run", broken)
        env = ix.recall("firstusebefore", all_projects=True)
        assert env.results == []
        assert "building it failed" in env.gaps["first_use"]
        monkeypatch.undo()
        env = ix.recall("firstusebefore", all_projects=True)
        assert [r.passage.anchor_id for r in env.results]
