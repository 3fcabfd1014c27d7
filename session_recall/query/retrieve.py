"""Retrieval: the candidates of a query's terms in rank order, verified
against the match predicate, as hits.

FTS5 gives candidates (a superset of the matches: messages holding each
term's tokens in order), read in rank order through a ranked first page and
a top-N sort (`Retriever.fts`); a term the index cannot represent, or a CJK
query the index answered with nothing, is answered by an exact scan of
stored text within a budget of sessions, most recent first (`Retriever.scan`),
with a literal prefilter (`literal_prefilter`) so that it folds only the
messages that can match. Every candidate is verified (`Retriever.verify`);
`Retriever.hits` chooses the engine. The scope reaches SQL here
(`Retriever.scope_sql`), after the gates decided it.
"""

from __future__ import annotations

import itertools
import math
import unicodedata
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace

import apsw
import orjson

from ..config import Settings
from ..model import Engine
from ..rows import one
from ..text.fold import HAS_CJK, literal_forms, literal_pairs, match_text
from ..text.tokens import TOKENIZER_VERSION
from . import rank
from .gates import Scope, cwd_permitted
from .match import held, needs_collapse
from .parse import Term, fts_phrase, fts_query, fts_quote
from .rank import Ranking


@dataclass
class Hit:
    rowid: int
    session: int
    turn: str
    score: float  # higher is better
    ts: str | None
    matched: list[str]
    partial: bool = False
    chars: int = 0  # the length of the text verified (question mode bounds its pool by it)


