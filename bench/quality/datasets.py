"""Labelled collections turned into session logs (canonical format, contract §2.1).

Three sets, each a list of sessions (what gets indexed) and a list of questions
with their gold labels:

- ``cmrc``: CMRC 2018 (dev split by default). Each article is one session,
  titled with the article's title. Its paragraph is cut at sentence ends into
  passages of at least ``CMRC_PASSAGE_CHARS`` characters (about three
  sentences, four to five passages an article), and each passage is one
  message (its own turn, user and assistant alternating, as pasted material
  and replies would). A question's gold session is its article; its gold
  messages are the passages that a reference answer's span overlaps.
- ``cranfield``: the 1,400 abstracts, **one per session** (titled with the
  document's title), each abstract one message. Grouping "related documents"
  would need a notion of relatedness: the only one the collection carries is
  the judgements themselves (grouping by them leaks the gold into the corpus),
  and grouping by anything else (journal, id order) makes sessions of
  unrelated documents whose session-level hits come by chance. So session
  level and message level coincide here. Gold: every judged document (codes 1
  to 4); the codes are kept as grades for nDCG.
- ``mixed``: both scripts in one corpus. All Cranfield abstracts (their
  judgements cover the whole collection) plus CMRC articles drawn with a fixed
  seed until the CMRC side holds as many index tokens as the Cranfield side
  (CJK bigrams counted like English words: what bm25's lengths and the
  corpus size see), and as many CMRC questions (from those articles) as there
  are Cranfield queries. Neither script's statistics nor its questions
  dominate the averages.

Timestamps are drawn per session from a seeded generator over one year, so
that recency carries no information about relevance (the labels know nothing
of time) and the newest-first baseline is not accidentally favoured.

The data are read from ``../shared/data`` beside the project root; when it is
absent, ``DataMissing`` says so.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from session_recall.text.tokens import index_body

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
CMRC_PASSAGE_CHARS = 100
SEED = 2018
EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)


class DataMissing(RuntimeError):
    """The labelled collections are not where the harness looks for them."""


@dataclass
class Message:
    message_id: str
    role: str
    text: str


@dataclass
class Session:
    session_id: str
    cwd: str
    title: str
    messages: list[Message]


@dataclass
class Question:
    qid: str
    text: str
    script: str  # "zh" or "en"
    gold_sessions: set[str]
    gold_messages: set[str]  # message ids (unique across the set); empty: no message-level gold
    grades: dict[str, int] = field(default_factory=dict)  # message id -> gain (graded sets)
    # The slice a question reports in, beside the whole set: for the dialogue
    # sets "question/tune", "question+answer/held", ... (how it was asked, and
    # which half of the dialogues it belongs to).
    slice: str = ""


@dataclass
class Dataset:
    name: str
    sessions: list[Session]
    questions: list[Question]
    notes: str = ""

    def write_logs(self, folder: Path) -> int:
        """One canonical .jsonl per session; returns the number of messages."""
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(f"{SEED}-{self.name}-ts")
        n = 0
        for s in self.sessions:
            start = EPOCH + dt.timedelta(seconds=rng.randrange(365 * 86400))
            lines = [{"type": "session", "session_id": s.session_id, "cwd": s.cwd,
                      "started_at": _iso(start), "title": s.title}]
            for i, m in enumerate(s.messages):
                lines.append({"type": "message", "session_id": s.session_id, "message_id": m.message_id,
                              "turn_id": f"t{i}", "role": m.role, "ts": _iso(start + dt.timedelta(minutes=i + 1)),
                              "text": m.text})
                n += 1
            name = hashlib.blake2b(s.session_id.encode(), digest_size=8).hexdigest()
            (folder / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
        return n


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _need(path: Path) -> Path:
    if not path.exists():
        raise DataMissing(f"{path.name} not found under ../shared/data (looked in {path.parent.resolve()}); "
                          "the quality benchmark needs the shared labelled collections beside the project")
    return path


# --- CMRC 2018 -------------------------------------------------------------------------

_SENTENCE = re.compile(r"[^。！？!?\n]*(?:[。！？!?\n]+[”」』）)]*|$)")


def cut_passages(context: str, min_chars: int = CMRC_PASSAGE_CHARS) -> list[tuple[int, int]]:
    """Spans (start, end) of consecutive passages covering the whole context,
    each ending at a sentence end and at least `min_chars` long (the last one
    may be shorter, unless it can join the one before)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE.finditer(context):
        if m.end() == m.start():
            continue
        if m.end() - start >= min_chars:
            spans.append((start, m.end()))
            start = m.end()
    if start < len(context):
        if spans and len(context) - start < min_chars // 2:
            spans[-1] = (spans[-1][0], len(context))
        else:
            spans.append((start, len(context)))
    return spans


