"""What hostile input costs the indexer: each worst case at n and 2n bytes.

    python -m bench.hostile_cost [--mb N] [--json OUT.json] [--only NAME,...]

For every case, builds an input of about N MB (default 4) and of 2N, runs the
part of the indexer the case aims at on each, and prints the seconds of CPU
for both and their ratio. A ratio near 2 is linear (doubling the input
doubles the time); a quadratic path shows near 4. CPU time, not wall clock:
the machine is shared. The cases:

- pipeline_* run indexer.pipeline.batches (read, split, noise test, parse,
  project, redact, tokenize; no database) over a canonical log whose lines
  are the case: noise lines with many "type" keys and spaces, many short
  garbage lines, one long line with many NUL runs, runs of blank lines
  between short lines, one line longer than the bound (read in bounded
  memory), a .zst of newlines and a .zst of short lines (both stopped by the
  bounds: the cost is that of the bound, whatever the size), lines that
  repeat one bad line, tool results whose JSON text is nested past orjson's
  depth limit, tool results of many tiny CJK runs.
- text_* run text.tokens.index_body_form (fold, NFKC, tokens) on one text:
  alternating combining marks (quadratic in CPython's NFKC before fold.py
  orders long runs first), alternating CJK and Latin, many distinct symbols,
  full-width forms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson
import zstandard

from session_recall.indexer import files as F
from session_recall.indexer import pipeline as P
from session_recall.text.tokens import index_body_form

SID = "bench-hostile"


def _head() -> bytes:
    return orjson.dumps({"type": "session", "session_id": SID, "cwd": "/home/ada/bench",
                         "started_at": "2026-12-01T09:00:00Z"}) + b"\n"


def _message(i: int, text: str, role: str = "user") -> bytes:
    return orjson.dumps({"type": "message", "session_id": SID, "message_id": f"m{i}", "turn_id": "t",
                         "role": role, "ts": "2026-12-01T09:00:01Z", "text": text}) + b"\n"


def _repeat(unit: bytes, size: int) -> bytes:
    return unit * max(1, size // len(unit))


# --- inputs: name -> (size in bytes -> (file name, bytes)) --------------------------


def noise_types(size: int) -> tuple[str, bytes]:
    line = b'{' + b'"type"   :   "progress", ' * 200 + b'"x": 1}\n'
    return "noise.jsonl", _head() + _repeat(line, size)


def short_garbage(size: int) -> tuple[str, bytes]:
    # Distinct lines, so that nothing is memoised: each is parsed.
    out = bytearray(_head())
    i = 0
    while len(out) < size:
        out += b"x%x\n" % i
        i += 1
    return "garbage.jsonl", bytes(out)


def repeated_bad(size: int) -> tuple[str, bytes]:
    return "repeated.jsonl", _head() + _repeat(b"{}\n", size)


def nul_runs(size: int) -> tuple[str, bytes]:
    # Lines of 60 KB, each 20,000 NUL runs between distinct pieces.
    out = bytearray(_head())
    i = 0
    while len(out) < size:
        out += b"".join(b"\x00\x00%x" % (i + j) for j in range(20_000)) + b"\n"
        i += 20_000
    return "nul.jsonl", bytes(out) + _message(1, "after")


def blank_runs(size: int) -> tuple[str, bytes]:
    return "blank.jsonl", _head() + _repeat(b"x\n" + b"\n" * 62, size)


def long_line(size: int) -> tuple[str, bytes]:
    # Over the bound (bench limit: 1 MiB), never held whole.
    return "long.jsonl", _head() + _message(0, "x" * size) + _message(1, "after")


def zst_newlines(size: int) -> tuple[str, bytes]:
    return "nl.jsonl.zst", zstandard.ZstdCompressor().compress(_head() + b"\n" * (size * 64))


def zst_short_lines(size: int) -> tuple[str, bytes]:
    return "short.jsonl.zst", zstandard.ZstdCompressor().compress(_head() + _repeat(b"{}\n", size * 64))


def deep_text(size: int) -> tuple[str, bytes]:
    depth = 2000
    text = '{"k":[' * depth + '"leaf"' + "]}" * depth
    out = bytearray(_head())
    i = 0
    while len(out) < size:
        out += _message(i, text, role="tool_result")
        i += 1
    return "deep.jsonl", bytes(out)


def cjk_confetti(size: int) -> tuple[str, bytes]:
    text = "中a" * 4000
    out = bytearray(_head())
    i = 0
    while len(out) < size:
        out += _message(i, text, role="assistant")
        i += 1
    return "cjk.jsonl", bytes(out)


PIPELINE = {
    "pipeline_noise_types": noise_types,
    "pipeline_short_garbage": short_garbage,
    "pipeline_repeated_bad": repeated_bad,
    "pipeline_nul_runs": nul_runs,
    "pipeline_blank_runs": blank_runs,
    "pipeline_long_line": long_line,
    "pipeline_zst_newlines": zst_newlines,
    "pipeline_zst_short_lines": zst_short_lines,
    "pipeline_deep_text": deep_text,
    "pipeline_cjk_confetti": cjk_confetti,
}

TEXT = {
    "text_combining_marks": lambda n: "a" + "\u0301\u0316" * (n // 4),
    "text_cjk_latin": lambda n: "中a" * (n // 4),
    "text_symbols": lambda n: "".join(chr(0x2200 + (i % 256)) for i in range(n // 3)),
    "text_fullwidth": lambda n: "ＡＢＣ，。" * (n // 15),
}

BENCH_LIMITS = F.Limits(max_line_bytes=1 << 20)


def _cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run_pipeline(make, size: int, folder: Path) -> float:
    name, data = make(size)
    path = folder / name
    path.write_bytes(data)

    def go() -> None:
        for _ in P.batches(str(path), "canonical", 0, {}, b"", batch_lines=20_000, batch_bytes=16 << 20,
                           limits=BENCH_LIMITS):
            pass

    try:
        return _cpu(go)
    finally:
        path.unlink()


def run_text(make, size: int) -> float:
    text = make(size)
    return _cpu(lambda: index_body_form(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=4.0, help="size of the smaller input, MB (default 4)")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()
    n = int(args.mb * 1_000_000)
    only = set(args.only.split(",")) if args.only else None
    index_body_form("é" * 5000)  # builds fold's class of marks outside the timings
    rows = []
    print(f"{'case':28} {'n MB':>6} {'t(n) s':>8} {'t(2n) s':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, make in [*PIPELINE.items(), *TEXT.items()]:
            if only and name not in only:
                continue
            size = n if name in PIPELINE else max(1, n // 8)  # the text cases are one message each
            if name in PIPELINE:
                run_pipeline(make, size // 8, folder)  # imports, compiled patterns, caches
                t1, t2 = run_pipeline(make, size, folder), run_pipeline(make, 2 * size, folder)
            else:
                t1, t2 = run_text(make, size), run_text(make, 2 * size)
            ratio = t2 / t1 if t1 > 0 else float("nan")
            rows.append({"case": name, "mb": size / 1e6, "t_n_s": round(t1, 4), "t_2n_s": round(t2, 4),
                         "ratio": round(ratio, 2)})
            print(f"{name:28} {size / 1e6:6.2f} {t1:8.3f} {t2:8.3f} {ratio:6.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
