"""recall and recall_more: gates, retrieval, ranking, passages, one envelope.

How a query runs (docs/recall.md):
1. refuse a credential-shaped query before touching any corpus;
2. decide the scope (gates): the caller's project, one session, or all
   projects under the policy; the cwd allow/deny lists always apply;
3. retrieve: FTS5 candidates in ranked order, each verified against the match
   predicate; a term the index cannot represent, or a CJK query the index
   answered with nothing, is answered by an exact scan of stored text within a
   budget of sessions, most recent first;
4. rank and select: weighted bm25, at most ceil(limit/3) passages per session
   in a first pass, a second pass filling unused slots; when the AND of two or
   more terms matches nothing, the best partial matches, marked;
5. assemble passages within byte budgets, render redactions, page with an
   opaque cursor.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import math
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import apsw
import orjson

from ..config import Settings
from ..model import Diagnostics, Envelope, Result
from ..text.fold import HAS_CJK, literal_forms, literal_pairs, match_text, replace_lone_surrogates
from ..text.redact import find_secret
from ..text.tokens import term_tokens
from . import passages as P
from . import rank
from .gates import Confirm, Scope, decide_scope, session_path
from .match import needs_collapse, occurs
from .parse import Term, fts_phrase, fts_query
from .retrieve import Retriever

# Role weights multiply bm25. A tool result that merely enumerates keywords
# (a file listing, a grep dump) repeats them in a long text: with k1 = 1.2,
# b = 0.75 and average length 30 tokens, `font` three times in a 40-token
# listing scores 1.47 x idf, once in a 25-token answer 1.07 x idf. Weighting
# tool results by 0.5 (0.73 x idf) and tool calls by 0.8 puts the answer first
# while a result that is about the term (tf 6+, short) can still lead.
ROLE_WEIGHT = {"user": 1.0, "assistant": 1.0, "tool_call": 0.8, "tool_result": 0.5, "system": 0.5}
# Verified hits examined at most per query before the quota's second pass
# fills what is left (a common word can have millions of candidates).
CANDIDATE_BUDGET = 5000
# Question mode (a question alone; docs/recall.md; measured in docs/quality.md
# with bench/quality/run.py). Keywords are ORed and each message scores
#   weighted bm25 x c ** COVERAGE_POWER x (1 + TITLE_WEIGHT x t)
# where c is the share of the question's keyword weight (the sum of the
# keywords' idf) that the message holds, and t the share its session's title
# holds. bm25 alone already rewards more keywords; c ** 0.5 adds a soft
# "more of the question first" (a message with half the weight scores 0.71x):
# on CMRC it put the right passage of an article first 2.6 points more often,
# at a cost of 0.9 points on Cranfield's long queries; a hard "most keywords
# first" (the first version) cost Cranfield 12 points of hit@1. A title that
# holds all of the keywords doubles the score: titles name what a session is
# about (+1.0 points of session hit@1 on CMRC, +2.2 on Cranfield, +2.6 on the
# mixed set).
COVERAGE_POWER = 0.5
TITLE_WEIGHT = 1.0
# Question mode re-scores only the first QUESTION_POOL verified hits in bm25
# order (bm25 already favours messages holding more keywords). Measured with
# bench/quality/run.py --set all (docs/quality.md): every figure is the same
# at a pool of 100, 300, 1,000 or 5,000, and moves first at 30 (message
# hit@5 on CMRC 0.947 -> 0.945); 200 keeps a wide margin and makes a common
# question on the bench's 250 MB corpus cost tens of ms, not seconds.
QUESTION_POOL = 200
# ...so question mode reads a first page of twice the pool (verification
# drops few: a candidate holds a keyword's tokens), then the rest if needed.
QUESTION_FIRST_PAGE = 2 * QUESTION_POOL
# A term query reads its best FTS_FIRST_PAGE candidates first (a limit of 5
# verifies a handful), and the rest by one more query only if it reads on
# (Engine._fts).
FTS_FIRST_PAGE = 64
# When the scope holds at least RANKED_FIRST_SHARE of the sessions and no
# re-rank is set, the first page starts from FTS5's RANKED_PAGE x `first`
# best matches by plain bm25, before any join, and keeps the ones it proves;
# a narrower scope joins first and scores only its matches (the break-even
# measured in docs/benchmarks.md).
RANKED_FIRST_SHARE = 0.5
RANKED_PAGE = 4
# A page that proves too few (its best bm25 went to tool results, weighted
# 0.5) is taken again RANKED_GROWTH times larger, up to RANKED_ROUNDS pages.
RANKED_ROUNDS = 2
RANKED_GROWTH = 8
# The most a role weight multiplies bm25 by (a role not listed: 1.0).
MAX_ROLE_WEIGHT = max(1.0, *ROLE_WEIGHT.values())
# Partial matches (no message has every term) are looked for only in queries
# of at most this many terms: each candidate of the ORed terms is checked for
# every term, and a pasted 100 KB query of thousands of terms would take minutes.
PARTIAL_MAX_TERMS = 32
# Keywords are taken from at most this many characters of a question: a
# question is a sentence or two, and segmenting a pasted 100 KB one takes seconds.
QUESTION_MAX_CHARS = 1000
# A hint quotes the query's terms in at most this many characters.
HINT_TERMS_CHARS = 200


def _weight_sql() -> str:
    cases = " ".join(f"WHEN '{role}' THEN {w}" for role, w in ROLE_WEIGHT.items())
    return f"(CASE m.role {cases} ELSE 1.0 END)"


def _one_snapshot(method):
    """Run an Engine method in one read transaction: every query it makes
    sees the same committed state, whatever a writer commits meanwhile."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.conn:  # a savepoint; outside a transaction it begins one
            return method(self, *args, **kwargs)
    return wrapper


