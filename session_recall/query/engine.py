"""recall and recall_more: the stages of the query side, in order, answering
in one envelope.

Each stage is a module of its own (docs/recall.md): `parse` (terms, quoting,
a question's keywords), `gates` (the scope), `retrieve` (FTS5 candidates,
the scans, verification, hits), `rank` (the `Ranking` value and the orders
it makes, selection), `passages`, `envelope` (cursors, statuses, hints).
The Engine holds one connection, the settings and a `Ranking`, and runs
every recall in one read transaction.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import overload

import apsw
import orjson

from .. import paths
from ..config import Settings
from ..model import Envelope, Passage, PassageMessage, Result, Status
from ..rows import one
from ..store import read_generation, read_is_empty
from ..text.fold import replace_lone_surrogates
from ..text.redact import find_secret
from . import envelope as E
from . import passages as P
from . import rank
from .gates import Confirm, Scope, cwd_permitted, decide_scope, session_path, why_wide
from .parse import QUESTION_MAX_CHARS, QueryTokenizer, Term
from .rank import Ranker, Ranking, select
from .retrieve import NO_FILTERS, Filters, Hit, Retriever, Run


@dataclass
class Located:
    """The sessions a session id (or a unique prefix of one) names for a
    caller: `sessions` (row, source, cwd, session_id, title, started_at),
    several only when one id lives in several sources or projects;
    `all_projects` when reaching them takes an all-projects search (the
    policy allows it); else, with no sessions, the status and hint."""

    sessions: list[tuple] = field(default_factory=list)
    all_projects: bool = False
    status: Status = "ok"
    hint: str = ""

    @property
    def session_id(self) -> str | None:
        return self.sessions[0][3] if self.sessions else None


def _one_snapshot(method):
    """Run an Engine method in one read transaction: every query it makes
    sees the same committed state, whatever a writer commits meanwhile."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.conn:  # a savepoint; outside a transaction it begins one
            if self.retriever.scopes is not None:  # inside another method's snapshot
                return method(self, *args, **kwargs)
            self.retriever.scopes = {}  # this snapshot's scopes, worked out once each
            try:
                return method(self, *args, **kwargs)
            finally:
                self.retriever.scopes = None
    return wrapper


