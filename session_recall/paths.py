"""Paths as the gates compare them (contract §6), shared by the indexer (which
normalises recorded cwds once, at ingest), the configuration (which resolves
the allow-, deny- and pin lists once, when it is read) and the gates.

Three rules, written down in docs/recall.md:

- a recorded cwd is normalised lexically (absolute, `.` and `..` removed,
  doubled and trailing slashes removed) and never resolved through symlinks:
  a link that appears later at a recorded cwd changes nothing;
- a list entry is taken in two spellings, as written (lexically normalised)
  and resolved through the links that exist when the configuration is read;
  re-pointing a link later changes nothing for a reader that has it;
- paths compare in Unicode NFC, by whole components, case-sensitively, except
  that a deny entry also covers every case twin (it is compared casefolded),
  so that no spelling of a denied folder gets past it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass


def lexical(path: str) -> str:
    """`path` made absolute (against the process's directory when relative) and
    normalised without touching the file system: no `.`, `..`, doubled or
    trailing slash. `//a` (which POSIX lets a system read specially) is `/a`."""
    norm = os.path.normpath(os.path.abspath(path))
    return "/" + norm.lstrip("/") if norm.startswith("//") else norm


def recorded(cwd: str) -> str:
    """A session's cwd as the index stores it: lexical when absolute, as
    written otherwise (a relative cwd belongs to no project, see gates)."""
    return lexical(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else cwd


def resolved(path: str) -> str:
    """Lexical, then through the symlinks that exist now. A path no file
    system can hold (one with a NUL character) is only lexical."""
    norm = lexical(path)
    if "\x00" in norm:
        return norm
    try:
        return os.path.realpath(norm)
    except (OSError, ValueError):
        return norm


def process_cwd() -> str:
    """The directory this process runs in, as the shell that started it
    spells it: `$PWD` when it names that directory (a user in `~/ln`, a link,
    keeps that spelling, which os.getcwd() resolves away), else os.getcwd()."""
    here = os.getcwd()
    pwd = os.environ.get("PWD")
    if pwd and os.path.isabs(pwd) and pwd != here:
        try:
            if os.path.samefile(pwd, here):
                return pwd
        except (OSError, ValueError):
            pass
    return here


def through_links(cwd: str) -> str | None:
    """A recorded cwd resolved through the symlinks that exist now, when that
    differs from it (else None; None for a cwd that is not absolute). Taken
    once, when a session is first indexed, and kept: the lists test it
    beside the cwd as recorded (gates.cwd_permitted)."""
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return None
    r = resolved(cwd)
    return r if r != cwd else None


def key(path: str) -> str:
    """The form paths compare in: NFC, so that a name typed in NFD (as macOS
    hands some of them out) is the same name."""
    return unicodedata.normalize("NFC", path)


def folded(path: str) -> str:
    """The form deny entries compare in: NFC and casefolded."""
    return key(path).casefold()


def under(path: str, root: str) -> bool:
    """`path` is `root` or inside it, by whole components (both in one form)."""
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def spellings(entry: str) -> tuple[str, ...]:
    """A configured path in both spellings, as written and resolved, in NFC:
    `~` expanded, made absolute, lexically normalised."""
    written = lexical(os.path.expanduser(entry))
    return tuple(dict.fromkeys(key(p) for p in (written, resolved(written))))


@dataclass(frozen=True)
class PathRules:
    """The allow-, deny- and pin lists, resolved once. Each holds both
    spellings of every entry; `deny` is casefolded."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()

    @classmethod
    def read(cls, allow: list[str], deny: list[str], pinned: list[str]) -> PathRules:
        def all_of(entries: list[str]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(p for e in entries for p in spellings(e)))
        return cls(all_of(allow), tuple(dict.fromkeys(p.casefold() for p in all_of(deny))), all_of(pinned))

    def denied(self, path: str) -> bool:
        """`path` (a recorded cwd in compare form) is under a deny entry, in any case."""
        f = path.casefold()
        return any(under(f, d) for d in self.deny)

    def allowed(self, path: str) -> bool:
        return not self.allow or any(under(path, a) for a in self.allow)

    def is_pinned(self, path: str) -> bool:
        return any(under(path, p) for p in self.pinned)


# A hint names a folder in at most this many characters.
HINT_PATH_CHARS = 160
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(path: str) -> str:
    """A folder as a hint names it: control characters (a NUL, a line break a
    caller put in a cwd) as escapes, a long path cut in its middle."""
    path = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", path)
    if len(path) > HINT_PATH_CHARS:
        half = HINT_PATH_CHARS // 2
        path = f"{path[:half]}…{path[-half:]}"
    return path
