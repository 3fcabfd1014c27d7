"""The coding-session set: questions an agent asks about its own past work,
against real Claude Code and Codex transcripts.

    python -m bench.quality.coding [--validate] [--systems ours,...] [--json OUT]

Unlike the other sets (bench/quality/datasets.py), nothing here is rewritten
as canonical logs: the transcripts in ``../shared/data/claude-code`` and
``../shared/data/codex`` are indexed where they lie, with their own kinds,
through the normal pipeline (the dataset's ``sources``, which
bench/quality/evaluate.py ``prepare`` syncs). Both folders are copies of test
fixtures of public repositories (Apache-2.0 and MIT; each SOURCES.md says
which): used here for evaluation only, never shipped with the package.

Beside them, as distractors, the project's own fixture sessions
(``fixtures/``: a résumé font, a checkout bug, in Chinese and English) and a
generated corpus (bench/corpus.py, the "mixed" profile: English and Chinese
prose, code, command output and tool envelopes drawn from real word
frequencies), so that a question has to beat many long sessions full of
ordinary programming words, not nine.

The questions (coding_questions.json, one object a line) were written by
reading the transcripts and asking what a developer who half remembers would
ask: half in Chinese (as a Chinese developer writes, English identifiers
kept: "上周删 hello.js 用的是什么命令"), in six shapes (a decision, a fix, a
file, a command, an error message, "last week"), either as a natural
question (``ask: "question"``, asked as ``Index.recall(question=...)``) or as
exact keywords (``ask: "query"``, asked as ``Index.recall(query=...)``, whose
terms must all match). ``hard`` marks paraphrases that avoid the words of the
transcript (synonyms, another language, another inflection). Fields:

- ``session``: the gold session id, as the index stores it (a Claude Code
  transcript's ``sessionId``, a Codex rollout's ``session_meta`` id; sub-agent
  files belong to their parent);
- ``messages``: the gold message ids (the messages that hold the answer, or
  for a query the messages that match it);
- ``answer``: for a question, words that a gold message must hold (checked
  by --validate, so a gold label cannot silently rot when a reader changes);
- ``split``: "tune" or "held", alternating within each language and kind of
  ask, so that settings are chosen on one half and reported on the other.

Each question's ``slice`` is "<ask>/<split>" (question/tune, query/held, ...):
the evaluation reports each slice beside the whole set.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench import corpus as C
from bench.quality import datasets as D
from session_recall.text.fold import fold

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = Path(__file__).with_name("coding_questions.json")
SHAPES = ("decision", "fix", "file", "command", "error", "last-week")
# The real transcripts, by kind (the gold sessions are all here).
REAL = (("claude-code", "claude-code"), ("codex", "codex"))
# The project's own fixture sessions: small, conversational distractors.
FIXTURES = (("fixtures/claude-code", "claude-code"), ("fixtures/codex", "codex"), ("fixtures/sessions", "canonical"))
# The generated distractors: 40 sessions of about 150 kB of log each (the
# size of a real working session), mixed scripts. About 4 s to generate once
# (kept under bench/out, reused) and 5 s to index.
DISTRACTOR_MB = 6.0
DISTRACTOR_SESSIONS = 40
DISTRACTOR_SEED = 18


@dataclass
class CodingQuestion(D.Question):
    ask: str = "question"  # "question" (question=) or "query" (query=)
    shape: str = ""
    hard: bool = False
    split: str = ""  # "tune" or "held"
    answer: str = ""
    slice: str = ""  # "<ask>/<split>"

    @property
    def query(self) -> str:
        """The exact query to ask, for a keyword item (else empty)."""
        return self.text if self.ask == "query" else ""


@dataclass
class SourceDataset(D.Dataset):
    """A set whose sessions are logs on disk, indexed where they lie:
    (folder, kind) pairs for ``Index.sync``. ``sessions`` stays empty (there
    is nothing to write as canonical logs)."""

    sources: list[tuple[Path, str]] = field(default_factory=list)


def load_questions(path: Path = QUESTIONS) -> list[CodingQuestion]:
    out = []
    for r in orjson.loads(path.read_bytes()):
        out.append(CodingQuestion(
            qid=r["id"], text=r["text"], script=r["lang"], gold_sessions={r["session"]},
            gold_messages=set(r["messages"]), ask=r["ask"], shape=r["shape"], hard=r["hard"], split=r["split"],
            answer=r.get("answer", ""), slice=f"{r['ask']}/{r['split']}"))
    return out


def distractor_folder(mb: float = DISTRACTOR_MB) -> Path:
    """The generated corpus (made once, then reused while its parameters and
    the generator are unchanged)."""
    p = C.params_for("mixed", mb, sessions=round(DISTRACTOR_SESSIONS * mb / DISTRACTOR_MB), seed=DISTRACTOR_SEED)
    corpus, _ = C.ensure(p, C.corpus_dir(p, "mixed"))
    return corpus.root


def coding(distractor_mb: float = DISTRACTOR_MB) -> SourceDataset:
    """The set: its sources (real transcripts, fixtures, generated
    distractors) and its questions."""
    sources = [(D._need(D.DATA / folder), kind) for folder, kind in REAL]
    sources += [(ROOT / folder, kind) for folder, kind in FIXTURES]
    if distractor_mb > 0:
        sources.append((distractor_folder(distractor_mb), "canonical"))
    questions = load_questions()
    return SourceDataset(
        "coding", [], questions, sources=sources,
        notes=f"real Claude Code and Codex transcripts (9 sessions) + the project's fixtures + "
              f"{distractor_mb:g} MB of generated sessions; {len(questions)} questions written from the transcripts")


# --- validation ------------------------------------------------------------------------------


def validate(ix, questions: list[CodingQuestion]) -> list[str]:
    """Every label checked against the index: the gold session exists, each
    gold message is in it; a question's answer words are in a gold message;
    a query matches (all terms) every gold message. Returns the problems."""
    c = ix.store.reader
    texts: dict[str, dict[str, str]] = {}
    for sid, mid, text in c.execute("SELECT s.session_id, m.message_id, m.text FROM messages m "
                                    "JOIN sessions s ON s.id = m.session"):
        texts.setdefault(sid, {})[mid] = text
    problems = []
    for q in questions:
        (sid,) = q.gold_sessions
        where = f"{q.qid} ({q.text!r})"
        if q.ask not in ("question", "query") or q.shape not in SHAPES or q.split not in ("tune", "held"):
            problems.append(f"{where}: bad ask/shape/split")
        if sid not in texts:
            problems.append(f"{where}: no session {sid} in the index")
            continue
        if missing := [m for m in q.gold_messages if m not in texts[sid]]:
            problems.append(f"{where}: messages not in {sid}: {missing}")
        if q.ask == "question":
            if not q.answer or not any(fold(q.answer) in fold(texts[sid].get(m, "")) for m in q.gold_messages):
                problems.append(f"{where}: no gold message holds {q.answer!r}")
        else:
            matched = {(s["session_id"], m.message_id) for m, s in ix.search(q.text, limit=100_000)}
            if unmatched := [m for m in q.gold_messages if (sid, m) not in matched]:
                problems.append(f"{where}: the query does not match gold messages {unmatched}")
    return problems


def overlap(ix, q: CodingQuestion) -> tuple[int, int]:
    """(keywords of the question found in its gold session, keywords): how
    much of the question a lexical match can see at all."""
    from session_recall.query.keywords import keyword_groups

    groups = keyword_groups(q.text)
    (sid,) = q.gold_sessions
    body = fold("\n".join(t for (t,) in ix.store.reader.execute(
        "SELECT m.text FROM messages m JOIN sessions s ON s.id = m.session WHERE s.session_id = ?", (sid,))))
    return sum(1 for g in groups if any(fold(v) in body for v in g)), len(groups)


# --- the run -----------------------------------------------------------------------------------


def counts(questions: list[CodingQuestion]) -> dict:
    out: dict = {"total": len(questions), "hard": sum(q.hard for q in questions)}
    for name, key in (("lang", lambda q: q.script), ("ask", lambda q: q.ask), ("shape", lambda q: q.shape),
                      ("split", lambda q: q.split)):
        tally: dict[str, int] = {}
        for q in questions:
            tally[key(q)] = tally.get(key(q), 0) + 1
        out[name] = dict(sorted(tally.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.quality import evaluate as E
    from bench.quality.baselines import Baselines

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--validate", action="store_true", help="check every label against the index; exit 1 on a problem")
    ap.add_argument("--systems", default="ours", help="comma-separated subset of " + ", ".join(E.SYSTEMS))
    ap.add_argument("--json", type=Path, default=None, help="write the report (per question rows included) here")
    args = ap.parse_args(argv)
    systems = tuple(s for s in args.systems.split(",") if s)
    status = 0
    try:
        with tempfile.TemporaryDirectory(prefix="recall-coding-") as tmp:
            ds, ix, n_messages, index_s = E.prepare("coding", Path(tmp))
            try:
                questions: list = ds.questions  # CodingQuestion (of bench.quality.coding, not __main__)
                if args.validate:
                    problems = validate(ix, questions)
                    for p in problems:
                        print("label problem:", p)
                    blind = [q.qid for q in questions if q.ask == "question" and overlap(ix, q)[0] == 0]
                    print(f"validated {len(questions)} labels: {len(problems)} problems; {len(blind)} questions "
                          f"share no keyword with their gold session ({', '.join(blind) or 'none'})")
                    status = 1 if problems else 0
                base = Baselines(ix.store.reader) if set(systems) - {"ours"} else None
                per_system = E.evaluate(ix, questions, systems, base)
                sessions = ix.status()["sessions"]
            finally:
                ix.close()
    except D.DataMissing as e:
        print(f"skipped: {e}", file=sys.stderr)
        return 0
    for rows in per_system.values():
        for r, q in zip(rows, questions):
            r.update(ask=q.ask, split=q.split, shape=q.shape, hard=q.hard, slice=q.slice)
    print(f"coding: {sessions} sessions, {n_messages} messages, indexed in {index_s:.1f} s; {counts(questions)}")
    print(slice_table(per_system))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps({"counts": counts(questions), "per_question": per_system},
                                           option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    return status


def slice_table(per_system: dict[str, list[dict]]) -> str:
    """Session and message hit@1 / hit@5 / MRR per system: the whole set, each
    half, each slice (ask x half), each language, the hard questions."""
    from bench.quality import evaluate as E

    head = ("system", "rows", "n", "s.hit@1", "s.hit@5", "s.MRR", "m.hit@1", "m.hit@5", "m.MRR", "median ms")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for system, rows in per_system.items():
        groups: list[tuple[str, list[dict]]] = [("all", rows)]
        groups += [(v, [r for r in rows if r["split"] == v]) for v in ("tune", "held")]
        groups += [(v, [r for r in rows if r["slice"] == v]) for v in sorted({r["slice"] for r in rows})]
        groups += [(f"lang {v}", [r for r in rows if r["script"] == v]) for v in sorted({r["script"] for r in rows})]
        groups.append(("hard", [r for r in rows if r["hard"]]))
        for label, sub in groups:
            if not sub:
                continue
            s = E.summarize(sub)
            cells = [f"{s[lvl][m]:.3f}" for lvl in ("session", "message") for m in ("hit@1", "hit@5", "mrr")]
            lines.append(f"| {system} | {label} | {len(sub)} | " + " | ".join(cells)
                         + f" | {s['latency_ms']['median']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
