"""Ranking: the weights and pool sizes of recall (one frozen `Ranking` value,
passed to the engine), the orders they make, and bm25 over the statistics of
a confined caller's own scope.

FTS5's built-in bm25() weighs a term by how many rows of the whole table hold
it. For a caller who may not see every project (a deny or allow list, or a
project scope under an all_projects policy of deny or confirm) that weight is
a side channel: a score moves when a word is added to a project the caller
cannot read, so comparing scores answers "does that project hold this word?".
recall_bm25 is the same formula, with the number of rows and the rows holding
each phrase counted in the caller's scope (docs/recall.md, "What a confined
caller can learn").
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

import apsw
import orjson

from ..rows import one
from ..text.fold import HAS_CJK, match_text
from .gates import session_path
from .match import occurs
from .parse import Term, fts_phrase

if TYPE_CHECKING:
    from ..config import Settings
    from .retrieve import Hit, Run

# FTS5's bm25 parameters (fts5_aux.c); the built-in function is called without
# column weights, so these are the values it uses.
K1 = 1.2
B = 0.75
# FTS5 clamps a non-positive idf (a phrase in more than half the rows) to this.
MIN_IDF = 1e-6


@dataclass(frozen=True)
class Ranking:
    """Every weight and pool size of recall. The engine takes one (default
    `Ranking()`, as shipped); the quality harness builds variants with
    `dataclasses.replace`."""

    # Role weights multiply bm25. A tool result that merely enumerates keywords
    # (a file listing, a grep dump) repeats them in a long text: with k1 = 1.2,
    # b = 0.75 and average length 30 tokens, `font` three times in a 40-token
    # listing scores 1.47 x idf, once in a 25-token answer 1.07 x idf. Weighting
    # tool results by 0.5 (0.73 x idf) and tool calls by 0.8 puts the answer first
    # while a result that is about the term (tf 6+, short) can still lead.
    role_weight: Mapping[str, float] = field(default_factory=lambda: MappingProxyType(
        {"user": 1.0, "assistant": 1.0, "tool_call": 0.8, "tool_result": 0.5, "system": 0.5}))
    # Verified hits examined at most per query before the quota's second pass
    # fills what is left (a common word can have millions of candidates).
    candidate_budget: int = 5000
    # Question mode (a question alone; docs/recall.md; measured in docs/quality.md
    # with bench/quality/evaluate.py). Keywords are ORed and each message scores
    #   weighted bm25 x c ** coverage_power x (1 + title_weight x t) x (1 + session_weight x (e - c))
    # where c is the share of the question's keyword weight (the keywords'
    # idf, keyword_weights) that the message holds, t the share its session's
    # title holds, e the share its session holds (below). bm25 alone already
    # rewards more keywords; c adds "more of the question first": on CMRC it
    # put the right passage of an article first 2.6 points more often (power
    # 0.5), and power 1 adds what the dialogue sets need (a turn holding one
    # keyword among many is rarely the answer) for 1.3 points on Cranfield's
    # long queries; a hard "most keywords first" (the first version) cost
    # Cranfield 12 points of hit@1. A title that holds all of the keywords
    # doubles the score: titles name what a session is about (+1.0 points of
    # session hit@1 on CMRC, +2.2 on Cranfield, +2.6 on the mixed set).
    coverage_power: float = 1.0
    title_weight: float = 1.0
    # A message's score is also multiplied by 1 + session_weight x (e - c), e
    # the share of the keywords' weight held by its session's messages among
    # the verified hits re-scored (the pool, below), c the message's own: a
    # conversation spreads what a question asks over several turns (the
    # question in one, the answer in the next), and a turn whose session holds
    # more of the question beside it is likelier the one meant. A session of
    # one message (e = c) is left as it was. On the dialogue sets' tuning
    # halves (docs/quality.md) this bought about +4 points of session hit@1 on
    # DREAM and +4 on C3; e ** 1 as a plain factor bought as much there but
    # counted a lone message's coverage twice (Cranfield -4.4 points).
    session_weight: float = 2.0
    # In a question that holds CJK, a keyword in another script (an
    # identifier, a command, a product: `compaction`, `vitest`, `hello.py`)
    # weighs latin_in_cjk times its idf in the shares above: it names the thing
    # asked about, where the CJK words around it (文件, 命令, 上次) are the
    # question's frame. On the coding set, +13 points of session hit@1.
    latin_in_cjk: float = 3.0
    # Question mode re-scores only the first question_pool verified hits in bm25
    # order (bm25 already favours messages holding more keywords). Measured with
    # bench/quality/evaluate.py (docs/quality.md): on CMRC and Cranfield every
    # figure is the same at a pool of 100, 300, 1,000 or 5,000; on the tuning
    # halves of the dialogue sets 100 against 200 gives session hit@1 0.303
    # against 0.306 (DREAM) and 0.276 against 0.278 (C3), the coding set and
    # Cranfield the same, for a median 30 to 65 % lower: each pooled hit is a
    # candidate read, folded and verified, and a long tool result costs
    # milliseconds to fold.
    question_pool: int = 100
    # ...and, past its first question_pool_min hits, none once the texts
    # pooled hold question_chars characters (None: no such bound). Every
    # pooled hit is folded and verified, about 20 ns a character (a tool
    # result of 100,000 characters costs 2 ms), so a question over long
    # tool results cost what their length did. On the coding set (warm,
    # three passes): median 11.7 -> 7.2 ms, mean 15.2 -> 7.2 ms, session
    # hit@1 0.755 -> 0.783 (its tuning half 0.714 -> 0.738, where 50,000
    # gave 0.714); the dialogue sets, CMRC and Cranfield, whose pools hold
    # short texts, the same (docs/quality.md). At least 20 hits: two pages.
    question_pool_min: int = 20
    question_chars: int | None = 100_000
    # ...so question mode reads a first page of twice the pool (verification
    # drops few: a candidate holds a keyword's tokens), then the rest if needed.
    question_first_page: int = 2 * 100
    # A term query reads its best fts_first_page candidates first (a limit of 5
    # verifies a handful), and the rest by one more query only if it reads on
    # (retrieve.Retriever.fts).
    fts_first_page: int = 64
    # When the scope holds at least ranked_first_share of the sessions and no
    # re-rank is set, the first page starts from FTS5's ranked_page x `first`
    # best matches by plain bm25, before any join, and keeps the ones it proves;
    # a narrower scope joins first and scores only its matches (the break-even
    # measured in docs/benchmarks.md).
    ranked_first_share: float = 0.5
    ranked_page: int = 4
    # A page that proves too few (its best bm25 went to tool results, weighted
    # 0.5) is taken again ranked_growth times larger, up to ranked_rounds pages.
    ranked_rounds: int = 2
    ranked_growth: int = 8
    # The plan by match count (retrieve.Retriever.windowed; docs/recall.md): a
    # query with more than plan_window candidates (fts5vocab's counts) ranks
    # its plan_window newest first, a window widened plan_growth times while it
    # holds too few in scope, up to plan_max_window; older candidates follow,
    # window by window. Ranking costs what the candidates scored cost.
    plan_window: int = 2048
    plan_growth: int = 4
    plan_max_window: int = 32768
    # How many candidates a windowed query reports (diagnostics.ranked_of) is
    # counted up to plan_count_cap rows a word (or the first window, if it
    # is larger); past that, `ranked_of_more`. The exact count read every row
    # of the word, a cost that grew with history while the window's did not
    # (`the` 7.4 ms, `是` 4.7 ms of its 12 at 1 GB; docs/benchmarks.md).
    plan_count_cap: int = 8192
    # Partial matches (no message has every term) are looked for only in queries
    # of at most this many terms: each candidate of the ORed terms is checked for
    # every term, and a pasted 100 KB query of thousands of terms would take minutes.
    partial_max_terms: int = 32

    @property
    def max_role_weight(self) -> float:
        """The most a role weight multiplies bm25 by (a role not listed: 1.0)."""
        return max(1.0, *self.role_weight.values())

    def weight_sql(self) -> str:
        """The role weight of `m` (messages) as SQL."""
        cases = " ".join(f"WHEN '{role}' THEN {w}" for role, w in self.role_weight.items())
        return f"(CASE m.role {cases} ELSE 1.0 END)"

    def snapshot(self) -> dict:
        """The values in force, by name, for a report."""
        return {name: dict(value) if isinstance(value, Mapping) else value
                for name, value in ((f, getattr(self, f)) for f in self.__dataclass_fields__)}


def idf(rows: int, holding: int) -> float:
    """FTS5's idf of a phrase held by `holding` of `rows` rows."""
    value = math.log((rows - holding + 0.5) / (holding + 0.5)) if rows else 0.0
    return value if value > 0 else MIN_IDF


