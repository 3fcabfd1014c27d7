"""Where a recall's time goes, query by query, on an index a bench run kept.

    python -m bench.run --size-mb 250 --profile mixed --json bench/out/250-mixed.json --keep
    python -m bench.query_profile bench/out/250-mixed.json

For each query of the run's mix (warm, median of up to --reps runs, fewer
for a slow one, as in run.py); a question is asked for its keywords, any of
them, as recall asks FTS5 for them:

- `matches`: messages whose index tokens match (what FTS5 must score);
- `fts5 alone`: FTS5 scoring every match and keeping the best 64 (400 for a
  question) (`ORDER BY bm25 LIMIT 64` on the FTS5 table, no join;
  `--first-page`): the floor of a ranked FTS5 query;
- `ranking`: the candidates recall read (as many as its diagnostics count),
  through the statements it ran for them: its first page (the best matches
  by plain bm25, joined with `messages` and `sessions` for the role weight,
  the scope and the tie breaks), and the rest of the matches if it read past
  what that page proves;
- `recall`: the whole `Index.recall(..., all_projects=True, limit=5)`; what it
  spends beyond the ranking is verification, the passages and the envelope.

A second table figures the query targets of issue 5 (p50, p99, the ratio
to ripgrep) from the `fts5 alone` column beside the `recall` one: any index
that ranks with FTS5's bm25 pays at least the first, so where it misses a
target, no work on recall's side of it can meet that target. The ripgrep
times are the run's own (its JSON).

It reads the database in the run's work folder (`recall.db` beside the corpus).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from bench.common import kept_index, label, median_ms, weighted_percentile
from session_recall import Index
from session_recall.query.parse import fts_query
from session_recall.query.rank import Ranking
from session_recall.query.retrieve import Run


def profile(db: Path, queries: list[dict], reps: int, ranking: Ranking) -> list[dict]:
    out = []
    with Index.open(str(db)) as ix:
        ix.engine.ranking = ranking
        engine, conn = ix.engine, ix.store.reader  # the connection the engine reads on
        for q in queries:
            if q["query"]:
                terms, any_term, first = engine.tokenizer.parse(q["query"]), False, ranking.fts_first_page
            else:  # a question: its keywords, any of them, as recall asks for them
                terms = engine.tokenizer.question_terms(q["question"], [])[0]
                any_term, first = True, ranking.question_first_page
            expr = fts_query(terms, any_term)
            if not expr:
                continue
            row = {"category": q["category"], "query": label(q), "term": bool(q["query"]), "rg_ms": q.get("rg_ms")}
            row["matches"] = conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?",
                                          (expr,)).fetchone()[0]
            row["fts5_ms"] = median_ms(lambda: conn.execute(
                "SELECT rowid, bm25(message_fts) AS b FROM message_fts WHERE message_fts MATCH ? "
                "ORDER BY b LIMIT ?", (expr, first or -1)).fetchall(), reps)

            def ask():
                return ix.recall(q["query"], question=q["question"], all_projects=True, limit=5)

            read = max(1, ask().diagnostics.candidates)
            row["ranking_ms"] = median_ms(lambda: list(itertools.islice(
                engine.retriever.fts(expr, "", [], Run(), first=first), read)), reps)
            row["recall_ms"] = median_ms(ask, reps)
            out.append(row)
    return out


def render(rows: list[dict]) -> str:
    lines = ["| category | query | matches | fts5 alone ms | ranking ms | recall ms | ranking / recall |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        share = r["ranking_ms"] / r["recall_ms"] if r["recall_ms"] else 0
        lines.append(f"| {r['category']} | {r['query']} | {r['matches']:,} | {r['fts5_ms']:.2f} | "
                     f"{r['ranking_ms']:.2f} | {r['recall_ms']:.2f} | {share:.0%} |")
    return "\n".join(lines)


def render_floor(rows: list[dict]) -> str:
    """The query targets figured from FTS5 alone beside recall, over the same
    queries: how close to its floor recall is, and whether the floor itself
    meets the target. The percentiles are over per-query medians (the p99 of
    25 queries is the slowest one's median), not over every sample as in
    run.py, whose p99 therefore comes out a little higher."""
    def pct(key: str, p: float) -> float:
        return weighted_percentile([[r[key]] for r in rows], p)

    terms = [r for r in rows if r["term"]]
    grep = [r for r in terms if r["rg_ms"]]  # none where the run had no ripgrep
    rg = sum(r["rg_ms"] for r in grep)

    def rg_ratio(key: str) -> str:
        ours = sum(r[key] for r in grep)
        return f"{rg / ours:.1f}x" if grep and ours else "-"

    return "\n".join([
        f"| over these {len(rows)} queries (per-query medians) | fts5 alone | recall | target |",
        "|---|---:|---:|---:|",
        f"| p50 | {pct('fts5_ms', 50):.2f} ms | {pct('recall_ms', 50):.2f} ms | ≤ 2 ms |",
        f"| p99 | {pct('fts5_ms', 99):.2f} ms | {pct('recall_ms', 99):.2f} ms | ≤ 20 ms |",
        f"| ripgrep's time over it, the {len(terms)} term queries summed | {rg_ratio('fts5_ms')} | "
        f"{rg_ratio('recall_ms')} | ≥ 50x |",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Per-query split of recall's time on a kept bench index.")
    ap.add_argument("run_json", type=Path, help="the JSON of a `python -m bench.run ... --keep` run")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-page", type=int, default=Ranking().fts_first_page,
                    help=f"recall's first FTS5 page (default {Ranking().fts_first_page}; 0 reads every candidate in "
                         "one sorted query, as recall did before the first page)")
    ap.add_argument("--corpus", type=Path, help="the run's corpus, when it was outside the project")
    args = ap.parse_args(argv)
    ranking = Ranking(fts_first_page=args.first_page)
    res, db = kept_index(args.run_json, args.corpus)
    if db is None:
        return 2
    rows = profile(db, res["queries"], args.reps, ranking)
    print(render(rows))
    print()
    print(render_floor(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