def _answer_span(context: str, answer: dict) -> tuple[int, int] | None:
    text, start = answer["text"], answer["answer_start"]
    if start >= 0 and context[start:start + len(text)] == text:
        return start, start + len(text)
    # About 2% of the offsets are off; the nearest occurrence of the text decides.
    found = [m.start() for m in re.finditer(re.escape(text), context)] if text else []
    if not found:
        return None
    best = min(found, key=lambda p: abs(p - start))
    return best, best + len(text)


def _cmrc_articles(split: str) -> list[dict]:
    path = _need(DATA / "cmrc2018" / f"cmrc2018_{split}.json")
    return json.loads(path.read_text(encoding="utf-8"))["data"]


def _cmrc_session(article: dict) -> tuple[Session, list[Question]]:
    (para,) = article["paragraphs"]
    context = para["context"]
    sid = f"cmrc-{article['id']}"
    spans = cut_passages(context)
    messages = [Message(f"{sid}-p{i}", "user" if i % 2 == 0 else "assistant", context[a:b].strip())
                for i, (a, b) in enumerate(spans)]
    questions = []
    for qa in para["qas"]:
        gold: set[str] = set()
        for ans in qa["answers"]:
            span = _answer_span(context, ans)
            if span is None:
                continue
            gold |= {messages[i].message_id for i, (a, b) in enumerate(spans) if a < span[1] and span[0] < b}
        if not gold or not qa["question"].strip():
            continue
        questions.append(Question(qa["id"], qa["question"].strip(), "zh", {sid}, gold))
    return Session(sid, "/home/bench/cmrc2018", article["title"], messages), questions


def cmrc(split: str = "dev") -> Dataset:
    sessions, questions = [], []
    for article in _cmrc_articles(split):
        s, qs = _cmrc_session(article)
        sessions.append(s)
        questions.extend(qs)
    return Dataset(f"cmrc-{split}" if split != "dev" else "cmrc", sessions, questions,
                   notes=f"CMRC 2018 {split}: one session per article, passages of >= {CMRC_PASSAGE_CHARS} "
                         "characters at sentence ends, one message each")


# --- Cranfield ---------------------------------------------------------------------------


def _cran_records(path: Path) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    fld = None
    for line in _need(path).read_text(encoding="latin-1").splitlines():
        if line.startswith(".I"):
            fld = None
            cur = None
            if line[2:].strip().isdigit():
                cur = {"I": line[2:].strip()}
                records.append(cur)
            # else: cran.all.1400 ends with a bare ".I" and a repeated tail: not a record
        elif len(line) == 2 and line[0] == "." and line[1] in "TABW":
            fld = line[1]
            cur[fld] = ""
        elif cur is not None and fld:
            cur[fld] += line.strip() + "\n"
    return records


def _clean(text: str) -> str:
    # ' .' and ' ,' are how the collection writes punctuation; lines are wrapped.
    return re.sub(r"\s+", " ", text).replace(" .", ".").replace(" ,", ",").strip()


