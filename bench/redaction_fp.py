"""The redactor's speed against a base revision, and its false-positive share.

    python -m bench.redaction_fp [--base main] [--corpus-mb 4] [--dense-mb 1] [--long-mb 10] [--reps 3]

Side by side, in MB/s of message text, the redactor of `--base` (read with
`git show BASE:session_recall/text/redact.py` into a temporary module) and
this tree's, on:

- (a) real transcripts: the shared Claude Code and Codex samples
  (`../shared/data` beside the repository, `--shared` to change), each line's
  visible text as the indexer projects it; and the bench corpus
  (bench/corpus.py, profile mixed, `--corpus-mb`), each message's text;
- (b) a synthetic worst case dense with trigger words
  (`password token key secret auth = : "` ...), at its size and twice it;
- (c) one line of `--long-mb` MB with no newline (corpus text joined), at its
  size and twice it.

For (b) and (c) the seconds at both sizes are printed: linear time means
the second is about twice the first.

The false-positive share is the share of whitespace-separated words of the
shared transcripts and of the bench corpus that the redactor changes (the
corpus has no secret in it; the transcripts have a few placeholders such as
`apiKey: 'proxy-handled'`, counted as false positives too).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from bench import corpus as C
from bench.common import ROOT
from session_recall.indexer.project import project, visible_text
from session_recall.text import redact as current

DENSE_UNIT = 'password token key secret auth = : " api_key=x "token": '


def base_module(ref: str) -> types.ModuleType:
    """The redactor module as it is at git revision `ref`."""
    src = subprocess.run(["git", "show", f"{ref}:session_recall/text/redact.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("from .fold import", "from session_recall.text.fold import")
    mod = types.ModuleType(f"redact_{ref}")
    sys.modules[mod.__name__] = mod  # (dataclasses look their module up)
    exec(compile(src, f"{ref}:redact.py", "exec"), mod.__dict__)  # noqa: S102 (the project's own file at a revision)
    return mod


def transcript_texts(shared: Path) -> list[str]:
    out = []
    for kind in ("claude-code", "codex"):
        for f in sorted((shared / kind).rglob("*.jsonl")):
            for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    out.append(visible_text(line))
    return out


def corpus_texts(mb: float, work: Path) -> list[str]:
    c, _ = C.ensure(C.params_for("mixed", mb), work / f"corpus-{mb}")
    out = []
    for f in sorted(c.root.rglob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if obj.get("type") in ("message", "message_delta"):
                text = project(obj["role"], obj.get("text", ""), obj.get("tool_name"))
                if text:
                    out.append(text)
    return out


def mb(texts: list[str]) -> float:
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6


def seconds(redact, texts: list[str], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for x in texts:
            redact(x)
        best = min(best, time.perf_counter() - t)
    return best


def fp_share(redact, texts: list[str]) -> tuple[float, int, int]:
    """(share, words changed, words) of whitespace-separated words."""
    changed = words = 0
    for x in texts:
        before = x.split()
        after = set(redact(x)[0].split())
        words += len(before)
        changed += sum(1 for w in before if w not in after)
    return (changed / words if words else 0.0), changed, words


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="git revision to compare with (default main)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--dense-mb", type=float, default=1.0)
    ap.add_argument("--long-mb", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    key = b"k" * 32
    base = base_module(args.base).Redactor(key).redact
    new = current.Redactor(key).redact
    with tempfile.TemporaryDirectory() as tmp:
        cases: dict[str, list[str]] = {}
        if args.shared.is_dir():
            cases["transcripts"] = transcript_texts(args.shared)
        if args.corpus_mb > 0:
            cases["corpus"] = corpus_texts(args.corpus_mb, Path(tmp))
    figures: dict[str, dict] = {}
    print(f"| case | MB | {args.base} MB/s | this MB/s | slower by |")
    print("|---|---|---|---|---|")
    for name, texts in cases.items():
        size = mb(texts)
        a, b = seconds(base, texts, args.reps), seconds(new, texts, args.reps)
        figures[name] = {"mb": size, "base_mb_s": size / a, "mb_s": size / b, "ratio": b / a}
        print(f"| {name} | {size:.2f} | {size / a:.2f} | {size / b:.2f} | {b / a:.2f}x |")
    filler = " ".join(cases.get("corpus") or cases.get("transcripts") or ["plain words"]).replace("\n", " ")
    scaling = {
        "dense": lambda n: DENSE_UNIT * max(1, int(n * 1e6 / len(DENSE_UNIT))),
        "long_line": lambda n: (filler * (1 + int(n * 1e6 / max(1, len(filler)))))[: int(n * 1e6)],
    }
    for name, make in scaling.items():
        n = args.dense_mb if name == "dense" else args.long_mb
        row = {}
        for label, size in (("1x", n), ("2x", 2 * n)):
            text = [make(size)]
            a, b = seconds(base, text, 1), seconds(new, text, max(1, min(3, args.reps)))
            row[label] = {"mb": mb(text), "base_s": a, "s": b}
            print(f"| {name} {label} | {mb(text):.2f} | {mb(text) / a:.2f} | {mb(text) / b:.2f} | {b / a:.2f}x |")
        row["doubling"] = row["2x"]["s"] / row["1x"]["s"]
        figures[name] = row
    print()
    for name in ("dense", "long_line"):
        print(f"{name}: twice the input took {figures[name]['doubling']:.2f}x the time (linear: about 2)")
    for name, texts in cases.items():
        share, changed, words = fp_share(new, texts)
        base_share = fp_share(base, texts)[0]
        figures[name]["fp_share"] = share
        figures[name]["base_fp_share"] = base_share
        print(f"false positives, {name}: {changed} of {words} words changed ({share:.4%}; {args.base}: {base_share:.4%})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
