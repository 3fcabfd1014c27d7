"""Gates: who may see which sessions (contract §6). Pure functions over small
values, so every path (index, scan, recall_more) asks the same questions.

Paths are compared resolved and absolute, by whole components: `/a/b` covers
`/a/b` and `/a/b/c`, never `/a/bc`, and never by basename.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from ..config import Settings
from ..text.fold import replace_lone_surrogates


@lru_cache(maxsize=4096)
def resolve(path: str) -> str:
    """Absolute, with `..`, `.`, doubled and trailing slashes and symlinks resolved
    (as far as the path exists on this machine). A path no file system can hold
    (one with a NUL character) is only normalised: it names no directory, so
    it covers only paths spelled under it."""
    try:
        return os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    except ValueError:  # embedded NUL
        norm = os.path.normpath(os.path.abspath(path))
        return norm if "\x00" in norm else os.path.realpath(norm)


def session_path(cwd: str) -> str | None:
    """A session's recorded cwd, resolved; None when it is not absolute. A log
    may carry anything, and a relative or `~` path would otherwise resolve
    against whoever is asking: such a session is in no project and passes no
    allow- or denylist (only an unfiltered all_projects search sees it)."""
    return resolve(cwd) if os.path.isabs(cwd) else None


def under(path: str, root: str) -> bool:
    """`path` is `root` or inside it, component-wise. Both already resolved."""
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def _under_any(path: str, roots: list[str]) -> bool:
    return any(under(path, resolve(r)) for r in roots)


def cwd_permitted(session_cwd: str, settings: Settings) -> bool:
    """The allow- and denylists: deny wins; a non-empty allowlist must cover it."""
    p = session_path(session_cwd)
    if p is None:
        return not settings.allow_cwds and not settings.deny_cwds
    if _under_any(p, settings.deny_cwds):
        return False
    return not settings.allow_cwds or _under_any(p, settings.allow_cwds)


Confirm = Callable[[str], bool | None]  # asks the user; None or an exception means nobody answered


@dataclass(frozen=True)
class Scope:
    """Which sessions a query may see, before the lists and session_id."""

    kind: Literal["project", "all"]
    cwd: str  # resolved; the root of a project scope
    session_id: str | None = None

    def covers_cwd(self, session_cwd: str, settings: Settings) -> bool:
        if self.kind == "project":
            p = session_path(session_cwd)
            if p is None or not under(p, self.cwd):
                return False
        return cwd_permitted(session_cwd, settings)

    def covers(self, session_cwd: str, session_id: str, settings: Settings) -> bool:
        if self.session_id is not None and session_id != self.session_id:
            return False
        return self.covers_cwd(session_cwd, settings)


@dataclass(frozen=True)
class Verdict:
    scope: Scope | None
    hint: str = ""


def decide_scope(settings: Settings, *, cwd: str | None, session_id: str | None, all_projects: bool,
                 confirm: Confirm | None = None) -> Verdict:
    """The scope a query runs in, or a refusal with a hint (fail closed)."""
    # Lone surrogates (a non-UTF-8 name from argv, say) are read as U+FFFD, as
    # the indexer read the cwds recorded in logs.
    root = resolve(replace_lone_surrogates(cwd or os.getcwd()))
    if not all_projects:
        return Verdict(Scope("project", root, session_id))
    policy = settings.all_projects
    if policy == "deny":
        return Verdict(None, "searching all projects is disabled by policy (all_projects = \"deny\"); "
                             "search this project instead, or pass the cwd of the project you mean")
    if policy == "confirm":
        answer = None
        if confirm is not None:
            try:
                answer = confirm("Allow this search to read sessions from all projects on this machine?")
            except Exception:
                answer = None
        if answer is not True:
            return Verdict(None, "searching all projects needs the user's confirmation, and none was given; "
                                 "search this project instead, or ask the user to allow it")
    return Verdict(Scope("all", root, session_id))