def cranfield() -> Dataset:
    folder = DATA / "cranfield"
    sessions = []
    for rec in _cran_records(folder / "cran.all.1400"):
        did = int(rec["I"])
        sid = f"cran-{did:04d}"
        text = _clean(rec.get("W", "")) or _clean(rec.get("T", ""))
        if not text:
            continue  # documents 471 and 995 are empty in the collection: nothing to index or find
        sessions.append(Session(sid, "/home/bench/cranfield", _clean(rec.get("T", "")) or sid,
                                [Message(f"{sid}-m0", "assistant", text)]))
    present = {s.session_id for s in sessions}
    queries = _cran_records(folder / "cran.qry")
    judged: dict[int, dict[str, int]] = {}
    for line in _need(folder / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        q, d, code = int(parts[0]), int(parts[1]), int(parts[2])
        if 1 <= code <= 4 and f"cran-{d:04d}" in present:
            judged.setdefault(q, {})[f"cran-{d:04d}-m0"] = 5 - code  # code 1 (complete answer) gains 4
    questions = []
    for pos, rec in enumerate(queries, start=1):  # judgements use the query's position (cranqrel.readme)
        grades = judged.get(pos)
        if not grades:
            continue
        questions.append(Question(f"cran-q{pos:03d}", _clean(rec.get("W", "")), "en",
                                  {m.rsplit("-", 1)[0] for m in grades}, set(grades), grades))
    return Dataset("cranfield", sessions, questions,
                   notes="Cranfield 1400: one abstract per session (one message); judged codes 1-4 are gold")


# --- mixed -----------------------------------------------------------------------------------


def _tokens(texts) -> int:
    return sum(len(index_body(t).split()) for t in texts)


def mixed() -> Dataset:
    cran = cranfield()
    target = _tokens(m.text for s in cran.sessions for m in s.messages)
    articles = _cmrc_articles("dev")
    random.Random(f"{SEED}-mixed").shuffle(articles)
    sessions, pool = [], []
    have = 0
    for article in articles:
        if have >= target:
            break
        s, qs = _cmrc_session(article)
        sessions.append(s)
        pool.extend(qs)
        have += _tokens(m.text for m in s.messages)
    rng = random.Random(f"{SEED}-mixed-q")
    zh = rng.sample(pool, min(len(pool), len(cran.questions)))
    zh.sort(key=lambda q: q.qid)
    # Interleave so that a --limit-questions slice keeps the balance.
    questions = [q for pair in zip(zh, cran.questions) for q in pair]
    return Dataset("mixed", cran.sessions + sessions, questions,
                   notes=f"all {len(cran.sessions)} Cranfield abstracts ({target} tokens) + {len(sessions)} CMRC "
                         f"articles ({have} tokens); {len(zh)} CMRC questions and {len(cran.questions)} "
                         "Cranfield queries, interleaved")


def _coding() -> Dataset:
    from bench.quality.coding import coding  # it builds on this module

    return coding()


# --- dialogues: C3 (Chinese) and DREAM (English) ------------------------------------------

DIALOGUE_FILES = {"c3": ("c3-train", "c3-d-train.json", "zh"), "dream": ("dream-train", "dream-train.json", "en")}


def half(dialogue_id: str) -> str:
    """Which half of a dialogue set a dialogue belongs to: settings are chosen
    on "tune" and reported on both; "held" is never tuned on."""
    return "tune" if hashlib.blake2b(dialogue_id.encode(), digest_size=1).digest()[0] % 2 == 0 else "held"


def _holds(text: str, answer: str) -> bool:
    needle = answer.strip().rstrip("。.!！?？").strip().casefold()
    return len(needle) >= 2 and needle in text.casefold()


def dialogues(name: str) -> Dataset:
    """One session per dialogue, one message per turn (roles alternating, user
    first, each turn's text as written, speaker mark included), no title (a
    log has none until something names it). Every question is asked twice:
    alone ("question") and followed by its correct answer ("question+answer").
    Gold: the question's own dialogue; at message level, the turns that hold
    the answer's text (only where one does)."""
    folder, file, script = DIALOGUE_FILES[name]
    records = json.loads(_need(DATA / folder / file).read_text(encoding="utf-8"))
    sessions, questions = [], []
    for turns, qas, did in records:
        sid = f"{name}-{did}"
        messages = [Message(f"{sid}-t{i}", "user" if i % 2 == 0 else "assistant", t.strip())
                    for i, t in enumerate(turns) if t.strip()]
        sessions.append(Session(sid, f"/home/bench/{name}", "", messages))
        h = half(did)
        for j, qa in enumerate(qas):
            q, a = qa["question"].strip(), qa["answer"].strip()
            gold = {m.message_id for m in messages if _holds(m.text, a)}
            sep = "" if script == "zh" else " "
            for ask, text in (("question", q), ("question+answer", f"{q}{sep}{a}")):
                questions.append(Question(f"{sid}-q{j}-{ask}", text, script, {sid}, gold, slice=f"{ask}/{h}"))
    return Dataset(name, sessions, questions,
                   notes=f"{folder}/{file}: one session per dialogue, one message per turn; each question asked "
                         "alone and with its answer; halves by dialogue id")


SETS = {"cmrc": cmrc, "cranfield": cranfield, "mixed": mixed, "cmrc-trial": lambda: cmrc("trial"),
        "c3": lambda: dialogues("c3"), "dream": lambda: dialogues("dream"), "coding": _coding}
