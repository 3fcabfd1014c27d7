"""Storage and tokenizer choice for the FTS5 index, measured.

    python bench/storage_choice.py --mb 20

Generates one deterministic mixed Chinese/English corpus (seeded, with the text
generator of bench/corpus.py: Chinese words drawn with the frequencies of
jieba's bundled dictionary, English from its small embedded word list; about
half of the bytes are CJK characters), then builds the same messages into six
schemas, each in a fresh SQLite file (WAL, one transaction per 5,000 rows, the
store's pragmas), and times a fixed query mix:

  (a) ours      messages + contentless_delete FTS5 over the bigram pre-transform
                (session_recall.text.tokens.index_body, FTS_TOKENIZE)
  (b) extcont   messages + messages_body(transformed body) + external-content
                FTS5 over messages_body
  (c) regular   messages + a regular (content-storing) FTS5 over the pre-transform
  (d) pytok     messages + contentless_delete FTS5 over the raw text, tokenized
                by a Python tokenizer registered through apsw that folds and
                splits CJK runs into bigrams itself
  (e) unicode61 messages + contentless_delete FTS5 over the raw text with plain
                unicode61 (the speed ceiling; NOT exact for CJK)
  (f) trigram   messages + contentless_delete FTS5 over the folded text with the
                trigram tokenizer (cannot answer 1- and 2-character terms from
                the index; those are timed as a scan of `messages`)

Reported per variant: build throughput (MB of message text per second, 1 MB =
10^6 bytes, end to end from Python strings to the committed database, text
transform included), database bytes per text byte (after a WAL checkpoint), the
part of it that the FTS side costs, and the median time of the query mix. Hit
counts are checked against a brute-force oracle over the folded text.

With --write-doc (the default) the measurement block of docs/storage.md is
rewritten between its markers; the prose around it is left alone.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import apsw  # noqa: E402
import apsw.fts5  # noqa: E402

from session_recall.text.fold import CJK_CLASS, CJK_RUN, blank_placeholders, fold, match_text  # noqa: E402
from session_recall.text.tokens import FTS_TOKENIZE, index_body, term_tokens  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import SMALL_ENGLISH, Pool, TextGen, cpu, load_jieba_dict, small_english_weights  # noqa: E402

BATCH = 5000
DOC_BEGIN = "<!-- measurements: begin (written by bench/storage_choice.py) -->"
DOC_END = "<!-- measurements: end -->"

# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------

QUERY_TERMS = {
    "cjk2": "显示",  # a 2-character CJK term
    "cjk1": "示",  # a 1-character CJK term (prefix query)
    "cjk4": "搜索引擎",  # a 4-character CJK term (phrase)
    "en": "function",  # an English word
}
QUERY_LABELS = {
    "cjk2": "2-char CJK `显示`",
    "cjk1": "1-char CJK `示` (prefix)",
    "cjk4": "4-char CJK `搜索引擎` (phrase)",
    "en": "English `function`",
}

_CJK_FULL = re.compile(f"[{CJK_CLASS}]+")


@dataclass
class Corpus:
    rows: list[tuple[int, int, str, str, str]]  # (id, session, message_id, role, text)
    text_bytes: int
    cjk_bytes: int
    seed: int

    @property
    def messages(self) -> int:
        return len(self.rows)


def generate_corpus(mb: float, seed: int) -> Corpus:
    """In-memory messages from bench/corpus.py's text generator, with the small
    English list this benchmark was published with ("function" is one of its
    query terms), so the corpus behind docs/storage.md is reproduced exactly."""
    rng = random.Random(seed)
    words, cum = load_jieba_dict()
    tg = TextGen(rng, Pool(rng, words, cum), Pool(rng, SMALL_ENGLISH, small_english_weights()))

    target = int(mb * 1_000_000)
    rows: list[tuple[int, int, str, str, str]] = []
    total = cjk = 0
    session = 0
    msg_in_session = 0
    while total < target:
        if msg_in_session == 0 or rng.random() < 0.02:
            session += 1
            msg_in_session = 0
        msg_in_session += 1
        role = "user" if msg_in_session % 2 else "assistant"
        size = int(min(max(rng.lognormvariate(math.log(300), 1.1), 12), 60_000))
        # Tilt the message's language toward whichever side is behind, so the
        # corpus converges on about half CJK by bytes.
        share = cjk / total if total else 0.5
        chinese = rng.random() < min(0.9, max(0.1, 0.5 + (0.5 - share) * 4))
        text = tg.body(size, chinese, 0.04 if role == "assistant" else 0.0)
        b = len(text.encode("utf-8"))
        total += b
        cjk += sum(len(run.encode("utf-8")) for run in CJK_RUN.findall(text))
        rid = len(rows) + 1
        rows.append((rid, session, f"m{rid}", role, text))
    return Corpus(rows, total, cjk, seed)


# ---------------------------------------------------------------------------
# The Python tokenizer of variant (d)
# ---------------------------------------------------------------------------

# unicode61 configured with categories 'L* N* Co M*' keeps letters, digits,
# marks and private-use characters inside words. Python's `[^\W_]` is exactly
# the L* and N* part; marks and private-use characters are added by a slower
# pattern that is used only for the texts that may contain one (any such BMP
# character, or any character beyond the BMP).


def _word_extras() -> tuple[str, str]:
    """Character classes (BMP, beyond the BMP) of the M* and Co characters
    outside CJK: word characters for unicode61 here, not for Python's \\w."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if (cat[0] == "M" or cat == "Co") and not _CJK_FULL.match(ch):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))

    def cls(rs: list[tuple[int, int]]) -> str:
        esc = lambda cp: re.escape(chr(cp))  # noqa: E731
        return "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in rs)

    bmp = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
    astral = [(max(lo, 0x10000), hi) for lo, hi in ranges if hi > 0xFFFF]
    return cls(bmp), cls(astral)


