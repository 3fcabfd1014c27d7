"""A confined caller learns nothing of what lies outside its scope.

Two indexes differ only in projects the caller may not read: in one they
hold the words `giraffe`, `zebra` and `长颈鹿` (often, in more and longer
messages), in the other other words. Every envelope the caller gets (results, scores,
statuses, hints, gaps and diagnostics) must be the same in both; only the time
taken may differ. A control shows that an unconfined caller's scores do move,
so the comparison can fail.
"""

from __future__ import annotations

import math
import random

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_recall import Index
from session_recall.migrations import _varints
from session_recall.query import rank
from session_recall.text.tokens import FTS_TOKENIZER_ARGS, body_tokens, index_body
from tests.conftest import Corpus

APP = "/srv/side/app"
DENIED = "/srv/side/denied"
OTHER = "/srv/side/other"

QUERIES = [
    {"query": "zebra"},  # bm25's idf of a word the denied project holds too
    {"query": "zebra stripes"},
    {"query": "zebra giraffe"},  # no message holds both: partial matches, a term only the denied project holds
    {"query": "giraffe"},
    {"query": "斑马 giraffe"},  # a CJK term: the fallback scan runs when every term may be held
    {"query": "长颈鹿"},
    {"question": "where did we talk about the zebra and the giraffe?"},
    {"question": "斑马和长颈鹿在哪里讨论过"},
    {"query": "zebra", "limit": 1},
]


def build(root, loud: bool) -> Corpus:
    """The caller's project first (the same row ids in both indexes), then a
    project with or without the words."""
    corpus = Corpus(root)
    app = corpus.session("a1", APP, title="zoo notes")
    for i in range(12):
        app.message(f"m{i}", f"the zebra stripes note {i} " + "filler " * (i % 5),
                    role="user" if i % 2 else "assistant", turn_id=f"t{i // 2}")
    app.message("m20", "斑马 在 动物园", role="user")
    app.message("m21", "plain words without animals")
    for name, cwd in (("d1", DENIED), ("o1", OTHER)):
        s = corpus.session(name, cwd, title="elsewhere")
        for i in range(45 if loud else 30):  # more messages, and longer ones, as well as other words
            words = "zebra giraffe 长颈鹿 斑马 " * (i % 3 + 1) if loud and i % 2 else "quartz basalt 花岗 玄武"
            s.message(f"m{i}", f"{words} line {i}")
    return corpus


def envelopes(corpus: Corpus, later: bool = False, **settings) -> list[dict]:
    """Every query's envelope but its time. `later`: the hidden project is
    written to once more, by a pass of its own, before the queries (a
    watcher's pass, an index's generation, a cursor's). A confined caller's
    freshness is compared too: it must not move with that pass."""
    ix = corpus.open(**settings)
    if later:
        corpus.session("d2", DENIED).message("m1", "zebra giraffe written later")
        corpus.sync(ix)
    out = []
    for q in QUERIES:
        env = ix.recall(cwd=APP, **q).model_dump()
        env["diagnostics"].pop("elapsed_ms")
        if not settings:
            env["diagnostics"].pop("index_freshness")
        out.append(env)
    return out


CONFINED = [
    pytest.param({"deny_cwds": [DENIED, OTHER]}, id="deny list"),
    pytest.param({"allow_cwds": [APP]}, id="allow list"),
    pytest.param({"all_projects": "deny"}, id="project scope, all_projects deny"),
    pytest.param({"all_projects": "confirm"}, id="project scope, all_projects confirm"),
]


@pytest.mark.parametrize("settings", CONFINED)
def test_a_confined_caller_gets_the_same_envelopes_whatever_the_hidden_project_holds(tmp_path, isolated_settings,
                                                                                     settings):
    quiet = envelopes(build(tmp_path / "quiet", loud=False), **settings)
    loud = envelopes(build(tmp_path / "loud", loud=True), later=True, **settings)
    assert any(e["results"] for e in quiet), "the queries must find something in the caller's project"
    assert any(e["next_cursor"] for e in quiet), "a cursor must be compared"
    for q, a, b in zip(QUERIES, quiet, loud):
        assert a == b, q