@dataclass
class Hit:
    rowid: int
    session: int
    turn: str
    score: float  # higher is better
    ts: str | None
    matched: list[str]
    partial: bool = False


@dataclass
class Run:
    """The state of one recall, for diagnostics and gaps."""

    engine: str = "none"
    candidates: int = 0
    sessions_scanned: int = 0
    reranked: list[str] = field(default_factory=list)
    gaps: dict[str, str] = field(default_factory=dict)


@dataclass
class Literal:
    """What a matching message holds literally (Engine._literal): for each
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


def _cursor_key(**params) -> str:
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


class Engine:
    def __init__(self, conn: apsw.Connection, settings: Settings):
        self.conn = conn
        self.settings = settings
        self.retriever = Retriever(conn)
        conn.create_scalar_function("recall_recency", self._recency, 1, deterministic=True)
        conn.create_scalar_function("recall_pinned", self._pinned, 1, deterministic=True)
        rank.register(conn)
        self._now = time.time()

    # --- SQL helpers ------------------------------------------------------------

    def _recency(self, ts: str | None) -> float:
        """1 + 2^(-age / half-life): today counts double, one half-life ago 1.5x."""
        h = self.settings.recency_half_life_days
        if not h or not ts:
            return 1.0
        try:
            import datetime as dt

            t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            if t.tzinfo is None:
                t = t.replace(tzinfo=dt.timezone.utc)
            age_days = max(0.0, (self._now - t.timestamp()) / 86400)
        except ValueError:
            return 1.0
        return 1.0 + 2.0 ** (-age_days / h)

    def _pinned(self, cwd: str) -> int:
        path = session_path(cwd)
        return int(path is not None and self.settings.path_rules().is_pinned(path))

    def generation(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def _scope_sql(self, scope: Scope) -> tuple[str, list]:
        """SQL restricting `s` (sessions) to the scope; the cwd test runs in
        Python over the distinct cwds (few), so it is the same code as gates."""
        clauses: list[str] = []
        params: list = []
        if scope.session_id is not None:
            clauses.append("s.session_id = ?")
            params.append(scope.session_id)
        if scope.kind == "project" or self.settings.allow_cwds or self.settings.deny_cwds:
            cwds = [c for (c,) in self.conn.execute("SELECT DISTINCT cwd FROM sessions")
                    if scope.covers_cwd(c, self.settings)]
            clauses.append("s.cwd IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(cwds).decode())
        twins = self._denied_twins()
        if twins:
            clauses.append("s.id NOT IN (SELECT value FROM json_each(?))")
            params.append(orjson.dumps(sorted(twins)).decode())
        return (" AND " + " AND ".join(clauses)) if clauses else "", params

    def _denied_twins(self) -> set[int]:
        """Sessions that share their source and id with a session in a denied
        folder. A harness records each file's cwd, and a sub-agent started
        after a `cd` records another one than its parent's: its messages are
        the parent session's (contract §2.1) and stay out with it. Fails
        closed: a true twin in another project is hidden too (docs/recall.md)."""
        if not self.settings.deny_cwds:
            return set()
        rules = self.settings.path_rules()
        denied = [c for (c,) in self.conn.execute("SELECT DISTINCT cwd FROM sessions")
                  if (p := session_path(c)) is not None and rules.denied(p)]
        if not denied:
            return set()
        return {row for (row,) in self.conn.execute(
            "SELECT t.id FROM sessions d JOIN sessions t ON t.session_id = d.session_id AND t.source = d.source "
            "WHERE d.cwd IN (SELECT value FROM json_each(?1)) AND t.cwd NOT IN (SELECT value FROM json_each(?1))",
            (orjson.dumps(denied).decode(),))}

    # --- what a confined caller may learn (docs/recall.md) ------------------------

    def _universe(self, scope: Scope) -> tuple[str, list] | None:
        """The sessions this caller may ever search, as SQL over `s`, when
        they are not all of them: under a deny or allow list, or in a project
        scope while all_projects is not simply allowed. None when the caller
        could search every session anyway: whole-index statistics then tell it
        nothing it could not read. Statistics of a confined caller (rows, rows
        holding a phrase) are counted here, never over the whole index."""
        s = self.settings
        if not (s.allow_cwds or s.deny_cwds or (scope.kind == "project" and s.all_projects != "allow")):
            return None
        return self._scope_sql(replace(scope, session_id=None))

    def _size(self, universe: tuple[str, list]) -> tuple[int, int]:
        """Messages and index tokens in the universe (migration m006 keeps
        them per session)."""
        rows, tokens = self.conn.execute(
            f"SELECT coalesce(sum(n_messages), 0), coalesce(sum(n_tokens), 0) FROM sessions s WHERE 1 = 1{universe[0]}",
            universe[1]).fetchone()
        return rows, tokens

    def _holding(self, expr: str, universe: tuple[str, list], limit: int = -1) -> int:
        """Messages in the universe that FTS5 gives as candidates of `expr`
        (at most `limit`)."""
        return self.conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM message_fts JOIN messages m INDEXED BY messages_rank "
            "ON m.id = message_fts.rowid JOIN sessions s ON s.id = m.session "
            f"WHERE message_fts MATCH ?{universe[0]} LIMIT ?)", [expr, *universe[1], limit]).fetchone()[0]

    def _bm25(self, phrases: list[str], universe: tuple[str, list] | None) -> str | None:
        """The score call of a confined caller (rank.recall_bm25 with idfs of
        the universe), or None for FTS5's own bm25."""
        if universe is None:
            return None
        rows, tokens = self._size(universe)
        return rank.bm25_sql(tokens / rows if rows else 1.0,
                             [rank.idf(rows, self._holding(p, universe)) for p in phrases])

    def _order_sql(self, run: Run) -> tuple[str, list[str]]:
        """The score expression over `{bm25}` (lower is better, as bm25) and
        the sort keys before it."""
        keys = []
        if self.settings.pinned_cwds:
            keys.append("recall_pinned(s.cwd) DESC")
            run.reranked.append("pinned_cwds")
        score = f"{{bm25}} * {_weight_sql()}"
        if self.settings.recency_half_life_days:
            score += " * recall_recency(m.ts)"
            run.reranked.append(f"recency_half_life_days={self.settings.recency_half_life_days:g}")
        return score, keys

    # --- retrieval --------------------------------------------------------------

    def _fts(self, expr: str, scope_sql: str, params: list, run: Run, first: int | None = None,
             bm25: str | None = None):
        """Candidates in rank order. Only keys and scores are sorted (every
        match is scored); the text of a candidate is read when verification
        reaches it.

        With `first`, the best `first` candidates come from a top-N sort, and
        the rest, if the caller reads on, from one query over every match past
        those: the order is total (ids break ties) and recall reads in one
        snapshot, so the statements add up to exactly the rows of one query.

        Before that, when the scope holds most sessions and nothing re-ranks,
        a statement takes FTS5's best matches by plain bm25 (RANKED_PAGE x
        `first`, over the scope's share) from its top-N sort before any join:
        joining every match to read its role, session and time costs about
        what scoring it does. A weighted score is bm25 (negative) times a
        role weight of at most MAX_ROLE_WEIGHT, so no match not taken can
        score below MAX_ROLE_WEIGHT x the worst bm25 taken; the rows taken
        that do are the first rows of the one query's order. A page that
        proves too few is taken again, RANKED_GROWTH times larger, up to
        RANKED_ROUNDS pages; the top-N page and the rest then go on past the
        rows proven. (A recency boost of up to 2, or pinned sessions first,
        would prove next to nothing.) A narrow scope skips it: joining
        first, SQLite scores only the matches in scope.

        `bm25`: the score call of a confined caller (_bm25), which also skips
        the ranked page: its proof needs FTS5's own order."""
        score, keys = self._order_sql(run)
        order = ", ".join(keys + ["score", "m.ts DESC", "m.id DESC"])
        cols = "m.id, m.session, m.turn_id, m.ts, NULL, NULL, 0"
        # The covering index (migration m005): SQLite would look each match
        # up in the table itself, one wide page per row.
        joins = ("JOIN messages m INDEXED BY messages_rank ON m.id = {} "
                 "JOIN sessions s ON s.id = m.session")
        sql = (f"SELECT {cols}, {score.format(bm25=bm25 or 'bm25(message_fts)')} AS score FROM message_fts "
               f"{joins.format('message_fts.rowid')} WHERE message_fts MATCH ?{scope_sql} ORDER BY {order}")
        if first is None:
            yield from self.conn.execute(sql, [expr, *params])
            return
        n = 0  # rows yielded
        # a re-rank would prove next to nothing
        ranked = not keys and not self.settings.recency_half_life_days and bm25 is None
        share = 1.0  # of the sessions, in scope
        if ranked and scope_sql:
            (total,), (scoped,) = (self.conn.execute(f"SELECT count(*) FROM sessions s WHERE 1 = 1{w}", a).fetchone()
                                   for w, a in (("", []), (scope_sql, params)))
            if not scoped:
                return
            share = scoped / total
        if ranked and share >= RANKED_FIRST_SHARE:
            top = math.ceil(RANKED_PAGE * first / share)
            for _ in range(RANKED_ROUNDS):
                whole, proven = False, 0
                for *row, taken, worst in self.conn.execute(
                        "WITH top(id, b) AS MATERIALIZED (SELECT rowid, bm25(message_fts) FROM message_fts "
                        "WHERE message_fts MATCH ? ORDER BY 2 LIMIT ?) "
                        f"SELECT {cols}, {score.format(bm25='top.b')} AS score, "
                        f"(SELECT count(*) FROM top), (SELECT max(b) FROM top) FROM top {joins.format('top.id')} "
                        f"WHERE 1 = 1{scope_sql} ORDER BY {order}", [expr, top, *params]):
                    whole = taken < top  # every match was taken: these rows are the answer
                    if not (whole or worst < 0 and row[-1] < worst * MAX_ROLE_WEIGHT):
                        break  # a match not taken may come before this row
                    proven += 1
                    if proven > n:  # a later round proves what an earlier one did, and more
                        n += 1
                        yield tuple(row)
                if whole:
                    return
                top *= RANKED_GROWTH
        page = 0
        for row in self.conn.execute(sql + " LIMIT ? OFFSET ?", [expr, *params, first, n]):
            page += 1
            yield row
        if page == first:
            yield from self.conn.execute(sql + " LIMIT -1 OFFSET ?", [expr, *params, n + first])

    @staticmethod
    def _literal(terms: list[Term], any_term: bool) -> Literal:
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

    def _scan(self, scope_sql: str, params: list, run: Run, literal: Literal | None = None):
        """Stored text of in-scope sessions, most recent first, within the
        budget; `literal` (from _literal) leaves out messages that cannot match."""
        budget = self.settings.scan_budget_sessions
        pinned = ""
        if self.settings.pinned_cwds:  # pinned cwds first here too (and scanned first, within the budget)
            pinned = "recall_pinned(s.cwd) DESC, "
            if "pinned_cwds" not in run.reranked:
                run.reranked.append("pinned_cwds")
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
                f"{sql} ORDER BY ts DESC, id DESC", (sid, *sql_params))
            yield from (rows if holds is None else (r for r in rows if holds(r[4], r[5])))

    def _verify(self, rows, terms: list[Term], *, need_all: bool, run: Run):
        """Hits among candidate rows (id, session, turn, ts, text, attachments,
        nfkc, score), in their order; a row without text is read here."""
        folded = [t.folded for t in terms]
        collapse = needs_collapse(folded)
        for rowid, session, turn, ts, text, atts, nfkc, score in rows:
            run.candidates += 1
            if text is None:
                text, atts, nfkc = self.conn.execute("SELECT text, attachments, nfkc FROM messages WHERE id = ?",
                                                     (rowid,)).fetchone()
            fields = [match_text(text, collapse, nfkc)]
            if atts:
                fields += [match_text(a["name"], collapse) for a in orjson.loads(atts)]
            matched = []
            for t in folded:
                if any(occurs(t, f) for f in fields):
                    matched.append(t)
                elif need_all:  # one missing term decides: a long query costs no more than it must
                    break
            if (len(matched) == len(folded)) if need_all else matched:
                yield Hit(rowid, session, turn, -score, ts, matched)

    def _hits(self, terms: list[Term], scope: Scope, run: Run, *, first: int | None, any_term: bool = False):
        """Verified hits in rank order, choosing the engine. `first`: the
        FTS5 candidates read through a top-N sort before the rest (_fts); None
        for a caller that reads thousands (partial matches): one query."""
        scope_sql, params = self._scope_sql(scope)
        universe = self._universe(scope)

        def scanned():  # the prefilter is worked out only for a scan
            return self._verify(self._scan(scope_sql, params, run, self._literal(terms, any_term)), terms,
                                need_all=not any_term, run=run)

        indexed = [t for t in terms if t.tokens.tokens]
        if not indexed or (any_term and len(indexed) < len(terms)):
            run.engine = "session-scan"
            yield from scanned()
            return
        expr = fts_query(indexed, any_term)
        run.engine = "fts"
        found = False
        rows = self._fts(expr, scope_sql, params, run, first=first,
                         bm25=self._bm25([fts_phrase(t.tokens) for t in indexed], universe))
        for hit in self._verify(rows, terms, need_all=not any_term, run=run):
            found = True
            yield hit
        if not found and any(HAS_CJK.search(t.folded) for t in terms) and (
                any_term or len(self._possible(terms, universe)) == len(terms)):
            # The index should have answered; an exact scan makes sure. Not
            # for an AND with a term the index vouches for (no CJK) and holds
            # no candidate of anywhere: candidates are a superset of the
            # matches, so no message holds that term, and none the AND.
            run.engine = "cjk-fallback"
            yield from scanned()

    # --- selection --------------------------------------------------------------

    @staticmethod
    def _select(hits, limit: int, need: int) -> tuple[list[Hit], bool]:
        """Collapse hits by turn, keep at most ceil(limit/3) passages per
        session in a first pass, fill unused slots from the rest. Returns the
        first `need` passages in final order and whether more exist."""
        quota = math.ceil(limit / 3)
        seen_turns: set[tuple[int, str]] = set()
        per_session: Counter[int] = Counter()
        first: list[Hit] = []
        deferred: list[Hit] = []
        examined = 0
        exhausted = True
        for hit in hits:
            key = (hit.session, hit.turn)
            if key in seen_turns:
                continue
            seen_turns.add(key)
            if per_session[hit.session] < quota:
                per_session[hit.session] += 1
                first.append(hit)
                if len(first) > need:
                    exhausted = False
                    break
            else:
                deferred.append(hit)
            examined += 1
            if examined >= CANDIDATE_BUDGET:
                exhausted = False
                break
        ranked = first + deferred if exhausted or len(first) <= need else first
        return ranked[:need], len(ranked) > need

    # --- the envelope -------------------------------------------------------------

    def _envelope(self, t0: float, query: str, question: str | None, status: str, hint: str, run: Run | None = None,
                  **kw) -> Envelope:
        run = run or Run()
        freshness = dict(self.conn.execute(
            "SELECT 'last_indexed_at', max(last_indexed_at) FROM sources").fetchall())
        freshness["sources"] = self.conn.execute("SELECT count(*) FROM sources").fetchone()[0]
        diag = Diagnostics(engine=run.engine, elapsed_ms=round((time.perf_counter() - t0) * 1000, 3),
                           sessions_scanned=run.sessions_scanned,
                           scan_budget=self.settings.scan_budget_sessions if run.engine != "fts" and
                           run.engine != "none" else 0,
                           candidates=run.candidates, reranked=run.reranked, index_freshness=freshness,
                           terms=kw.pop("terms", []))
        return Envelope(query=query, question=question, status=status, hint=hint, gaps=run.gaps,
                        diagnostics=diag, **kw)

    def refusal(self, query: str, question: str | None, t0: float | None = None) -> Envelope | None:
        """The refusal of a credential-shaped query or question, else None.
        Reads no session, message or index row (callers ask it first)."""
        for text in (_clean(query) or "", _clean(question) or ""):
            kind = find_secret(text)
            if kind:
                return self._envelope(
                    time.perf_counter() if t0 is None else t0, "[refused]", None, "refused",
                    f"The query looks like a credential ({kind}). Secrets are removed when sessions are indexed "
                    "and cannot be searched for; search for the words around it instead (the service, file or "
                    "command it was used with).")
        return None

    @_one_snapshot
    def recall(self, query: str = "", question: str | None = None, *, all_projects: bool = False,
               cwd: str | None = None, session_id: str | None = None, limit: int | None = None,
               cursor: str | None = None, caller_session: str | None = None,
               confirm: Confirm | None = None, caller_cwd: str | None = None) -> Envelope:
        t0 = time.perf_counter()
        self._now = time.time()
        query, question, cwd, session_id, cursor, caller_session, caller_cwd = map(
            _clean, (query or "", question, cwd, session_id, cursor, caller_session, caller_cwd))
        # 1. a credential-shaped query is refused before any corpus is touched
        refused = self.refusal(query, question, t0)
        if refused is not None:
            return refused
        limit = max(1, min(limit or self.settings.default_limit, self.settings.max_limit))
        terms = self.retriever.parse(query)
        kw_terms, kw_group = self.question_terms(question, terms) if question else ([], {})
        term_names = [t.folded for t in terms + kw_terms]
        if not terms and not kw_terms:
            return self._envelope(t0, query, question, "empty_query",
                                  "Give a query (words or \"quoted phrases\", all must match) or a question "
                                  "in natural language.")
        # 2. gates
        verdict = decide_scope(self.settings, cwd=cwd, session_id=session_id, all_projects=all_projects,
                               confirm=confirm, caller_cwd=caller_cwd)
        if verdict.scope is None:
            return self._envelope(t0, query, question, "denied", verdict.hint)
        scope = verdict.scope
        if self.conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None:
            return self._envelope(t0, query, question, "empty_index",
                                  "The index is empty: nothing has been searched. Index session logs first "
                                  "(`recall index PATH`, or configure sources).", terms=term_names)
        if session_id is not None:
            twins = self._denied_twins()
            known = [r for r in self.conn.execute("SELECT cwd, id FROM sessions WHERE session_id = ?", (session_id,))
                     if scope.covers(r[0], session_id, self.settings) and r[1] not in twins]
            if not known:
                return self._envelope(t0, query, question, "unknown_session",
                                      f"No session {session_id!r} in scope ({self._scope_words(scope)}). Check the id, "
                                      "or search without session_id.", terms=term_names)
        # 3. paging
        key = _cursor_key(q=query, qs=question, a=all_projects, c=scope.roots, s=session_id, l=limit)
        offset = 0
        generation = self.generation()
        if cursor:
            cur = read_cursor(cursor)
            if cur is None or cur.get("k") != key:
                return self._envelope(t0, query, question, "stale_cursor",
                                      "This cursor does not belong to this query; repeat the query without a "
                                      "cursor, or with the same query, question, scope and limit.", terms=term_names)
            if cur.get("g") != generation:
                return self._envelope(t0, query, question, "stale_cursor",
                                      "The index changed since this cursor was made (new messages arrived); "
                                      "repeat the query without a cursor to page the current results.",
                                      terms=term_names)
            offset = cur["o"]
        # 4. retrieve and select
        run = Run()
        if question and len(question) > QUESTION_MAX_CHARS:
            run.gaps["question"] = (f"keywords were taken from the question's first {QUESTION_MAX_CHARS} "
                                    f"characters (of {len(question)})")
        need = offset + limit
        partial = False
        if terms and kw_terms:
            hits = self._rank_by_keywords(self._hits(terms, scope, run, first=FTS_FIRST_PAGE), kw_terms, kw_group)
        elif terms:
            hits = self._hits(terms, scope, run, first=FTS_FIRST_PAGE)
        else:
            # question only: a message with more of the keywords comes first
            hits = self._by_question(self._hits(kw_terms, scope, run, any_term=True, first=QUESTION_FIRST_PAGE),
                                     kw_terms, kw_group, run, self._universe(scope))
        selected, more = self._select(hits, limit, need)
        if not selected and len(terms) > PARTIAL_MAX_TERMS and not kw_terms:
            run.gaps["partial"] = (f"no message contains all {len(terms)} terms; partial matches are looked for "
                                   f"only in queries of at most {PARTIAL_MAX_TERMS} terms")
        elif not selected and len(terms) >= 2 and not kw_terms:
            partial_run = Run()
            alive = self._possible(terms, self._universe(scope))
            if not alive:
                ranked = iter(())
            elif len(alive) == 1:  # every hit has the one term: coverage ties, rank order stands
                ranked = self._hits(alive, scope, partial_run, first=FTS_FIRST_PAGE)
            else:
                ranked = self._by_coverage(self._hits(alive, scope, partial_run, any_term=True, first=None))
            selected, more = self._select(ranked, limit, need)
            for h in selected:
                h.partial = True
            partial = bool(selected)
            partial_run.gaps.update(run.gaps)
            partial_run.candidates += run.candidates
            run = partial_run
        page = selected[offset:]
        # 5. passages
        rend = P.Renderer(self.settings.redaction)
        results: list[Result] = []
        used = 0
        folded_terms = [t.folded for t in terms + kw_terms]
        for hit in page:
            s = self.conn.execute("SELECT source, cwd, session_id, title, started_at FROM sessions WHERE id = ?",
                                  (hit.session,)).fetchone()
            passage = P.build(self.conn, session_row=hit.session, session_key=(s[0], s[1], s[2]), anchor_row=hit.rowid,
                              terms=[t.folded for t in terms] if terms else [], rend=rend,
                              caller_session=_own(caller_session, s[1], scope), cut_terms=folded_terms)
            if not terms:  # question mode: mark hits by any keyword
                for m in passage.messages:
                    m.is_hit = m.is_hit or any(occurs(k, match_text(m.text)) for k in folded_terms)
            size = sum(len(m.text.encode("utf-8", "surrogatepass")) for m in passage.messages)
            if results and used + size > P.RESPONSE_BYTES:
                run.gaps["response_budget"] = (f"{len(page) - len(results)} more passages did not fit the "
                                               f"response budget of {P.RESPONSE_BYTES} bytes; page with next_cursor")
                more = True
                break
            used += size
            results.append(Result(session_id=s[2], source=s[0], title=rend(s[3]), cwd=s[1], started_at=s[4],
                                  score=round(hit.score, 6), partial=hit.partial, matched_terms=hit.matched,
                                  passage=passage))
        next_cursor = make_cursor(key, offset + len(results), generation) if more and results else None
        if results:
            status = "partial" if partial else "ok"
            hint = self._ok_hint(results, partial, terms, next_cursor)
        else:
            status = "no_match"
            hint = (f"No message in {self._scope_words(scope)} matches "
                    + (_quoted([t.raw for t in terms], " and ") if terms else "the question's keywords "
                       + _quoted([t.folded for t in kw_terms], ", "))
                    + (". Try fewer or other words, a question, or all_projects." if not all_projects else
                       ". Try fewer or other words, or a question."))
            scope_sql, params = self._scope_sql(scope)
            if not offset and not self.conn.execute(
                    f"SELECT count(*) FROM sessions s WHERE 1 = 1{scope_sql}", params).fetchone()[0]:
                # Nothing was searched: not the same answer as "searched, found nothing".
                run.gaps["scope"] = f"no indexed session lies in {self._scope_words(scope)}"
                hint = (f"No session of {self._scope_words(scope)} is indexed, so nothing was searched. "
                        "Index this project's session logs (`recall index PATH`), pass the cwd of the project "
                        "you mean, or search all_projects.")
            if offset:
                hint = "No more results: the previous page was the last."
        return self._envelope(t0, query, question, status, hint, run, results=results, next_cursor=next_cursor,
                              redacted=rend.redacted, terms=term_names)

    def question_terms(self, question: str, terms: list[Term]) -> tuple[list[Term], dict[str, int]]:
        """The keywords of a question (and their variants) that are not among
        `terms`, as terms, with each one's keyword group (by folded text)."""
        from .keywords import keyword_groups

        kw_terms: list[Term] = []
        kw_group: dict[str, int] = {}
        have = {t.folded for t in terms}
        for gi, group in enumerate(keyword_groups(question[:QUESTION_MAX_CHARS])):
            for kw in group:
                folded = match_text(kw).strip()
                if folded and folded not in have:
                    have.add(folded)
                    kw_group[folded] = gi
                    kw_terms.append(Term(kw, folded, term_tokens(folded, self.retriever.word_tokens)))
        return kw_terms, kw_group

    def _possible(self, terms: list[Term], universe: tuple[str, list] | None) -> list[Term]:
        """The terms some message may hold: a term the index holds no
        candidate for anywhere (in the universe of a confined caller, which
        must not learn what lies outside it) matches nothing (candidates are
        a superset), unless the index cannot vouch for it (no tokens; or CJK,
        which the fallback scan re-checks)."""
        def held(t: Term) -> bool:
            if universe is not None:
                return self._holding(fts_phrase(t.tokens), universe, 1) > 0
            return self.conn.execute("SELECT 1 FROM message_fts WHERE message_fts MATCH ? LIMIT 1",
                                     (fts_phrase(t.tokens),)).fetchone() is not None
        return [t for t in terms if not t.tokens.tokens or HAS_CJK.search(t.folded) or held(t)]

    def _rank_by_keywords(self, hits, kw_terms: list[Term], kw_group: dict[str, int]):
        """query AND-filters; the question's keywords rank (more keywords first,
        a keyword and its variants counting once). Examines at most
        CANDIDATE_BUDGET hits."""
        pool = []
        for i, hit in enumerate(hits):
            if i >= CANDIDATE_BUDGET:
                break
            text = self.conn.execute("SELECT text FROM messages WHERE id = ?", (hit.rowid,)).fetchone()[0]
            mt = match_text(text)
            extra: dict[int, str] = {}
            for k in kw_terms:
                if kw_group[k.folded] not in extra and occurs(k.folded, mt):
                    extra[kw_group[k.folded]] = k.folded
            hit.matched = hit.matched + list(extra.values())
            pool.append(hit)
        return self._by_coverage(iter(pool))

    def _group_idf(self, kw_terms: list[Term], kw_group: dict[str, int],
                   universe: tuple[str, list] | None) -> dict[int, float]:
        """idf of each keyword group over the whole index (over the universe
        of a confined caller): ln(1 + (N - n + 0.5) / (n + 0.5)), n the
        messages holding any of its variants, N the messages (over the whole
        index, approximated by the highest message row id)."""
        n_all = self._size(universe)[0] if universe is not None else self.conn.execute(
            "SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        phrases: dict[int, list[str]] = {}
        for t in kw_terms:
            if t.tokens.tokens:
                phrases.setdefault(kw_group[t.folded], []).append(fts_phrase(t.tokens))
        idf = {}
        for g in set(kw_group.values()):
            if g not in phrases:
                n = 0
            elif universe is not None:
                n = self._holding(" OR ".join(phrases[g]), universe)
            else:
                n = self.conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?",
                                      (" OR ".join(phrases[g]),)).fetchone()[0]
            idf[g] = math.log(1 + (n_all - n + 0.5) / (n + 0.5))
        return idf

    def _by_question(self, hits, kw_terms: list[Term], kw_group: dict[str, int], run: Run,
                     universe: tuple[str, list] | None):
        """Question mode: at most CANDIDATE_BUDGET hits (in bm25 order), each
        scored weighted bm25 x c ** COVERAGE_POWER x (1 + TITLE_WEIGHT x t)
        (see COVERAGE_POWER), then ordered: pinned cwds first (when
        configured), score, coverage, newer, id. Which messages are returned
        does not change, only their order."""
        pool = list(itertools.islice(hits, QUESTION_POOL))
        if not pool:
            return iter(pool)
        idf = self._group_idf(kw_terms, kw_group, universe)
        total = sum(idf.values()) or 1.0
        rows = self.conn.execute("SELECT id, cwd, title FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                                 (orjson.dumps(sorted({h.session for h in pool})).decode(),)).fetchall()
        pinned = {sid for sid, cwd, _ in rows if self.settings.pinned_cwds and self._pinned(cwd)}
        title_cov: dict[int, float] = {}
        if TITLE_WEIGHT:
            for sid, _cwd, title in rows:
                tt = match_text(title or "")
                got = {kw_group[t.folded] for t in kw_terms if tt and occurs(t.folded, tt)}
                if got:
                    title_cov[sid] = sum(idf[g] for g in got) / total
            if title_cov:
                run.reranked.append(f"session_title={TITLE_WEIGHT:g}")
        cover: dict[int, float] = {}
        for h in pool:
            cover[h.rowid] = cov = sum(idf[g] for g in {kw_group[m] for m in h.matched if m in kw_group}) / total
            h.score = h.score * cov ** COVERAGE_POWER * (1 + TITLE_WEIGHT * title_cov.get(h.session, 0.0))
        # Coverage also breaks ties: a scan has no bm25 (every score is 0).
        pool.sort(key=lambda h: (h.session not in pinned, -h.score, -cover[h.rowid], _neg(h.ts), -h.rowid))
        return iter(pool)

    def _by_coverage(self, hits):
        """At most CANDIDATE_BUDGET hits, those matching more terms first, then
        by rank: pinned cwds first (when configured), score, newer, id."""
        pool = list(itertools.islice(hits, CANDIDATE_BUDGET))
        pinned: set[int] = set()
        if self.settings.pinned_cwds and pool:
            rows = self.conn.execute("SELECT id, cwd FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                                     (orjson.dumps(sorted({h.session for h in pool})).decode(),))
            pinned = {sid for sid, cwd in rows if self._pinned(cwd)}
        pool.sort(key=lambda h: (h.session not in pinned, -len(h.matched), -h.score, _neg(h.ts), -h.rowid))
        return iter(pool)

    @staticmethod
    def _scope_words(scope: Scope) -> str:
        base = "all projects" if scope.kind == "all" else f"the project {scope.cwd}"
        return base + (f", session {scope.session_id}" if scope.session_id else "")

    @staticmethod
    def _ok_hint(results: list[Result], partial: bool, terms: list[Term], cursor: str | None) -> str:
        sessions = len({(r.source, r.cwd, r.session_id) for r in results})
        hint = f"{len(results)} passage{'s' * (len(results) != 1)} from {sessions} session{'s' * (sessions != 1)}."
        if partial:
            hint = ("No message contains all of " + _quoted([t.raw for t in terms], ", ")
                    + "; these are the best partial matches (matched_terms says which terms each has). " + hint)
        hint += " recall_more(anchor_id) widens a passage to its whole turn."
        if cursor:
            hint += " More results: pass next_cursor."
        return hint

    # --- recall_more ----------------------------------------------------------------

    @_one_snapshot
    def recall_more(self, anchor: str, *, cwd: str | None = None, all_projects: bool = False,
                    caller_session: str | None = None, confirm: Confirm | None = None,
                    caller_cwd: str | None = None) -> Envelope:
        t0 = time.perf_counter()
        anchor, cwd, caller_session, caller_cwd = map(_clean, (anchor, cwd, caller_session, caller_cwd))
        parsed = P.parse_anchor(anchor)
        if parsed is None:
            return self._envelope(t0, anchor, None, "unknown_anchor",
                                  "This is not an anchor_id from a recall result; pass a passage's anchor_id.")
        source, scwd, session_id, message_id = parsed
        verdict = decide_scope(self.settings, cwd=cwd, session_id=None, all_projects=all_projects, confirm=confirm,
                               caller_cwd=caller_cwd)
        row = self.conn.execute(
            "SELECT s.id, s.title, s.started_at, m.id FROM sessions s JOIN messages m ON m.session = s.id "
            "WHERE s.source = ? AND s.cwd = ? AND s.session_id = ? AND m.message_id = ?",
            (source, scwd, session_id, message_id)).fetchone()
        # Out of scope and unknown read the same, so an anchor cannot probe other projects.
        if (verdict.scope is None or row is None or not verdict.scope.covers(scwd, session_id, self.settings)
                or row[0] in self._denied_twins()):
            return self._envelope(t0, anchor, None, "unknown_anchor" if verdict.scope is not None else "denied",
                                  verdict.hint or "No passage with this anchor in scope: it belongs to a session "
                                  "this caller cannot see, or the session is no longer indexed.")
        rend = P.Renderer(self.settings.redaction)
        passage = P.build(self.conn, session_row=row[0], session_key=(source, scwd, session_id), anchor_row=row[3],
                          terms=[], rend=rend, caller_session=_own(caller_session, scwd, verdict.scope), wide=True)
        result = Result(session_id=session_id, source=source, title=rend(row[1]), cwd=scwd, started_at=row[2],
                        score=0.0, partial=False, matched_terms=[], passage=passage)
        run = Run(engine="none")
        return self._envelope(t0, anchor, None, "ok", f"The turn around this anchor, {len(passage.messages)} messages.",
                              run, results=[result], redacted=rend.redacted)


def _clean(value: str | None) -> str | None:
    """A caller's string as the index reads text: lone surrogates (which no
    envelope could encode) become U+FFFD, as they did in the logs."""
    return replace_lone_surrogates(value) if isinstance(value, str) else value


def _quoted(values: list[str], sep: str) -> str:
    """Terms for a hint, quoted, at most HINT_TERMS_CHARS (a hint stays one
    short sentence even for a query of 100 KB)."""
    text = sep.join(repr(v) for v in values)
    return text if len(text) <= HINT_TERMS_CHARS else text[:HINT_TERMS_CHARS] + "…"


def _own(caller_session: str | None, session_cwd: str, scope: Scope) -> str | None:
    """`caller_session` if a session of this cwd can be the caller's own: a
    session is (source, cwd, id), so the same id in another project (outside
    the caller's cwd) is someone else's and its materials get no resource."""
    return caller_session if scope.in_root(session_cwd) else None


def _neg(ts: str | None) -> tuple:
    """Sort key putting newer timestamps first."""
    return tuple(-ord(c) for c in (ts or ""))
