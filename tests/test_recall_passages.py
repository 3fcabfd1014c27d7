"""Passages (contract section 7): hits of one turn collapse into one passage,
tool results enter only as hits, the passage and response budgets, long
messages cut around their hit, and materials."""

from __future__ import annotations

import json

import pytest

from session_recall.query import passages as P
from tests.helpers import all_pages, anchors, passage_bytes


def test_hits_in_one_turn_collapse_into_one_passage(proj, corpus):
    s = corpus.session("s1", proj)
    s.message("u1", "Which font should the résumé use?", turn_id="t1")
    s.message("c1", '{"command": "fc-list :family"}', role="tool_call", tool_name="Bash", turn_id="t1")
    s.message("r1", "DejaVu Sans\nNoto Serif\nInter", role="tool_result", turn_id="t1")
    s.message("a1", "The font is Garamond, the others look too plain.", role="assistant", turn_id="t1")
    s.message("u2", "Thanks! And the colour?", turn_id="t2")
    s.message("a2", "A dark blue for the headings; the font stays.", role="assistant", turn_id="t2")
    ix = corpus.open()
    env = ix.recall("font", cwd=str(proj))
    assert len(env.results) == 2  # two turns, two passages
    by_turn = {r.passage.turn_id: r.passage for r in env.results}
    p1 = by_turn["t1"]
    assert [m.message_id for m in p1.messages] == ["u1", "c1", "a1"]  # the tool_result is no hit: left out
    assert [m.is_hit for m in p1.messages] == [True, False, True]
    assert sum(m.is_anchor for m in p1.messages) == 1
    assert all(m.is_hit for m in p1.messages if m.is_anchor)
    p2 = by_turn["t2"]
    assert [(m.message_id, m.is_hit) for m in p2.messages] == [("u2", False), ("a2", True)]


def test_a_tool_result_enters_only_as_a_hit_and_hard_truncated(proj, corpus):
    log = "\n".join(f"line {i}: ok" for i in range(20000))
    s = corpus.session("s1", proj)
    s.message("u1", "Run the test suite and look for the segfault.", turn_id="t1")
    s.message("c1", '{"command": "pytest -x"}', role="tool_call", tool_name="Bash", turn_id="t1")
    s.message("r1", log + "\nFatal: segfault in parser.c:212\n" + log, role="tool_result", turn_id="t1")
    s.message("r2", log, role="tool_result", turn_id="t1")  # no hit: never shown
    s.message("a1", "The segfault is in parser.c, line 212.", role="assistant", turn_id="t1")
    s2 = corpus.session("s2", proj)
    s2.message("r9", log + "\nonly-here: stacktrace-7731\n" + log, role="tool_result", turn_id="t1")
    ix = corpus.open()
    env = ix.recall("segfault", cwd=str(proj))
    assert len(env.results) == 1
    msgs = {m.message_id: m for m in env.results[0].passage.messages}
    assert "r2" not in msgs
    r1 = msgs["r1"]
    assert r1.is_hit and r1.truncated
    assert len(r1.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES
    assert "segfault" in r1.text  # cut around the hit
    # a tool_result as the anchor, and widened: still hard-truncated
    env = ix.recall("stacktrace-7731", cwd=str(proj))
    (r,) = env.results
    (m,) = r.passage.messages
    assert m.is_anchor and m.role == "tool_result" and m.truncated
    assert len(m.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES and "stacktrace-7731" in m.text
    more = ix.recall_more(r.passage.anchor_id, cwd=str(proj))
    for m in more.results[0].passage.messages:
        if m.role == "tool_result":
            assert len(m.text.encode("utf-8")) <= P.TOOL_RESULT_BYTES
    widened = ix.recall_more(ix.recall("segfault", cwd=str(proj)).results[0].passage.anchor_id, cwd=str(proj))
    ids = [m.message_id for m in widened.results[0].passage.messages]
    assert "r2" not in ids and "u1" in ids and "a1" in ids


def test_passage_and_response_budgets_hold_on_huge_messages(proj, corpus):
    filler = "lorem ipsum " * 2500  # 30 KB, twenty times the budget of a hit
    for i in range(12):
        s = corpus.session(f"s{i:02d}", proj)
        for j in range(6):
            s.message(f"m{j}", f"budget {filler}", role="assistant" if j % 2 else "user", turn_id="t1")
        s.message("short", "budget", role="assistant", turn_id="t1")  # the best hit, in the middle of the turn
        for j in range(6, 9):
            s.message(f"m{j}", f"budget {filler}", role="assistant", turn_id="t1")
    ix = corpus.open()
    env = ix.recall("budget", cwd=str(proj), limit=12)
    assert env.status == "ok" and env.results
    for r in env.results:
        assert passage_bytes(r) <= P.PASSAGE_BYTES, passage_bytes(r)
        for m in r.passage.messages:
            limit = P.HIT_BYTES if m.is_hit else P.NEIGHBOUR_BYTES
            assert len(m.text.encode("utf-8")) <= limit
            assert m.text == "" or "budget" in m.text.casefold() or not m.is_hit
    total = sum(passage_bytes(r) for r in env.results)
    assert total <= P.RESPONSE_BYTES
    assert len(env.results) < 12 and "response_budget" in env.gaps and env.next_cursor
    rest = all_pages(ix, "budget", cwd=str(proj), limit=12, cursor=env.next_cursor)
    seen = anchors(env) + [a for p in rest for a in anchors(p)]
    assert len(seen) == len(set(seen)) == 12
    for p in rest:
        assert sum(passage_bytes(r) for r in p.results) <= P.RESPONSE_BYTES
    more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj))
    assert passage_bytes(more.results[0]) <= P.MORE_PASSAGE_BYTES
    assert len(json.dumps(more.model_dump())) < 4 * P.MORE_PASSAGE_BYTES