_EXTRAS_BMP, _EXTRAS_ASTRAL = _word_extras()
# A BMP-only class compiles to a table lookup; the astral part would make it a
# slow list of ranges, so every astral character just selects the full pattern.
_MAY_HAVE_EXTRA = re.compile(f"[{_EXTRAS_BMP}\U00010000-\U0010ffff]")
_PY_TOKEN_FAST = re.compile(f"([{CJK_CLASS}]+)|[^\\W_{CJK_CLASS}]+")
_PY_TOKEN_FULL = re.compile(
    f"([{CJK_CLASS}]+)|(?:[^\\W_{CJK_CLASS}]|[{_EXTRAS_BMP}]|[{_EXTRAS_ASTRAL}])+"
)


def bigram_tokenizer(con: apsw.Connection, args: list[str]) -> apsw.Tokenizer:
    """Fold, then CJK runs -> overlapping bigrams (+ last-character unigram in
    documents, as index_body does; in queries a run is closed only when
    something follows it, as term_tokens does). Tokens are returned without
    offsets: a contentless table has no highlight() or snippet() to use them,
    and computing them costs extra."""

    def tokenize(utf8: bytes, flags: int, locale: str | None):
        text = fold(blank_placeholders(utf8.decode("utf-8", "replace")))
        query = flags & apsw.FTS5_TOKENIZE_QUERY
        end = len(text)
        out: list[str] = []
        append, extend = out.append, out.extend
        pattern = _PY_TOKEN_FULL if _MAY_HAVE_EXTRA.search(text) else _PY_TOKEN_FAST
        for m in pattern.finditer(text):
            run = m.group(1)
            if run is None:
                append(m.group())
                continue
            if len(run) == 1:
                append(run)
                continue
            extend([run[i : i + 2] for i in range(len(run) - 1)])
            if not query or m.end() < end:
                append(run[-1])
        return out

    return tokenize


TRICKY = [
    "浮窗现在只显示Miso", "简历 模板", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ１２３", "cafe\u0301 naïve", "a_b-c.d/e",
    "한국어 텍스트", "カタカナ と ひらがな", "emoji 😀 here 👍🏽", "x\ue123y", "हिन्दी", "ﬁle", "İstanbul",
    "Straße", "100% C++ a->b", "示", "々〆〇", "𠀀𠀁ab", "١٢٣ digits", "\u0e01\u0e34 thai", "𝐀𝐁 math",
    "a\U000f0001b", "a\U0001d165b",
]


