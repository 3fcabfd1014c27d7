"""What `recall` prints for a person: terminal control characters from logs
are shown, never sent, while --json stays lossless."""

from __future__ import annotations

import re

from session_recall.model import Envelope

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
