"""Finding log files and reading them byte-exactly from an offset.

Offsets count bytes of the log as written: of the file for plain `.jsonl`, of
the decompressed stream for `.jsonl.zst`. A line is consumed only with its
newline; a last line still being written waits for it.

A log can change while it is read (truncated, written again, replaced). The
signature of a consumed prefix is therefore kept from the bytes as they were
read (`Prefix`), not read back from the file afterwards: the writer compares it
with the file before it commits, and a reader that starts at an offset first
checks that the prefix is still the one an earlier read consumed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import zstandard

CHUNK = 1 << 20
LINES_CHUNK = 64 << 10
HEAD_SAMPLE = 64 << 10
TAIL_SAMPLE = 4 << 10
# Compressed input is fed to the decompressor this many bytes at a time: zstd
# turns a few bytes into up to 128 KiB (an RLE block), so one call makes at
# most about 32 MiB however the file was built, and a bomb is stopped within
# that much of its bound. Larger pieces save little (measured: 1 KiB costs
# about 20 % more than 16 KiB on a 10 MB archive).
ZST_PIECE = 1 << 10


@dataclass(frozen=True)
class Limits:
    """Bounds on what one log may cost to read (docs/indexing.md, "Bounds").

    A line longer than `max_line_bytes` is counted as `too_large` and skipped
    without being held in memory whole. A `.zst` stops being decompressed
    (counted as `zst_limit`, the lines before indexed) when its output passes
    `zst_max_bytes`, or passes `zst_ratio_after` bytes and `zst_max_ratio`
    times the compressed bytes read so far, or passes `zst_lines_after`
    lines and `zst_max_line_ratio` lines per compressed byte: a line costs
    the reader a fixed amount of work whatever its length, and a bomb of
    short lines (`{}` repeated) is dear long before it is large."""

    max_line_bytes: int = 64 << 20
    zst_max_bytes: int = 4 << 30
    zst_max_ratio: int = 100
    zst_ratio_after: int = 64 << 20
    zst_max_line_ratio: int = 8
    zst_lines_after: int = 1 << 20

    @classmethod
    def of(cls, settings) -> Limits:
        """The limits a config.Settings names (its fields of the same names)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


DEFAULT_LIMITS = Limits()


class Damaged(Exception):
    """A `.zst` that cannot be read on (`corrupt_zst`: not a valid stream,
    or cut off inside a frame) or may not be (`zst_limit`); what was
    decompressed before it is good."""

    def __init__(self, reason: str):
        super().__init__(reason)  # the only argument: it pickles across processes
        self.reason = reason


class Overlong:
    """A line longer than Limits.max_line_bytes, in place of its bytes:
    its length (with its newline) and the samples of it that a Prefix keeps."""

    __slots__ = ("head", "length", "tail")

    def __init__(self, length: int, head: bytes, tail: bytes):
        self.length = length
        self.head = head
        self.tail = tail


@functools.cache
def _claimed() -> re.Pattern[str] | None:
    """The other file names some kind gives its logs (Parser.names)."""
    from .sources import kinds  # (the registry imports the parsers, which import nothing of this module)

    names = [p.names for p in kinds().values() if p.names]
    return re.compile("|".join(f"(?:{n})" for n in names)) if names else None


def is_log(name: str) -> bool:
    if name.endswith(".jsonl") or name.endswith(".jsonl.zst"):
        return True
    claimed = _claimed()
    return claimed is not None and claimed.fullmatch(os.path.basename(name)) is not None


def is_database(path: str) -> bool:
    """A log that is an SQLite database (OpenCode's): read by its kind's
    `read_database`, never by lines."""
    return path.endswith(".db")


def database_stat(path: str) -> tuple[int, int, str | None]:
    """(size, mtime_ns, published) of a database with its write-ahead log: a
    database in WAL mode changes its `-wal` file first, the main file only at
    a checkpoint. `published` names the commits its readers can see: a digest
    of the WAL index's header (in the first 96 bytes of `-shm`, two copies),
    which the writer updates when a transaction commits, after the
    transaction's frames are written and synced. A writer held in between
    (a slow sync, a busy machine) has moved the `-wal` file's size and time
    while a reader still sees the commit before, and the header's update
    comes through shared memory, with no file event and no change to either
    file's size or time. None with an empty or no `-wal` file, or no
    `-shm` file (not in WAL mode, or not open)."""
    st = os.stat(path)
    size, mtime = st.st_size, st.st_mtime_ns
    try:
        wal = os.stat(path + "-wal")
    except OSError:
        return size, mtime, None
    # (An empty one holds nothing: a reader opening the database creates it.)
    if not wal.st_size:
        return size, mtime, None
    size, mtime = size + wal.st_size, max(mtime, wal.st_mtime_ns)
    try:
        with open(path + "-shm", "rb") as fh:
            header = fh.read(96)
    except OSError:
        return size, mtime, None
    # Of each copy, what names the commits (mxFrame, nPage, the last frame's
    # checksum, the salts), not iChange or isInit, which a reader's recovery
    # of the same frames rewrites.
    return size, mtime, hashlib.blake2b(header[16:40] + header[64:88], digest_size=8).hexdigest()