class Engine:
    def __init__(self, conn: apsw.Connection, settings: Settings, ranking: Ranking | None = None):
        self.conn = conn
        self.settings = settings
        self.tokenizer = QueryTokenizer(conn)
        self.retriever = Retriever(conn, settings, ranking or Ranking())
        self.ranker = Ranker(conn, settings, self.retriever.ranking)
        # apsw's stubs type a scalar function as variadic over every SQLite
        # value; a one-argument function with a narrower type cannot match it.
        conn.create_scalar_function("recall_recency", self._recency, 1, deterministic=True)  # type: ignore[arg-type]
        conn.create_scalar_function("recall_pinned", self._pinned, 1, deterministic=True)  # type: ignore[arg-type]
        rank.register(conn)
        self._now = time.time()

    @property
    def ranking(self) -> Ranking:
        return self.retriever.ranking

    @ranking.setter
    def ranking(self, value: Ranking) -> None:
        self.retriever.ranking = self.ranker.ranking = value

    def _recency(self, ts: str | None) -> float:
        return rank.recency(ts, self.settings.recency_half_life_days, self._now)

    def _pinned(self, cwd: str) -> int:
        return rank.pinned(self.settings, cwd)

    def generation(self, scope: Scope | None = None) -> int:
        """What a cursor must see unchanged to page on: the index's count of
        batches written; for a confined caller (Retriever.universe), the
        sessions it may search, their messages and tokens, so that neither a
        cursor nor its staleness moves with what is written out of its reach."""
        universe = self.retriever.universe(scope) if scope is not None else None
        if universe is None:
            return read_generation(self.conn)
        sql, params = universe
        row = one(self.conn.execute(
            f"SELECT count(*), total(n_messages), total(n_tokens) FROM sessions s WHERE 1 = 1{sql}", params))
        return int.from_bytes(hashlib.blake2b(orjson.dumps(row), digest_size=7).digest(), "big")

    def _envelope(self, t0: float, query: str, question: str | None, status: Status, hint: str, run: Run | None = None,
                  **kw) -> Envelope:
        return E.envelope(self.conn, self.settings.scan_budget_sessions, t0, query, question, status, hint, run,
                          confined=self.settings.confines(), **kw)

    def refusal(self, query: str, question: str | None, t0: float | None = None) -> Envelope | None:
        """The refusal of a credential-shaped query or question, else None.
        Reads no session, message or index row (callers ask it first)."""
        for text in (_clean(query) or "", _clean(question) or ""):
            kind = find_secret(text)
            if kind:
                return self._envelope(time.perf_counter() if t0 is None else t0, "[refused]", None, "refused",
                                      E.refused_hint(kind))
        return None

    # --- recall -------------------------------------------------------------------------

    @_one_snapshot
    def recall(self, query: str = "", question: str | None = None, *, all_projects: bool = False,
               cwd: str | None = None, session_id: str | None = None, limit: int | None = None,
               cursor: str | None = None, caller_session: str | None = None,
               confirm: Confirm | None = None, caller_cwd: str | None = None, for_model: bool = False,
               filters: Filters = NO_FILTERS, screened: bool = False) -> Envelope:
        """A page of ranked, gated passages for `query` (terms, all must
        match) and/or `question` (natural language):
        1. refuse a credential-shaped query before touching any corpus;
        2. parse the terms and the question's keywords;
        3. decide the scope (gates): the caller's project, one session, or all
           projects under the policy; the cwd allow/deny lists always apply;
        4. read the cursor: a page of this query over this generation;
        5. retrieve and rank (weighted bm25; question mode re-scores by the
           keywords' coverage and the title), select at most ceil(limit/3)
           passages per session in a first pass, a second pass filling
           unused slots; when the AND of two or more terms matches nothing,
           the best partial matches, marked;
        6. assemble passages within byte budgets (smaller `for_model`: a page
           that fits a model's tool result), redactions rendered;
        7. the envelope: status, the hint for what to do next, the cursor.
        `screened`: the caller asked `refusal` about this query and question
        already (Index.recall does, before a first use builds anything), so
        step 1 is not taken twice."""
        t0 = time.perf_counter()
        self._now = time.time()
        query = _clean(query or "")
        question, cwd, session_id, cursor, caller_session, caller_cwd = map(
            _clean, (question, cwd, session_id, cursor, caller_session, caller_cwd))
        # 1. a credential-shaped query is refused before any corpus is touched
        refused = None if screened else self.refusal(query, question, t0)
        if refused is not None:
            return refused
        limit = max(1, min(limit or self.settings.default_limit, self.settings.max_limit))
        # 2. parse
        terms = self.tokenizer.parse(query)
        kw_terms, kw_group = self.tokenizer.question_terms(question, terms) if question else ([], {})
        term_names = [t.folded for t in terms + kw_terms]
        if not terms and not kw_terms:
            return self._envelope(t0, query, question, "empty_query", E.empty_query_hint())
        # 3. gates
        verdict = decide_scope(self.settings, cwd=cwd, session_id=session_id, all_projects=all_projects,
                               confirm=confirm, caller_cwd=caller_cwd)
        if verdict.scope is None:
            return self._envelope(t0, query, question, "denied", verdict.hint)
        scope = verdict.scope
        root = scope.cwd if scope.kind == "project" else None
        if (early := self._unanswerable(scope, session_id)) is not None:
            return self._envelope(t0, query, question, *early, terms=term_names, project_root=root)
        # 4. paging
        key = E.cursor_key(q=query, qs=question, a=all_projects, c=scope.roots, s=session_id, l=limit,
                           **({"f": filters.key()} if filters else {}))
        offset = 0
        generation = self.generation(scope)
        if cursor:
            cur = E.read_cursor(cursor)
            if (stale := E.cursor_hint(cur, key, generation)) is not None:
                return self._envelope(t0, query, question, "stale_cursor", stale, terms=term_names,
                                      project_root=root)
            assert cur is not None  # cursor_hint refuses a cursor that could not be read
            offset = cur["o"]
        # 5. retrieve, rank and select (the filters, if any, in the SQL of every engine)
        run = Run(filters=filters)
        if question and len(question) > QUESTION_MAX_CHARS:
            run.gaps["question"] = E.question_gap(QUESTION_MAX_CHARS, len(question))
        selected, more, partial, run = self._select(terms, kw_terms, kw_group, scope, run, limit, offset + limit)
        # 6. passages
        rend = P.Renderer(self.settings.redaction)
        budgets = P.for_model(limit) if for_model else P.FULL
        results, left_out = P.collect(self.conn, selected[offset:], terms=[t.folded for t in terms],
                                      keywords=term_names, rend=rend, caller_session=caller_session, scope=scope,
                                      budgets=budgets)
        if left_out:
            run.gaps["response_budget"] = (
                E.response_budget_gap(left_out, budgets.response_chars, "characters") if budgets.response_chars
                else E.response_budget_gap(left_out, budgets.response))
            more = True
        # 7. the envelope
        next_cursor = E.make_cursor(key, offset + len(results), generation) if more and results else None
        status: Status
        if results:
            status, hint = "partial" if partial else "ok", E.ok_hint(results, partial, terms, next_cursor)
        else:
            status, hint = "no_match", self._no_match_hint(scope, terms, kw_terms, all_projects, offset, run,
                                                           asked=bool(question and question.strip()))
        return self._envelope(t0, query, question, status, hint, run, results=results, next_cursor=next_cursor,
                              redacted=rend.redacted, terms=term_names, project_root=root)

    def _unanswerable(self, scope: Scope, session_id: str | None) -> tuple[Status, str] | None:
        """The status and hint of a recall that has nothing to search: an
        empty index, or a session_id that no session in scope has."""
        if read_is_empty(self.conn):
            return "empty_index", E.empty_index_hint()
        if session_id is not None:
            twins = self.retriever.denied_twins()
            known = [r for r in self.conn.execute("SELECT cwd, id, cwd_links FROM sessions WHERE session_id = ?",
                                                  (session_id,))
                     if scope.covers(r[0], session_id, self.settings, r[2]) and r[1] not in twins]
            if not known:
                return "unknown_session", E.unknown_session_hint(session_id, scope)
        return None

    def _select(self, terms: list[Term], kw_terms: list[Term], kw_group: dict[str, int], scope: Scope, run: Run,
                limit: int, need: int) -> tuple[list[Hit], bool, bool, Run]:
        """The first `need` passages' hits in final order, whether more
        exist, whether they are partial matches, and the run that found them."""
        selected, more = select(self._ranked(terms, kw_terms, kw_group, scope, run), limit, need,
                                self.ranking.candidate_budget)
        if selected or kw_terms:
            return selected, more, False, run
        if len(terms) > self.ranking.partial_max_terms:
            run.gaps["partial"] = E.partial_gap(len(terms), self.ranking.partial_max_terms)
            return selected, more, False, run
        if len(terms) < 2:
            return selected, more, False, run
        selected, more, run = self._partial(terms, scope, run, limit, need)
        return selected, more, bool(selected), run

    def _ranked(self, terms: list[Term], kw_terms: list[Term], kw_group: dict[str, int], scope: Scope,
                run: Run):
        """Verified hits in rank order: a query's terms AND-filter (ranked by
        the question's keywords when there is a question too); a question
        alone ORs its keywords, a message with more of them first."""
        first = self.ranking.fts_first_page
        if terms and kw_terms:
            return self.ranker.by_keywords(self.retriever.hits(terms, scope, run, first=first), kw_terms, kw_group)
        if terms:
            return self.retriever.hits(terms, scope, run, first=first)
        return self.ranker.by_question(
            self.retriever.hits(kw_terms, scope, run, any_term=True, first=self.ranking.question_first_page),
            kw_terms, kw_group, run, self.retriever.universe(scope))

    def _partial(self, terms: list[Term], scope: Scope, run: Run, limit: int,
                 need: int) -> tuple[list[Hit], bool, Run]:
        """The best partial matches when no message holds every term: those
        holding more of the terms first, marked partial; the run that found
        them (with the first run's gaps and candidates)."""
        partial_run = Run(filters=run.filters)
        alive = self.retriever.possible(terms, self.retriever.universe(scope))
        ranked: Iterator[Hit]
        if not alive:
            ranked = iter(())
        elif len(alive) == 1:  # every hit has the one term: coverage ties, rank order stands
            ranked = self.retriever.hits(alive, scope, partial_run, first=self.ranking.fts_first_page)
        else:
            ranked = self.ranker.by_coverage(self.retriever.hits(alive, scope, partial_run, any_term=True,
                                                                 first=None))
        selected, more = select(ranked, limit, need, self.ranking.candidate_budget)
        for h in selected:
            h.partial = True
        partial_run.gaps.update(run.gaps)
        partial_run.candidates += run.candidates
        return selected, more, partial_run

    def _no_match_hint(self, scope: Scope, terms: list[Term], kw_terms: list[Term], all_projects: bool,
                       offset: int, run: Run, *, asked: bool = False) -> str:
        """The hint of an empty page: nothing matched, nothing was searched
        (no session lies in scope; a gap says so), or the pages ran out.
        `asked`: a question was given (it is not suggested again)."""
        f = run.filters
        named = [name for name, given in (("role", f.roles), ("source", f.sources), ("since", f.since),
                                          ("until", f.until)) if given]
        policy = self.settings.all_projects
        hint = E.no_match_hint(scope, terms, kw_terms, all_projects, named, policy, asked=asked)
        scope_sql, params = self.retriever.scope_sql(scope)
        if not offset and not one(self.conn.execute(
                f"SELECT count(*) FROM sessions s WHERE 1 = 1{scope_sql}", params))[0]:
            # Nothing was searched: not the same answer as "searched, found nothing".
            run.gaps["scope"] = E.scope_gap(scope)
            hint = E.nothing_indexed_hint(scope, policy, self._indexed_above(scope) if policy == "allow" else None)
        if offset:
            hint = E.last_page_hint()
        return hint

    def _indexed_above(self, scope: Scope) -> str | None:
        """The nearest folder above a project scope's root that holds sessions
        (recorded there, and let through by the lists), short of `/` and
        $HOME: where a caller in a subfolder of a project without a git work
        tree should look. None when there is none, or the scope is wider."""
        if scope.kind != "project" or scope.exact or scope.session_id is not None:
            return None
        root = scope.roots[0]
        best: str | None = None
        for cwd, links in self.conn.execute("SELECT DISTINCT cwd, cwd_links FROM sessions"):
            p = session_path(cwd)
            if (p is not None and p != root and paths.under(root, p) and why_wide((p,), ()) is None
                    and cwd_permitted(cwd, self.settings, links) and (best is None or len(p) > len(best))):
                best = p
        return best

    # --- sessions by id ---------------------------------------------------------------------

    def _sessions_in(self, prefix: str, scope: Scope) -> list[tuple]:
        """Sessions in `scope` (its lists and denied twins applied) whose id is
        `prefix`, else whose id starts with it; most recent first."""
        twins = self.retriever.denied_twins()
        rows = [r for r in self.conn.execute(
            "SELECT id, source, cwd, session_id, coalesce(title, prompt), started_at, cwd_links FROM sessions "
            "WHERE substr(session_id, 1, length(?1)) = ?1 ORDER BY started_at DESC, id DESC", (prefix,))
            if scope.covers(r[2], r[3], self.settings, r[6]) and r[0] not in twins]
        rows = [r[:6] for r in rows]
        exact = [r for r in rows if r[3] == prefix]
        return exact or rows

    @_one_snapshot
    def locate_session(self, prefix: str, *, cwd: str | None = None, all_projects: bool = False,
                       confirm: Confirm | None = None, caller_cwd: str | None = None) -> Located:
        """The session `prefix` names (a session id or a unique prefix of one),
        wherever it lives, under the same gates as recall: in the caller's
        project; else, in another project, when the all_projects policy is
        `allow` (or the caller asked for all projects); under `confirm`, the
        hint says to ask for all projects; under `deny` it is not found.
        The allow- and denylists always apply."""
        prefix = _clean(prefix)
        cwd, caller_cwd = _clean(cwd), _clean(caller_cwd)
        if not prefix:
            return Located(status="unknown_session", hint=E.empty_session_hint())
        verdict = decide_scope(self.settings, cwd=cwd, session_id=None, all_projects=all_projects, confirm=confirm,
                               caller_cwd=caller_cwd)
        if verdict.scope is None:
            return Located(status="denied", hint=verdict.hint)
        rows = self._sessions_in(prefix, verdict.scope)
        wide = all_projects
        if not rows and not all_projects and self.settings.all_projects != "deny":
            scope = verdict.scope
            rows = self._sessions_in(prefix, Scope("all", scope.cwd, None, scope.roots))
            wide = True
            if rows and self.settings.all_projects == "confirm":
                return Located(status="unknown_session", hint=E.session_elsewhere_hint(prefix))
        if not rows:
            return Located(status="unknown_session", hint=E.unknown_session_hint(prefix, verdict.scope, searching=False))
        ids = sorted({r[3] for r in rows})
        if len(ids) > 1:
            return Located(status="unknown_session", hint=E.ambiguous_session_hint(prefix, ids))
        return Located(rows, wide)

    @_one_snapshot
    def show(self, located: Located, *, caller_session: str | None = None) -> Envelope:
        """Every message of the located sessions, in order, redacted as
        passages are, nothing cut: a session as evidence."""
        t0 = time.perf_counter()
        if not located.sessions:
            return self._envelope(t0, "", None, located.status, located.hint)
        rend = P.Renderer(self.settings.redaction)
        results = []
        for row, source, scwd, session_id, title, started_at in located.sessions:
            messages = [
                PassageMessage(message_id=mid, role=role, ts=ts, text=rend(text),
                               materials=P.materials(orjson.loads(atts) if atts else [], session_id=session_id,
                                                     readable_session=caller_session, rend=rend))
                for mid, role, ts, text, atts in self.conn.execute(
                    "SELECT message_id, role, ts, text, attachments FROM messages WHERE session = ? ORDER BY seq",
                    (row,))]
            passage = Passage(anchor_id=P.anchor_id(source, scwd, session_id, messages[0].message_id)
                              if messages else "", turn_id="", messages=messages)
            results.append(Result(session_id=session_id, source=source, title=rend(title), cwd=scwd,
                                  started_at=started_at, score=0.0, matched_terms=[], passage=passage))
        n = sum(len(r.passage.messages) for r in results)
        return self._envelope(t0, located.session_id or "", None, "ok", E.session_hint(n), Run(engine="none"),
                              results=results, redacted=rend.redacted)

    # --- recall_more ----------------------------------------------------------------------

    @_one_snapshot
    def recall_more(self, anchor: str, *, cwd: str | None = None, all_projects: bool = False,
                    caller_session: str | None = None, confirm: Confirm | None = None,
                    caller_cwd: str | None = None) -> Envelope:
        """One passage (by its anchor_id) widened to its whole turn, under
        the same gates as recall."""
        t0 = time.perf_counter()
        anchor = _clean(anchor)
        cwd, caller_session, caller_cwd = map(_clean, (cwd, caller_session, caller_cwd))
        parsed = P.parse_anchor(anchor)
        if parsed is None:
            return self._envelope(t0, anchor, None, "unknown_anchor", E.not_an_anchor_hint())
        source, scwd, session_id, message_id = parsed
        verdict = decide_scope(self.settings, cwd=cwd, session_id=None, all_projects=all_projects, confirm=confirm,
                               caller_cwd=caller_cwd)
        row = self.conn.execute(
            "SELECT s.id, coalesce(s.title, s.prompt), s.started_at, m.id, s.cwd_links FROM sessions s "
            "JOIN messages m ON m.session = s.id WHERE s.source = ? AND s.cwd = ? AND s.session_id = ? AND m.message_id = ?",
            (source, scwd, session_id, message_id)).fetchone()
        # Out of scope and unknown read the same, so an anchor cannot probe other projects.
        if (verdict.scope is None or row is None or not verdict.scope.covers(scwd, session_id, self.settings, row[4])
                or row[0] in self.retriever.denied_twins()):
            return self._envelope(t0, anchor, None, "unknown_anchor" if verdict.scope is not None else "denied",
                                  verdict.hint or E.anchor_out_of_scope_hint())
        rend = P.Renderer(self.settings.redaction)
        passage = P.build(self.conn, session_row=row[0], session_key=(source, scwd, session_id), anchor_row=row[3],
                          terms=[], rend=rend, caller_session=P.own_session(caller_session, scwd, verdict.scope),
                          wide=True)
        result = Result(session_id=session_id, source=source, title=rend(row[1]), cwd=scwd, started_at=row[2],
                        score=0.0, partial=False, matched_terms=[], passage=passage)
        return self._envelope(t0, anchor, None, "ok", E.turn_hint(len(passage.messages)), Run(engine="none"),
                              results=[result], redacted=rend.redacted,
                              project_root=verdict.scope.cwd if verdict.scope.kind == "project" else None)


@overload
def _clean(value: str) -> str: ...
@overload
def _clean(value: str | None) -> str | None: ...
def _clean(value: str | None) -> str | None:
    """A caller's string as the index reads text: lone surrogates (which no
    envelope could encode) become U+FFFD, as they did in the logs. Anything
    but a str or None (bytes from a caller that did not decode) is a
    TypeError that shows what came."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"a text argument must be a str or None, not {type(value).__name__}: {value!r:.60}")
    return replace_lone_surrogates(value)