def recall_bm25(api: apsw.FTS5ExtensionApi, avgdl: float, *idfs: float) -> float:
    """bm25 (negative, lower is better, as FTS5's) of the current row, given
    the scope's average row length in tokens and one idf per phrase of the
    expression, in order."""
    norm = K1 * (1 - B + B * api.column_size(0) / (avgdl or 1.0))
    score = 0.0
    for phrase, weight in enumerate(idfs):
        tf = len(api.phrase_locations(phrase)[0])
        if tf:
            score += weight * tf * (K1 + 1) / (tf + norm)
    return -score


def register(conn: apsw.Connection) -> None:
    # apsw's stubs type an FTS5 function as variadic over every SQLite value
    conn.register_fts5_function("recall_bm25", recall_bm25)  # type: ignore[arg-type]


def bm25_sql(avgdl: float, idfs: list[float]) -> str:
    """The score call for a confined scope: numbers this module worked out,
    written as literals (repr of a float round-trips exactly)."""
    return "recall_bm25(message_fts" + "".join(f", {float(w)!r}" for w in (avgdl, *idfs)) + ")"


# --- what a confined caller may learn (docs/recall.md) ----------------------------
# A universe is the SQL restricting `s` (sessions) to what a confined caller
# may ever search (retrieve.Retriever.universe); statistics of a confined
# caller (rows, rows holding a phrase) are counted in it, never over the
# whole index.


