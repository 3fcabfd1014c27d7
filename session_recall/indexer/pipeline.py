"""Reading logs into batches: the part of indexing that needs no database.

A batch is what one transaction commits: the events of a run of lines, the
skip counts, and the offset and parser state just after its last line. Making
batches (reading, splitting, skipping noise, parsing, projecting, redacting,
rewriting text into index tokens) is pure, so a large sync runs it in a worker
process while the main process writes the previous batches: the two cores of
a small machine each do half of the work, and the one writer stays the only
process that touches the database.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from ..model import MessageEvent
from ..text.redact import Redactor
from . import files as F
from .ingest import prepare
from .sources import Skip, kinds


@dataclass
class Batch:
    events: list
    skips: Counter[str]
    end: int  # offset just after the batch's last line
    state: dict  # the parser's state at `end`
    lines: int
    nbytes: int = 0
    # The signature of the file's bytes up to `end` as they were read (a plain
    # file; None for a .zst): the writer commits the batch only if the file
    # still has them (files.Prefix).
    sig: str | None = None


def batches(path: str, kind: str, offset: int, state: dict, key: bytes, *,
            batch_lines: int, batch_bytes: int, max_bytes: float = float("inf"),
            expect: str | None = None) -> Iterator[Batch]:
    """The batches of `path` after `offset`, stopping after the batch that
    passes `max_bytes` read (a range), or at the last complete line.

    `expect` is the signature of the file's first `offset` bytes as they were
    consumed (a plain file): if the file no longer starts with them, it raises
    files.FileChanged before reading on."""
    parser = kinds()[kind](path, state)
    redactor = Redactor(key)
    parser.redact = lambda text: redactor.redact(text)[0]
    events: list = []
    skips: Counter[str] = Counter()
    start = end = offset
    n_lines = 0
    noise = 0

    prefix = None if F.is_zst(path) else F.Prefix()
    block = b""
    block_start = offset

    def cut() -> Batch:
        nonlocal events, skips, start, n_lines, noise
        if noise:
            skips["noise"] += noise
        for ev in events:
            if isinstance(ev, MessageEvent):
                ev.prepared = prepare(ev, redactor)
        # A deep copy: the parser goes on changing its nested state, and this
        # batch's offset must be saved with the state as it is here.
        sig = None if prefix is None else prefix.digest(block, end - block_start)
        b = Batch(events, skips, end, orjson.loads(orjson.dumps(parser.state)), n_lines, end - start, sig)
        events, skips, start, n_lines, noise = [], Counter(), end, 0, 0
        return b

    # The hot loop. Most lines are noise: the test of Parser.is_noise is
    # inlined for lines without surrounding white space, and noise is counted
    # in a local, so such a line costs a split, a few byte comparisons and
    # one regex search in C.
    indexed_types = parser.indexed_types.search
    feed = parser.feed
    for block in F.read_blocks(path, offset, expect=expect, prefix=prefix):
        block_start = end
        lines = block.split(b"\n")
        lines.pop()  # the empty piece after the block's last newline
        for line in lines:
            end += len(line) + 1
            n_lines += 1
            if (line[:1] == b"{" and line[-1:] == b"}" and b'"type"' in line
                    and indexed_types(line) is None):
                noise += 1
            else:
                try:
                    events.extend(feed(line))
                except Skip as s:
                    skips[s.reason] += 1
                if parser.notes:
                    skips.update(parser.notes)
                    parser.notes.clear()
            if n_lines >= batch_lines or end - start >= batch_bytes:
                yield cut()
                if end - offset >= max_bytes:
                    return
        if prefix is not None:
            prefix.advance(block)
            block, block_start = b"", end
    if end != start or events or skips or noise:
        yield cut()


def read_range(path: str, kind: str, offset: int, state: dict, key: bytes, batch_lines: int,
               batch_bytes: int, max_bytes: float, expect: str | None = None) -> tuple[list[Batch], bool]:
    """One range of batches, for a worker process; and whether the file ended.
    `expect`: the signature of the bytes before `offset`, as `batches` takes it
    (a range that follows another starts where that one's last batch ended)."""
    out = list(batches(path, kind, offset, state, key, batch_lines=batch_lines, batch_bytes=batch_bytes,
                       max_bytes=max_bytes, expect=expect))
    consumed = (out[-1].end - offset) if out else 0
    return out, consumed < max_bytes


# A large sync reads in a worker process; below this many bytes to read the
# process start (a spawn: no fork of a process that holds a database
# connection and maybe watcher threads) costs more than it saves.
WORKER_MIN_BYTES = 32 << 20
RANGE_BYTES = 8 << 20
# First ranges of the next files queued on the worker while one is committed,
# up to this much log (at least one file): one full range, or a dozen small
# files, whose round trips through the pool would otherwise leave both
# processes waiting on each other. Parsed, a range takes about 2.7 times its
# size in memory (the bench's mixed corpus) until the writer commits it.
LOOKAHEAD_BYTES = RANGE_BYTES


def worker_pool() -> cf.ProcessPoolExecutor:
    return cf.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
