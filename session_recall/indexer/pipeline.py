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
import logging
import multiprocessing
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from ..model import MessageEvent
from ..text.redact import Redactor
from . import files as F
from .ingest import prepare
from .sources import Skip, kinds

log = logging.getLogger(__name__)

# A run of NUL bytes in a line (a file allocated before it was written, the
# hole a crash leaves) separates lines: what follows it is read on its own.
_NUL_RUN = re.compile(rb"\x00+")
# What a piece cut off by NUL bytes fails with when it is the damage itself,
# not a line: counted once, as the run's `nul_bytes`.
_DAMAGE = frozenset({"blank", "malformed_json", "invalid_utf8", "nul_bytes", "not_object"})
# Runs of empty lines at least this long are counted without visiting each
# (a .zst of newlines inflates to any number of them).
_EMPTY_RUN = b"\n" * 64
_NEWLINES = re.compile(rb"\n+")


def _segments(block: bytes):
    """(segment, empty lines after it) covering `block`: each segment ends
    with a newline, and the long runs of empty lines between them are
    found with a substring search and a regex over the run alone, in C."""
    pos = 0
    while True:
        i = block.find(_EMPTY_RUN, pos)
        if i == -1:
            yield (block if pos == 0 else block[pos:]), 0
            return
        run = _NEWLINES.match(block, i)
        assert run is not None  # block[i:] starts with _EMPTY_RUN
        run_end = run.end()
        yield block[pos:i + 1], run_end - i - 1
        pos = run_end
        if pos == len(block):
            return


# Reasons a line is skipped for that depend on its bytes alone (load_object,
# is_noise), never on the parser's state: a repeat of such a line is counted
# without being parsed again. Repeats are what a compressed bomb is made of.
_PURE = frozenset({"noise", "malformed_json", "invalid_utf8", "not_object", "missing_type", "too_deep"})
_MEMO_LINE = 512  # bytes; longer lines are rarely repeated and cost their parse anyway
_MEMO_SIZE = 1024


def feed_line(parser, line: bytes, skips: Counter[str], max_line: int, memo: dict | None = None) -> list:
    """The events of one line that is not plain noise, or [] with the line
    counted under its reason. Nothing a line holds can stop the file: an
    exception of the parser (a bug, or an input it did not foresee) is
    counted as `parse_error` and logged, and the next line is read."""
    if len(line) > max_line:
        skips["too_large"] += 1
        return []
    if b"\x00" in line:
        events: list = []
        skips["nul_bytes"] += 1
        for piece in _NUL_RUN.split(line):
            if not piece:
                continue
            if memo is not None and piece in memo:
                if memo[piece] not in _DAMAGE:
                    skips[memo[piece]] += 1
                continue
            events.extend(_feed(parser, piece, skips, _DAMAGE, memo))
        return events
    return _feed(parser, line, skips, frozenset(), memo)