def size(conn: apsw.Connection, universe: tuple[str, list]) -> tuple[int, int]:
    """Messages and index tokens in the universe (migration m006 keeps
    them per session)."""
    rows, tokens = one(conn.execute(
        f"SELECT coalesce(sum(n_messages), 0), coalesce(sum(n_tokens), 0) FROM sessions s WHERE 1 = 1{universe[0]}",
        universe[1]))
    return rows, tokens


def holding(conn: apsw.Connection, expr: str, universe: tuple[str, list], limit: int = -1) -> int:
    """Messages in the universe that FTS5 gives as candidates of `expr`
    (at most `limit`)."""
    return one(conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM message_fts JOIN messages m INDEXED BY messages_rank "
        "ON m.id = message_fts.rowid JOIN sessions s ON s.id = m.session "
        f"WHERE message_fts MATCH ?{universe[0]} LIMIT ?)", [expr, *universe[1], limit]))[0]


def confined_bm25(conn: apsw.Connection, phrases: list[str], universe: tuple[str, list] | None) -> str | None:
    """The score call of a confined caller (recall_bm25 with idfs of the
    universe), or None for FTS5's own bm25."""
    if universe is None:
        return None
    rows, tokens = size(conn, universe)
    return bm25_sql(tokens / rows if rows else 1.0, [idf(rows, holding(conn, p, universe)) for p in phrases])


# --- re-ranks -------------------------------------------------------------------------


def recency(ts: str | None, half_life_days: float | None, now: float) -> float:
    """1 + 2^(-age / half-life): today counts double, one half-life ago 1.5x."""
    h = half_life_days
    if not h or not ts:
        return 1.0
    try:
        import datetime as dt

        t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        age_days = max(0.0, (now - t.timestamp()) / 86400)
    except ValueError:
        return 1.0
    return 1.0 + 2.0 ** (-age_days / h)


