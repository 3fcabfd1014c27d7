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

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import zstandard

CHUNK = 1 << 20
LINES_CHUNK = 64 << 10
HEAD_SAMPLE = 64 << 10
TAIL_SAMPLE = 4 << 10


def is_log(name: str) -> bool:
    return name.endswith(".jsonl") or name.endswith(".jsonl.zst")


def is_zst(path: str) -> bool:
    return path.endswith(".zst")


def discover(root: str, problems: Counter[str]) -> list[str]:
    """Every log file under root (or root itself), as absolute paths, sorted.

    Symlinked folders are followed once (a loop is counted, not followed); an
    unreadable folder is counted and passed over; where both `x.jsonl` and
    `x.jsonl.zst` exist the plain file wins, being the one still written to."""
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


def _chunks(path: str, offset: int, expect: str | None = None, prefix: Prefix | None = None,
            size: int = CHUNK) -> Iterator[bytes]:
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
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            skip = offset
            while skip:
                got = reader.read(min(skip, size))
                if not got:
                    return
                skip -= len(got)
        else:
            fh.seek(offset)
            reader = fh
        while chunk := reader.read(size):
            yield chunk


def read_blocks(path: str, offset: int, *, expect: str | None = None,
                prefix: Prefix | None = None, size: int = CHUNK) -> Iterator[bytes]:
    """The bytes after `offset` in blocks that each end with a newline (about
    `size` bytes; a line of any length arrives whole, in one block). A last
    line without its newline is not returned: it waits for it.

    Given `prefix` (a plain file), it is set, when the file is opened, to the
    samples of the bytes before `offset` (the caller advances it over the
    blocks); given also `expect`, the signature of those bytes as an earlier
    read consumed them, a file whose prefix is no longer that raises
    FileChanged before anything is read."""
    pending: list[bytes] = []
    for chunk in _chunks(path, offset, expect, prefix, size):
        nl = chunk.rfind(b"\n")
        if nl == -1:
            pending.append(chunk)
            continue
        if pending:
            pending.append(chunk[: nl + 1])
            yield b"".join(pending)
            pending.clear()
        else:
            yield chunk[: nl + 1] if nl + 1 < len(chunk) else chunk
        if nl + 1 < len(chunk):
            pending.append(chunk[nl + 1 :])


def read_lines(path: str, offset: int) -> Iterator[tuple[bytes, int]]:
    """(line without newline, offset just past its newline) for each complete
    line after `offset`. For a file's first lines (its kind): it reads in
    small chunks, so a caller that stops early has not read a whole MiB."""
    pos = offset
    for block in read_blocks(path, offset, size=LINES_CHUNK):
        lines = block.split(b"\n")
        lines.pop()  # the empty piece after the block's last newline
        for line in lines:
            pos += len(line) + 1
            yield line, pos