@pytest.mark.parametrize(
    ("query", "question", "planted", "seen"),
    [
        ("garamond", None, "we chose GARAMOND for the body", "GARAMOND"),
        ("font", None, "the ＦＯＮＴ is garamond", "ＦＯＮＴ"),  # full-width in the text
        ('"source serif"', None, "we chose Source\n   Serif for the body", "Serif"),  # a phrase over a line break
        ("strasse", None, "the office in the Große Straße was closed", "Straße"),  # ß folds to ss
        ("", "我们选了什么字体？", "最后我们选了思源宋体作为正文字体", "字体"),  # question mode
    ],
)
def test_a_long_message_is_cut_around_its_hit(proj, corpus, query, question, planted, seen):
    filler = "ß lorem ipsum dolor " * 800  # 16 KB, with a character whose folding is longer
    corpus.session("s1", proj).message("m1", f"{filler} {planted} {filler}", role="assistant")
    ix = corpus.open()
    env = ix.recall(query, question=question, cwd=str(proj))
    assert env.status == "ok", env.hint
    (m,) = env.results[0].passage.messages
    assert m.truncated and len(m.text.encode("utf-8")) <= P.HIT_BYTES
    assert seen in m.text


def test_materials(proj, corpus, tmp_path):
    def att(i, name, mime, size=1000):
        return {"id": f"att_{i}", "name": name, "mime_type": mime, "bytes": size}

    atts = [
        att(1, "screenshot.png", "image/png"),
        att(2, "notes.txt", "text/plain"),
        att(3, "invoice.pdf", "application/pdf"),
        att(4, "dump.bin", "application/octet-stream"),
        {"id": "bad id with spaces", "name": "x", "mime_type": "image/png", "bytes": 1},  # malformed
        {"name": "no-id.png", "mime_type": "image/png", "bytes": 1},  # malformed
        att(5, "config.json", "application/json"),
        {"id": "att_x", "name": "neg.png", "mime_type": "image/png", "bytes": -5},  # malformed
        att(6, "photo.JPG", "IMAGE/JPEG"),
        att(7, "archive.zip", "application/zip"),
        att(8, "readme.md", "text/markdown"),
        att(9, "ninth.png", "image/png"),
        att(10, "tenth.png", "image/png"),
    ]
    s = corpus.session("sess-1", proj)
    s.message("m1", "here are the materials for the layout", attachments=atts)
    s.message("m2", "", attachments=[att(11, "checkout-bug.png", "image/png")], turn_id="t2")  # a pasted screenshot
    other = tmp_path / "other"
    other.mkdir()
    # the same session id in another project
    corpus.session("sess-1", other).message("m1", "materials elsewhere",
                                            attachments=[att(1, "theirs.png", "image/png")])
    ix = corpus.open()

    env = ix.recall("materials", cwd=str(proj), caller_session="sess-1")
    (msg,) = env.results[0].passage.messages
    mats = msg.materials
    assert [m.name for m in mats] == ["screenshot.png", "notes.txt", "invoice.pdf", "dump.bin", "config.json",
                                      "photo.JPG", "archive.zip", "readme.md"]  # 8, counted after filtering
    kinds = {m.name: m.kind for m in mats}
    assert kinds == {"screenshot.png": "image", "notes.txt": "text", "invoice.pdf": "pdf", "dump.bin": "binary",
                     "config.json": "text", "photo.JPG": "image", "archive.zip": "binary", "readme.md": "text"}
    for m in mats:
        assert m.name and m.mime_type and m.bytes == 1000
        if m.kind in ("image", "text"):
            assert m.resource and "sess-1" in m.resource
        else:
            assert m.resource is None, m
    assert "null" not in json.dumps([m.model_dump(exclude={"resource"}) for m in mats])

    # another caller, or none: metadata only
    for caller in (None, "sess-2"):
        env = ix.recall("materials", cwd=str(proj), caller_session=caller)
        assert all(m.resource is None for m in env.results[0].passage.messages[0].materials)
        more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj), caller_session=caller)
        assert all(m.resource is None for m in more.results[0].passage.messages[0].materials)
    more = ix.recall_more(env.results[0].passage.anchor_id, cwd=str(proj), caller_session="sess-1")
    assert sum(m.resource is not None for m in more.results[0].passage.messages[0].materials) == 5

    # the twin session of another project is not the caller's session
    env = ix.recall("materials", cwd=str(proj), all_projects=True, caller_session="sess-1")
    by_cwd = {r.cwd: r.passage.messages[0].materials for r in env.results}
    assert any(m.resource for m in by_cwd[str(proj)])
    assert [m.resource for m in by_cwd[str(other)]] == [None]

    # a message with no text of its own is found by its file name
    env = ix.recall("checkout", cwd=str(proj), caller_session="sess-1")
    (msg,) = env.results[0].passage.messages
    assert msg.text == "" and [m.name for m in msg.materials] == ["checkout-bug.png"]
    assert msg.materials[0].resource
