"""The coding-session set of the quality harness (bench/quality/coding.py).

Its questions are labelled by hand against the real Claude Code and Codex
transcripts in ../shared/data; these tests keep the labels honest: every gold
session and message exists once the transcripts are indexed by the normal
readers, every question's gold message holds its answer, every keyword query
matches its gold messages. A reader change that renames a session or drops a
message shows here, not as a silent drop in the figures.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from bench.quality import coding
from bench.quality import datasets as D
from bench.quality import evaluate as E
from session_recall import Index

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "claude-code").is_dir() or not (DATA / "codex").is_dir(),
    reason="the transcripts (../shared/data/claude-code, ../shared/data/codex) are not beside the project")


def _real_index(tmp_path: Path) -> Index:
    config = tmp_path / "empty.toml"
    config.write_text("")
    ix = Index.open(tmp_path / "recall.db", config=config)
    for folder, kind in coding.REAL:
        ix.sync([str(DATA / folder)], kind=kind)
    return ix


def test_the_set_has_the_questions_the_issue_asks_for() -> None:
    qs = coding.load_questions()
    assert len(qs) >= 80
    assert len({q.qid for q in qs}) == len(qs)
    langs = Counter(q.script for q in qs)
    assert set(langs) == {"en", "zh"} and abs(langs["en"] - langs["zh"]) <= 2
    assert set(Counter(q.shape for q in qs)) == set(coding.SHAPES)
    asks = Counter(q.ask for q in qs)
    assert asks["query"] >= 20 and asks["question"] >= 60
    assert 0.25 <= sum(q.hard for q in qs) / len(qs) <= 0.4
    # The halves alternate within each language and kind of ask, so both are balanced.
    for key in {(q.script, q.ask) for q in qs}:
        splits = [q.split for q in qs if (q.script, q.ask) == key]
        assert splits == [("tune", "held")[i % 2] for i in range(len(splits))]
    assert all(q.slice == f"{q.ask}/{q.split}" and len(q.gold_sessions) == 1 for q in qs)


@needs_data
def test_every_label_holds_in_the_real_transcripts(tmp_path: Path) -> None:
    with _real_index(tmp_path) as ix:
        qs = coding.load_questions()
        assert coding.validate(ix, qs) == []
        # ... and a label that does not hold is reported (the check can fail).
        q = next(q for q in qs if q.ask == "question")
        k = next(q for q in qs if q.ask == "query")
        for broken in (dataclasses.replace(q, answer="words in no transcript"),
                       dataclasses.replace(k, gold_messages=k.gold_messages | {q.qid}),
                       dataclasses.replace(q, gold_sessions={"no-such-session"})):
            assert coding.validate(ix, [broken]), broken


@needs_data
def test_prepare_indexes_a_sets_sources_with_their_kinds_and_asks_queries_as_queries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = [q for q in coding.load_questions() if q.qid == "code-039"]  # the query poolOptions
    assert items and items[0].ask == "query"
    monkeypatch.setitem(D.SETS, "tiny", lambda: coding.SourceDataset(
        "tiny", [], items, sources=[(DATA / "codex", "codex")]))
    ds, ix, n_messages, _ = E.prepare("tiny", tmp_path)
    try:
        assert n_messages == ix.status()["messages"] > 200  # the rollouts, read by the codex reader
        asked: list[dict] = []
        recall = ix.recall
        monkeypatch.setattr(ix, "recall", lambda *a, **kw: asked.append(kw) or recall(*a, **kw))
        (row,) = E.evaluate(ix, ds.questions, ("ours",), None)["ours"]
        # Asked as query= (its exact term), no question: the one message that holds it, first.
        assert [(kw["query"], kw["question"]) for kw in asked] == [("poolOptions", None)]
        assert row["top"] == [("019e1625-789d-76c0-80ab-3724b5ddb799", "call_8Psrgz5hNdgZk6l53j0OY4a9:output")]
        assert (row["session"], row["message"]) == (1, 1)
    finally:
        ix.close()