def check_python_tokenizer(corpus: Corpus, sample: int = 2000) -> int:
    """(d) must build the very index (a) builds: its document tokens must equal
    unicode61's tokens of index_body(). Returns how many texts were compared."""
    from session_recall.text.tokens import FTS_TOKENIZER_ARGS

    conn = apsw.Connection(":memory:")
    u61 = conn.fts5_tokenizer("unicode61", FTS_TOKENIZER_ARGS)
    ours = bigram_tokenizer(conn, [])
    step = max(1, len(corpus.rows) // sample)
    texts = TRICKY + [r[4] for r in corpus.rows[::step]]
    for text in texts:
        want = u61(index_body(text).encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None,
                   include_offsets=False, include_colocated=False)
        got = ours(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None)
        if list(want) != got:
            raise SystemExit(f"variant (d) tokenizer differs from unicode61 on index_body for {text[:80]!r}")
    return len(texts)


# ---------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------

MESSAGES_DDL = """
CREATE TABLE messages(
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE(session, message_id)
);
"""
INSERT_MESSAGE = "INSERT INTO messages(id, session, message_id, role, text) VALUES (?, ?, ?, ?, ?)"


def _bigram_phrase(term: str) -> str:
    """The FTS5 query for one folded term under the pre-transform (as the query
    engine builds it from term_tokens)."""
    tt = term_tokens(term, lambda s: s.split())
    return '"' + " ".join(tt.tokens) + '"' + ("*" if tt.prefix else "")


def _plain_phrase(term: str, prefix: bool = False) -> str:
    return '"' + term.replace('"', '""') + '"' + ("*" if prefix else "")


@dataclass
class Variant:
    key: str
    name: str
    ddl: str
    exact: bool
    note: str
    # how the FTS row is written: "body" (index_body), "raw", "folded"
    feed: str
    extra_body_table: bool = False
    python_tokenizer: bool = False
    queries: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind -> (sql, param)


def _fts_query(match: str) -> tuple[str, str]:
    return ("SELECT rowid FROM message_fts WHERE message_fts MATCH ?", match)


def _scan_query(term: str) -> tuple[str, str]:
    return ("SELECT id FROM messages WHERE instr(text, ?) > 0", term)


def make_variants() -> list[Variant]:
    t = QUERY_TERMS
    bigram_q = {
        "cjk2": _fts_query(_bigram_phrase(t["cjk2"])),
        "cjk1": _fts_query(_bigram_phrase(t["cjk1"])),
        "cjk4": _fts_query(_bigram_phrase(t["cjk4"])),
        "en": _fts_query(_bigram_phrase(t["en"])),
    }
    raw_q = {
        "cjk2": _fts_query(_plain_phrase(t["cjk2"])),
        "cjk1": _fts_query(_plain_phrase(t["cjk1"], prefix=True)),
        "cjk4": _fts_query(_plain_phrase(t["cjk4"])),
        "en": _fts_query(_plain_phrase(t["en"])),
    }
    trigram_q = {
        "cjk2": _scan_query(t["cjk2"]),
        "cjk1": _scan_query(t["cjk1"]),
        "cjk4": _fts_query(_plain_phrase(t["cjk4"])),
        "en": _fts_query(_plain_phrase(t["en"])),
    }
    return [
        Variant(
            "a", "ours: contentless_delete, bigram pre-transform",
            "CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1, "
            f'tokenize="{FTS_TOKENIZE}")',
            True, "", "body", queries=bigram_q,
        ),
        Variant(
            "b", "external content (messages_body), bigram pre-transform",
            "CREATE TABLE messages_body(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
            "CREATE VIRTUAL TABLE message_fts USING fts5(body, content='messages_body', "
            f"content_rowid='id', tokenize=\"{FTS_TOKENIZE}\")",
            True, "", "body", extra_body_table=True, queries=bigram_q,
        ),
        Variant(
            "c", "regular FTS5 (stores its content), bigram pre-transform",
            f'CREATE VIRTUAL TABLE message_fts USING fts5(body, tokenize="{FTS_TOKENIZE}")',
            True, "", "body", queries=bigram_q,
        ),
        Variant(
            "d", "Python tokenizer (apsw), contentless_delete, raw text",
            "CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1, "
            "tokenize='py_bigram')",
            True, "", "raw", python_tokenizer=True, queries=raw_q,
        ),
        Variant(
            "e", "plain unicode61, contentless_delete, raw text (not exact)",
            "CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1)",
            False, "CJK runs are single tokens", "raw", queries=raw_q,
        ),
        Variant(
            "f", "trigram, contentless_delete, folded text",
            "CREATE VIRTUAL TABLE message_fts USING fts5(body, content='', contentless_delete=1, "
            "tokenize='trigram')",
            False, "1-2 char terms scan `messages`", "folded", queries=trigram_q,
        ),
    ]


# ---------------------------------------------------------------------------
# Build, size, query
# ---------------------------------------------------------------------------


def connect(path: str, variant: Variant) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA cache_size=-65536")
    if variant.python_tokenizer:
        conn.register_fts5_tokenizer("py_bigram", bigram_tokenizer)
    return conn


@dataclass
class BuildResult:
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time (robust to other load on the machine)
    file_bytes: int
    fts_bytes: int  # FTS shadow tables, plus messages_body for (b)
    msg_bytes: int  # messages and its index


def build(variant: Variant, path: str, corpus: Corpus) -> BuildResult:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = connect(path, variant)
    conn.execute(MESSAGES_DDL)
    conn.execute(variant.ddl)
    cur = conn.cursor()
    execute = cur.execute
    rows = corpus.rows
    feed = variant.feed
    body_table = variant.extra_body_table
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(rows), BATCH):
        execute("BEGIN")
        for row in rows[start : start + BATCH]:
            rid, text = row[0], row[4]
            execute(INSERT_MESSAGE, row)
            if feed == "body":
                body = index_body(text)
            elif feed == "folded":
                body = fold(blank_placeholders(text))
            else:
                body = text
            if body_table:
                execute("INSERT INTO messages_body(id, body) VALUES (?, ?)", (rid, body))
            execute("INSERT INTO message_fts(rowid, body) VALUES (?, ?)", (rid, body))
        execute("COMMIT")
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    fts = msg = 0
    for name, nbytes in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        if name.startswith("message_fts") or name == "messages_body":
            fts += nbytes
        elif name == "messages" or name.startswith("sqlite_autoindex_messages"):
            msg += nbytes
    conn.close()
    size = sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
    return BuildResult(seconds, cpu_seconds, size, fts, msg)


