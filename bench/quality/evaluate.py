"""Recall quality on labelled data: session-recall against three baselines.

    python -m bench.quality.evaluate [--set cmrc|cranfield|mixed|all] [--limit-questions N] [--json OUT]

For each set (bench/quality/datasets.py says how each is built): write the
sessions as canonical logs into a temporary folder, index them through the
normal pipeline (``Index.open(db).sync([folder])``), then ask every question
the way an agent does, ``Index.recall(query="", question=..., all_projects=True,
limit=10)``, and the baselines (bench/quality/baselines.py) on the same
messages. Reported per system:

- session level: hit@1, hit@5 and MRR (of the first result, counted in result
  positions, whose session is a gold session; 0 when none is in the 10);
- message level: the same for the first result whose anchor (the matched
  message) is a gold message; for graded sets also nDCG@10 over the anchors
  (gain 5 - Cranfield code, so a "complete answer" gains 4);
- latency: median and 95th percentile wall time of one question, ms.

The data are read from ``../shared/data`` beside the project root; when they
are absent the run says so and exits with status 0 (nothing to measure) unless
--require-data is given.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.quality import datasets as D
from bench.quality.baselines import Baselines
from session_recall import Index
from session_recall.query import keywords as K
from session_recall.query.parse import QUESTION_MAX_CHARS
from session_recall.query.rank import Ranking

LIMIT = 10
SYSTEMS = ("ours", "porter", "bigram", "peer", "unicode61", "scan")


def ranks(ranked: list[tuple[str, str]], q: D.Question) -> tuple[int | None, int | None]:
    """1-based positions of the first gold session and the first gold message."""
    rs = next((i for i, (s, _) in enumerate(ranked, 1) if s in q.gold_sessions), None)
    rm = next((i for i, (_, m) in enumerate(ranked, 1) if m in q.gold_messages), None)
    return rs, rm


def ndcg(ranked: list[tuple[str, str]], q: D.Question, k: int = LIMIT) -> float:
    seen: set[str] = set()
    dcg = 0.0
    for i, (_, m) in enumerate(ranked[:k], 1):
        if m in seen:
            continue
        seen.add(m)
        dcg += (2 ** q.grades.get(m, 0) - 1) / math.log2(i + 1)
    ideal = sorted(q.grades.values(), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / math.log2(i + 1) for i, g in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def summarize(rows: list[dict]) -> dict:
    """hit@1, hit@5 and MRR at both levels (message level over the questions
    that have message-level gold), nDCG where graded, latency."""
    n = len(rows)
    out: dict = {"questions": n}
    for level in ("session", "message"):
        rk = [r[level] for r in rows if level == "session" or r.get("message_gold", True)]
        m = len(rk) or 1
        out[level] = {
            "hit@1": sum(1 for x in rk if x == 1) / m,
            "hit@5": sum(1 for x in rk if x is not None and x <= 5) / m,
            "mrr": sum(1 / x for x in rk if x is not None) / m,
        }
        if level == "message" and len(rk) < n:
            out[level]["questions"] = len(rk)
    graded_rows = [r["ndcg"] for r in rows if r.get("ndcg") is not None]
    if graded_rows:  # over the questions that have grades (in mixed: the Cranfield half)
        out["message"]["ndcg@10"] = statistics.fmean(graded_rows)
    lat = sorted(r["ms"] for r in rows)
    out["latency_ms"] = {"median": statistics.median(lat), "p99": lat[min(n - 1, int(0.99 * n))]}
    return out


def ours(ix: Index, question: str, query: str = "") -> list[tuple[str, str]]:
    """A question (question=), or with `query` a keyword item (query=, its terms ANDed)."""
    env = ix.recall(query=query, question=None if query else question, all_projects=True, limit=LIMIT)
    out = []
    for r in env.results:
        anchor = next((m.message_id for m in r.passage.messages if m.is_anchor), "")
        out.append((r.session_id, anchor))
    return out


def prepare(name: str, workdir: Path) -> tuple[D.Dataset, Index, int, float]:
    """Write the set's logs and index them through the normal pipeline."""
    ds = D.SETS[name]()
    logs = workdir / name / "logs"
    db = workdir / name / "recall.db"
    n_messages = ds.write_logs(logs)
    config = workdir / "empty.toml"  # the defaults, whatever the user's own config says
    config.write_text("")
    t0 = time.perf_counter()
    ix = Index.open(db, config=config)
    ix.sync([str(logs)], kind="canonical")
    sources = getattr(ds, "sources", [])  # real logs, indexed where they lie with their kinds (coding set)
    for path, kind in sources:
        ix.sync([str(path)], kind=kind)
    index_s = time.perf_counter() - t0
    indexed = ix.status()["messages"]
    if indexed != n_messages and not sources:
        raise SystemExit(f"{name}: wrote {n_messages} messages but the index holds {indexed}")
    return ds, ix, indexed, index_s


def evaluate(ix: Index, questions: list[D.Question], systems: tuple[str, ...],
             base: Baselines | None) -> dict[str, list[dict]]:
    """Per system, one row per question: ranks, nDCG, latency."""
    per_system: dict[str, list[dict]] = {s: [] for s in systems}
    for q in questions:
        for system in systems:
            t = time.perf_counter()
            ranked = ours(ix, q.text, getattr(q, "query", "")) if system == "ours" else getattr(base, system)(q.text, LIMIT)
            ms = (time.perf_counter() - t) * 1000
            rs, rm = ranks(ranked, q)
            per_system[system].append({"qid": q.qid, "script": q.script, "slice": q.slice, "session": rs,
                                       "message": rm, "message_gold": bool(q.gold_messages), "ms": ms,
                                       "ndcg": ndcg(ranked, q) if q.grades else None, "top": ranked[:3]})
    return per_system


