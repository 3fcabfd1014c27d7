"""Gates: who may see which sessions (contract §6). Pure functions over small
values, so every path (index, scan, recall_more) asks the same questions.

Paths compare by whole components: `/a/b` covers `/a/b` and `/a/b/c`, never
`/a/bc`, and never by basename. A recorded cwd is taken as the index stored
it (normalised lexically at ingest, never resolved through symlinks); the
caller's cwd is live, so it counts in both spellings, as given and resolved;
the lists were resolved when the configuration was read (session_recall/paths.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from .. import paths
from ..config import Settings
from ..paths import under  # noqa: F401  (part of this module's interface)
from ..text.fold import replace_lone_surrogates


def resolve(path: str) -> str:
    """Absolute, with `..`, `.`, doubled and trailing slashes and symlinks resolved
    (as far as the path exists on this machine, now: not cached). For a
    caller's cwd, never for a recorded cwd."""
    return paths.resolved(os.path.expanduser(path))


def session_path(cwd: str) -> str | None:
    """A session's recorded cwd in compare form (lexical, NFC; no file system
    is asked); None when it is not absolute. A log may carry anything, and a
    relative or `~` path would otherwise resolve against whoever is asking:
    such a session is in no project and passes no allow- or denylist (only an
    unfiltered all_projects search sees it)."""
    return paths.key(paths.recorded(cwd)) if os.path.isabs(cwd) else None


def cwd_permitted(session_cwd: str, settings: Settings, links: str | None = None) -> bool:
    """The allow- and denylists: deny wins; a non-empty allowlist must cover it.
    `links`: the cwd through the symlinks that existed when the session was
    indexed (sessions.cwd_links), tested too: each spelling must pass, so a
    link can keep a session out of a list's reach, never let one in."""
    p = session_path(session_cwd)
    if p is None:
        return not settings.allow_cwds and not settings.deny_cwds
    rules = settings.path_rules()
    if rules.denied(p) or not rules.allowed(p):
        return False
    q = session_path(links) if links else None
    return q is None or (not rules.denied(q) and rules.allowed(q))


# --- the caller's project ---------------------------------------------------------


def _home() -> tuple[str, ...]:
    home = os.path.expanduser("~")
    return tuple(dict.fromkeys(paths.key(p) for p in (paths.lexical(home), paths.resolved(home))))


def _git_top(path: str, home: tuple[str, ...]) -> str | None:
    """The top of the git work tree holding `path` (a `.git` folder or file),
    walking up its own spelling; a repository at or above $HOME does not
    count (a dotfiles repository at `~` would make every project one)."""
    p = path
    while True:
        if any(paths.under(h, p) for h in home):
            return None
        if os.path.exists(os.path.join(p, ".git")):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def project_roots(cwd: str) -> tuple[str, ...]:
    """The project of a directory, in compare form: the top of the git work
    tree that holds it, else the directory itself; in both spellings (as
    given and resolved through symlinks), the resolved one first."""
    given = paths.lexical(os.path.expanduser(replace_lone_surrogates(cwd)))
    forms = [given] if "\x00" in given else [paths.resolved(given), given]
    home = _home()
    roots = []
    for form in forms:
        top = _git_top(form, home) if "\x00" not in form else None
        roots.append(paths.key(top or form))
    return tuple(dict.fromkeys(roots))


def project_of_recorded(cwd: str) -> str:
    """The project of a session's recorded cwd, as `--cwd` would name it: the
    top of the git work tree that holds it on this machine now (walking up its
    recorded spelling, never through links; not a repository at or above
    $HOME), else the cwd itself. A relative cwd is its own (no) project."""
    if not os.path.isabs(cwd):
        return cwd
    rec = paths.key(paths.recorded(cwd))
    return paths.key(_git_top(rec, _home()) or rec) if "\x00" not in rec else rec


def why_wide(roots: tuple[str, ...], caller: tuple[str, ...]) -> str | None:
    """Why a scope with these roots is wider than one project, or None: it is
    `/`, `$HOME` or above it, or an ancestor of the caller's own project.
    Compared casefolded too: a case twin of one of them is as wide."""
    home = [h.casefold() for h in _home()]
    own = [c.casefold() for c in caller]
    for root in roots:
        r = root.casefold()
        if r == "/":
            return "the root directory /"
        if any(paths.under(h, r) for h in home):
            return "your home directory or a folder above it"
        if any(paths.under(c, r) and c != r for c in own):
            return "a folder above your project"
    return None


