"""Hostile and broken logs: no run raises, each bad input is counted under its
reason in `status()["skipped"]`, and the good lines around it are indexed.

Each file of fixtures/bad holds one class of bad input between good lines; the
ones too large to ship (deep nesting, numbers of thousands of digits, a 50 MB
line, a noise-heavy log) are written by the tests. Every file is indexed alone
and all of them together, through the real `Index.sync` on a real database.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orjson
import pytest

from session_recall import Index

BAD = Path(__file__).resolve().parent.parent / "fixtures" / "bad"
CWD = "/home/ada/bad"


class Case:
    """What indexing one bad file must give: the skip counts of status(), the
    words that find exactly one message (by id), words that find none, and
    what status() says is waiting (not skipped, not read yet)."""

    def __init__(self, skipped: dict[str, int], found: dict[str, str], absent: tuple[str, ...] = (),
                 waiting: dict[str, int] | None = None):
        self.skipped = skipped
        self.found = found
        self.absent = absent
        self.waiting = waiting or {}


def around(slug: str, **more: str) -> dict[str, str]:
    """The good lines each fixture puts around its bad ones, plus `more`."""
    return {f"{slug}before": "before", f"{slug}after": "after", **more}


CASES: dict[str, Case] = {
    # Broken JSON: cut off, a trailing comma, a missing colon, an unterminated string.
    "malformed_json.jsonl": Case({"malformed_json": 4}, around("malformed"),
                                 ("malformedcut", "malformedcomma", "malformedcolon", "malformedquote")),
    # An array, a number, a string, null, true, and a message wrapped in an array.
    "not_object.jsonl": Case({"not_object": 6}, around("notobject"), ("notobjectstring", "notobjectinarray")),
    # Messages without session_id, message_id, role or ts; a title without
    # session_id; a session without cwd.
    "missing_fields.jsonl": Case({"invalid_fields": 6}, around("missing"),
                                 ("missingsessionidword", "missingmessageidword", "missingroleword",
                                  "missingtsword", "missingsessionidtitle")),
    # A number for text, for session_id; an unknown role; a list for ts; an
    # object for message_id; null for turn_id; true for tool_name.
    "wrong_types.jsonl": Case({"invalid_fields": 7}, around("types"),
                              ("typesintsid", "typesrobot", "typeslistts", "typesobjmid", "typesnullturn",
                               "typesbooltool")),
    # \xff, a lead byte without its continuation, an overlong form, an encoded
    # surrogate, stray continuation bytes; then valid CJK and emoji.
    "invalid_utf8.jsonl": Case({"invalid_utf8": 5}, around("utf8", utf8cjk="cjk", 中文="cjk"),
                               ("utf8ff", "utf8lonelead", "utf8overlong", "utf8cesu", "utf8cont")),
    # A raw NUL inside a string, a line of NULs, NULs before an object: each
    # run of NULs is counted once and separates lines, so the object after
    # the NULs (a crash's hole, a file allocated before it was written) is
    # indexed; an escaped \u0000 is valid JSON and its message is indexed.
    "nul_bytes.jsonl": Case({"nul_bytes": 3}, around("nul", nulescaped="escaped", nulleading="lead-nul"),
                            ("nulraw",)),
    # The last line has no newline: it waits for it, not read, not skipped,
    # and status says that a last line is waiting.
    "no_trailing_newline.jsonl": Case({}, around("partial"), ("partialpending",), {"partial_last_line": 1}),
    # progress, usage, token_count, "Message", "message_v2", "", and payloads
    # that mention "message" and "session" in nested fields.
    "unknown_types.jsonl": Case({"noise": 9}, around("unknown"),
                                ("unknowncapital", "unknownvtwo", "unknownempty", "unknownnested",
                                 "unknowndelta", "unknownpayload")),
    # The same message id settled twice: the first stands.
    "duplicate_ids.jsonl": Case({"duplicate_message": 1}, around("dup", dupfirst="twice"), ("dupsecond",)),
    # A delta, its settle, then a late delta: the settled text stands.
    "delta_after_settle.jsonl": Case({"delta_after_settle": 1}, around("delta", deltasettled="streamed"),
                                     ("deltapartone", "deltalate")),
    # 400-digit integers and 1e400 in a noise line and in fields nobody reads
    # (indexed), as an attachment size (that attachment is malformed) and as a
    # timestamp (that message is invalid).
    "huge_numbers.jsonl": Case({"noise": 1, "bad_attachment": 1, "invalid_fields": 1},
                               around("huge", hugebigint="bigint", hugeinf="inf", hugeattachment="att"),
                               ("hugets", "hugeattname")),
    "empty.jsonl": Case({"empty_file": 1}, {}),
    "binary.jsonl": Case({"unknown_kind": 1}, {}),
    "corrupt.jsonl.zst": Case({"corrupt_zst": 1}, {}),
    "message_before_session.jsonl": Case({"no_session": 1}, {"orderbefore": "before", "orderafter": "after"},
                                         ("orderearly",)),
    # A bad id, no name, a negative size, items that are not objects, a value
    # that is not a list, and a message whose only attachment is malformed
    # (left with nothing, it is empty). Each message with text stays, found by
    # its text, and a good attachment beside a bad one by its name.
    "malformed_attachment.jsonl": Case({"bad_attachment": 7, "empty": 1},
                                       around("att", attbadid="bad-id", attgoodname="bad-id", attnoname="no-name",
                                              attnegbytes="neg-bytes", attnotdict="not-dict",
                                              attnotlist="not-list"),
                                       ("attonlyname",)),
}


# --- logs written by the tests (too large to ship) ----------------------------


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def session(session_id: str) -> bytes:
    return line({"type": "session", "session_id": session_id, "cwd": CWD, "started_at": "2026-12-01T09:00:00Z"})


def message(session_id: str, message_id: str, text: str, role: str = "user", **extra) -> dict:
    return {"type": "message", "session_id": session_id, "message_id": message_id, "turn_id": "t1",
            "role": role, "ts": "2026-12-01T09:00:01Z", "text": text, **extra}


def with_raw(obj: dict, raw: bytes) -> bytes:
    """`obj` as a line with a raw JSON member spliced in (for values orjson would not write)."""
    return orjson.dumps(obj)[:-1] + b"," + raw + b"}\n"


DEPTH = 100_000


def write_deep_nesting(folder: Path) -> Case:
    sid = "bad-deep"
    opening, closing = b"[" * DEPTH, b"]" * DEPTH
    (folder / "deep_nesting.jsonl").write_bytes(b"".join([
        session(sid),
        line(message(sid, "before", "deepbefore is a good line")),
        opening + b"\n",                                                  # unclosed
        opening + closing + b"\n",                                        # closed, but no object
        b"[" * 1_000_000 + b"]" * 1_000_000 + b"\n",                      # a native parser's stack
        with_raw(message(sid, "field", "deepfield"), b'"extra": ' + opening + closing),
        b'{"type": "progress", "data": ' + opening + closing + b"}\n",   # noise, however deep
        # A tool result whose text is an envelope nested 1,000 levels: decoded.
        line(message(sid, "envelope", "[" * 1_000 + '"deepenvelope"' + "]" * 1_000, role="tool_result")),
        line(message(sid, "after", "deepafter is a good line", role="assistant")),
    ]))
    return Case({"too_deep": 4, "noise": 1}, {"deepbefore": "before", "deepafter": "after",
                                              "deepenvelope": "envelope"}, ("deepfield",))


def write_huge_digits(folder: Path) -> Case:
    sid = "bad-digits"
    digits = b"9" * 5_000  # beyond the 4,300 digits Python converts to int
    (folder / "huge_digits.jsonl").write_bytes(b"".join([
        session(sid),
        line(message(sid, "before", "digitsbefore is a good line")),
        b'{"type": "usage", "tokens": ' + digits + b"}\n",
        with_raw(message(sid, "extra", "digitsextra"), b'"usage": ' + digits + b', "cost": -' + digits),
        line(message(sid, "att", "digitsattachment", attachments=[{"id": "a1", "name": "digitsattname.bin",
                                                                   "bytes": 0}])).replace(b'"bytes":0',
                                                                                         b'"bytes":' + digits),
        line(message(sid, "after", "digitsafter is a good line", role="assistant")),
    ]))
    return Case({"noise": 1, "bad_attachment": 1},
                {"digitsbefore": "before", "digitsafter": "after", "digitsextra": "extra",
                 "digitsattachment": "att"}, ("digitsattname",))


GENERATED = (write_deep_nesting, write_huge_digits)


# --- helpers -------------------------------------------------------------------


def message_ids(ix: Index, word: str) -> list[str]:
    return sorted(match.message_id for match, _ in ix.search(word))


def check(ix: Index, case: Case) -> None:
    for word, message_id in case.found.items():
        assert message_ids(ix, word) == [message_id], word
    for word in case.absent:
        assert message_ids(ix, word) == [], word


def copy_bad(folder: Path) -> dict[str, Case]:
    """Every shipped and generated bad file in `folder`, with what it must give."""
    folder.mkdir(exist_ok=True)
    cases = {}
    for name, case in CASES.items():
        shutil.copyfile(BAD / name, folder / name)
        cases[name] = case
    for write in GENERATED:
        case = write(folder)
        cases[write.__name__.removeprefix("write_") + ".jsonl"] = case
    return cases


def test_every_shipped_bad_file_has_a_case():
    assert sorted(p.name for p in BAD.iterdir()) == sorted(CASES)


# --- one class at a time -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_file_is_counted_and_its_good_lines_indexed(name, tmp_path, index):
    case = CASES[name]
    log = tmp_path / name
    shutil.copyfile(BAD / name, log)

    index.sync([str(log)])

    status = index.status()
    assert status["skipped"] == case.skipped
    assert status["waiting"] == case.waiting
    assert status["messages"] == len(set(case.found.values()))
    check(index, case)

    report = index.sync([str(log)])  # a second pass reads nothing and counts nothing twice
    assert (report.messages_added, report.messages_updated, report.bytes_read) == (0, 0, 0)
    assert index.status()["skipped"] == case.skipped


@pytest.mark.parametrize("write", GENERATED, ids=lambda w: w.__name__)
def test_a_generated_bad_file_is_counted_and_its_good_lines_indexed(write, tmp_path, index):
    folder = tmp_path / "logs"
    folder.mkdir()
    case = write(folder)

    index.sync([str(folder)])

    assert index.status()["skipped"] == case.skipped
    assert index.status()["messages"] == len(set(case.found.values()))
    check(index, case)


def test_all_bad_files_together(tmp_path, index):
    folder = tmp_path / "logs"
    cases = copy_bad(folder)

    report = index.sync([str(folder)])

    expected = sum((Counter(c.skipped) for c in cases.values()), Counter())
    status = index.status()
    assert status["skipped"] == dict(expected)
    assert report.skipped == dict(expected)
    assert status["waiting"] == dict(sum((Counter(c.waiting) for c in cases.values()), Counter()))
    assert status["messages"] == sum(len(set(c.found.values())) for c in cases.values())
    for case in cases.values():
        check(index, case)

    again = index.sync([str(folder)])
    assert (again.messages_added, again.messages_updated) == (0, 0)
    assert index.status()["skipped"] == dict(expected)  # problems of the source are replaced, not added up


def test_status_on_the_command_line_counts_the_same(tmp_path, run_recall):
    folder = tmp_path / "logs"
    cases = copy_bad(folder)
    db = tmp_path / "cli.db"

    indexed = run_recall("--db", db, "index", folder)
    assert indexed.returncode == 0, indexed.stderr
    shown = run_recall("--db", db, "status", "--json")
    assert shown.returncode == 0, shown.stderr

    expected = sum((Counter(c.skipped) for c in cases.values()), Counter())
    assert orjson.loads(shown.stdout)["skipped"] == dict(expected)
    assert orjson.loads(shown.stdout)["waiting"] == {"partial_last_line": 1}

    text = run_recall("--db", db, "status")
    assert text.returncode == 0, text.stderr
    assert "skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(expected.items())) in text.stdout
    assert "waiting: partial_last_line 1 " in text.stdout


# --- classes that need a second look -------------------------------------------


def test_a_last_line_without_newline_is_indexed_when_the_newline_comes(tmp_path, index):
    log = tmp_path / "partial.jsonl"
    shutil.copyfile(BAD / "no_trailing_newline.jsonl", log)
    index.sync([str(log)])
    assert message_ids(index, "partialpending") == []
    assert index.status()["waiting"] == {"partial_last_line": 1}

    with open(log, "ab") as fh:
        fh.write(b"\n")
    index.sync([str(log)])

    assert message_ids(index, "partialpending") == ["pending"]
    assert index.status()["skipped"] == {}
    assert index.status()["waiting"] == {}


def test_an_empty_file_stops_being_counted_once_it_is_written(tmp_path, index):
    log = tmp_path / "new.jsonl"
    log.touch()
    index.sync([str(log)])
    assert index.status()["skipped"] == {"empty_file": 1}

    log.write_bytes(session("late") + line(message("late", "m1", "latecomer arrives")))
    index.sync([str(log)])

    assert index.status()["skipped"] == {}
    assert message_ids(index, "latecomer") == ["m1"]


def test_a_binary_file_read_as_canonical_is_counted_line_by_line(tmp_path, index):
    log = tmp_path / "binary.jsonl"
    shutil.copyfile(BAD / "binary.jsonl", log)
    index.sync([str(log)], kind="canonical")
    status = index.status()
    assert status["messages"] == 0
    skipped = status["skipped"]
    assert skipped and set(skipped) <= {"blank", "noise", "invalid_utf8", "malformed_json", "nul_bytes",
                                        "not_object", "missing_type", "too_deep"}
    assert sum(skipped.values()) == (BAD / "binary.jsonl").read_bytes().count(b"\n")


def test_a_zst_whose_tail_is_corrupt_is_counted(tmp_path, index):
    import zstandard

    good = session("zst") + line(message("zst", "m1", "zstbefore compressed"))
    (tmp_path / "tail.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(good) + b"garbage, not a frame")
    index.sync([str(tmp_path)])
    assert index.status()["skipped"] == {"corrupt_zst": 1}


def test_lone_surrogate_escapes_are_indexed_as_replacement_characters(tmp_path, index):
    log = tmp_path / "surrogates.jsonl"
    text = rb'"surrogateword \ud800 lone and \udc00 low, a pair \ud83c\udf89"'  # valid JSON escapes
    log.write_bytes(session("sur") + line(message("sur", "m1", "x")).replace(b'"x"', text))
    index.sync([str(log)])
    [(match, _)] = index.search("surrogateword")
    assert match.text == "surrogateword \ufffd lone and \ufffd low, a pair \U0001f389"
    assert index.status()["skipped"] == {}


# --- size and noise --------------------------------------------------------------


BIG = 50_000_000


def test_a_50_mb_line_is_indexed_whole(tmp_path, index):
    # A tool result of 50 MB (a long build log, say) on one line, with a word
    # that occurs only at its very end. (Not base64 lines: the redactor takes
    # a run of them for a private key's body, docs/indexing.md.)
    unit = "compiling module 42 of the workspace, warnings: none, elapsed 0.8 s\n"
    text = unit * (BIG // len(unit)) + "the end is marked zanzibarquux"
    log = tmp_path / "big.jsonl"
    with open(log, "wb") as fh:
        fh.write(session("big"))
        fh.write(line(message("big", "small", "a small question first")))
        fh.write(line(message("big", "huge", text, role="tool_result")))
    assert log.stat().st_size > BIG

    report = index.sync([str(log)])

    assert report.skipped == {}
    assert index.status()["messages"] == 2
    [(match, _)] = index.search("zanzibarquux")
    assert match.message_id == "huge"
    assert len(match.text) == len(text) and match.text.endswith("zanzibarquux")


def test_a_noise_heavy_log_indexes_exactly_its_messages(tmp_path, index):
    rng = random.Random(96)
    n_lines, n_messages = 20_000, 800  # 4 % messages, as in real logs
    sid = "noisy"
    noise_kinds = [
        lambda i: {"type": "progress", "session_id": sid, "percent": i % 100},
        lambda i: {"type": "token_count", "info": {"input": i, "cached": i // 2, "total": i * 3}},
        lambda i: {"type": "usage", "model": "m", "input_tokens": i, "output_tokens": rng.randrange(900)},
        # noise that names our types inside: parsed in full, still noise
        lambda i: {"type": "tool_progress", "message": {"type": "message", "text": f"noiseword{i}"}},
        lambda i: {"type": "event", "payload": {"type": "message_delta", "message_id": f"n{i}",
                                                "text": f"noiseword{i}"}},
    ]
    slots = set(rng.sample(range(1, n_lines), n_messages))
    lines = [session(sid)]
    words: list[str] = []
    texts: list[str] = []
    for i in range(1, n_lines):
        if i in slots:
            word = f"signal{len(words)}word"
            words.append(word)
            texts.append(f"{word} at line {i}")
            role = rng.choice(["user", "assistant"])
            lines.append(line(message(sid, f"m{len(words)}", texts[-1], role=role)))
        else:
            lines.append(line(rng.choice(noise_kinds)(i)))
    log = tmp_path / "noisy.jsonl"
    log.write_bytes(b"".join(lines))

    report = index.sync([str(log)])

    assert report.lines == n_lines
    status = index.status()
    assert status["messages"] == n_messages
    assert status["skipped"] == {"noise": n_lines - 1 - n_messages}
    stored = dict(index.store.conn.execute("SELECT message_id, text FROM messages"))
    assert stored == {f"m{k + 1}": text for k, text in enumerate(texts)}
    for word in rng.sample(words, 25):
        assert len(index.search(word)) == 1, word
    assert index.search("noiseword17") == []


# --- folders that cannot be walked as they are ------------------------------------


def _good_log(path: Path, word: str) -> None:
    path.write_text(
        json.dumps({"type": "session", "session_id": path.stem, "cwd": "/p", "started_at": "2026-01-01T00:00:00Z"})
        + "\n" + json.dumps({"type": "message", "session_id": path.stem, "message_id": "m", "turn_id": "t",
                              "role": "user", "ts": "2026-01-01T00:00:01Z", "text": word}) + "\n",
        encoding="utf-8")


def test_a_symlink_loop_is_counted_and_the_logs_beside_it_are_indexed(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    _good_log(src / "a" / "one.jsonl", "quetzal")
    os.symlink(src, src / "a" / "loop")  # a/loop -> src -> a -> loop ...
    with Index.open(tmp_path / "r.db") as ix:
        report = ix.sync([str(src)])
        assert report.skipped.get("symlink_loop", 0) >= 1
        assert [m.message_id for m, _ in ix.search("quetzal")] == ["m"]
        assert ix.status()["skipped"].get("symlink_loop", 0) >= 1


# As root, a folder of mode 0 is readable: root's CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH pass over file modes. The indexer then runs as a real
# `recall index` subprocess that gives up that power before it starts: as the
# `nobody` user (setgid/setuid), or, where nobody cannot run this Python (an
# interpreter under root's home, say), as root without those two capabilities
# (dropped from its bounding set, so that exec does not give them back, and
# from its inheritable, permitted and effective sets).

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
PR_CAPBSET_DROP = 24
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _as_nobody():
    """A preexec_fn that makes the child the `nobody` user (looked up here, not
    in the child, where only plain system calls are safe)."""
    import pwd

    entry = pwd.getpwnam("nobody")

    def become() -> None:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    become.uid, become.gid = entry.pw_uid, entry.pw_gid
    return become


def _without_file_mode_bypass():
    """A preexec_fn that leaves the child root, without the two capabilities."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    keep = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF

    def drop() -> None:
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
        if libc.capget(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capget")
        data[0].effective &= keep
        data[0].permitted &= keep
        data[0].inheritable &= keep
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset")

    return drop


PROBE = """
import os, sys
import session_recall  # this identity can run the product
try:
    os.listdir(sys.argv[1])
except PermissionError:
    sys.exit(0)
sys.exit(3)
"""


def _kept_out(preexec, closed: Path, env: dict[str, str], cwd: Path) -> str | None:
    """None if a child made with `preexec` runs the product and cannot read
    `closed`; else why not."""
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE, str(closed)], preexec_fn=preexec, env=env, cwd=cwd,
                               capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not start it ({e})"
    if probe.returncode == 3:
        return "it still reads a folder of mode 0"
    if probe.returncode != 0:
        return f"it cannot run the product ({(probe.stderr.strip().splitlines() or ['?'])[-1]})"
    return None