@dataclass(frozen=True)
class Filters:
    """What a caller narrowed a recall to, beside its scope: message roles,
    source kinds, and a time range of the message's own timestamp (`since`
    inclusive, `until` exclusive; ISO 8601 instants, compared as instants, to
    the millisecond, by SQLite's julianday; a message without a readable
    timestamp is outside any range). Applied in the SQL of every engine, so
    hits are exactly the matches that pass them."""

    roles: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None

    def __bool__(self) -> bool:
        return bool(self.roles or self.sources or self.since or self.until)

    def key(self) -> list:
        """For a cursor's key: a page of one filter never pages another."""
        return [sorted(self.roles), sorted(self.sources), self.since, self.until]

    def sql(self, m: str = "m.", s: str | None = "s.") -> tuple[str, list]:
        """SQL to AND in, over messages (columns prefixed `m`) and sessions
        (prefixed `s`; None: the sources are tested elsewhere)."""
        clauses: list[str] = []
        params: list = []
        if self.roles:
            clauses.append(f"{m}role IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(sorted(self.roles)).decode())
        if self.sources and s is not None:
            clauses.append(f"{s}source IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(sorted(self.sources)).decode())
        if self.since is not None:
            clauses.append(f"julianday({m}ts) >= julianday(?)")
            params.append(self.since)
        if self.until is not None:
            clauses.append(f"julianday({m}ts) < julianday(?)")
            params.append(self.until)
        return "".join(" AND " + c for c in clauses), params


NO_FILTERS = Filters()


@dataclass
class Run:
    """The state of one recall, for diagnostics and gaps, and the filters it
    runs under."""

    filters: Filters = NO_FILTERS
    engine: Engine = "none"
    candidates: int = 0
    sessions_scanned: int = 0
    reranked: list[str] = field(default_factory=list)
    gaps: dict[str, str] = field(default_factory=dict)
    # the bounded plan (Retriever.windowed): candidates ranked, of at most how
    # many; ranked_of_more: the count stopped there (each word is in more rows)
    ranked: int = 0
    ranked_of: int | None = None
    ranked_of_more: bool = False


@dataclass
class Literal:
    """What a matching message holds literally (literal_prefilter): for each
    term, groups of forms, each group a character and what folds to it, or
    two ideographs side by side and the other forms of either
    (fold.literal_pairs); a message holds a term when it holds some form of
    every group. SQLite tests
    the groups of one form (`instr`, before a row is read); Python tests the
    rest on the row's raw text (a few substring tests, where an `instr` per
    form over every row costs more than the folding they save)."""

    per_term: list[list[tuple[str, ...]]]
    any_term: bool

    def sql(self) -> tuple[str, list[str]]:
        conds: list[str] = []
        params: list[str] = []
        for groups in self.per_term:
            single = [g[0] for g in groups if len(g) == 1]
            if not single:
                if self.any_term:
                    return "", []  # this term may be anywhere
                continue
            conds.append("(" + " AND ".join(["(instr(text, ?) OR instr(coalesce(attachments, ''), ?))"] * len(single))
                         + ")")
            params += [c for c in single for _ in (0, 1)]
        if not conds:
            return "", []
        return " AND (" + (" OR " if self.any_term else " AND ").join(conds) + ")", params

    @property
    def holds(self) -> Callable[[str, str | None], bool] | None:
        """A test of every group on a row's raw text (the groups of one form
        again, which costs little), or None when every group has one form:
        then SQLite has tested them all."""
        if all(len(g) == 1 for groups in self.per_term for g in groups):
            return None
        per_term = self.per_term
        combine = any if self.any_term else all

        def holds(text: str, atts: str | None) -> bool:
            return combine(all(any(x in text or (atts is not None and x in atts) for x in g) for g in groups)
                           for groups in per_term)
        return holds


def literal_prefilter(terms: list[Term], any_term: bool) -> Literal:
    """A necessary condition for a message to hold the terms: the
    characters of each that a matching text must hold literally, in one of
    their few forms (fold.literal_forms), so a scan folds only the
    messages that pass."""
    per_term: list[list[tuple[str, ...]]] = []
    for t in terms:
        # Attachment names are tested in their JSON, where a control
        # character, `"` or `\` is escaped: such a form is not looked for.
        forms = {c: f for c, f in literal_forms(t.folded).items()
                 if all(orjson.dumps(x)[1:-1].decode() == x for x in f)}
        if (len(forms) > 1 and all(len(f) == 1 for f in forms.values()) and set(forms) == set(t.folded)
                and not any(map(unicodedata.combining, t.folded))):
            # Every character has no other form, none moves in the
            # normalization and none folds to nothing: the term itself is
            # in the text.
            per_term.append([(t.folded,)])
        else:
            # Two ideographs side by side first (far fewer texts hold
            # them), then each character; the character itself before
            # its rarer forms.
            chars = sorted(((c, *sorted(f - {c})) for c, f in forms.items()), key=lambda g: (len(g), g))
            per_term.append(literal_pairs(t.folded, forms) + chars)
    return Literal(per_term, any_term)


class Retriever:
    """Candidates, scans, verification and hits over one connection, in the
    scope the gates decided."""

    def __init__(self, conn: apsw.Connection, settings: Settings, ranking: Ranking):
        self.conn = conn
        self.settings = settings
        self.ranking = ranking
        self._vocab = False  # the temp fts5vocab table is on the connection
        # scope_sql's answers while an Engine method holds one read snapshot
        # (engine._one_snapshot sets it, and drops it when the snapshot ends;
        # None outside one: nothing is kept between snapshots). A recall asks
        # for its scope several times: its cursor, a confined caller's
        # universe, the engines.
        self.scopes: dict[Scope, tuple[str, list]] | None = None

    # --- the scope in SQL ---------------------------------------------------------

    def scope_sql(self, scope: Scope) -> tuple[str, list]:
        """SQL restricting `s` (sessions) to the scope; the cwd test runs in
        Python over the distinct cwds (few), so it is the same code as gates."""
        if self.scopes is None:
            return self._scope_sql(scope)
        if (known := self.scopes.get(scope)) is None:
            known = self.scopes[scope] = self._scope_sql(scope)
        return known[0], list(known[1])

    def _scope_sql(self, scope: Scope) -> tuple[str, list]:
        clauses: list[str] = []
        params: list = []
        if scope.session_id is not None:
            clauses.append("s.session_id = ?")
            params.append(scope.session_id)
        if scope.kind == "project" or self.settings.allow_cwds or self.settings.deny_cwds:
            # (a cwd recorded through a link that a list keeps out: every session of
            # it is out, whichever the spelling it was first indexed through)
            seen: dict[str, bool] = {}
            for c, links in self.conn.execute("SELECT DISTINCT cwd, cwd_links FROM sessions"):
                seen[c] = seen.get(c, True) and scope.covers_cwd(c, self.settings, links)
            cwds = [c for c, ok in seen.items() if ok]
            clauses.append("s.cwd IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(cwds).decode())
        twins = self.denied_twins()
        if twins:
            clauses.append("s.id NOT IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(sorted(twins)).decode())
        return (" AND " + " AND ".join(clauses)) if clauses else "", params

    def denied_twins(self) -> set[int]:
        """Sessions that share their source and id with a session the lists
        keep out (a denied folder, or one outside a non-empty allowlist). A
        harness records each file's cwd, and a sub-agent started after a `cd`
        records another one than its parent's: its messages are the parent
        session's (contract §2.1) and stay out with it. Fails closed: a true
        twin in another project is hidden too (docs/recall.md)."""
        if not (self.settings.deny_cwds or self.settings.allow_cwds):
            return set()
        denied = list(dict.fromkeys(c for c, links in self.conn.execute("SELECT DISTINCT cwd, cwd_links FROM sessions")
                                    if not cwd_permitted(c, self.settings, links)))
        if not denied:
            return set()
        return {row for (row,) in self.conn.execute(
            "SELECT t.id FROM sessions d JOIN sessions t ON t.session_id = d.session_id AND t.source = d.source "
            "WHERE d.cwd IN (SELECT value FROM json_each(?1)) AND t.cwd NOT IN (SELECT value FROM json_each(?1))",
            (orjson.dumps(denied).decode(),))}

    def universe(self, scope: Scope) -> tuple[str, list] | None:
        """The sessions this caller may ever search, as SQL over `s`, when
        they are not all of them: under a deny or allow list, or in a project
        scope while all_projects is not simply allowed. None when the caller
        could search every session anyway: whole-index statistics then tell it
        nothing it could not read. Statistics of a confined caller (rows, rows
        holding a phrase) are counted here (rank.size, rank.holding), never
        over the whole index."""
        s = self.settings
        if not (s.allow_cwds or s.deny_cwds or (scope.kind == "project" and s.all_projects != "allow")):
            return None
        return self.scope_sql(replace(scope, session_id=None))

    def possible(self, terms: list[Term], universe: tuple[str, list] | None) -> list[Term]:
        """The terms some message may hold: a term the index holds no
        candidate for anywhere (in the universe of a confined caller, which
        must not learn what lies outside it) matches nothing (candidates are
        a superset), unless the index cannot vouch for it (no tokens; or CJK,
        which the fallback scan re-checks)."""
        def held(t: Term) -> bool:
            if universe is not None:
                return rank.holding(self.conn, fts_phrase(t.tokens), universe, 1) > 0
            return self.conn.execute("SELECT 1 FROM message_fts WHERE message_fts MATCH ? LIMIT 1",
                                     (fts_phrase(t.tokens),)).fetchone() is not None
        return [t for t in terms if not t.tokens.tokens or HAS_CJK.search(t.folded) or held(t)]

    # --- FTS5 candidates ------------------------------------------------------------

    def order_sql(self, run: Run) -> tuple[str, list[str]]:
        """The score expression over `{bm25}` (lower is better, as bm25) and
        the sort keys before it."""
        keys = []
        if self.settings.pinned_cwds:
            keys.append("recall_pinned(s.cwd) DESC")
            run.reranked.append("pinned_cwds")
        score = f"{{bm25}} * {self.ranking.weight_sql()}"
        if self.settings.recency_half_life_days:
            score += " * recall_recency(m.ts)"
            run.reranked.append(f"recency_half_life_days={self.settings.recency_half_life_days:g}")
        return score, keys

    def fts(self, expr: str, scope_sql: str, params: list, run: Run, first: int | None = None,
            bm25: str | None = None, window: tuple[int, int | None] | None = None,
            empty: bool = False) -> Iterator[tuple]:
        """Candidates in rank order. Only keys and scores are sorted (every
        match is scored); the text of a candidate is read when verification
        reaches it.

        With `first`, the best `first` candidates come from a top-N sort, and
        the rest, if the caller reads on, from one query over every match past
        those: the order is total (ids break ties) and recall reads in one
        snapshot, so the statements add up to exactly the rows of one query.

        Before that, when the scope holds most sessions and nothing re-ranks,
        the ranked first page (_ranked_first) takes FTS5's best matches by
        plain bm25 and yields those it proves. A narrow scope skips it:
        joining first, SQLite scores only the matches in scope.

        `bm25`: the score call of a confined caller (rank.confined_bm25),
        which also skips the ranked page: its proof needs FTS5's own order.

        `window` (lo, hi): only the matches with lo <= rowid < hi (hi None:
        no upper end), a window of the bounded plan (windowed).

        `empty`: FTS5 holds no candidate (candidates_bound is 0): nothing
        is asked of it (a ranked first page that finds nothing would be
        asked again, larger, and then the rest)."""
        score, keys = self.order_sql(run)  # (its re-ranks are reported either way)
        if empty:
            return
        head: list[str | int] = [expr]
        if window is not None:
            expr_sql = " AND message_fts.rowid >= ?" + (" AND message_fts.rowid < ?" if window[1] is not None else "")
            head += [w for w in window if w is not None]
        else:
            expr_sql = ""
        order = ", ".join(keys + ["score", "m.ts DESC", "m.id DESC"])
        # the filters are ANDed to the scope where messages are joined (not
        # where sessions alone are counted)
        filter_sql, filter_params = run.filters.sql()
        sql = (f"SELECT {_COLS}, {score.format(bm25=bm25 or 'bm25(message_fts)')} AS score FROM message_fts "
               f"{_JOINS.format('message_fts.rowid')} WHERE message_fts MATCH ?{expr_sql}{scope_sql}{filter_sql} "
               f"ORDER BY {order}")
        params_m = [*params, *filter_params]
        if first is None:
            yield from self.conn.execute(sql, [*head, *params_m])
            return
        n = 0  # rows yielded
        # A re-rank would prove next to nothing. Nor is the ranked page for a
        # window of the plan: its bm25 scores the whole window either way, so
        # it saves only part of a join of a few thousand rows, and where it
        # proves too few (a term found mostly in tool results, weighted 0.5:
        # `json`, `error`) the window is scored once more.
        ranked = not keys and not self.settings.recency_half_life_days and bm25 is None and window is None
        share = 1.0  # of the sessions, in scope
        if ranked and scope_sql:
            (total,), (scoped,) = (one(self.conn.execute(f"SELECT count(*) FROM sessions s WHERE 1 = 1{w}", a))
                                   for w, a in (("", []), (scope_sql, params)))
            if not scoped:
                return
            share = scoped / total
        if ranked and share >= self.ranking.ranked_first_share:
            proven = yield from self._ranked_first(head, expr_sql, scope_sql + filter_sql,
                                                   params_m, score, order, first, share)
            if proven is None:
                return
            n = proven
        page = 0
        for row in self.conn.execute(sql + " LIMIT ? OFFSET ?", [*head, *params_m, first, n]):
            page += 1
            yield row
        if page == first:
            yield from self.conn.execute(sql + " LIMIT -1 OFFSET ?", [*head, *params_m, n + first])

    def _ranked_first(self, head: list, expr_sql: str, scope_sql: str, params: list, score: str, order: str,
                      first: int, share: float) -> Generator[tuple, None, int | None]:
        """The ranked first page: FTS5's best matches by plain bm25
        (ranked_page x `first`, over the scope's share) from its top-N sort
        before any join: joining every match to read its role, session and
        time costs about what scoring it does. A weighted score is bm25
        (negative) times a role weight of at most max_role_weight, so no match
        not taken can score below max_role_weight x the worst bm25 taken; the
        rows taken that do are the first rows of the one query's order. A
        page that proves too few is taken again, ranked_growth times larger,
        up to ranked_rounds pages; the top-N page and the rest then go on past
        the rows proven. (A recency boost of up to 2, or pinned sessions
        first, would prove next to nothing.) Returns the number of rows
        yielded, or None when they are every match in scope."""
        r = self.ranking
        top = math.ceil(r.ranked_page * first / share)
        n = 0
        for _ in range(r.ranked_rounds):
            whole, proven = False, 0
            for *row, taken, worst in self.conn.execute(
                    "WITH top(id, b) AS MATERIALIZED (SELECT rowid, bm25(message_fts) FROM message_fts "
                    f"WHERE message_fts MATCH ?{expr_sql} ORDER BY 2 LIMIT ?) "
                    f"SELECT {_COLS}, {score.format(bm25='top.b')} AS score, "
                    f"(SELECT count(*) FROM top), (SELECT max(b) FROM top) FROM top {_JOINS.format('top.id')} "
                    f"WHERE 1 = 1{scope_sql} ORDER BY {order}", [*head, top, *params]):
                whole = taken < top  # every match was taken: these rows are the answer
                if not (whole or worst < 0 and row[-1] < worst * r.max_role_weight):
                    break  # a match not taken may come before this row
                proven += 1
                if proven > n:  # a later round proves what an earlier one did, and more
                    n += 1
                    yield tuple(row)
            if whole:
                return None
            top *= r.ranked_growth
        return n

    # --- the plan by match count -------------------------------------------------------

    def candidates_bound(self, terms: list[Term], any_term: bool, cap: int | None = None) -> int:
        """At most how many rows FTS5 gives as candidates of the terms,
        from the index's own counts of rows per token: a phrase has at most
        the rows of its rarest token, an AND at most the rows of its rarest
        term, an OR at most their sum. Exact for one token. fts5vocab reads
        every row (and position) of a token to count it; with `cap`, a token
        is counted up to `cap` rows only (FTS5 reads that many of its row
        ids), which decides whether the bound exceeds cap - 1 at a cost that
        does not grow with the index. A prefix token (a lone CJK character:
        text/tokens.py makes no other) is counted by FTS5 itself, capped or
        not: the table's one-character prefix index holds it as one row list
        (migrations.create_fts), where fts5vocab would read every token
        beginning with it."""
        if not self._vocab:
            self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.recall_vocab "
                              "USING fts5vocab(main, message_fts, row)")
            self._vocab = True

        def rows(token: str, prefix: bool) -> int:
            if cap is not None or prefix:
                return one(self.conn.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM message_fts WHERE message_fts MATCH ? LIMIT ?)",
                    (fts_quote(token) + ("*" if prefix else ""), -1 if cap is None else cap)))[0]
            return one(self.conn.execute("SELECT coalesce(max(doc), 0) FROM temp.recall_vocab WHERE term = ?",
                                         (token,)))[0]

        per_term = []
        for t in terms:
            toks = t.tokens.tokens
            per_term.append(min(rows(tok, t.tokens.prefix and i == len(toks) - 1) for i, tok in enumerate(toks)))
        return sum(per_term) if any_term else min(per_term)

    def windowed(self, expr: str, scope_sql: str, params: list, run: Run, first: int,
                 bound: Callable[[int], int]) -> Iterator[tuple]:
        """The bounded plan of a frequent query (at most `bound` candidates,
        more than Ranking.plan_window): its candidates in windows of row ids,
        newest first (row ids follow the order messages were indexed in:
        docs/recall.md). The first window holds the plan_window newest
        candidates; while it holds fewer than `first` in scope and filters, it
        widens plan_growth times, up to plan_max_window candidates or all of
        them. Its candidates are ranked by one statement (fts, the order every
        match would be in) and read; a caller that reads on gets the next window of older
        candidates, plan_growth times larger, ranked among themselves, and so
        on to the oldest. Every candidate is still read and verified, so the
        matches are exactly those of the whole plan; what the plan bounds is
        which candidates one ranking compares. `run.ranked` counts the
        candidates of the windows opened, `run.ranked_of` is `bound(cap)`
        (candidates_bound, each token counted up to `cap` rows: the larger of
        Ranking.plan_count_cap and the first window, plus one), asked only
        when the first window leaves candidates out; when the count reaches
        the cap, ranked_of is the cap and `run.ranked_of_more` says that each
        word of the query is in more rows than that.
        (Every token of the query having more than plan_window rows, a
        phrase or an AND of them may still have fewer: then the first
        window holds them all, and they are ranked at once, as below.)"""
        r = self.ranking
        size = r.plan_window
        hi: int | None = None
        first_window = True
        while True:
            upper = "" if hi is None else " AND rowid < ?"
            lo, n = one(self.conn.execute(
                "SELECT min(rowid), count(*) FROM (SELECT rowid FROM message_fts "
                f"WHERE message_fts MATCH ?{upper} ORDER BY rowid DESC LIMIT ?)",
                [expr, *([] if hi is None else [hi]), size]))
            if not n:
                return
            last = n < size  # the window reaches the oldest candidate
            if last and hi is None:  # every candidate: ranked at once, as without a plan
                yield from self.fts(expr, scope_sql, params, run, first=first)
                return
            # The window ranked as a query with a first page (fts with
            # `first`): its best `first` rows by a top-N sort, the rest only if
            # the caller reads on. Not a statement per candidate: FTS5's bm25
            # walks every candidate of the table once per statement for its
            # document frequencies.
            ranked = self.fts(expr, scope_sql, params, run, first=first, window=(lo, hi))
            rows = list(itertools.islice(ranked, first))
            if first_window:
                if len(rows) < first and not last and size < r.plan_max_window:
                    size = min(size * r.plan_growth, r.plan_max_window)  # too few in scope: a wider window
                    continue
                if last:
                    run.ranked_of = n
                else:
                    limit = max(r.plan_count_cap, n)
                    counted = bound(limit + 1)
                    run.ranked_of_more = counted > limit
                    run.ranked_of = limit if run.ranked_of_more else max(counted, n)
                    run.gaps["ranking"] = (E_RANKING_GAP_MORE if run.ranked_of_more else E_RANKING_GAP).format(
                        ranked=n, bound=run.ranked_of)
                first_window = False
            run.ranked += n
            yield from rows
            yield from ranked
            if last:
                return
            hi, size = lo, size * r.plan_growth

    # --- the scan ---------------------------------------------------------------------

    def scan(self, scope_sql: str, params: list, run: Run, literal: Literal | None = None) -> Iterator[tuple]:
        """Stored text of in-scope sessions, most recent first, within the
        budget; `literal` (from literal_prefilter) leaves out messages that
        cannot match."""
        budget = self.settings.scan_budget_sessions
        pinned = ""
        if self.settings.pinned_cwds:  # pinned cwds first here too (and scanned first, within the budget)
            pinned = "recall_pinned(s.cwd) DESC, "
            if "pinned_cwds" not in run.reranked:
                run.reranked.append("pinned_cwds")
        # a session of another source holds no message that passes: tested on the sessions
        filter_sql, filter_params = run.filters.sql(m="", s=None)
        if run.filters.sources:
            scope_sql += " AND s.source IN (SELECT value FROM json_each(?))"
            params = [*params, orjson.dumps(sorted(run.filters.sources)).decode()]
        sessions = list(self.conn.execute(
            f"SELECT s.id FROM sessions s WHERE 1 = 1{scope_sql} "
            f"ORDER BY {pinned}coalesce((SELECT max(ts) FROM messages WHERE session = s.id), s.started_at) DESC, "
            "s.id DESC LIMIT ?", [*params, budget + 1]))
        if len(sessions) > budget:
            run.gaps["scan"] = (f"the exact scan visited the {budget} most recent sessions in scope (its budget); "
                                "older sessions were not searched for the terms the index cannot look up")
            sessions = sessions[:budget]
        sql, sql_params = literal.sql() if literal else ("", [])
        holds = literal.holds if literal else None
        for (sid,) in sessions:
            run.sessions_scanned += 1
            rows = self.conn.execute(
                f"SELECT id, session, turn_id, ts, text, attachments, nfkc, 0.0 FROM messages WHERE session = ?"
                f"{filter_sql}{sql} ORDER BY ts DESC, id DESC", (sid, *filter_params, *sql_params))
            yield from (rows if holds is None else (r for r in rows if holds(r[4], r[5])))

    # --- verification and hits ------------------------------------------------------------

    def verify(self, rows: Iterable[tuple], terms: list[Term], *, need_all: bool, run: Run) -> Iterator[Hit]:
        """Hits among candidate rows (id, session, turn, ts, text, attachments,
        nfkc, score), in their order; a row without text is read here."""
        folded = [t.folded for t in terms]
        collapse = needs_collapse(folded)
        for rowid, session, turn, ts, text, atts, nfkc, score in rows:
            run.candidates += 1
            if text is None:
                text, atts, nfkc = one(self.conn.execute("SELECT text, attachments, nfkc FROM messages WHERE id = ?",
                                                         (rowid,)))
            names = [match_text(a["name"], collapse) for a in orjson.loads(atts)] if atts else []
            matched = held(folded, text, names, collapse, nfkc, need_all=need_all)
            if (len(matched) == len(folded)) if need_all else matched:
                yield Hit(rowid, session, turn, -score, ts, matched, chars=len(text))

    def hits(self, terms: list[Term], scope: Scope, run: Run, *, first: int | None,
             any_term: bool = False) -> Iterator[Hit]:
        """Verified hits in rank order, choosing the engine. `first`: the
        FTS5 candidates read through a top-N sort before the rest (fts); None
        for a caller that reads thousands (partial matches): one query."""
        scope_sql, params = self.scope_sql(scope)
        universe = self.universe(scope)

        def scanned():  # the prefilter is worked out only for a scan
            return self.verify(self.scan(scope_sql, params, run, literal_prefilter(terms, any_term)), terms,
                               need_all=not any_term, run=run)

        indexed = [t for t in terms if t.tokens.tokens]
        if not indexed or (any_term and len(indexed) < len(terms)):
            run.engine = "session-scan"
            yield from scanned()
            return
        expr = fts_query(indexed, any_term)
        run.engine = "fts"
        found = False
        bm25 = rank.confined_bm25(self.conn, [fts_phrase(t.tokens) for t in indexed], universe)
        # Not for a question (any_term): its keywords are ORed, so nearly every
        # question over a long history has more candidates than a window, and
        # ranking the newest window first put the answer out of reach: on the
        # dialogue sets with a window of 256 (as 2,048 is at about eight times
        # their size), session hit@1 0.300 -> 0.195 (DREAM), 0.262 -> 0.225 (C3).
        window = self.ranking.plan_window
        bound = (self.candidates_bound(indexed, any_term, cap=window + 1)
                 if first is not None and bm25 is None and not self.settings.pinned_cwds and not any_term else None)
        if first is not None and bound is not None and bound > window:
            rows = self.windowed(expr, scope_sql, params, run, first,
                                 lambda cap: self.candidates_bound(indexed, any_term, cap=cap))
        else:
            # A bound of 0: no candidate (a term the index holds nowhere).
            rows = self.fts(expr, scope_sql, params, run, first=first, bm25=bm25, empty=bound == 0)
        for hit in self.verify(rows, terms, need_all=not any_term, run=run):
            found = True
            yield hit
        if not found and any(HAS_CJK.search(t.folded) for t in terms) and (
                any_term or len(self.possible(terms, universe)) == len(terms)):
            # The index should have answered; an exact scan makes sure. Not
            # for an AND with a term the index vouches for (no CJK) and holds
            # no candidate of anywhere: candidates are a superset of the
            # matches, so no message holds that term, and none the AND.
            run.engine = "cjk-fallback"
            if self.vouched():
                # The index was cut by this tokenizer, and its bigrams hold
                # every CJK match of every message stored (the differential
                # test): there is nothing it cannot vouch for to scan.
                return
            yield from scanned()

    def vouched(self) -> bool:
        """Whether the index's tokens are those of this code's tokenizer, so
        its candidates hold every match of every stored message; an index
        waiting for its rebuild after a tokenizer change is not."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
        return row is not None and row[0] == str(TOKENIZER_VERSION)


E_RANKING_GAP = ("a frequent query: its page was ranked among the {ranked:,} most recently indexed of at most "
                 "{bound:,} candidates; older matches follow on later pages, ranked among themselves")
E_RANKING_GAP_MORE = ("a frequent query: its page was ranked among the {ranked:,} most recently indexed of its "
                      "candidates (each of its words is in more than {bound:,} messages); older matches follow on "
                      "later pages, ranked among themselves")
_COLS = "m.id, m.session, m.turn_id, m.ts, NULL, NULL, 0"
# The covering index (migration m005): SQLite would look each match up in the
# table itself, one wide page per row.
_JOINS = ("JOIN messages m INDEXED BY messages_rank ON m.id = {} "
          "JOIN sessions s ON s.id = m.session")