Confirm = Callable[[str], bool | None]  # asks the user; None or an exception means nobody answered


@dataclass(frozen=True)
class Scope:
    """Which sessions a query may see, before the lists and session_id."""

    kind: Literal["project", "all"]
    cwd: str  # resolved; the root of a project scope, as the envelope shows it
    session_id: str | None = None
    # Every spelling of the root (compare form): the resolved one and the one given.
    roots: tuple[str, ...] = field(default=(), compare=False)
    # Only sessions started in the root itself, not below: the default scope
    # of a caller standing in `/`, $HOME or above it, which is no project.
    exact: bool = False

    def __post_init__(self):
        if not self.roots:
            object.__setattr__(self, "roots", (paths.key(self.cwd),))

    def in_root(self, session_cwd: str) -> bool:
        """The recorded cwd is the root or inside it (any spelling of the root);
        in an exact scope, the root itself."""
        p = session_path(session_cwd)
        if p is None:
            return False
        return any(p == r if self.exact else paths.under(p, r) for r in self.roots)

    def covers_cwd(self, session_cwd: str, settings: Settings, links: str | None = None) -> bool:
        if self.kind == "project" and not self.in_root(session_cwd):
            return False
        return cwd_permitted(session_cwd, settings, links)

    def covers(self, session_cwd: str, session_id: str, settings: Settings, links: str | None = None) -> bool:
        if self.session_id is not None and session_id != self.session_id:
            return False
        return self.covers_cwd(session_cwd, settings, links)


@dataclass(frozen=True)
class Verdict:
    scope: Scope | None
    hint: str = ""


def decide_scope(settings: Settings, *, cwd: str | None, session_id: str | None, all_projects: bool,
                 confirm: Confirm | None = None, caller_cwd: str | None = None) -> Verdict:
    """The scope a query runs in, or a refusal with a hint (fail closed).
    `caller_cwd` is where the caller stands (default: this process's
    directory), and the default `cwd`; a `cwd` given that is `/`, `$HOME` or
    above the caller's project is an all-projects search for the policy,
    however it was asked."""
    # Lone surrogates (a non-UTF-8 name from argv, say) are read as U+FFFD, as
    # the indexer read the cwds recorded in logs.
    roots = project_roots(cwd or caller_cwd or paths.process_cwd())
    project = Scope("project", roots[0], session_id, roots)
    if not all_projects:
        if cwd is None:
            # The caller's own directory is the default scope; standing in `/`,
            # $HOME or above it (no project), that is the sessions started
            # there, never every project below it.
            return Verdict(replace(project, exact=True) if why_wide(roots, ()) else project)
        wide = why_wide(roots, project_roots(caller_cwd or paths.process_cwd()))
        if wide is None:
            return Verdict(project)
        shown = paths.shown(roots[0])
        refusal = _policy(settings, confirm, f"The folder {shown} is {wide}: searching it reads the "
                                             "sessions of many projects. Allow this search?",
                          f"the cwd {shown} is {wide}, so this search would read many projects; ")
        return refusal or Verdict(project)
    refusal = _policy(settings, confirm, "Allow this search to read sessions from all projects on this machine?", "")
    return refusal or Verdict(Scope("all", roots[0], session_id, roots))


def _policy(settings: Settings, confirm: Confirm | None, question: str, why: str) -> Verdict | None:
    """The all_projects policy: None lets the search run, else the refusal."""
    policy = settings.all_projects
    if policy == "deny":
        return Verdict(None, why + "searching all projects is disabled by policy (all_projects = \"deny\"); "
                                   "search this project instead, or pass the cwd of the one project you mean")
    if policy == "confirm":
        answer = None
        if confirm is not None:
            try:
                answer = confirm(question)
            except Exception:
                answer = None
        if answer is not True:
            instead = "search this project instead (or pass the cwd of the one project you mean)"
            if confirm is None:  # nobody was asked
                return Verdict(None, why + "searching all projects needs the user's confirmation, and none was "
                                           f"given; {instead}, or ask for all projects explicitly (all_projects; "
                                           "on the command line --all-projects) so that the user is asked")
            if answer is False:  # the user's own no
                return Verdict(None, why + f"the user did not allow searching all projects; {instead}")
            return Verdict(None, why + "searching all projects needs the user's confirmation, and the user "
                                       f"could not be asked or did not answer; {instead}, or ask again once "
                                       "the user can answer")
    return None
