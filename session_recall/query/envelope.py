"""The envelope around every answer: its status, the hint that says what to do
next (one function per hint), gaps, diagnostics, and the opaque cursor that
pages a result list.

Statuses (docs/recall.md): ok, partial, no_match, empty_query, empty_index,
denied, unknown_session, unknown_anchor, stale_cursor, refused. A cursor
holds a key of the query, question, scope and limit, an offset, and the
index's generation: it pages only the query that made it, and only while no
message arrived.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

import apsw
import orjson

from .. import paths
from ..model import Diagnostics, Envelope, Result, Status
from ..rows import one
from .gates import Scope, why_wide
from .parse import Term
from .retrieve import Run

# A hint quotes the query's terms in at most this many characters.
HINT_TERMS_CHARS = 200


# --- cursors ----------------------------------------------------------------------------


def cursor_key(**params) -> str:
    return hashlib.blake2b(orjson.dumps(params, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()


def make_cursor(key: str, offset: int, generation: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"k": key, "o": offset, "g": generation})).rstrip(b"=").decode()


def read_cursor(cursor: str) -> dict | None:
    try:
        value = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        return None
    if isinstance(value, dict) and isinstance(value.get("o"), int) and value["o"] >= 0:
        return value
    return None


def cursor_hint(cur: dict | None, key: str, generation: int) -> str | None:
    """Why a cursor cannot page this query (a stale_cursor's hint), or None
    when it can."""
    if cur is None:
        return unreadable_cursor_hint()
    if cur.get("k") != key:
        return foreign_cursor_hint()
    if cur.get("g") != generation:
        return changed_index_hint()
    return None


# --- the envelope -----------------------------------------------------------------------


def envelope(conn: apsw.Connection, scan_budget: int, t0: float, query: str, question: str | None, status: Status,
             hint: str, run: Run | None = None, *, confined: bool = False, **kw) -> Envelope:
    """The envelope of an answer, its diagnostics read from `run` and the
    index's freshness from `conn`. `confined`: the settings keep some caller
    from some project (Settings.confines); the time of the last pass is then
    not given (null), since a watcher's pass follows what is written in any
    project, out of the caller's reach too."""
    run = run or Run()
    last, sources = one(conn.execute("SELECT max(last_indexed_at), count(*) FROM sources"))
    if confined:
        last = None
    freshness: dict[str, Any] = {"last_indexed_at": last, "sources": sources}
    diag = Diagnostics(engine=run.engine, elapsed_ms=round((time.perf_counter() - t0) * 1000, 3),
                       sessions_scanned=run.sessions_scanned,
                       scan_budget=scan_budget if run.engine != "fts" and run.engine != "none" else 0,
                       candidates=run.candidates, reranked=run.reranked, index_freshness=freshness,
                       ranked=run.ranked if run.ranked_of is not None else None, ranked_of=run.ranked_of,
                       ranked_of_more=run.ranked_of_more,
                       terms=kw.pop("terms", []))
    return Envelope(query=query, question=question, status=status, hint=hint, gaps=run.gaps,
                    diagnostics=diag, **kw)


# --- hints --------------------------------------------------------------------------------


def quoted(values: list[str], sep: str) -> str:
    """Terms for a hint, quoted, at most HINT_TERMS_CHARS (a hint stays one
    short sentence even for a query of 100 KB)."""
    text = sep.join(repr(v) for v in values)
    return text if len(text) <= HINT_TERMS_CHARS else text[:HINT_TERMS_CHARS] + "…"


def scope_words(scope: Scope) -> str:
    cwd = paths.shown(scope.cwd)
    if scope.kind == "all":
        base = "all projects"
    elif scope.exact:
        base = (f"{cwd} itself (a root or home folder is no project: the sessions of the projects below it "
                "are searched only with all projects, or with the cwd of one of them)")
    elif (wide := why_wide(scope.roots, ())) is not None:
        # A cwd of `/` or $HOME that the policy let through: every project below it.
        base = f"any project under {cwd} ({wide})"
    else:
        base = f"the project {cwd}"
    return base + (f", session {scope.session_id}" if scope.session_id else "")


def refused_hint(kind: str) -> str:
    return (f"The query looks like a credential ({kind}). Secrets are removed when sessions are indexed "
            "and cannot be searched for; search for the words around it instead (the service, file or "
            "command it was used with).")


def empty_query_hint() -> str:
    return ("Give a query (words or \"quoted phrases\", all must match) or a question "
            "in natural language.")


def empty_index_hint() -> str:
    return ("The index is empty: nothing has been searched. The user can index their session logs "
            "(`recall index`, or [[sources]] in the config).")


def unknown_session_hint(session_id: str, scope: Scope, searching: bool = True) -> str:
    """`searching`: a recall filtered to that session (which can drop the
    filter); else a lookup of the session itself (show), which cannot."""
    return (f"No session {session_id!r} in scope ({scope_words(scope)}). Check the id"
            + (", or search without session_id." if searching else " or the first characters given."))


def empty_session_hint() -> str:
    return "Give a session id (or the first characters of one)."


def session_elsewhere_hint(prefix: str) -> str:
    return (f"Session {prefix!r} is in another project; reading it is an all-projects search, which needs "
            "the user's confirmation: ask for all_projects (on the command line --all-projects).")


def ambiguous_session_hint(prefix: str, ids: list[str]) -> str:
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return f"{len(ids)} sessions start with {prefix!r} ({shown}); give more of the id."


def session_hint(n_messages: int) -> str:
    return f"The whole session, {n_messages} message{'s' * (n_messages != 1)}."


def foreign_cursor_hint() -> str:
    return ("This cursor does not belong to this query; repeat the query without a "
            "cursor, or with the same query, question, scope and limit.")


def unreadable_cursor_hint() -> str:
    return ("This cursor could not be read (it is not one this index made, or it was cut or changed); "
            "pass a result's next_cursor exactly as given, or repeat the query without a cursor.")


def changed_index_hint() -> str:
    return ("The index changed since this cursor was made (new messages arrived); "
            "repeat the query without a cursor to page the current results.")


def ok_hint(results: list[Result], partial: bool, terms: list[Term], cursor: str | None) -> str:
    sessions = len({(r.source, r.cwd, r.session_id) for r in results})
    hint = f"{len(results)} passage{'s' * (len(results) != 1)} from {sessions} session{'s' * (sessions != 1)}."
    if partial:
        hint = ("No message contains all of " + quoted([t.raw for t in terms], ", ")
                + "; these are the best partial matches (matched_terms says which terms each has). " + hint)
    hint += " recall_more(anchor_id) widens a passage to its whole turn."
    if cursor:
        hint += " More results: pass next_cursor."
    return hint


def _all_projects_offer(policy: str) -> str:
    """How a hint offers all_projects under the policy: not at all when it is
    denied (the answer would be `denied`)."""
    return {"allow": "all_projects", "confirm": "all_projects (the user is asked)"}.get(policy, "")


def no_match_hint(scope: Scope, terms: list[Term], kw_terms: list[Term], all_projects: bool,
                  filtered: list[str] | None = None, policy: str = "allow", *, asked: bool = False) -> str:
    """`filtered`: the filters the caller gave (role, source, since, until),
    named so that a miss they caused is not read as a miss of the words.
    `policy`: the all_projects policy, which decides whether all_projects is
    offered. `asked`: a question was given, so none is suggested."""
    within = f" among the messages its filters keep ({', '.join(filtered)})" if filtered else ""
    offer = _all_projects_offer(policy)
    tries = ["other filters"] if filtered else []
    tries.append("fewer or other words")
    if not asked:
        tries.append("a question")
    # Under `/`, all projects would add only sessions with no absolute cwd.
    if not all_projects and scope.cwd != "/" and offer:
        tries.append(offer)
    return (f"No message in {scope_words(scope)} matches "
            + (quoted([t.raw for t in terms], " and ") if terms else "the question's keywords "
               + quoted([t.folded for t in kw_terms], ", "))
            + within + ". Try " + (", ".join(tries[:-1]) + ", or " if len(tries) > 1 else "") + tries[-1] + ".")


def nothing_indexed_hint(scope: Scope, policy: str = "allow", above: str | None = None) -> str:
    """`above`: the nearest folder above the caller's with sessions of its own
    (a caller in a subfolder of a project that is no git work tree), named
    when the policy allows a search of it without asking."""
    offer = _all_projects_offer(policy)
    near = (f"Sessions were indexed in {paths.shown(above)}, above this folder: pass it as the cwd to search it. "
            if above else "")
    return (f"No session of {scope_words(scope)} is indexed, so nothing was searched. " + near
            + ("Pass the cwd of the project you mean" + (f", or search {offer}" if offer else "")
               + " (the user can list the indexed projects with `recall projects`)."))


def last_page_hint() -> str:
    return "No more results: the previous page was the last."


def not_an_anchor_hint() -> str:
    return "This is not an anchor_id from a recall result; pass a passage's anchor_id."


def anchor_out_of_scope_hint() -> str:
    return ("No passage with this anchor in scope: it belongs to a session "
            "this caller cannot see, or the session is no longer indexed.")


def turn_hint(n_messages: int) -> str:
    return f"The turn around this anchor, {n_messages} message{'s' * (n_messages != 1)}."


# --- gaps ---------------------------------------------------------------------------------


def question_gap(max_chars: int, length: int) -> str:
    return f"keywords were taken from the question's first {max_chars} characters (of {length})"


def partial_gap(n_terms: int, max_terms: int) -> str:
    return (f"no message contains all {n_terms} terms; partial matches are looked for "
            f"only in queries of at most {max_terms} terms")


def response_budget_gap(left_out: int, budget: int, unit: str = "bytes") -> str:
    return (f"{left_out} more passages did not fit the "
            f"response budget of {budget} {unit}; page with next_cursor")


def scope_gap(scope: Scope) -> str:
    return f"no indexed session lies in {scope_words(scope)}"