@dataclass
class QueryResult:
    mix_ms: float  # median over runs of the summed mix
    per_query_ms: dict[str, float]
    hits: dict[str, int]


def run_queries(variant: Variant, path: str, runs: int) -> QueryResult:
    conn = connect(path, variant)
    hits = {}
    for kind, (sql, param) in variant.queries.items():  # warm up, count
        hits[kind] = len(conn.execute(sql, (param,)).fetchall())
    per: dict[str, list[float]] = {k: [] for k in variant.queries}
    mixes: list[float] = []
    for _ in range(runs):
        mix = 0.0
        for kind, (sql, param) in variant.queries.items():
            t0 = time.perf_counter()
            conn.execute(sql, (param,)).fetchall()
            dt = time.perf_counter() - t0
            per[kind].append(dt)
            mix += dt
        mixes.append(mix)
    conn.close()
    return QueryResult(
        statistics.median(mixes) * 1000,
        {k: statistics.median(v) * 1000 for k, v in per.items()},
        hits,
    )


def fts_bytes(conn: apsw.Connection) -> int:
    return conn.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'message\\_fts%' ESCAPE '\\'"
    ).fetchone()[0]


def optimize_effect(variant: Variant, path: str) -> tuple[int, int, float]:
    """FTS bytes before and after FTS5 'optimize' (merging the segments that
    incremental ingest leaves), and the seconds it took."""
    conn = connect(path, variant)
    before = fts_bytes(conn)
    t0 = time.perf_counter()
    conn.execute("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
    seconds = time.perf_counter() - t0
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    after = fts_bytes(conn)
    conn.close()
    return before, after, seconds


def oracle(corpus: Corpus) -> dict[str, int]:
    """Messages that truly match each term (the predicate of docs/matching.md):
    CJK terms as substrings of the folded text, the English term as a whole word."""
    texts = [match_text(r[4]) for r in corpus.rows]
    out = {}
    for kind, term in QUERY_TERMS.items():
        if kind == "en":
            pat = re.compile(f"(?<![^\\W_{CJK_CLASS}]){re.escape(term)}(?![^\\W_{CJK_CLASS}])")
            out[kind] = sum(1 for t in texts if pat.search(t))
        else:
            out[kind] = sum(1 for t in texts if term in t)
    return out


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def machine() -> dict[str, str]:
    model, nproc = cpu()
    try:
        import jieba

        jieba_version = jieba.__version__
    except Exception:  # pragma: no cover
        jieba_version = "?"
    return {
        "nproc": str(nproc),
        "cpu": model,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "jieba": jieba_version,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x"


def rates(builds, corpus) -> tuple[dict[str, float], dict[str, float]]:
    """Build MB/s per variant: best of the repeats, by wall clock and by CPU time."""
    mb = corpus.text_bytes / 1e6
    wall = {k: mb / min(b["seconds"]) for k, b in builds.items()}
    cpu = {k: mb / min(b["cpu_seconds"]) for k, b in builds.items()}
    return wall, cpu


def tables(variants, builds, queries, corpus, truth) -> tuple[str, str, str]:
    wall, cpu = rates(builds, corpus)
    a_q = queries["a"]
    a_size = builds["a"]["result"].file_bytes / corpus.text_bytes
    main = [
        "| variant | build MB/s | vs (a) | build MB/s, CPU time | DB bytes / text byte | vs (a) "
        "| FTS side bytes / text byte | query mix, median ms | vs (a) | exact on the mix |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    hits = [
        "| variant | " + " | ".join(QUERY_LABELS[k] for k in QUERY_TERMS) + " |",
        "|---|" + "---:|" * len(QUERY_TERMS),
        "| oracle (true matches) | " + " | ".join(str(truth[k]) for k in QUERY_TERMS) + " |",
    ]
    per = [
        "| variant | " + " | ".join(QUERY_LABELS[k] for k in QUERY_TERMS) + " |",
        "|---|" + "---:|" * len(QUERY_TERMS),
    ]
    for v in variants:
        b, q = builds[v.key], queries[v.key]
        size = b["result"].file_bytes / corpus.text_bytes
        fts = b["result"].fts_bytes / corpus.text_bytes
        exact_n = sum(1 for k in QUERY_TERMS if q.hits[k] == truth[k])
        exact = f"{exact_n}/{len(QUERY_TERMS)}"
        if v.note:
            exact += f" ({v.note})"
        main.append(
            f"| ({v.key}) {v.name} | {wall[v.key]:.2f} | {fmt_ratio(wall[v.key] / wall['a'])} | "
            f"{cpu[v.key]:.2f} | {size:.2f} | {fmt_ratio(size / a_size)} | {fts:.2f} | "
            f"{q.mix_ms:.2f} | {fmt_ratio(q.mix_ms / a_q.mix_ms)} | {exact} |"
        )
        cells = []
        for k in QUERY_TERMS:
            h = q.hits[k]
            mark = "" if h == truth[k] else (" (superset)" if h > truth[k] else " (misses)")
            cells.append(f"{h}{mark}")
        hits.append(f"| ({v.key}) | " + " | ".join(cells) + " |")
        cells = []
        for k in QUERY_TERMS:
            sql = v.queries[k][0]
            cells.append(f"{q.per_query_ms[k]:.2f}" + (" (scan)" if "instr(" in sql else ""))
        per.append(f"| ({v.key}) | " + " | ".join(cells) + " |")
    return "\n".join(main), "\n".join(hits), "\n".join(per)


def python_side(corpus: Corpus, repeat: int) -> list[tuple[str, float]]:
    """MB/s of the Python text work alone (no SQLite), best of `repeat`: what
    bounds the write path before FTS5 sees a token."""
    texts = [r[4] for r in corpus.rows]
    utf8 = [t.encode("utf-8") for t in texts]
    tok = bigram_tokenizer(None, [])  # type: ignore[arg-type]
    doc = apsw.FTS5_TOKENIZE_DOCUMENT

    @apsw.fts5.StringTokenizer
    def with_offsets(con, args):
        # The same tokens with str offsets, which StringTokenizer maps to UTF-8
        # byte offsets: what a tokenizer that supports highlight() must do.
        def inner(text: str, flags: int, locale):
            pattern = _PY_TOKEN_FULL if _MAY_HAVE_EXTRA.search(text) else _PY_TOKEN_FAST
            for m in pattern.finditer(text):
                s, e = m.span()
                w = fold(m.group())
                if m.group(1) is None or len(w) == 1:
                    yield s, e, w
                    continue
                for i in range(len(w) - 1):
                    yield s + i, s + i + 2, w[i : i + 2]
                yield e - 1, e, w[-1]

        return inner

    tok_off = with_offsets(None, [])
    jobs = [
        ("fold (NFKC + casefold) only", lambda: [fold(blank_placeholders(t)) for t in texts]),
        ("(a)/(b)/(c) pre-transform: `index_body`", lambda: [index_body(t) for t in texts]),
        ("(d) tokenizer function, tokens only (as benchmarked)", lambda: [tok(b, doc, None) for b in utf8]),
        ("(d) tokenizer function with UTF-8 offsets (`apsw.fts5.StringTokenizer`)",
         lambda: [list(tok_off(b, doc, None)) for b in utf8]),
    ]
    out = []
    mb = corpus.text_bytes / 1e6
    for label, fn in jobs:
        best = math.inf
        for _ in range(repeat):
            c0 = time.process_time()
            fn()
            best = min(best, time.process_time() - c0)
        out.append((label, mb / best))
    return out


def summary(variants, builds, queries, corpus, truth) -> list[str]:
    """What the numbers say, computed (so that a re-run that changes the picture
    says so)."""
    wall, cpu = rates(builds, corpus)
    size = {v.key: builds[v.key]["result"].file_bytes / corpus.text_bytes for v in variants}
    exact = [v for v in variants if all(queries[v.key].hits[k] == truth[k] for k in QUERY_TERMS)]
    lines = []
    if exact:
        fastest = max(exact, key=lambda v: wall[v.key])
        fastest_cpu = max(exact, key=lambda v: cpu[v.key])
        smallest = min(exact, key=lambda v: size[v.key])
        quickest = min(exact, key=lambda v: queries[v.key].mix_ms)
        lines.append(
            f"Computed summary: exact on the query mix: {', '.join('(' + v.key + ')' for v in exact)}. "
            f"Among them the fastest build is ({fastest.key}) at {wall[fastest.key]:.2f} MB/s "
            f"(by CPU time ({fastest_cpu.key}) at {cpu[fastest_cpu.key]:.2f} MB/s); the smallest database is "
            f"({smallest.key}) at {size[smallest.key]:.2f} bytes per text byte; the quickest query mix is "
            f"({quickest.key}) at {queries[quickest.key].mix_ms:.2f} ms."
        )
    return lines


def render_block(args, variants, builds, queries, corpus, truth, info, total_s, py_side, opt) -> str:
    main, hits, per = tables(variants, builds, queries, corpus, truth)
    sizes = sorted(len(r[4].encode("utf-8")) for r in corpus.rows)
    cmd = "python bench/storage_choice.py " + " ".join(args.argv)
    out = [
        DOC_BEGIN,
        "",
        f"Command: `{cmd.strip()}` (total run {total_s:.0f} s).",
        "",
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['os']}; Python {info['python']}, "
        f"SQLite {info['sqlite']} (apsw {info['apsw']}), jieba {info['jieba']}; "
        f"load average {info['load']} at start, {info['load_end']} at the end.",
        "",
        f"Corpus: seed {corpus.seed}, {corpus.messages:,} messages, {corpus.text_bytes / 1e6:.2f} MB of "
        f"UTF-8 text (1 MB = 10^6 bytes), {100 * corpus.cjk_bytes / corpus.text_bytes:.0f}% of it CJK "
        f"characters; message size median {sizes[len(sizes) // 2]:,} bytes, largest {sizes[-1]:,}. "
        f"Each build is a fresh file, WAL, synchronous=NORMAL, one transaction per {BATCH:,} rows, timed "
        f"from the first insert to the last commit (text transform included); build rates are the best "
        f"of {args.repeat} interleaved builds per variant, by wall clock and by this process's CPU time "
        f"(the latter is unaffected by other work on the machine). Sizes are after a WAL checkpoint. "
        f"Query figures are medians of {args.runs} runs of the mix on a warm connection (candidate "
        f"rowids fetched, no verification).",
        "",
        main,
        "",
        "\"FTS side\" is the FTS5 shadow tables (plus `messages_body` for (b)); the rest of the file is "
        "the `messages` table, which every variant has. \"Exact\" compares the index's candidate count "
        "with the brute-force oracle over the folded text.",
        "",
        "Candidates per query:",
        "",
        hits,
        "",
        "Median ms per query:",
        "",
        per,
        "",
        "Python text work alone (no SQLite), CPU time, best of the repeats:",
        "",
        "| step | MB/s |",
        "|---|---:|",
        *[f"| {label} | {rate:.1f} |" for label, rate in py_side],
        "",
        f"FTS5 `optimize` on (a) after the build: FTS side {opt[0] / corpus.text_bytes:.2f} -> "
        f"{opt[1] / corpus.text_bytes:.2f} bytes per text byte ({100 * (1 - opt[1] / opt[0]):.0f}% smaller), "
        f"in {opt[2]:.2f} s.",
        "",
        *summary(variants, builds, queries, corpus, truth),
        "",
        DOC_END,
    ]
    return "\n".join(out)


DOC_TEMPLATE = """# Storage: how the index keeps its text and tokens

{block}
"""


def write_doc(path: Path, block: str) -> None:
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if DOC_BEGIN in text and DOC_END in text:
            head, rest = text.split(DOC_BEGIN, 1)
            _, tail = rest.split(DOC_END, 1)
            path.write_text(head + block + tail, encoding="utf-8")
            return
        path.write_text(text.rstrip("\n") + "\n\n" + block + "\n", encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DOC_TEMPLATE.format(block=block), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=20.0, help="corpus size in MB of message text (default 20)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5, help="builds per variant, interleaved; the best counts")
    p.add_argument("--runs", type=int, default=31, help="runs of the query mix per variant")
    p.add_argument("--only", default="abcdef", help="variants to run, e.g. 'ad' ((a) is always run)")
    p.add_argument("--doc", default=str(ROOT / "docs" / "storage.md"), help="document to update")
    p.add_argument("--no-doc", action="store_true", help="print only; leave the document alone")
    args = p.parse_args(argv)
    args.argv = argv

    t_start = time.perf_counter()
    info = machine()
    print(f"generating {args.mb:g} MB corpus (seed {args.seed}) ...", flush=True)
    t0 = time.perf_counter()
    corpus = generate_corpus(args.mb, args.seed)
    print(
        f"  {corpus.messages:,} messages, {corpus.text_bytes / 1e6:.2f} MB, "
        f"{100 * corpus.cjk_bytes / corpus.text_bytes:.0f}% CJK by bytes ({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    truth = oracle(corpus)
    n = check_python_tokenizer(corpus)
    print(f"  (d)'s tokenizer gives unicode61's tokens of index_body() on {n:,} texts", flush=True)
    variants = [v for v in make_variants() if v.key == "a" or v.key in args.only]
    builds: dict[str, dict] = {v.key: {"seconds": [], "cpu_seconds": []} for v in variants}
    queries: dict[str, QueryResult] = {}
    with tempfile.TemporaryDirectory(prefix="storage-choice-") as tmp:
        for r in range(args.repeat):
            for v in variants:
                path = os.path.join(tmp, f"{v.key}.db")
                res = build(v, path, corpus)
                builds[v.key]["seconds"].append(res.seconds)
                builds[v.key]["cpu_seconds"].append(res.cpu_seconds)
                builds[v.key]["result"] = res
                print(
                    f"  build {r + 1}/{args.repeat} ({v.key}): {res.seconds:6.2f} s, "
                    f"{corpus.text_bytes / 1e6 / res.seconds:5.2f} MB/s "
                    f"(CPU {corpus.text_bytes / 1e6 / res.cpu_seconds:5.2f}), {res.file_bytes / 1e6:7.1f} MB",
                    flush=True,
                )
        for v in variants:
            queries[v.key] = run_queries(v, os.path.join(tmp, f"{v.key}.db"), args.runs)
        opt = optimize_effect(variants[0], os.path.join(tmp, "a.db"))
    print("  timing the Python text work alone ...", flush=True)
    py_side = python_side(corpus, args.repeat)
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    total_s = time.perf_counter() - t_start
    block = render_block(args, variants, builds, queries, corpus, truth, info, total_s, py_side, opt)
    print()
    print(block.replace(DOC_BEGIN, "").replace(DOC_END, "").strip())
    if not args.no_doc:
        write_doc(Path(args.doc), block)
        print(f"\nwrote {Path(args.doc).relative_to(ROOT) if Path(args.doc).is_relative_to(ROOT) else args.doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