def test_control_an_unconfined_caller_sees_whole_index_statistics(tmp_path, isolated_settings):
    """all_projects allowed and no lists: the caller may read every project,
    so the scores are FTS5's own, over the whole index, and they move."""
    quiet = envelopes(build(tmp_path / "quiet", loud=False))
    loud = envelopes(build(tmp_path / "loud", loud=True))
    scores = [[r["score"] for r in e["results"]] for e in (quiet[0], loud[0])]
    assert scores[0] and scores[0] != scores[1]


@pytest.mark.parametrize("seed", range(5))
def test_recall_bm25_over_the_whole_table_is_fts5s_bm25(seed):
    """The formula of rank.recall_bm25 with idfs counted over the whole table
    equals FTS5's bm25, so a confined caller's ranking is bm25 over its scope."""
    rnd = random.Random(seed)
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1)")
    conn.execute("CREATE TABLE docs(body TEXT)")
    vocab = [f"w{i}" for i in range(12)]
    rows = rnd.randint(5, 60)
    for i in range(rows):
        body = " ".join(rnd.choice(vocab) for _ in range(rnd.randint(1, 30)))
        conn.execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (i + 1, body))
        conn.execute("INSERT INTO docs(body) VALUES (?)", (body,))
    rank.register(conn)
    for _ in range(20):
        phrases = [rnd.choice(vocab) if rnd.random() < 0.8 else " ".join(rnd.sample(vocab, 2))
                   for _ in range(rnd.randint(1, 3))]
        expr = (" OR " if rnd.random() < 0.5 else " AND ").join(f'"{p}"' for p in phrases)
        idfs = [rank.idf(rows, conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?",
                                            (f'"{p}"',)).fetchone()[0]) for p in phrases]
        avgdl = conn.execute("SELECT sum(length(body) - length(replace(body, ' ', '')) + 1) FROM docs").fetchone()[0] / rows
        got = conn.execute(f"SELECT rowid, bm25(message_fts), {rank.bm25_sql(avgdl, idfs)} FROM message_fts "
                           "WHERE message_fts MATCH ?", (expr,)).fetchall()
        for rowid, want, ours in got:
            assert math.isclose(want, ours, rel_tol=1e-9, abs_tol=1e-12), (expr, rowid)


def test_a_confined_scores_ranking_follows_bm25_over_the_scope(tmp_path, isolated_settings):
    """Confined or not, a caller whose scope is every session gets the same
    scores: the idfs of the universe are those of the whole index then."""
    corpus = build(tmp_path / "c", loud=True)
    allowed = corpus.open().recall("zebra", all_projects=True, cwd=APP)
    listed = corpus.open(deny_cwds=["/srv/nowhere"]).recall("zebra", all_projects=True, cwd=APP)
    assert [r.score for r in allowed.results] == pytest.approx([r.score for r in listed.results], rel=1e-9)
    assert [r.passage.messages[0].text for r in allowed.results] == \
        [r.passage.messages[0].text for r in listed.results]



@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab Z9_-./é\u0301简历模板、。!😀\t\n")) | st.characters(), max_size=60))
def test_body_tokens_counts_what_fts5_indexes(text):
    conn = apsw.Connection(":memory:")
    body = index_body(text)
    want = len(conn.fts5_tokenizer("unicode61", FTS_TOKENIZER_ARGS)(body.encode("utf-8", "surrogatepass"),
                                                                      apsw.FTS5_TOKENIZE_DOCUMENT, None))
    assert body_tokens(body) == want


def fts5_lengths(db) -> dict[int, tuple[int, int]]:
    """Per session: messages and FTS5's own record of their tokens."""
    conn = apsw.Connection(str(db))
    out: dict[int, tuple[int, int]] = {}
    for session, sz in conn.execute("SELECT m.session, d.sz FROM messages m JOIN message_fts_docsize d ON d.id = m.id"):
        n, t = out.get(session, (0, 0))
        out[session] = (n + 1, t + _varints(sz))
    kept = {sid: (n, t) for sid, n, t in conn.execute("SELECT id, n_messages, n_tokens FROM sessions")}
    conn.close()
    return out, kept


