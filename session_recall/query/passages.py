"""Passages: a hit plus a bounded window of its turn, rendered for output.

Budgets (bytes of UTF-8 text; docs/recall.md):
- a neighbour's text is cut to NEIGHBOUR_BYTES, a hit's to HIT_BYTES, around
  the first place a term occurs;
- a tool_result enters a passage only as its anchor (or as another hit of the
  same turn) and is hard-truncated to TOOL_RESULT_BYTES;
- one passage holds at most PASSAGE_BYTES of text; one response RESPONSE_BYTES
  (results past it are left out, and `gaps` says so).
`recall_more` widens one passage to the whole turn with the MORE_* budgets.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import apsw
import orjson

from ..model import Material, MaterialKind, Passage, PassageMessage, Result
from ..rows import one
from ..text.fold import match_text
from ..text.redact import render
from .match import message_matches, occurs

if TYPE_CHECKING:
    from .gates import Scope
    from .retrieve import Hit

WINDOW = 2
NEIGHBOUR_BYTES = 600
HIT_BYTES = 1500
TOOL_RESULT_BYTES = 1024
PASSAGE_BYTES = 4096
RESPONSE_BYTES = 32768
MORE_WINDOW = 40
MORE_PASSAGE_BYTES = 16384
MATERIALS_PER_MESSAGE = 8
# A neighbour that would have to be cut to fewer bytes than this is left out
# rather than shown as a stub.
MIN_PIECE_BYTES = 64
READABLE = ("image", "text")


@dataclass(frozen=True)
class Budgets:
    """What one passage and one response may hold, in UTF-8 bytes of text
    (docs/recall.md). `response_chars`, when set, also bounds the results'
    compact JSON (defaults left out) in characters: what a harness hands a
    model, markup and all."""

    hit: int = HIT_BYTES
    neighbour: int = NEIGHBOUR_BYTES
    tool_result: int = TOOL_RESULT_BYTES
    passage: int = PASSAGE_BYTES
    response: int = RESPONSE_BYTES
    response_chars: int | None = None


FULL = Budgets()
# For a model (the MCP server): a default page of 5 passages fits about
# 8,000 characters of JSON, the size of a result that no harness cuts; a
# result's markup (ids, anchor, times) costs 600-900 characters of it, so
# the text of a passage gets less than a kilobyte, and `recall_more` the rest.
MODEL_PASSAGE_CHARS = 1450
MODEL_RESPONSE_CHARS = 40000


def for_model(limit: int) -> Budgets:
    """Budgets for a page of `limit` passages read by a model."""
    return Budgets(hit=600, neighbour=200, tool_result=400, passage=800, response=RESPONSE_BYTES,
                   response_chars=min(MODEL_RESPONSE_CHARS, MODEL_PASSAGE_CHARS * limit))


def anchor_id(source: str, cwd: str, session_id: str, message_id: str) -> str:
    """Opaque, stable across rebuilds, and naming its session unambiguously."""
    raw = orjson.dumps([source, cwd, session_id, message_id])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def parse_anchor(anchor: str) -> tuple[str, str, str, str] | None:
    try:
        raw = base64.urlsafe_b64decode(anchor + "=" * (-len(anchor) % 4))
        value = orjson.loads(raw)
    except (ValueError, orjson.JSONDecodeError):
        return None
    if isinstance(value, list) and len(value) == 4 and all(isinstance(v, str) for v in value):
        return (value[0], value[1], value[2], value[3])
    return None


def material_kind(mime: str) -> MaterialKind:
    mime = mime.lower()
    if mime.startswith("image/"):
        return "image"
    if mime == "application/pdf":
        return "pdf"
    if mime.startswith("text/") or mime in ("application/json", "application/xml", "application/x-yaml",
                                            "application/yaml", "application/toml"):
        return "text"
    return "binary"


def _locate(text: str, terms: list[str]) -> int:
    """The character offset in `text` of the first place a term occurs, else 0.

    Terms are match text (folded, white space collapsed), `text` is not: look
    in its case-folded form first (same length in the common case), then piece
    by piece in its match text (full-width forms, a phrase broken over lines),
    mapping the place found back to `text`."""
    terms = [t for t in terms if t]
    if not terms:
        return 0
    low = text.casefold()
    if len(low) == len(text):
        found = [i for i in (low.find(t) for t in terms) if i >= 0]
        if found:
            return min(found)
    step, overlap = 65536, 4 * max(map(len, terms)) + 64
    for start in range(0, len(text), step):
        piece = text[start : start + step + overlap]
        mt = match_text(piece)
        found = [i for i in (mt.find(t) for t in terms) if i >= 0]
        if found:
            at = min(found)
            lo, hi = 0, len(piece)
            while lo < hi:  # the shortest prefix whose match text reaches past `at`
                mid = (lo + hi) // 2
                if len(match_text(piece[:mid])) > at:
                    hi = mid
                else:
                    lo = mid + 1
            return start + max(0, lo - 1)
    return 0


def _cut(text: str, budget: int, terms: list[str]) -> tuple[str, bool]:
    """At most `budget` bytes of text, around the first place a term occurs.
    (Every character is at least a byte: a text of more characters than the
    budget is not encoded to be measured, and only as many characters as
    the budget are encoded to be cut; a tool result can be megabytes.)"""
    if len(text) <= budget and len(text.encode("utf-8", "surrogatepass")) <= budget:
        return text, False
    if budget < 7:  # no room for the two ellipses (3 bytes each) and a character
        return "", True
    at = _locate(text, terms)
    # centre the window on the hit, in characters, then trim to bytes
    chars = max(1, budget // 3)
    start = max(0, at - chars // 3)
    piece = text[start : start + budget - 6]
    cut = piece.encode("utf-8", "surrogatepass")[: budget - 6].decode("utf-8", "ignore")
    return ("…" if start else "") + cut + "…", True


@dataclass
class Renderer:
    """Renders stored text for output and counts what it redacted."""

    mode: str
    redacted: int = 0

    @overload
    def __call__(self, text: str) -> str: ...
    @overload
    def __call__(self, text: None) -> None: ...
    @overload
    def __call__(self, text: str | None) -> str | None: ...
    def __call__(self, text: str | None) -> str | None:
        if text is None:
            return None
        out, n = render(text, self.mode)
        self.redacted += n
        return out


def materials(raw: list[dict], *, session_id: str, readable_session: str | None, rend: Renderer) -> list[Material]:
    out: list[Material] = []
    for a in raw[:MATERIALS_PER_MESSAGE]:
        kind = material_kind(a.get("mime_type", ""))
        resource = None
        if readable_session is not None and readable_session == session_id and kind in READABLE:
            resource = f"recall://sessions/{session_id}/attachments/{a['id']}"
        out.append(Material(name=rend(a["name"]), kind=kind, mime_type=a.get("mime_type", ""),
                            bytes=int(a.get("bytes", 0)), resource=resource))
    return out


def build(conn: apsw.Connection, *, session_row: int, session_key: tuple[str, str, str], anchor_row: int,
          terms: list[str], rend: Renderer, caller_session: str | None, wide: bool = False,
          cut_terms: list[str] | None = None, budgets: Budgets = FULL) -> Passage:
    """The passage around one anchor message. `terms` (all must occur) decide
    which neighbours are hits; long texts are cut around the first of
    `cut_terms` (default: `terms`; a question's keywords in question mode)."""
    cut_terms = terms if cut_terms is None else cut_terms
    source, cwd, session_id = session_key
    turn_id, anchor_seq = one(conn.execute("SELECT turn_id, seq FROM messages WHERE id = ?", (anchor_row,)))
    window = MORE_WINDOW if wide else WINDOW
    # The rows around the anchor, without their text: most are never looked
    # at (the window stops at `window` neighbours a side), and a tool
    # result's text can be megabytes (the columns after it, read past its
    # overflow pages, too). A text is read when it is needed (text_of).
    # Sorted here, not by ORDER BY: in this statement SQLite (3.54) plans
    # the order again for every new range bound, which cost more than the
    # rest of it (20 of 30 us).
    rows = sorted(conn.execute(
        "SELECT id, message_id, role, ts, seq FROM messages WHERE session = ? AND turn_id = ? AND seq BETWEEN ? AND ?",
        (session_row, turn_id, anchor_seq - 4 * window - 8, anchor_seq + 4 * window + 8),
    ), key=lambda r: r[4])
    stored: dict[int, tuple[str, str | None, int]] = {}

    def text_of(row_id: int) -> tuple[str, str | None, int]:
        """A row's stored text, attachments (JSON) and whether the text is in
        NFKC (messages.nfkc)."""
        if row_id not in stored:
            stored[row_id] = one(conn.execute("SELECT text, attachments, nfkc FROM messages WHERE id = ?", (row_id,)))
        return stored[row_id]

    idx = next(i for i, r in enumerate(rows) if r[0] == anchor_row)
    # Visible neighbours: a tool_result enters only as a hit.
    picked = [rows[idx]]
    hit_flags = {anchor_row: True}
    for direction in (-1, 1):
        n = 0
        i = idx + direction
        while 0 <= i < len(rows) and n < window:
            r = rows[i]
            is_hit = False
            if terms:
                text, raw_atts, nfkc = text_of(r[0])
                atts = orjson.loads(raw_atts) if raw_atts else []
                is_hit = message_matches(terms, text, [a["name"] for a in atts], nfkc=bool(nfkc))
            if r[2] != "tool_result" or is_hit:
                picked.append(r)
                hit_flags[r[0]] = is_hit
                n += 1
            i += direction
    picked.sort(key=lambda r: r[4])
    budget = MORE_PASSAGE_BYTES if wide else budgets.passage
    out: list[PassageMessage] = []
    # the anchor first claims its budget, then neighbours in order of closeness
    order = sorted(picked, key=lambda r: (r[0] != anchor_row, abs(r[4] - anchor_seq)))
    texts: dict[int, tuple[str, bool]] = {}
    for r in order:
        if wide:
            per = TOOL_RESULT_BYTES if r[2] == "tool_result" else 4 * (HIT_BYTES if hit_flags[r[0]] else NEIGHBOUR_BYTES)
        else:
            per = (budgets.tool_result if r[2] == "tool_result"
                   else budgets.hit if hit_flags[r[0]] else budgets.neighbour)
        per = min(per, budget)
        if per <= 0:
            continue
        # only a hit is searched for the place to cut (a neighbour does not hold the terms)
        text, truncated = _cut(rend(text_of(r[0])[0]) or "", per, cut_terms if hit_flags[r[0]] else [])
        if truncated and per < MIN_PIECE_BYTES and r[0] != anchor_row:
            continue
        budget -= len(text.encode("utf-8", "surrogatepass"))
        texts[r[0]] = (text, truncated)
    for r in picked:
        if r[0] not in texts:
            continue
        text, truncated = texts[r[0]]
        raw_atts = text_of(r[0])[1]
        atts = orjson.loads(raw_atts) if raw_atts else []
        out.append(PassageMessage(
            message_id=r[1], role=r[2], ts=r[3], text=text, is_anchor=r[0] == anchor_row,
            is_hit=hit_flags[r[0]], truncated=truncated,
            materials=materials(atts, session_id=session_id, readable_session=caller_session, rend=rend),
        ))
    return Passage(anchor_id=anchor_id(source, cwd, session_id, rows[idx][1]), turn_id=turn_id, messages=out)


def own_session(caller_session: str | None, session_cwd: str, scope: Scope) -> str | None:
    """`caller_session` if a session of this cwd can be the caller's own: a
    session is (source, cwd, id), so the same id in another project (outside
    the caller's cwd) is someone else's and its materials get no resource."""
    return caller_session if caller_session is not None and scope.in_root(session_cwd) else None


def collect(conn: apsw.Connection, page: list[Hit], *, terms: list[str], keywords: list[str], rend: Renderer,
            caller_session: str | None, scope: Scope, budgets: Budgets = FULL) -> tuple[list[Result], int]:
    """The results of a page of hits, each with its passage, within the
    response budgets (the first always), and how many hits were left out.
    `terms`: the query's folded terms (all must occur in a hit); `keywords`:
    every folded term and keyword (long texts are cut around them; with no
    `terms`, a question's, they mark the hits)."""
    results: list[Result] = []
    used = used_chars = 0
    for hit in page:
        # An untitled session shows its first prompt (never ranked as a title).
        s = one(conn.execute("SELECT source, cwd, session_id, coalesce(title, prompt), started_at FROM sessions "
                             "WHERE id = ?",
                             (hit.session,)))
        passage = build(conn, session_row=hit.session, session_key=(s[0], s[1], s[2]), anchor_row=hit.rowid,
                        terms=terms, rend=rend, caller_session=own_session(caller_session, s[1], scope),
                        cut_terms=keywords, budgets=budgets)
        if not terms:  # question mode: mark hits by any keyword
            for m in passage.messages:
                if not m.is_hit:
                    shown = match_text(m.text)  # (once, not once a keyword)
                    m.is_hit = any(occurs(k, shown) for k in keywords)
        size = sum(len(m.text.encode("utf-8", "surrogatepass")) for m in passage.messages)
        result = Result(session_id=s[2], source=s[0], title=rend(s[3]), cwd=s[1], started_at=s[4],
                        score=round(hit.score, 6), partial=hit.partial, matched_terms=hit.matched, passage=passage)
        chars = len(result.model_dump_json(exclude_defaults=True)) if budgets.response_chars else 0
        if results and (used + size > budgets.response
                        or (budgets.response_chars and used_chars + chars > budgets.response_chars)):
            return results, len(page) - len(results)
        used += size
        used_chars += chars
        results.append(result)
    return results, 0
