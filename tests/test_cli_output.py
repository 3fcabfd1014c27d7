"""What `recall` prints for a person: terminal control characters from logs
are shown, never sent, while --json stays lossless."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from session_recall.model import Envelope
from tests.helpers import run_all

# What a tool may have printed into a log: a window title (OSC 2, ended by
# BEL and by ST), a clipboard write (OSC 52), a screen clear (CSI 2J), the
# one-byte C1 CSI and NEL, a lone carriage return, a backspace and a DEL.
HOSTILE = ("zebra \x1b]2;owned\x07 \x1b]0;again\x1b\\ \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[H "
           "\x9b31m \x85 over\rwrite back\x08 del\x7f end\r\nnext line")
# Anything a terminal acts on: C0 but tab and newline, DEL, C1.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_control_characters_from_a_log_never_reach_the_terminal(proj, corpus, run_recall):
    # The index drops escape sequences from messages (docs/formats.md), not
    # other controls; a recorded cwd and an attachment's name keep theirs.
    odd = proj / "sub\x1b]2;retitled\x07dir"
    s = corpus.session("s1", odd, title="build \x1b]2;title\x07 log", started_at="2026-11-20T09:00:00Z")
    s.message("u1", HOSTILE + " bell\x07 reverse\x8dindex",
              attachments=[{"id": "a1", "name": "shot\x1b[2J.png", "mime_type": "image/png", "bytes": 3}])
    s.message("a1", "the answer \x1b[31mred\x1b[0m \x1b]52;c;cGFzdGU=\x07", role="assistant")
    ix = corpus.open()
    stored = {h.message_id: h.text for h, _ in ix.search("zebra") + ix.search("answer")}
    ix.close()

    done = run_recall("--db", corpus.db, "search", "zebra", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROL.search(done.stdout), repr(done.stdout)
    assert not RAW_CONTROL.search(done.stderr), repr(done.stderr)
    # shown as visible escapes, the words around them kept
    for shown in ("sub^[]2;retitled^Gdir", "over^Mwrite", "back^H", "del^?", "<U+0085>", "bell^G",
                  "reverse<U+008D>index", "shot^[[2J.png", "next line"):
        assert shown in done.stdout, shown

    done = run_recall("--db", corpus.db, "search", "zebra", "--cwd", proj, "--json")
    assert done.returncode == 0, done.stderr
    env = Envelope.model_validate_json(done.stdout)
    texts = {m.message_id: m.text for m in env.results[0].passage.messages}
    assert texts == stored  # lossless: the text as the index holds it
    assert "\x07" in texts["u1"] and "\x8d" in texts["u1"] and "\x7f" in texts["u1"]
    assert env.results[0].cwd == str(odd)

    anchor = env.results[0].passage.anchor_id
    done = run_recall("--db", corpus.db, "more", anchor, "--cwd", proj)
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROL.search(done.stdout) and "sub^[]2;retitled^Gdir" in done.stdout


def _blocks_corpus(corpus, proj):
    s = corpus.session("a3f1c2d4-0001-4e5f", proj, title="Résumé layout", started_at="2026-11-20T09:00:00Z")
    s.message("u1", "Which serif font for the résumé?\nIt must print well.\nAnd read on screen.",
              ts="2026-11-20T09:12:05Z")
    s.message("c1", "Edit\nresume/style.css\n" + "\n".join(f"line {i} of the old file" for i in range(60))
              + "\nfont-family: Source Serif 4", role="tool_call", tool_name="Edit", ts="2026-11-20T09:13:00Z")
    s.message("a1", "Source Serif 4 for the body,\nInter for the headings.", role="assistant",
              ts="2026-11-20T09:14:30Z")
    corpus.open().close()


def test_human_output_reads_like_rg_context(proj, corpus, run_recall):
    _blocks_corpus(corpus, proj)
    plain, full, colour, partial, miss = run_all(
        run_recall,
        ["--db", corpus.db, "search", "serif", "--cwd", proj],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--full", "--limit", "1"],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--color", "always"],
        ["--db", corpus.db, "search", "serif", "zeppelin", "--cwd", proj],
        ["--db", corpus.db, "search", "zeppelin", "--cwd", proj])
    out = plain.stdout
    lines = out.splitlines()
    # one block a passage: its number, the title, a short session id and the project
    assert lines[0].startswith("[1]") and "Résumé layout" in lines[0] and "a3f1c2d4 " in lines[0] + " "
    assert str(proj) in lines[0] and "a3f1c2d4-0001-4e5f" not in lines[0]
    # each message under its own time and role; continuation lines indented under the text
    first = next(ln for ln in lines if "Which serif font" in ln)
    assert "2026-11-20 09:12" in first and " user " in first
    column = first.index("Which serif font")
    cont = lines[lines.index(first) + 1]
    assert cont.strip() == "It must print well." and cont.index("It must") == column
    assert any("2026-11-20 09:14" in ln and "assistant" in ln for ln in lines)
    # an Edit's payload is one line unless --full
    assert "line 30 of the old file" not in out and "--full shows them" in out
    assert "line 30 of the old file" in full.stdout
    # colour only when asked (a pipe is not a terminal); the words of the command line, not MCP's
    assert "\x1b[" not in out and "\x1b[1;31m" in colour.stdout
    assert "recall more N" in out and "recall_more" not in out and "anchor_id" not in out
    # the partial-match notice comes first
    assert partial.stdout.splitlines()[0].startswith("No message contains all of 'serif', 'zeppelin'")
    assert partial.returncode == 1
    assert miss.stdout == "" and "--all-projects" in miss.stderr and "all_projects" not in miss.stderr


def test_recall_more_takes_the_number_of_a_passage_of_the_last_search(proj, corpus, run_recall):
    _blocks_corpus(corpus, proj)
    found = run_recall("--db", corpus.db, "search", "serif", "--cwd", proj)
    assert found.returncode == 0, found.stderr
    last = Path(f"{corpus.db}.last-search")
    assert last.stat().st_mode & 0o777 == 0o600
    more, beyond = run_all(run_recall, ["--db", corpus.db, "more", "1"], ["--db", corpus.db, "more", "7"])
    assert more.returncode == 0, more.stderr
    assert "Inter for the headings." in more.stdout and "Which serif font" in more.stdout
    assert beyond.returncode == 2 and "no passage 7" in beyond.stderr


PAGER_SCRIPT = "cat > {out}"


def test_a_pager_runs_only_when_stdout_is_a_terminal(proj, corpus, recall_cmd, tmp_path):
    import os
    import pty
    import subprocess

    _blocks_corpus(corpus, proj)
    paged = tmp_path / "paged.txt"
    env = {**os.environ, "PAGER": PAGER_SCRIPT.format(out=paged), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    argv = [*recall_cmd, "--db", str(corpus.db), "search", "serif", "--cwd", str(proj)]
    master, slave = pty.openpty()
    try:
        done = subprocess.run(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                              timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0, done.stderr
    text = paged.read_text()
    assert "Résumé layout" in text and "\x1b[" in text  # paged, coloured for `less -R`
    paged.unlink()
    piped = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert piped.returncode == 0 and b"R\xc3\xa9sum\xc3\xa9 layout" in piped.stdout and not paged.exists()


def test_counts_of_one_read_as_one(proj, corpus, run_recall):
    """A turn of one message, a payload of one more line, one line before a
    hit: "1 message", "+1 line", "1 line before", never "1 messages"."""
    s = corpus.session("b0b0b0b0-0001", proj, title="One of each")
    s.message("u1", "where did the walrus go?", turn_id="t1")
    s.message("c1", "Edit zoo/narwhal.txt\nthe old line", role="tool_call", tool_name="Edit", turn_id="t2")
    s.message("u2", "\n".join(f"line {i}" for i in range(6)) + "\nthe okapi is here", turn_id="t3")
    corpus.open().close()
    narwhal, okapi = run_all(
        run_recall,
        ["--db", corpus.db, "search", "narwhal", "--cwd", proj],
        ["--db", corpus.db, "search", "okapi", "--cwd", proj])
    assert "(+1 line; --full shows them)" in narwhal.stdout, narwhal.stdout
    assert "(1 line before)" in okapi.stdout, okapi.stdout
    assert run_recall("--db", corpus.db, "search", "walrus", "--cwd", proj).returncode == 0
    done = run_recall("--db", corpus.db, "more", "1", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    assert "The turn around this anchor, 1 message." in done.stdout, done.stdout


def test_a_payload_shows_its_tool_and_path_whatever_the_hit(proj, corpus, run_recall):
    """README: a tool call that carries a whole file shows its first line,
    the tool and the path, unless --full (before: the tool's name alone, or
    the line just before the hit, deep in the file's text)."""
    body = "\n".join(f"paragraph {i}" for i in range(40)) + "\nset in Source Serif 4"
    patch = "*** Begin Patch\n*** Update File: src/style.css\n@@\n-font: Inter\n+font: Source Serif 4\n*** End Patch"
    s = corpus.session("c4c4c4c4-0001", proj, title="Payloads")
    s.message("w1", orjson.dumps({"file_path": "/srv/site/notes.md", "content": body}).decode(),
              role="tool_call", tool_name="Write", turn_id="t1")
    s.message("p1", orjson.dumps({"input": patch}).decode(), role="tool_call", tool_name="apply_patch",
              turn_id="t2")
    corpus.open().close()
    plain, full = run_all(
        run_recall,
        ["--db", corpus.db, "search", "serif", "--cwd", proj],
        ["--db", corpus.db, "search", "serif", "--cwd", proj, "--full"])
    lines = plain.stdout.splitlines()
    write = next(i for i, ln in enumerate(lines) if ln.endswith("tool_call    Write"))
    assert lines[write + 1].strip() == "/srv/site/notes.md", plain.stdout
    assert lines[write + 2].strip() == "… (+41 lines; --full shows them)", plain.stdout
    apply = next(i for i, ln in enumerate(lines) if ln.endswith("tool_call    apply_patch"))
    assert lines[apply + 1].strip() == "*** Update File: src/style.css", plain.stdout
    assert lines[apply + 2].strip() == "… (+5 lines; --full shows them)", plain.stdout
    assert "paragraph 39" not in plain.stdout and "paragraph 39" in full.stdout


# The bidirectional controls that reorder what a terminal shows (CVE-2021-42574,
# "Trojan Source"): embeddings, overrides, isolates and their ends.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidirectional_controls_from_a_log_are_shown_not_obeyed(proj, corpus, run_recall):
    """`rm -rf ~/build ‮ # safe` would be drawn reversed after the override:
    each control is shown as its code point, the Arabic and Hebrew text
    around it left alone; --json keeps the text as stored."""
    s = corpus.session("s1", proj, title="review \u202eevil\u202c title", started_at="2026-11-20T09:00:00Z")
    s.message("u1", "zebra rm -rf ~/build \u202e # safe \u202c and " + BIDI + " then مرحبا שלום")
    corpus.open().close()
    done = run_recall("--db", corpus.db, "search", "zebra", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in BIDI), repr(done.stdout)
    assert "~/build <U+202E> # safe <U+202C> and <U+202A><U+202B>" in done.stdout
    assert "review <U+202E>evil<U+202C> title" in done.stdout and "مرحبا שלום" in done.stdout
    done = run_recall("--db", corpus.db, "search", "zebra", "--cwd", proj, "--json")
    assert BIDI in Envelope.model_validate_json(done.stdout).results[0].passage.messages[0].text


INVISIBLE = "\u200b\u200e\u200f\u2028\u2029\u2060\ufeff"


def test_characters_a_terminal_draws_as_nothing_are_shown(proj, corpus, run_recall):
    """A zero-width space, a direction mark, a word joiner, a stray byte order
    mark or a line separator would hide a difference in what is read
    (`pass\u200bword`); each is shown as its code point. A zero-width joiner
    stays: an emoji sequence is written with it."""
    s = corpus.session("s2", proj, started_at="2026-11-20T09:00:00Z")
    s.message("u1", "zebra pass" + INVISIBLE + "word and a family \U0001F468\u200d\U0001F469\u200d\U0001F467")
    corpus.open().close()
    done = run_recall("--db", corpus.db, "search", "zebra", "--cwd", proj)
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in INVISIBLE), repr(done.stdout)
    assert "pass<U+200B><U+200E><U+200F><U+2028><U+2029><U+2060><U+FEFF>word" in done.stdout
    assert "\U0001F468\u200d\U0001F469" in done.stdout