def test_the_scope_statistics_follow_messages_as_they_come_change_and_go(tmp_path, isolated_settings, canonical):
    logs = tmp_path / "logs"
    logs.mkdir()
    a, b = canonical("sa", cwd="/srv/side/app"), canonical("sb", cwd="/srv/side/denied")
    (logs / "a.jsonl").write_bytes(a.session() + a.message("m1", "one two three") + a.delta("m2", "streamed 简历")
                                   + a.message("m3", "attached", attachments=[{"name": "résumé final.pdf"}]))
    (logs / "b.jsonl").write_bytes(b.session() + b.message("m1", "zebra " * 40))
    db = tmp_path / "r.db"
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="canonical")
        real, kept = fts5_lengths(db)
        assert real == {k: v for k, v in kept.items() if v != (0, 0)} and len(real) == 2
        # a delta appends, a settled text replaces, a rewritten file forgets
        with open(logs / "a.jsonl", "ab") as fh:
            fh.write(a.delta("m2", " 模板 more words") + a.message("m1", "replaced by a much longer text now"))
        (logs / "b.jsonl").write_bytes(b.session() + b.message("m9", "short"))
        ix.sync([str(logs)], kind="canonical")
        real, kept = fts5_lengths(db)
        assert real == {k: v for k, v in kept.items() if v != (0, 0)}
        assert sum(n for n, _ in kept.values()) == 4


def test_the_migration_reads_old_rows_lengths_from_fts5(tmp_path, isolated_settings, canonical):
    """An index made before m006 gets each message's tokens from FTS5's
    docsize, and each session's totals."""
    logs = tmp_path / "logs"
    logs.mkdir()
    a = canonical("sa", cwd="/srv/side/app")
    (logs / "a.jsonl").write_bytes(a.session() + a.message("m1", "one two three 简历模板") + a.message("m2", "x " * 300))
    db = tmp_path / "r.db"
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="canonical")
    conn = apsw.Connection(str(db))
    # (An index of before m006 is one of before m010 too.)
    conn.execute("DROP TRIGGER messages_stats_delete; UPDATE messages SET ntok = 0; "
                 "UPDATE sessions SET n_messages = 0, n_tokens = 0;"
                 "DELETE FROM _migrations WHERE name IN ('m006_scope_statistics', 'm010_session_totals_by_the_writer')")
    for column in ("messages DROP COLUMN ntok", "sessions DROP COLUMN n_messages", "sessions DROP COLUMN n_tokens"):
        conn.execute(f"ALTER TABLE {column}")
    conn.close()
    with Index.open(db):
        pass
    real, kept = fts5_lengths(db)
    assert real == kept and list(real.values())[0][1] > 300
    assert message_insert_triggers(db) == []


def message_insert_triggers(db) -> list[str]:
    conn = apsw.Connection(str(db))
    try:
        return [name for name, sql in conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' "
                                                   "AND tbl_name = 'messages'")
                if {"INSERT", "UPDATE"} & set(sql.upper().split(" BEGIN")[0].split())]
    finally:
        conn.close()


def test_no_trigger_fires_when_a_message_is_written(tmp_path, isolated_settings, canonical):
    """A write that fires a trigger runs with a statement journal, which
    copies every page it touches first: the writer keeps the session totals
    itself (migration m010), and they still follow a rebuild."""
    logs = tmp_path / "logs"
    logs.mkdir()
    a = canonical("sa", cwd="/srv/side/app")
    (logs / "a.jsonl").write_bytes(a.session() + a.message("m1", "one two three 简历模板") + a.delta("m2", "x y"))
    db = tmp_path / "r.db"
    with Index.open(db) as ix:
        ix.sync([str(logs)], kind="canonical")
    assert message_insert_triggers(db) == []
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'tokenizer_version'; "
                 # as if an older tokenizer had counted 7 more tokens a message
                 "UPDATE messages SET ntok = ntok + 7; UPDATE sessions SET n_tokens = n_tokens + 7 * n_messages")
    conn.close()
    (logs / "a.jsonl").unlink()  # its messages survive the rebuild, re-tokenized from the stored text
    with Index.open(db) as ix:
        assert ix.sync([str(logs)], kind="canonical").rebuilt
    real, kept = fts5_lengths(db)
    assert real == kept and sum(n for n, _ in real.values()) == 2