def pinned(settings: Settings, cwd: str) -> int:
    """1 when a session of `cwd` lies under a pinned folder."""
    path = session_path(cwd)
    return int(path is not None and settings.path_rules().is_pinned(path))


def neg(ts: str | None) -> tuple:
    """Sort key putting newer timestamps first."""
    return tuple(-ord(c) for c in (ts or ""))


# --- selection ------------------------------------------------------------------------


def select(hits: Iterable[Hit], limit: int, need: int, budget: int) -> tuple[list[Hit], bool]:
    """Collapse hits by turn, keep at most ceil(limit/3) passages per
    session in a first pass, fill unused slots from the rest (examining at
    most `budget` passages). Returns the first `need` passages in final
    order and whether more exist."""
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
        if examined >= budget:
            exhausted = False
            break
    ranked = first + deferred if exhausted or len(first) <= need else first
    return ranked[:need], len(ranked) > need


class Ranker:
    """The orders recall puts verified hits in, beyond bm25: by the
    question's keywords, and by coverage for partial matches."""

    def __init__(self, conn: apsw.Connection, settings: Settings, ranking: Ranking):
        self.conn = conn
        self.settings = settings
        self.ranking = ranking

    def _pinned_sessions(self, sessions: set[int]) -> set[int]:
        rows = self.conn.execute("SELECT id, cwd FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                                 (orjson.dumps(sorted(sessions)).decode(),))
        return {sid for sid, cwd in rows if pinned(self.settings, cwd)}

    def by_keywords(self, hits: Iterable[Hit], kw_terms: list[Term], kw_group: dict[str, int]) -> Iterator[Hit]:
        """query AND-filters; the question's keywords rank (more keywords first,
        a keyword and its variants counting once). Examines at most
        candidate_budget hits."""
        pool = []
        for i, hit in enumerate(hits):
            if i >= self.ranking.candidate_budget:
                break
            text = one(self.conn.execute("SELECT text FROM messages WHERE id = ?", (hit.rowid,)))[0]
            mt = match_text(text)
            extra: dict[int, str] = {}
            for k in kw_terms:
                if kw_group[k.folded] not in extra and occurs(k.folded, mt):
                    extra[kw_group[k.folded]] = k.folded
            hit.matched = hit.matched + list(extra.values())
            pool.append(hit)
        return self.by_coverage(iter(pool))

    def group_idf(self, kw_terms: list[Term], kw_group: dict[str, int],
                  universe: tuple[str, list] | None) -> dict[int, float]:
        """idf of each keyword group over the whole index (over the universe
        of a confined caller): ln(1 + (N - n + 0.5) / (n + 0.5)), n the
        messages holding any of its variants, N the messages (over the whole
        index, approximated by the highest message row id)."""
        n_all = size(self.conn, universe)[0] if universe is not None else one(self.conn.execute(
            "SELECT coalesce(max(id), 0) FROM messages"))[0]
        phrases: dict[int, list[str]] = {}
        for t in kw_terms:
            if t.tokens.tokens:
                phrases.setdefault(kw_group[t.folded], []).append(fts_phrase(t.tokens))
        out = {}
        for g in set(kw_group.values()):
            if g not in phrases:
                n = 0
            elif universe is not None:
                n = holding(self.conn, " OR ".join(phrases[g]), universe)
            else:
                n = one(self.conn.execute("SELECT count(*) FROM message_fts WHERE message_fts MATCH ?",
                                          (" OR ".join(phrases[g]),)))[0]
            out[g] = math.log(1 + (n_all - n + 0.5) / (n + 0.5))
        return out

    def keyword_weights(self, kw_terms: list[Term], kw_group: dict[str, int],
                        universe: tuple[str, list] | None) -> dict[int, float]:
        """Each keyword group's weight in the coverage shares: its idf
        (group_idf), times latin_in_cjk for a keyword outside CJK in a
        question that holds CJK."""
        idf = self.group_idf(kw_terms, kw_group, universe)
        first = {g: folded for folded, g in reversed(kw_group.items())}  # each group's keyword
        cjk = {g for g, folded in first.items() if HAS_CJK.search(folded)}
        if cjk and self.ranking.latin_in_cjk != 1.0:
            idf = {g: w * (1.0 if g in cjk else self.ranking.latin_in_cjk) for g, w in idf.items()}
        return idf

    def _title_cover(self, rows: list, kw_terms: list[Term], kw_group: dict[str, int], idf: dict[int, float],
                     total: float, run: Run) -> dict[int, float]:
        """The share of the keywords' weight each session's title holds."""
        title_cov: dict[int, float] = {}
        if self.ranking.title_weight:
            for sid, _cwd, title in rows:
                tt = match_text(title or "")
                got = {kw_group[t.folded] for t in kw_terms if tt and occurs(t.folded, tt)}
                if got:
                    title_cov[sid] = sum(idf[g] for g in got) / total
            if title_cov:
                run.reranked.append(f"session_title={self.ranking.title_weight:g}")
        return title_cov

    def by_question(self, hits: Iterable[Hit], kw_terms: list[Term], kw_group: dict[str, int], run: Run,
                    universe: tuple[str, list] | None) -> Iterator[Hit]:
        """Question mode: at most question_pool hits (in bm25 order; fewer
        when their texts are long: _question_pool), each
        scored weighted bm25 x c ** coverage_power x (1 + title_weight x t)
        x (1 + session_weight x (e - c)) (see Ranking.coverage_power), then ordered: pinned cwds first (when
        configured), score, coverage, newer, id. Which messages are returned
        does not change, only their order."""
        r = self.ranking
        pool = self._question_pool(hits)
        if not pool:
            return iter(pool)
        idf = self.keyword_weights(kw_terms, kw_group, universe)
        total = sum(idf.values()) or 1.0
        rows = self.conn.execute("SELECT id, cwd, title FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                                 (orjson.dumps(sorted({h.session for h in pool})).decode(),)).fetchall()
        pins = {sid for sid, cwd, _ in rows if self.settings.pinned_cwds and pinned(self.settings, cast(str, cwd))}
        title_cov = self._title_cover(rows, kw_terms, kw_group, idf, total, run)
        cover: dict[int, float] = {}
        for h in pool:
            cover[h.rowid] = cov = sum(idf[g] for g in {kw_group[m] for m in h.matched if m in kw_group}) / total
            h.score = h.score * cov ** r.coverage_power * (1 + r.title_weight * title_cov.get(h.session, 0.0))
        if r.session_weight:
            held: dict[int, set[int]] = {}
            for h in pool:
                held.setdefault(h.session, set()).update(kw_group[m] for m in h.matched if m in kw_group)
            for h in pool:
                h.score *= 1 + r.session_weight * (sum(idf[g] for g in held[h.session]) / total - cover[h.rowid])
        # Coverage also breaks ties: a scan has no bm25 (every score is 0).
        pool.sort(key=lambda h: (h.session not in pins, -h.score, -cover[h.rowid], neg(h.ts), -h.rowid))
        return iter(pool)

    def _question_pool(self, hits: Iterable[Hit]) -> list[Hit]:
        """The first hits, up to question_pool of them, or fewer, but at
        least question_pool_min, once their texts hold question_chars
        characters (the rest are not read: each costs its folding)."""
        r = self.ranking
        pool: list[Hit] = []
        chars = 0
        for h in hits:
            pool.append(h)
            chars += h.chars
            if len(pool) >= r.question_pool or (
                    r.question_chars is not None and len(pool) >= r.question_pool_min and chars >= r.question_chars):
                break
        return pool

    def by_coverage(self, hits: Iterable[Hit]) -> Iterator[Hit]:
        """At most candidate_budget hits, those matching more terms first, then
        by rank: pinned cwds first (when configured), score, newer, id."""
        pool = list(itertools.islice(hits, self.ranking.candidate_budget))
        pins: set[int] = set()
        if self.settings.pinned_cwds and pool:
            pins = self._pinned_sessions({h.session for h in pool})
        pool.sort(key=lambda h: (h.session not in pins, -len(h.matched), -h.score, neg(h.ts), -h.rowid))
        return iter(pool)
