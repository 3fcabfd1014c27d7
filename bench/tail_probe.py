"""What the design changes named for the query tail could buy, measured on an
index a bench run kept (issue 21: "document frequencies kept by the index",
a ranking that stops early, the role weight without a join).

    python -m bench.run --size-mb 1000 --profile mixed --json bench/out/1000-mixed.json --keep
    python -m bench.tail_probe bench/out/1000-mixed.json

Three tables, each statement warm, median of up to --reps runs:

1. Every query of the mix: its FTS5 expression's `matches`; `df walk`, what
   FTS5's bm25 spends counting the rows of each phrase for its document
   frequencies (a count of each phrase's rows, summed: the part that
   frequencies kept by the index would save); `ranked`, FTS5's best
   `first` rows by plain bm25 (64 for a term, 4 x 200 for a question, the
   pages recall asks for), which pays that walk once and scores every
   match.
2. Every question: a pruning that stops early (MaxScore). A message holding
   only keywords whose upper bounds (idf x (k1 + 1), a bm25 term's most)
   add up to less than the k-th best score can never enter the best k, so
   only the rows of the other keywords need scoring. For k = 100 (the pool
   a question re-scores) and k = 800 (the ranked page recall reads): the
   threshold, the keywords left out and the rows still to score.
3. Every term query whose first window is a window of the plan (more
   candidates than Ranking.plan_window): the window's ranking statement
   split into FTS5's bm25 over the window alone and the same statement
   joined to `messages_rank` (the role weight, the session) and to
   `sessions` (the scope), as recall runs it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import apsw

from bench.common import kept_index, label, median_ms
from session_recall.query.parse import QueryTokenizer, fts_phrase, fts_query
from session_recall.query.rank import K1, Ranking, bm25_sql, idf, register
from session_recall.rows import one

ROLE = ("(CASE m.role WHEN 'user' THEN 1.0 WHEN 'assistant' THEN 1.0 WHEN 'tool_call' THEN 0.8 "
        "ELSE 0.5 END)")
POOLS = (100, 800)


def count(conn: apsw.Connection, expr: str) -> int:
    return one(conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?", (expr,)))[0]


def kth_score(conn: apsw.Connection, expr: str, k: int) -> float:
    """The k-th best plain bm25 of `expr`, as a positive number (0 when it
    has fewer than k matches: nothing can be pruned)."""
    scores: list[float] = [b for (b,) in conn.execute(
        "SELECT bm25(message_fts) FROM message_fts WHERE message_fts MATCH ? ORDER BY 1 LIMIT ?", (expr, k))]
    return -scores[-1] if len(scores) == k else 0.0


def pruned(idfs: list[float], threshold: float) -> list[int]:
    """The phrases MaxScore leaves out: the smallest upper bounds whose sum
    stays below the threshold."""
    left, bound = [], 0.0
    for i in sorted(range(len(idfs)), key=lambda i: idfs[i]):
        if bound + idfs[i] * (K1 + 1) >= threshold:
            break
        bound += idfs[i] * (K1 + 1)
        left.append(i)
    return left


def probe(db: Path, queries: list[dict], reps: int) -> tuple[list[dict], list[dict], list[dict]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    tokenizer = QueryTokenizer(conn)
    ranking = Ranking()
    register(conn)  # recall_bm25: the same formula as a Python FTS5 function, given its idfs
    n_rows = one(conn.execute("SELECT count(*) FROM message_fts_docsize"))[0]
    tokens = one(conn.execute("SELECT coalesce(sum(n_tokens), 0) FROM sessions"))[0]
    every, questions, windows = [], [], []
    for q in queries:
        if q["query"]:
            terms, first = tokenizer.parse(q["query"]), ranking.fts_first_page
        else:
            terms = tokenizer.question_terms(q["question"], [])[0]
            first = ranking.ranked_page * ranking.question_first_page
        terms = [t for t in terms if t.tokens.tokens]
        expr = fts_query(terms, any_term=not q["query"])
        if not expr:
            continue
        phrases = [fts_phrase(t.tokens) for t in terms]
        row: dict = {"query": label(q), "matches": count(conn, expr)}
        row["walk_ms"] = median_ms(lambda: [count(conn, p) for p in phrases], reps)
        row["ranked_ms"] = median_ms(lambda: conn.execute(
            "SELECT rowid, bm25(message_fts) FROM message_fts WHERE message_fts MATCH ? ORDER BY 2 LIMIT ?",
            (expr, first)).fetchall(), reps)
        every.append(row)
        if not q["query"]:
            dfs = [count(conn, p) for p in phrases]
            idfs = [idf(n_rows, d) for d in dfs]
            qrow: dict = {"query": label(q), "matches": row["matches"],
                    "keywords": ", ".join(f"{p} {d:,}" for p, d in zip(phrases, dfs))}
            for k in POOLS:
                theta = kth_score(conn, expr, k)
                left = pruned(idfs, theta)
                kept = [p for i, p in enumerate(phrases) if i not in left]
                qrow[k] = (theta, [phrases[i] for i in left], count(conn, " OR ".join(kept)) if left
                           else row["matches"])
            questions.append(qrow)
            continue
        lo, n = one(conn.execute("SELECT min(rowid), count(*) FROM (SELECT rowid FROM message_fts "
                                 "WHERE message_fts MATCH ? ORDER BY rowid DESC LIMIT ?)", (expr, ranking.plan_window)))
        if len(terms) != 1 or n < ranking.plan_window:
            continue
        where = "WHERE message_fts MATCH ? AND message_fts.rowid >= ?"
        joins = ("", "JOIN messages m INDEXED BY messages_rank ON m.id = message_fts.rowid",
                 "JOIN messages m INDEXED BY messages_rank ON m.id = message_fts.rowid "
                 "JOIN sessions s ON s.id = m.session")
        wrow: dict = {"query": label(q), "window": n}
        own = bm25_sql(tokens / n_rows, [idf(n_rows, count(conn, phrases[0]))])
        for name, join, bm25 in zip(("alone", "messages", "sessions", "own"), (*joins, ""),
                                    (*["bm25(message_fts)"] * 3, own)):
            score = bm25 + (f" * {ROLE}" if join else "")
            order = "score" + (", m.ts DESC, m.id DESC" if join else "")
            sql = (f"SELECT message_fts.rowid, {score} AS score FROM message_fts {join} {where} "
                   f"ORDER BY {order} LIMIT {ranking.fts_first_page}")
            wrow[name] = median_ms(lambda sql=sql: conn.execute(sql, (expr, lo)).fetchall(), reps)
        windows.append(wrow)
    return every, questions, windows


def render(every: list[dict], questions: list[dict], windows: list[dict]) -> str:
    out = ["| query | matches | df walk ms | ranked ms | walk / ranked |", "|---|---:|---:|---:|---:|"]
    for r in every:
        # (bm25 is never called, nor its walk made, for an expression with no match)
        share = f"{r['walk_ms'] / r['ranked_ms']:.0%}" if r["matches"] else "-"
        out.append(f"| {r['query']} | {r['matches']:,} | {r['walk_ms']:.2f} | {r['ranked_ms']:.2f} | {share} |")
    out += ["", "| question | keywords (rows) | matches | " + " | ".join(
        f"best {k}: threshold, left out, rows to score" for k in POOLS) + " |", "|---|---|---:|" + "---|" * len(POOLS)]
    for r in questions:
        cells = [f"{r[k][0]:.2f}, {' '.join(r[k][1]) or '-'}, {r[k][2]:,} ({r[k][2] / r['matches']:.0%})"
                 for k in POOLS]
        out.append(f"| {r['query']} | {r['keywords']} | {r['matches']:,} | " + " | ".join(cells) + " |")
    out += ["", "| windowed term | window | FTS5 bm25 alone ms | joined to messages_rank ms | and to sessions ms "
            "| recall_bm25 (Python) alone ms |", "|---|---:|---:|---:|---:|---:|"]
    for r in windows:
        out.append(f"| {r['query']} | {r['window']:,} | {r['alone']:.2f} | {r['messages']:.2f} | {r['sessions']:.2f} "
                   f"| {r['own']:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="What the tail's design changes could buy, on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `python -m bench.run ... --keep` run")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--corpus", type=Path, help="the run's corpus, when it was outside the project")
    args = ap.parse_args(argv)
    res, db = kept_index(args.run_json, args.corpus)
    if db is None:
        return 2
    print(render(*probe(db, res["queries"], args.reps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