def report(per_system: dict[str, list[dict]]) -> dict:
    out = {}
    for system, rows in per_system.items():
        out[system] = summarize(rows)
        scripts = sorted({r["script"] for r in rows})
        if len(scripts) > 1:
            out[system]["by_script"] = {sc: summarize([r for r in rows if r["script"] == sc]) for sc in scripts}
        slices = sorted({r["slice"] for r in rows if r["slice"]})
        if slices:
            out[system]["by_slice"] = {sl: summarize([r for r in rows if r["slice"] == sl]) for sl in slices}
    return out


def run_set(name: str, limit_questions: int | None, systems: tuple[str, ...], workdir: Path,
            verbose: bool) -> dict:
    ds, ix, n_messages, index_s = prepare(name, workdir)
    questions = ds.questions[:limit_questions] if limit_questions else ds.questions
    try:
        base = Baselines(ix.store.reader) if set(systems) - {"ours"} else None
        per_system = evaluate(ix, questions, systems, base)
    finally:
        ix.close()
    result = {"set": name, "notes": ds.notes, "sessions": len(ds.sessions), "messages": n_messages,
              "questions": len(questions), "index_s": round(index_s, 2), "systems": report(per_system)}
    if verbose:
        result["per_question"] = per_system
    return result


def settings_snapshot(ranking: Ranking | None = None) -> dict:
    """The ranking values and keyword choices in force, for the report."""
    snap = (ranking or Ranking()).snapshot() | {"QUESTION_MAX_CHARS": QUESTION_MAX_CHARS}
    snap.update({f"keywords.{n}": getattr(K, n) for n in dir(K)
                 if n.isupper() and isinstance(getattr(K, n), (int, float, bool, str))})
    return snap


def _row(system: str, s: dict, graded: bool) -> str:
    cells = [system] + [f"{s[lvl][m]:.3f}" for lvl in ("session", "message") for m in ("hit@1", "hit@5", "mrr")]
    if graded:
        cells.append(f"{s['message'].get('ndcg@10', 0.0):.3f}")
    cells += [f"{s['latency_ms']['median']:.1f}", f"{s['latency_ms']['p99']:.1f}"]
    return "| " + " | ".join(cells) + " |"


def leads(systems: dict) -> str:
    """ours minus the best other system, session hit@1 and MRR."""
    if "ours" not in systems or len(systems) < 2:
        return ""
    o = systems["ours"]["session"]
    others = {k: v["session"] for k, v in systems.items() if k != "ours"}
    best = max(others, key=lambda k: (others[k]["hit@1"], others[k]["mrr"]))
    return (f"lead of ours over the best baseline ({best}): hit@1 {o['hit@1'] - others[best]['hit@1']:+.3f}, "
            f"MRR {o['mrr'] - others[best]['mrr']:+.3f}")


def table(results: list[dict]) -> str:
    lines = []
    for res in results:
        lines.append(f"\n{res['set']}: {res['sessions']} sessions, {res['messages']} messages, "
                     f"{res['questions']} questions, "
                     f"indexed in {res['index_s']} s ({res['notes']})")
        graded = any("ndcg@10" in s["message"] for s in res["systems"].values())
        head = ("system", "s.hit@1", "s.hit@5", "s.MRR", "m.hit@1", "m.hit@5", "m.MRR") + (
            ("nDCG@10",) if graded else ()) + ("median ms", "p99 ms")
        slices = sorted({sl for s in res["systems"].values() for sl in s.get("by_slice", {})})
        for sl in [None, *slices]:
            per = {k: (v if sl is None else v["by_slice"][sl]) for k, v in res["systems"].items()}
            if sl is not None:
                lines.append(f"\n{res['set']} {sl} ({next(iter(per.values()))['questions']} questions)")
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "---|" * len(head))
            lines += [_row(system, s, graded) for system, s in per.items()]
            if lead := leads(per):
                lines.append(lead)
    return "\n".join(lines)


ALL = ("cmrc", "cranfield", "mixed", "c3", "dream", "coding")
CONVERSATIONS = ("c3", "dream", "coding")


def set_names(choice: str) -> list[str]:
    return list(ALL if choice == "all" else CONVERSATIONS if choice == "conversations" else (choice,))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="all", choices=[*D.SETS, "all", "conversations"])
    ap.add_argument("--limit-questions", type=int, default=None, help="the first N questions of each set")
    ap.add_argument("--json", type=Path, default=None, help="write the full report here")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    ap.add_argument("--workdir", type=Path, default=None, help="keep logs and databases here (default: temporary)")
    ap.add_argument("--verbose", action="store_true", help="add per-question rows and ours' misses to the JSON")
    ap.add_argument("--require-data", action="store_true", help="fail (status 2) when the data are absent")
    args = ap.parse_args(argv)
    names = set_names(args.set)
    systems = tuple(s for s in args.systems.split(",") if s)
    if unknown := set(systems) - set(SYSTEMS):
        ap.error(f"unknown systems: {', '.join(sorted(unknown))}")
    try:
        with tempfile.TemporaryDirectory(prefix="recall-quality-") as tmp:
            workdir = args.workdir or Path(tmp)
            results = [run_set(n, args.limit_questions, systems, workdir, args.verbose) for n in names]
    except D.DataMissing as e:
        print(f"skipped: {e}", file=sys.stderr)
        return 2 if args.require_data else 0
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps({"limit": LIMIT, "settings": settings_snapshot(), "results": results},
                                           option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