def is_document(path: str) -> bool:
    """A log that is one JSON document (`*.json`), rewritten whole when it
    changes: read whole, as one line, and again whole after any change."""
    return path.endswith(".json")


def is_zst(path: str) -> bool:
    return path.endswith(".zst")


def discover(root: str, problems: Counter[str], links: list[tuple[str, str]] | None = None) -> list[str]:
    """Every log file under root (or root itself), as absolute paths, sorted.

    Symlinked folders are followed once (a loop is counted, not followed); an
    unreadable folder is counted and passed over; where both `x.jsonl` and
    `x.jsonl.zst` exist the plain file wins, being the one still written to.
    Given `links`, each symlinked folder followed and each symlinked log is
    added to it as (its path through the link, its real path): the watcher
    watches those too (inotify sees a write only where the file really is)."""
    root_path = Path(root).expanduser().absolute()
    if root_path.is_file():
        return [str(root_path)]  # a file named explicitly is read whatever its name
    found: list[str] = []
    seen_dirs: set[tuple[int, int]] = set()

    def onerror(err: OSError) -> None:
        problems["unreadable_dir"] += 1

    for dirpath, dirnames, filenames in os.walk(root_path, onerror=onerror, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            problems["unreadable_dir"] += 1
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen_dirs:
            problems["symlink_loop"] += 1
            dirnames[:] = []
            continue
        seen_dirs.add((st.st_dev, st.st_ino))
        dirnames.sort()
        if links is not None:
            for name in dirnames:
                full = os.path.join(dirpath, name)
                if os.path.islink(full):
                    links.append((full, os.path.realpath(full)))
        names = set(filenames)
        for name in sorted(filenames):
            if not is_log(name):
                continue
            if name.endswith(".zst") and name[: -len(".zst")] in names:
                continue
            full = os.path.join(dirpath, name)
            try:
                if not os.path.isfile(full):  # a dangling link or a link loop
                    problems["unreadable_file"] += 1
                    continue
            except OSError:
                problems["unreadable_file"] += 1
                continue
            if links is not None and os.path.islink(full):
                links.append((full, os.path.realpath(full)))
            found.append(full)
    return found


# Why a log is no longer what was read of it (counted in `source_problems`).
TRUNCATED = "truncated_while_read"
REWRITTEN = "rewritten_while_read"


class FileChanged(Exception):
    """A log changed under its reader: it is not what was read of it."""

    def __init__(self, reason: str):
        super().__init__(reason)  # the only argument: it pickles across processes
        self.reason = reason


def _blake(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
    return h.hexdigest()


def prefix_hash(path: str, offset: int) -> str:
    """A signature of the consumed prefix of a plain file: its first 64 KiB and
    the 4 KiB before `offset`. Reading two samples keeps the check O(1) per
    file per sync however large the file grows; a rewrite that keeps both the
    head and the last consumed line byte-identical goes unnoticed (documented)."""
    with open(path, "rb") as fh:
        head = fh.read(min(offset, HEAD_SAMPLE))
        start = max(0, offset - TAIL_SAMPLE)
        fh.seek(start)
        tail = fh.read(offset - start)
    return _blake(str(offset).encode(), head, tail)


class Prefix:
    """The signature of a consumed prefix (what `prefix_hash` reads back from
    the file), kept from the bytes as they are read: the first HEAD_SAMPLE
    bytes, the last TAIL_SAMPLE bytes, and the offset."""

    __slots__ = ("head", "offset", "tail")

    def __init__(self, offset: int = 0, head: bytes = b"", tail: bytes = b""):
        self.offset = offset
        self.head = head
        self.tail = tail

    @classmethod
    def read(cls, fd: int, offset: int) -> Prefix:
        """The samples of the first `offset` bytes of an open file (positional
        reads: the file's position is left as it is). A file shorter than
        `offset` gives samples whose signature is not the prefix's."""
        head = os.pread(fd, min(offset, HEAD_SAMPLE), 0)
        start = max(0, offset - TAIL_SAMPLE)
        return cls(offset, head, os.pread(fd, offset - start, start))

    def digest(self, data: bytes = b"", upto: int = 0) -> str:
        """The signature at `offset + upto`, had `data[:upto]` (the bytes just
        after `offset`) been consumed too."""
        head = self.head
        if upto and len(head) < HEAD_SAMPLE:
            head += data[:min(upto, HEAD_SAMPLE - len(head))]
        tail = data[max(0, upto - TAIL_SAMPLE):upto]
        if len(tail) < TAIL_SAMPLE:
            tail = (self.tail + tail)[-TAIL_SAMPLE:]
        return _blake(str(self.offset + upto).encode(), head, tail)

    def skip(self, line: Overlong) -> None:
        """An over-long line after `offset` is consumed (from its samples)."""
        if len(self.head) < HEAD_SAMPLE:
            self.head += line.head[:HEAD_SAMPLE - len(self.head)]
        self.tail = (self.tail + line.tail)[-TAIL_SAMPLE:]
        self.offset += line.length

    def advance(self, data: bytes) -> None:
        """`data`, the bytes just after `offset`, are consumed."""
        if len(self.head) < HEAD_SAMPLE:
            self.head += data[:HEAD_SAMPLE - len(self.head)]
        self.tail = (self.tail + data[-TAIL_SAMPLE:])[-TAIL_SAMPLE:]
        self.offset += len(data)


def file_identity(path: str, size: int) -> str:
    """A signature of a whole compressed file: size, head and tail."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_SAMPLE)
        fh.seek(max(0, size - HEAD_SAMPLE))
        tail = fh.read()
    return _blake(str(size).encode(), head, tail)


def _within(data: bytes, out: int, lines: int, compressed: int, limits: Limits) -> int:
    """How many bytes of `data`, decompressed after `out` bytes and `lines`
    newlines from `compressed` bytes of input, the limits allow."""
    keep = min(limits.zst_max_bytes, max(limits.zst_ratio_after, limits.zst_max_ratio * compressed)) - out
    keep = max(0, min(len(data), keep))
    cap = max(limits.zst_lines_after, limits.zst_max_line_ratio * compressed) - lines
    if data.count(b"\n", 0, keep) > cap:
        # The longest prefix with at most `cap` newlines: a binary search of
        # counts in C, not a visit of each line.
        lo, hi = 0, keep
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if data.count(b"\n", 0, mid) <= cap:
                lo = mid
            else:
                hi = mid - 1
        keep = lo
    return keep


def _zst_output(fh, size: int, limits: Limits) -> Iterator[bytes]:
    """The decompressed bytes of a `.zst` (all its frames), in pieces of
    about `size`. Raises Damaged where the stream is not valid, ends inside
    a frame, or passes the limits; every byte before that point is yielded
    first."""
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    in_frame = False  # input given to the current frame, which has not ended
    compressed = out = lines = 0
    held: list[bytes] = []
    n_held = 0
    problem = None
    while problem is None:
        piece = fh.read(ZST_PIECE)
        if not piece:
            if in_frame:
                problem = "corrupt_zst"  # cut off inside a frame
            break
        compressed += len(piece)
        while piece:
            try:
                data = dobj.decompress(piece)
            except zstandard.ZstdError:
                problem = "corrupt_zst"
                break
            in_frame = True
            piece = b""
            if dobj.eof:  # a frame ended; what follows is the next frame's
                piece = dobj.unused_data
                dobj = dctx.decompressobj()
                in_frame = False
            if not data:
                continue
            keep = _within(data, out, lines, compressed, limits)
            if keep < len(data):
                held.append(data[:keep])  # what the limits allow of it
                problem = "zst_limit"
                break
            out += len(data)
            lines += data.count(b"\n")
            held.append(data)
            n_held += len(data)
            if n_held >= size:
                yield b"".join(held)
                held.clear()
                n_held = 0
    if held:
        yield b"".join(held)
    if problem is not None:
        raise Damaged(problem)


def _chunks(path: str, offset: int, expect: str | None = None, prefix: Prefix | None = None,
            size: int = CHUNK, limits: Limits = DEFAULT_LIMITS) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        if prefix is not None and not is_zst(path):
            # The samples of what was consumed before `offset`, through the
            # file now open: if they are not what was consumed, what follows
            # is not its continuation.
            start = Prefix.read(fh.fileno(), offset)
            if expect is not None and offset and start.digest() != expect:
                raise FileChanged(TRUNCATED if os.fstat(fh.fileno()).st_size < offset else REWRITTEN)
            prefix.offset, prefix.head, prefix.tail = start.offset, start.head, start.tail
        if is_zst(path):
            skip = offset  # a stream cannot seek: what was read before is decompressed again
            for chunk in _zst_output(fh, size, limits):
                if skip >= len(chunk):
                    skip -= len(chunk)
                    continue
                yield chunk[skip:] if skip else chunk
                skip = 0
            return
        fh.seek(offset)
        while chunk := fh.read(size):
            yield chunk


def read_blocks(path: str, offset: int, *, expect: str | None = None,
                prefix: Prefix | None = None, size: int = CHUNK,
                limits: Limits = DEFAULT_LIMITS) -> Iterator[bytes | Overlong]:
    """The bytes after `offset` in blocks that each end with a newline (about
    `size` bytes; a line of any length up to `limits.max_line_bytes` arrives
    whole, in one block). A longer line arrives as an Overlong in its place,
    having never been held in memory whole. A last line without its newline
    is not returned: it waits for it.

    Given `prefix` (a plain file), it is set, when the file is opened, to the
    samples of the bytes before `offset` (the caller advances it over the
    blocks); given also `expect`, the signature of those bytes as an earlier
    read consumed them, a file whose prefix is no longer that raises
    FileChanged before anything is read. A `.zst` that cannot be read to its
    end raises files.Damaged after the blocks before the damage."""
    max_line = limits.max_line_bytes
    pending: list[bytes] = []  # the start of a line, not yet ended
    n_pending = 0
    # An over-long line being passed over: its length so far and samples.
    long_len, long_head, long_tail = -1, b"", b""
    for chunk in _chunks(path, offset, expect, prefix, size, limits):
        if long_len >= 0:
            nl = chunk.find(b"\n")
            part = chunk if nl == -1 else chunk[: nl + 1]
            long_len += len(part)
            if len(long_head) < HEAD_SAMPLE:
                long_head += part[: HEAD_SAMPLE - len(long_head)]
            long_tail = (long_tail + part[-TAIL_SAMPLE:])[-TAIL_SAMPLE:]
            if nl == -1:
                continue
            yield Overlong(long_len, long_head, long_tail)
            long_len, long_head, long_tail = -1, b"", b""
            chunk = chunk[nl + 1:]
            if not chunk:
                continue
        nl = chunk.rfind(b"\n")
        if nl == -1:
            pending.append(chunk)
            n_pending += len(chunk)
            if n_pending > max_line:
                head = b"".join(pending)
                long_len, long_head, long_tail = n_pending, head[:HEAD_SAMPLE], head[-TAIL_SAMPLE:]
                pending.clear()
                n_pending = 0
            continue
        if pending:
            first = chunk.find(b"\n")
            if n_pending + first + 1 > max_line:
                head = b"".join(pending) + chunk[: first + 1]
                yield Overlong(len(head), head[:HEAD_SAMPLE], head[-TAIL_SAMPLE:])
                del head
                pending.clear()
                n_pending = 0
                if first < nl:
                    yield chunk[first + 1: nl + 1]
            else:
                pending.append(chunk[: nl + 1])
                yield b"".join(pending)
                pending.clear()
                n_pending = 0
        else:
            yield chunk[: nl + 1] if nl + 1 < len(chunk) else chunk
        if nl + 1 < len(chunk):
            pending.append(chunk[nl + 1 :])
            n_pending += len(chunk) - nl - 1


def read_lines(path: str, offset: int) -> Iterator[tuple[bytes, int]]:
    """(line without newline, offset just past its newline) for each complete
    line after `offset`. For a file's first lines (its kind): it reads in
    small chunks, so a caller that stops early has not read a whole MiB. An
    over-long line is passed over; a damaged `.zst` raises Damaged after the
    lines before the damage."""
    pos = offset
    for block in read_blocks(path, offset, size=LINES_CHUNK):
        if isinstance(block, Overlong):
            pos += block.length
            continue
        lines = block.split(b"\n")
        lines.pop()  # the empty piece after the block's last newline
        for line in lines:
            pos += len(line) + 1
            yield line, pos