def _index_as_unprivileged(recall_cmd: list[str], tree: Path, src: Path, closed: Path,
                           db: Path) -> tuple[dict, dict]:
    """As root: `recall index` and `recall status` in a child that cannot read
    `closed`; their reports. Skips when no such child can be made."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALL_")}
    env |= {"HOME": str(tree), "XDG_DATA_HOME": str(tree / "data"), "XDG_CONFIG_HOME": str(tree / "config"),
            "PYTHONDONTWRITEBYTECODE": "1"}
    why = {}
    for name, make in (("as nobody", _as_nobody),
                       ("without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH", _without_file_mode_bypass)):
        try:
            preexec = make()
        except (KeyError, OSError) as e:  # no such user; no libc to call
            why[name] = f"not available ({e})"
            continue
        why[name] = _kept_out(preexec, closed, env, tree)
        if why[name] is None:
            break
    else:
        pytest.skip("running as root, which reads every folder whatever its mode, and no child could be kept "
                    "out of one: " + "; ".join(f"{k}: {v}" for k, v in why.items()))
    if make is _as_nobody:
        os.chown(db.parent, preexec.uid, preexec.gid)  # the only files the child writes: the database's

    def recall(*args: str) -> dict:
        done = subprocess.run([*recall_cmd, "--db", str(db), *args], preexec_fn=preexec, env=env, cwd=tree,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return orjson.loads(done.stdout)

    return recall("index", "--json", str(src)), recall("status", "--json")


def test_an_unreadable_folder_is_counted_and_the_rest_is_indexed(recall_cmd):
    # A tree that the child can reach whoever it runs as (a test's own tmp_path
    # lies in a folder only its owner may enter), with a database folder it owns.
    tree = Path(tempfile.mkdtemp(prefix="recall-unreadable-"))
    src, closed, db = tree / "src", tree / "src" / "closed", tree / "db" / "r.db"
    try:
        closed.mkdir(parents=True)
        db.parent.mkdir()
        _good_log(src / "open.jsonl", "quetzal")
        _good_log(closed / "hidden.jsonl", "axolotl")
        os.chmod(tree, 0o755)
        os.chmod(closed, 0)
        if os.geteuid() == 0:
            report, status = _index_as_unprivileged(recall_cmd, tree, src, closed, db)
            assert report["skipped"].get("unreadable_dir") == 1
            assert status["skipped"].get("unreadable_dir") == 1
            assert status["messages"] == 1
        else:
            with Index.open(db) as ix:
                report = ix.sync([str(src)])
                assert report.skipped.get("unreadable_dir") == 1
                assert ix.status()["skipped"].get("unreadable_dir") == 1
        with Index.open(db) as ix:
            assert [m.message_id for m, _ in ix.search("quetzal")] == ["m"]
            assert not ix.search("axolotl")
    finally:
        os.chmod(closed, 0o755)
        shutil.rmtree(tree)