def _feed(parser, line: bytes, skips: Counter[str], silent: frozenset[str], memo: dict | None = None) -> list:
    try:
        return parser.feed(line)
    except Skip as s:
        if s.reason not in silent:
            skips[s.reason] += 1
        if memo is not None and s.reason in _PURE and len(line) <= _MEMO_LINE:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            memo[line] = s.reason
    except RecursionError:
        skips["too_deep"] += 1
    except MemoryError:
        skips["too_large"] += 1
    except Exception:
        log.warning("a line of %s could not be parsed; counted as parse_error", parser.path, exc_info=True)
        skips["parse_error"] += 1
    finally:
        if parser.notes:
            skips.update(parser.notes)
            parser.notes.clear()
    return []


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
            expect: str | None = None, limits: F.Limits = F.DEFAULT_LIMITS) -> Iterator[Batch]:
    """The batches of `path` after `offset`, stopping after the batch that
    passes `max_bytes` read (a range), or at the last complete line.

    `expect` is the signature of the file's first `offset` bytes as they were
    consumed (a plain file): if the file no longer starts with them, it raises
    files.FileChanged before reading on.

    Nothing in the bytes stops a file: a line that cannot be read is counted
    and skipped (feed_line), an over-long one is passed over unread, and a
    `.zst` that is damaged or passes its limits ends with the lines before
    the damage, the damage counted (`corrupt_zst`, `zst_limit`)."""
    parser = kinds()[kind](path, state)
    redactor = Redactor(key)
    parser.redact = lambda text: redactor.redact(text)[0]
    events: list = []
    skips: Counter[str] = Counter()
    start = end = offset
    n_lines = 0
    noise = 0
    blank = 0

    prefix = None if F.is_zst(path) else F.Prefix()
    block = b""
    block_start = offset

    def cut() -> Batch:
        nonlocal events, skips, start, n_lines, noise, blank
        if noise:
            skips["noise"] += noise
        if blank:
            skips["blank"] += blank
        kept = []
        for ev in events:
            if isinstance(ev, MessageEvent):
                try:
                    ev.prepared = prepare(ev, redactor)
                except RecursionError:
                    skips["too_deep"] += 1
                    continue
                except Exception:
                    log.warning("a message of %s could not be prepared; counted as parse_error", path,
                                exc_info=True)
                    skips["parse_error"] += 1
                    continue
            kept.append(ev)
        # A deep copy: the parser goes on changing its nested state, and this
        # batch's offset must be saved with the state as it is here.
        sig = None if prefix is None else prefix.digest(block, end - block_start)
        b = Batch(kept, skips, end, orjson.loads(orjson.dumps(parser.state)), n_lines, end - start, sig)
        events, skips, start, n_lines, noise, blank = [], Counter(), end, 0, 0, 0
        return b

    if F.is_document(path):
        # One JSON document, rewritten whole when it changes (the sync reads
        # it again from the start after any change): one line, all of it.
        if offset:
            return
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limits.max_line_bytes:
                skips["too_large"] += 1
                end = size
                yield Batch([], skips, end, orjson.loads(orjson.dumps(parser.state)), 1, end,
                            F.prefix_hash(path, end))
                return
            block = fh.read()
        end = len(block)
        n_lines = 1
        if block.strip():
            events.extend(feed_line(parser, block, skips, limits.max_line_bytes))
        else:
            blank += 1
        yield cut()
        return

    # The hot loop. Most lines are noise: the test of Parser.is_noise is
    # inlined for lines without surrounding white space, and noise is counted
    # in a local, so such a line costs a split, a few byte comparisons and
    # one regex search in C.
    indexed_types = parser.indexed_types.search
    max_line = limits.max_line_bytes
    memo: dict[bytes, str] = {}  # short lines skipped for a _PURE reason
    try:
        for piece in F.read_blocks(path, offset, expect=expect, prefix=prefix, limits=limits):
            block_start = end
            if isinstance(piece, F.Overlong):  # never held whole: counted from its length
                end += piece.length
                n_lines += 1
                skips["too_large"] += 1
                if prefix is not None:
                    prefix.skip(piece)
                block, block_start = b"", end
            else:
                block = piece
                for segment, empties in _segments(block):
                    lines = segment.split(b"\n")
                    lines.pop()  # the empty piece after the segment's last newline
                    for line in lines:
                        end += len(line) + 1
                        n_lines += 1
                        if (line[:1] == b"{" and line[-1:] == b"}" and b'"type"' in line
                                and indexed_types(line) is None):
                            noise += 1
                        elif not line:
                            blank += 1
                        elif line in memo:
                            skips[memo[line]] += 1
                        else:
                            got = feed_line(parser, line, skips, max_line, memo)
                            if got:
                                events.extend(got)
                        if n_lines >= batch_lines or end - start >= batch_bytes:
                            yield cut()
                            if end - offset >= max_bytes:
                                return
                    if empties:  # a long run of empty lines: counted, not visited
                        end += empties
                        n_lines += empties
                        blank += empties
            if n_lines >= batch_lines or end - start >= batch_bytes:
                yield cut()
                if end - offset >= max_bytes:
                    return
            if prefix is not None:
                prefix.advance(block)
                block, block_start = b"", end
    except F.Damaged as d:
        # The file changed while it was decompressed (its identity is no
        # longer the one the read was decided on): not damage, a rewrite.
        if expect is not None and F.is_zst(path) and _zst_changed(path, expect):
            raise F.FileChanged(F.REWRITTEN) from None
        skips[d.reason] += 1
    if end != start or events or skips or noise or blank:
        yield cut()


def _zst_changed(path: str, ident: str) -> bool:
    try:
        return F.file_identity(path, os.stat(path).st_size) != ident
    except OSError:
        return True


def read_range(path: str, kind: str, offset: int, state: dict, key: bytes, batch_lines: int,
               batch_bytes: int, max_bytes: float, expect: str | None = None,
               limits: F.Limits = F.DEFAULT_LIMITS) -> tuple[list[Batch], bool]:
    """One range of batches, for a worker process; and whether the file ended.
    `expect`: the signature of the bytes before `offset`, as `batches` takes it
    (a range that follows another starts where that one's last batch ended)."""
    out = list(batches(path, kind, offset, state, key, batch_lines=batch_lines, batch_bytes=batch_bytes,
                       max_bytes=max_bytes, expect=expect, limits=limits))
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


# How often the worker looks whether the process that started it is alive.
PARENT_POLL_S = 0.5


def _exit_with_parent(parent: int) -> None:
    """In the worker: exit once the process that started it is gone. A parent
    killed with SIGKILL closes nothing for it, and the worker holds both ends
    of its own pipes, so it would wait for its next task, or to hand back a
    range, forever (tens of MB, one more per crash of an indexer)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def worker_pool() -> cf.ProcessPoolExecutor:
    return cf.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                  initializer=_exit_with_parent, initargs=(os.getpid(),))
