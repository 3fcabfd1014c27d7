"""bm25 over the statistics of a confined caller's own scope.

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

import math

import apsw

# FTS5's bm25 parameters (fts5_aux.c); the built-in function is called without
# column weights, so these are the values it uses.
K1 = 1.2
B = 0.75
# FTS5 clamps a non-positive idf (a phrase in more than half the rows) to this.
MIN_IDF = 1e-6


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
    conn.register_fts5_function("recall_bm25", recall_bm25)


def bm25_sql(avgdl: float, idfs: list[float]) -> str:
    """The score call for a confined scope: numbers this module worked out,
    written as literals (repr of a float round-trips exactly)."""
    return "recall_bm25(message_fts" + "".join(f", {float(w)!r}" for w in (avgdl, *idfs)) + ")"
